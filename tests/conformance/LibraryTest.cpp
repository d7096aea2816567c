// The conformance kernels through their libraries, as a user calls them: each case built for the
// zpu and for ascend by add_tandem_library (tests/conformance/CMakeLists.txt), called through
// Halide's _argv convention with Halide::Runtime::Buffer on seeded random inputs, its output
// checked against a plain loop. A runtime-shape library is called at several shapes, 1 x 1 and
// primes among them; a buffer of the wrong shape returns an error code and writes nothing.
#include "conformance_libraries.h" // the libraries' headers and TANDEM_CONFORMANCE_LIBRARIES

#include <HalideBuffer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Buffer = Halide::Runtime::Buffer<float>;

struct Library {
    const char *name, *target, *generator, *params;
    int (*argv)(void **);
    const halide_filter_metadata_t *(*metadata)(void);
};
std::ostream &operator<<(std::ostream &os, const Library &l) {
    return os << l.name;
}

const std::vector<Library> libraries = {
#define TANDEM_LIBRARY(name, target, generator, params)                                            \
    {#name, target, generator, params, name##_argv, name##_metadata},
    TANDEM_CONFORMANCE_LIBRARIES(TANDEM_LIBRARY)
#undef TANDEM_LIBRARY
};

/** The parameters of a case ("act=gelu runtime=true") by name. */
std::map<std::string, std::string> parse(const std::string &params) {
    std::map<std::string, std::string> p;
    std::istringstream in(params);
    std::string kv;
    while (in >> kv)
        p[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    return p;
}

/** A value rounded to bfloat16 (to nearest even), as its bits. */
uint16_t to_bf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

/** A float rounded to bfloat16 and back. */
float round_bf16(float v) {
    const uint32_t word = uint32_t(to_bf16(v)) << 16;
    float r;
    std::memcpy(&r, &word, 4);
    return r;
}

/** The plain loop of each generator: out from the inputs (in declaration order). */
void reference(const std::string &generator, const std::map<std::string, std::string> &p,
               const std::vector<Buffer> &in, Buffer &out) {
    const Buffer &a = in[0];
    auto rows = [&](const std::function<void(int r)> &row) {
        for (int r = 0; r < out.dim(1).extent(); r++)
            row(r);
    };
    const int C = a.dim(0).extent();
    if (generator == "softmax" || generator == "log_softmax") {
        rows([&](int r) {
            float mx = -INFINITY, sum = 0;
            for (int c = 0; c < C; c++)
                mx = std::max(mx, a(c, r));
            for (int c = 0; c < C; c++)
                sum += std::exp(a(c, r) - mx);
            for (int c = 0; c < C; c++) {
                out(c, r) = generator == "softmax" ? std::exp(a(c, r) - mx) / sum
                                                   : a(c, r) - mx - std::log(sum);
            }
        });
    } else if (generator == "layernorm") {
        rows([&](int r) {
            double sum = 0, var = 0;
            for (int c = 0; c < C; c++)
                sum += a(c, r);
            const double mean = sum / C;
            for (int c = 0; c < C; c++)
                var += (a(c, r) - mean) * (a(c, r) - mean);
            for (int c = 0; c < C; c++) {
                out(c, r) =
                    float((a(c, r) - mean) / std::sqrt(var / C + 1e-5) * in[1](c) + in[2](c));
            }
        });
    } else if (generator == "user_rmsnorm") {
        rows([&](int r) {
            double ss = 0;
            for (int c = 0; c < C; c++)
                ss += double(a(c, r)) * a(c, r);
            for (int c = 0; c < C; c++)
                out(c, r) = float(a(c, r) * in[1](c) / std::sqrt(ss / C + 1e-6));
        });
    } else if (generator == "subtract_mean") {
        rows([&](int r) {
            double sum = 0;
            for (int c = 0; c < C; c++)
                sum += a(c, r);
            for (int c = 0; c < C; c++)
                out(c, r) = float(a(c, r) - sum / C);
        });
    } else if (generator == "activation") {
        const std::string act = p.count("act") ? p.at("act") : "gelu";
        out.for_each_element([&](int x, int y) {
            const double v = a(x, y);
            out(x, y) = float(
                act == "gelu"
                    ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                : act == "silu" ? v / (1 + std::exp(-v))
                : act == "tanh" ? std::tanh(v)
                                : 1 / (1 + std::exp(-v)));
        });
    } else if (generator == "max_pool") {
        out.for_each_element([&](int x, int y) {
            out(x, y) = std::max(std::max(a(2 * x, 2 * y), a(2 * x + 1, 2 * y)),
                                 std::max(a(2 * x, 2 * y + 1), a(2 * x + 1, 2 * y + 1)));
        });
    } else if (generator == "row_scan") {
        rows([&](int r) {
            float s = 0;
            for (int c = 0; c < C; c++)
                out(c, r) = s = c == 0 ? a(c, r) : s + a(c, r);
        });
    } else if (generator == "gemv") {
        for (int r = 0; r < out.dim(0).extent(); r++) {
            float s = 0;
            for (int k = 0; k < C; k++)
                s += a(k, r) * in[1](k);
            out(r) = s;
        }
    } else if (generator == "transpose") {
        out.for_each_element([&](int x, int y) { out(x, y) = a(y, x); });
    } else if (generator == "stencil") {
        out.for_each_element([&](int x, int y) {
            double s = 0;
            for (int j = 0; j < 3; j++)
                for (int i = 0; i < 3; i++)
                    s += (i == 1 ? 2 : 1) * (j == 1 ? 2 : 1) * a(x + i, y + j);
            out(x, y) = float(s / 16);
        });
    } else if (generator == "column_reduce") {
        const bool max = p.count("op") && p.at("op") == "max";
        for (int x = 0; x < out.dim(0).extent(); x++) {
            double v = max ? -INFINITY : 0;
            for (int y = 0; y < a.dim(1).extent(); y++)
                v = max ? std::max<double>(v, a(x, y)) : v + a(x, y);
            out(x) = float(v);
        }
    } else if (generator == "window_sum") {
        const int window_end = p.count("C") ? std::stoi(p.at("C")) : 20;
        out.for_each_element([&](int x, int y) {
            double s = 0;
            for (int k = 0; k <= y - window_end && k < a.dim(1).extent(); k++)
                s += a(x, k);
            out(x, y) = float(s);
        });
    } else if (generator == "bias_relu") {
        out.for_each_element([&](int x, int y) { out(x, y) = std::max(a(x, y) + in[1](x), 0.0f); });
    } else if (generator == "rope") {
        // in: x, then cos and sin of (i, y) for the pair of columns 2i, 2i + 1.
        out.for_each_element([&](int x, int y) {
            const int i = x / 2;
            const float u = a(2 * i, y), v = a(2 * i + 1, y), c = in[1](i, y), s = in[2](i, y);
            out(x, y) = x % 2 == 0 ? u * c - v * s : u * s + v * c;
        });
    } else if (generator == "quantize") {
        const float scale = p.count("scale") ? std::stof(p.at("scale")) : 0.05f;
        out.for_each_element([&](int x, int y) {
            out(x, y) = std::clamp(std::nearbyint(a(x, y) / scale), -128.0f, 127.0f);
        });
    } else if (generator == "silu_mul") {
        out.for_each_element([&](int x, int y) {
            const float v = a(x, y);
            out(x, y) = v / (1.0f + std::exp(-v)) * in[1](x, y);
        });
    } else if (generator == "outer") {
        out.for_each_element([&](int x, int y) { out(x, y) = a(x) * in[1](y); });
    } else if (generator == "column_softmax") {
        for (int x = 0; x < out.dim(0).extent(); x++) {
            float mx = -INFINITY, sum = 0;
            for (int y = 0; y < out.dim(1).extent(); y++)
                mx = std::max(mx, a(x, y));
            for (int y = 0; y < out.dim(1).extent(); y++)
                sum += std::exp(a(x, y) - mx);
            for (int y = 0; y < out.dim(1).extent(); y++)
                out(x, y) = std::exp(a(x, y) - mx) / sum;
        }
    } else if (generator == "logsumexp") {
        for (int y = 0; y < out.dim(0).extent(); y++) {
            float mx = -INFINITY, sum = 0;
            for (int x = 0; x < C; x++)
                mx = std::max(mx, a(x, y));
            for (int x = 0; x < C; x++)
                sum += std::exp(a(x, y) - mx);
            out(y) = mx + std::log(sum);
        }
    } else if (generator == "undeclared") {
        out.for_each_element([&](int x, int y) { out(x, y) = a(x, y) * 2.0f + 1.0f; });
    } else if (generator == "linear") {
        // in: x (K x M, or M x K for tn and tt), w (K x N for nt and tt, N x K for nn and tn),
        // then bias, residual, or the scales scale_x and scale_w.
        const std::string layout = p.count("layout") ? p.at("layout") : "nt";
        const bool nt = layout[1] == 't', x_t = layout[0] == 't';
        const std::string epilogue = p.count("epilogue") ? p.at("epilogue") : "bias";
        const int K = x_t ? a.dim(1).extent() : a.dim(0).extent();
        out.for_each_element([&](int n, int m) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += double(x_t ? a(m, k) : a(k, m)) * (nt ? in[1](k, n) : in[1](n, k));
            if (epilogue == "bias")
                s += in[2](n);
            if (epilogue == "residual")
                s += in[2](n, m);
            if (epilogue == "scales") // (rowwise: scale_x(m), then scale_w(n))
                s = float(s) * in[2](m) * in[3](n);
            out(n, m) = float(s);
        });
    } else if (generator == "batched_matmul") {
        // in: x (K x M x B), w (K x N x B for nt, N x K x B for nn).
        const bool nt = !p.count("layout") || p.at("layout") == "nt";
        const int K = a.dim(0).extent();
        out.for_each_element([&](int n, int m, int b) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += double(a(k, m, b)) * (nt ? in[1](k, n, b) : in[1](n, k, b));
            out(n, m, b) = float(s);
        });
    } else if (generator == "split_k_partials") {
        // in: x (K x M), w (K x N); out: each slice of K's partial sums (layout nt).
        const int K = a.dim(0).extent(), slice = K / out.dim(2).extent();
        out.for_each_element([&](int n, int m, int u) {
            double s = 0;
            for (int k = u * slice; k < (u + 1) * slice; k++)
                s += double(a(k, m)) * in[1](k, n);
            out(n, m, u) = float(s);
        });
    } else if (generator == "swiglu") {
        // in: x (K x M), w1 and w3 (K x N each): silu(x w1) * (x w3).
        const int K = a.dim(0).extent();
        out.for_each_element([&](int n, int m) {
            double g = 0, u = 0;
            for (int k = 0; k < K; k++) {
                g += double(a(k, m)) * in[1](k, n);
                u += double(a(k, m)) * in[2](k, n);
            }
            out(n, m) = float(g / (1 + std::exp(-g)) * u);
        });
    } else if (generator == "matmul_chain") {
        // in: x (K x M), w1 (K x J), w2 (N x J): sum_j bf16(act(x w1))(j, m) * w2(n, j), the
        // hidden values summed in f32 and rounded to bfloat16 as the kernel's are (the cases keep
        // K at 1 or 2, where f32 sums of exact bf16 products do not depend on their order).
        const int K = a.dim(0).extent(), J = in[1].dim(1).extent();
        const bool relu = !p.count("act") || p.at("act") == "relu";
        out.for_each_element([&](int n, int m) {
            double s = 0;
            for (int j = 0; j < J; j++) {
                float h = 0;
                for (int k = 0; k < K; k++)
                    h += a(k, m) * in[1](k, j);
                s += double(round_bf16(relu ? std::max(h, 0.0f) : h)) * in[2](n, j);
            }
            out(n, m) = float(s);
        });
    } else if (generator == "attention" || generator == "flash_attention") {
        // in: q (D x S x H x B), k and v (D x L x KV x B): softmax over j of scale * q . k (f32
        // as the kernel computes it), rounded to bfloat16, times v; query head h reads key-value
        // head h / (H / KV); with causal=true query s sees keys j <= s + L - S. (FlashAttention
        // computes the same in key blocks.)
        const int D = a.dim(0).extent(), S = a.dim(1).extent(), H = a.dim(2).extent(),
                  B = a.dim(3).extent(), L = in[1].dim(1).extent(), KV = in[1].dim(2).extent();
        const float scale = 1.0f / std::sqrt(float(D));
        const bool causal = p.count("causal") && p.at("causal") == "true";
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) {
                const int kv = h / (H / KV);
                for (int s = 0; s < S; s++) {
                    std::vector<float> e(static_cast<size_t>(L));
                    float mx = -INFINITY, sum = 0;
                    for (int j = 0; j < L; j++) {
                        float dot = 0;
                        for (int d = 0; d < D; d++)
                            dot += a(d, s, h, b) * in[1](d, j, kv, b);
                        // (a causal mask hides the keys after the query's: -inf, exp 0)
                        e[size_t(j)] = causal && j > s + L - S ? -FLT_MAX : dot * scale;
                        mx = std::max(mx, e[size_t(j)]);
                    }
                    for (float &x : e)
                        sum += x = std::exp(x - mx);
                    for (int n = 0; n < D; n++) {
                        double o = 0;
                        for (int j = 0; j < L; j++)
                            o += double(round_bf16(e[size_t(j)] / sum)) * in[2](n, j, kv, b);
                        out(n, s, h, b) = float(o);
                    }
                }
            }
        }
    } else {
        FAIL() << "no plain loop for generator " << generator;
    }
}

/** The extents of every argument of `lib` at problem size (n0, n1) (a runtime-shape call), by the
 * generator's shapes; the static extents when n0 is 0. */
std::vector<std::vector<int>> extents_at(const Library &lib, int n0, int n1) {
    const halide_filter_metadata_t *m = lib.metadata();
    std::vector<std::vector<int>> all;
    for (int i = 0; i < m->num_arguments; i++) {
        const halide_filter_argument_t &arg = m->arguments[i];
        std::vector<int> e;
        for (int d = 0; d < arg.dimensions; d++)
            e.push_back(int(*arg.buffer_estimates[2 * d + 1]));
        if (n0 > 0) {
            const std::string g = lib.generator;
            if (g == "transpose")
                e = arg.kind == halide_argument_kind_output_buffer ? std::vector<int>{n0, n1}
                                                                   : std::vector<int>{n1, n0};
            else if (g == "stencil")
                e = arg.kind == halide_argument_kind_output_buffer
                        ? std::vector<int>{n0, n1}
                        : std::vector<int>{n0 + 2, n1 + 2};
            else if (g == "attention") { // q and out: n0 query rows; all: n1 batches
                if (arg.kind == halide_argument_kind_output_buffer || i == 0)
                    e[1] = n0;
                e[3] = n1;
            } else if (g == "linear") { // n1 tokens: x's (its dim 0 transposed), the output's,
                                        // the residual's and scale_x's rows; w and bias static
                const std::string name = arg.name, params = lib.params;
                const bool x_t = params.find("layout=t") != std::string::npos;
                if (name == "x")
                    e[x_t ? 0 : 1] = n1;
                else if (name == "scale_x")
                    e[0] = n1;
                else if (name != "w" && name != "bias" && name != "scale_w")
                    e[1] = n1;
            } else if (arg.dimensions == 3)
                e[2] = n1; // a batched matmul's batch count (its matrices are static)
            else if (arg.dimensions == 2)
                e[1] = n1; // a row kernel's rows (their length is static) or a grid's height
            if (g == "activation" || g == "column_reduce" || g == "undeclared")
                e[0] = n0;
        }
        all.push_back(e);
    }
    return all;
}

/** A value rounded to IEEE half (to nearest even), as its bits: GCC's own _Float16 conversion,
 * not Tandem's. */
uint16_t to_f16(float v) {
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    return bits;
}

/** The float a half's bits hold. */
float from_f16(uint16_t bits) {
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    return static_cast<float>(h);
}

/** Calls `lib` at `extents` on random inputs (of each argument's type: f32, or bf16, f16 or int8
 * operands); compares its output (f32, bf16, f16, int32 or int8) with the plain loop, which reads
 * the same values as floats. */
void check(const Library &lib, const std::vector<std::vector<int>> &extents, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    std::vector<Buffer> inputs; // the values, as the plain loop reads them
    std::vector<Halide::Runtime::Buffer<uint16_t>> halves; // the bf16 or f16 operands' bits
    std::vector<Halide::Runtime::Buffer<int8_t>> bytes;    // the int8 operands
    inputs.reserve(extents.size());                        // raw_buffer() addresses stay
    halves.reserve(extents.size());
    bytes.reserve(extents.size());
    std::vector<void *> args;
    std::uniform_int_distribution<int> int8(-128, 127);
    for (size_t i = 0; i + 1 < extents.size(); i++) {
        inputs.emplace_back(extents[i]);
        inputs.back().for_each_value([&](float &v) { v = value(rng); });
        const halide_type_t type = lib.metadata()->arguments[i].type;
        if (type.code == halide_type_int && type.bits == 8) {
            bytes.emplace_back(extents[i]);
            for (size_t e = 0; e < inputs.back().number_of_elements(); e++) {
                bytes.back().data()[e] = int8_t(int8(rng));
                inputs.back().data()[e] = bytes.back().data()[e];
            }
            args.push_back(bytes.back().raw_buffer());
            continue;
        }
        if (type.bits != 16 ||
            (type.code != halide_type_bfloat && type.code != halide_type_float)) {
            args.push_back(inputs.back().raw_buffer());
            continue;
        }
        const bool f16 = type.code == halide_type_float;
        halves.emplace_back(extents[i]);
        halves.back().raw_buffer()->type = type;
        for (size_t e = 0; e < inputs.back().number_of_elements(); e++) {
            float &v = inputs.back().data()[e];
            uint16_t &bits = halves.back().data()[e];
            if (f16) {
                bits = to_f16(v);
                v = from_f16(bits);
            } else {
                bits = to_bf16(v);
                const uint32_t word = uint32_t(bits) << 16;
                std::memcpy(&v, &word, 4);
            }
        }
        args.push_back(halves.back().raw_buffer());
    }
    // An f32 output, or a bf16 or f16 one (then read back as floats, and checked to within its
    // rounding: half an ulp of the type, twice for the f32 sums it rounds).
    // An int32 output (int8 sums) is exact.
    const halide_type_t out_type = lib.metadata()->arguments[extents.size() - 1].type;
    const bool half_out = out_type.bits == 16, int_out = out_type.code == halide_type_int;
    const bool byte_out = int_out && out_type.bits == 8; // int8 (quantized) values
    Buffer out(extents.back()), want(extents.back());
    Halide::Runtime::Buffer<uint16_t> out_bits(extents.back());
    Halide::Runtime::Buffer<int32_t> out_ints(extents.back());
    Halide::Runtime::Buffer<int8_t> out_bytes(extents.back());
    out.fill(NAN);
    out_bits.fill(0xffff); // NaN in bf16 and f16
    out_bits.raw_buffer()->type = out_type;
    out_ints.fill(-7);
    out_bytes.fill(-7);
    args.push_back(half_out   ? out_bits.raw_buffer()
                   : byte_out ? out_bytes.raw_buffer()
                   : int_out  ? out_ints.raw_buffer()
                              : out.raw_buffer());
    ASSERT_EQ(lib.argv(args.data()), 0) << lib.name;
    if (int_out) {
        for (size_t e = 0; e < out.number_of_elements(); e++)
            out.data()[e] = float(byte_out ? out_bytes.data()[e] : out_ints.data()[e]);
    }
    if (half_out) {
        for (size_t e = 0; e < out.number_of_elements(); e++) {
            const uint16_t bits = out_bits.data()[e];
            const uint32_t word = uint32_t(bits) << 16;
            if (out_type.code == halide_type_bfloat)
                std::memcpy(&out.data()[e], &word, 4);
            else
                out.data()[e] = from_f16(bits);
        }
    }
    const double rounding = int_out                               ? 0
                            : !half_out                           ? 1e-4
                            : out_type.code == halide_type_bfloat ? 8e-3
                                                                  : 1e-3;
    const std::map<std::string, std::string> params = parse(lib.params);
    reference(lib.generator, params, inputs, want);
    double scale = 0;
    want.for_each_value([&](float v) {
        if (std::isfinite(v)) // a sum past a half's range is infinite in both
            scale = std::max(scale, double(std::fabs(v)));
    });
    int bad = 0;
    const int width = want.dim(0).extent();
    for (size_t i = 0; i < want.number_of_elements(); i++) { // dense, the same shape
        const double w = want.data()[i], g = out.data()[i];
        // Attention rounds P to bf16: its row sum, added in another order than the loop's, may
        // round an element of P the other way (an ulp of bf16 times one v). FlashAttention rounds
        // P before it divides by the row's sum, relative to the block's max: each element of P
        // within a bf16 ulp (2^-8) of the loop's, so the output within 2^-8 of the largest.
        // So does attention with the online softmax (TJ > 0).
        const std::string generator = lib.generator;
        const bool online =
            generator == "flash_attention" ||
            (generator == "attention" && params.count("TJ") && params.at("TJ") != "0");
        const double slack = online ? 4e-3 * scale : generator == "attention" ? 1e-3 * scale : 0;
        const double tolerance =
            int_out ? 0 : 1e-5 * scale + rounding * std::fabs(w) + 1e-6 + slack;
        if (!(std::fabs(g - w) <= tolerance) && !(std::isinf(w) && g == w) && bad++ < 5) {
            ADD_FAILURE() << lib.name << " at (" << i % width << ", " << i / width << "): " << g
                          << ", the loop says " << w;
        }
    }
}

/** Whether an argument's extent is left to the call without an estimate (Halide's default). */
bool undeclared(const Library &lib) {
    for (const std::vector<int> &e : extents_at(lib, 0, 0)) {
        if (std::count(e.begin(), e.end(), 0))
            return true;
    }
    return false;
}

bool runtime(const Library &lib) {
    return parse(lib.params).count("runtime") || undeclared(lib);
}

class Conformance : public ::testing::TestWithParam<Library> {};

TEST_P(Conformance, MatchesThePlainLoop) {
    const Library &lib = GetParam();
    if (!undeclared(lib))
        check(lib, extents_at(lib, 0, 0), 1);
    if (!runtime(lib))
        return;
    for (auto [n0, n1] : std::vector<std::pair<int, int>>{{1, 1}, {7, 13}, {130, 3}})
        check(lib, extents_at(lib, n0, n1), 2);
}

TEST_P(Conformance, RefusesABadBufferWithoutWriting) {
    const Library &lib = GetParam();
    std::vector<std::vector<int>> extents = extents_at(lib, undeclared(lib) ? 7 : 0, 5);
    extents.front().front() += 1; // the first input one element wider than the kernel reads
    if (runtime(lib))
        extents.front() = std::vector<int>(extents.front().size(), 1); // smaller than out needs
    std::vector<Buffer> buffers;
    for (const std::vector<int> &e : extents)
        buffers.emplace_back(e);
    buffers.back().fill(-7.0f);
    std::vector<void *> args;
    for (Buffer &b : buffers)
        args.push_back(b.raw_buffer());
    EXPECT_NE(lib.argv(args.data()), 0) << lib.name;
    buffers.back().for_each_value([&](float v) { ASSERT_EQ(v, -7.0f); });
}

INSTANTIATE_TEST_SUITE_P(Libraries, Conformance, ::testing::ValuesIn(libraries),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
