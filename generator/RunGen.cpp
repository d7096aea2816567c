#include "RunGen.h"

#include <CLI/CLI.hpp>
#include <HalideBuffer.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace tandem {

namespace {

std::string type_name(const halide_type_t &t) {
    const char *code = t.code == halide_type_float    ? "float"
                       : t.code == halide_type_bfloat ? "bfloat"
                       : t.code == halide_type_uint   ? "uint"
                                                      : "int";
    return code + std::to_string(t.bits);
}

/** Random values of the buffer's type: floats in [-1, 1), integers in [-8, 8) (unsigned [0, 16)).
 */
void fill(Halide::Runtime::Buffer<void> &b, std::mt19937 &rng) {
    std::uniform_real_distribution<float> real(-1.0f, 1.0f);
    std::uniform_int_distribution<int> integer(-8, 7);
    const halide_type_t t = b.type();
    auto *bytes = static_cast<unsigned char *>(b.data());
    for (size_t i = 0; i < b.number_of_elements(); i++) {
        unsigned char *at = bytes + i * t.bytes();
        if (t.code == halide_type_float && t.bits == 32) {
            float v = real(rng);
            std::memcpy(at, &v, 4);
        } else if (t.code == halide_type_bfloat && t.bits == 16) {
            float v = real(rng);
            uint32_t u;
            std::memcpy(&u, &v, 4);
            uint16_t h = uint16_t(u >> 16);
            std::memcpy(at, &h, 2);
        } else if (t.code == halide_type_float && t.bits == 16) {
            const _Float16 h = static_cast<_Float16>(real(rng)); // IEEE half, exact in [-1, 1)
            std::memcpy(at, &h, 2);
        } else {
            int64_t v = integer(rng);
            if (t.code == halide_type_uint)
                v += 8;
            std::memcpy(at, &v, size_t(t.bytes())); // little-endian: the low bytes
        }
    }
}

/** Element i of a dense buffer of type t, as a double. */
double element(const unsigned char *data, const halide_type_t &t, size_t i) {
    const unsigned char *at = data + i * t.bytes();
    if (t.code == halide_type_float && t.bits == 32) {
        float v;
        std::memcpy(&v, at, 4);
        return v;
    }
    if (t.bits == 16 && (t.code == halide_type_bfloat || t.code == halide_type_float)) {
        uint16_t h;
        std::memcpy(&h, at, 2);
        if (t.code == halide_type_bfloat) {
            const uint32_t u = uint32_t(h) << 16;
            float v;
            std::memcpy(&v, &u, 4);
            return v;
        }
        _Float16 v;
        std::memcpy(&v, &h, 2);
        return double(v);
    }
    int64_t v = 0;
    std::memcpy(&v, at, size_t(t.bytes()));
    if (t.code == halide_type_int && t.bits < 64) // sign-extend
        v = (v << (64 - t.bits)) >> (64 - t.bits);
    return double(v);
}

std::string saved_path(const std::string &dir, const char *name) {
    return dir + "/" + name + ".bin";
}

/** The saved elements of an argument, or empty with a message. */
std::vector<unsigned char> read_saved(const std::string &dir, const char *name, size_t bytes) {
    std::ifstream f(saved_path(dir, name), std::ios::binary | std::ios::ate);
    if (!f) {
        std::fprintf(stderr, "--check: no %s (written by the generator's --run --save %s)\n",
                     saved_path(dir, name).c_str(), dir.c_str());
        return {};
    }
    if (size_t(f.tellg()) != bytes) {
        std::fprintf(stderr, "--check: %s has %lld bytes, the argument takes %zu\n",
                     saved_path(dir, name).c_str(), (long long)f.tellg(), bytes);
        return {};
    }
    std::vector<unsigned char> data(bytes);
    f.seekg(0);
    f.read(reinterpret_cast<char *>(data.data()), std::streamsize(bytes));
    return data;
}

} // namespace

bool load_saved(const std::string &dir, const halide_filter_argument_t &a, halide_buffer_t *host) {
    const size_t bytes = Halide::Runtime::Buffer<void>(*host).size_in_bytes();
    std::vector<unsigned char> data = read_saved(dir, a.name, bytes);
    if (data.empty())
        return false;
    std::memcpy(host->host, data.data(), bytes);
    return true;
}

bool check_saved(const std::string &dir, const halide_filter_argument_t &out,
                 const halide_buffer_t *host) {
    Halide::Runtime::Buffer<void> b(*host);
    std::vector<unsigned char> want = read_saved(dir, out.name, b.size_in_bytes());
    double tolerance = -1;
    std::ifstream(dir + "/tolerance") >> tolerance;
    if (want.empty() || tolerance < 0) {
        if (tolerance < 0)
            std::fprintf(stderr, "--check: no tolerance in %s/tolerance\n", dir.c_str());
        return false;
    }
    const auto *have = static_cast<const unsigned char *>(b.data());
    double max_ref = 0, max_err = 0;
    size_t bad = 0, first_bad = 0;
    bool finite = true;
    for (size_t i = 0; i < b.number_of_elements(); i++) {
        const double w = element(want.data(), out.type, i), h = element(have, out.type, i);
        if (!std::isfinite(h) || !std::isfinite(w)) { // the reference's own infinity is right
            if (!(h == w || (std::isnan(h) && std::isnan(w)))) {
                finite = false;
                if (bad++ == 0)
                    first_bad = i;
            }
            continue;
        }
        max_ref = std::max(max_ref, std::fabs(w));
        max_err = std::max(max_err, std::fabs(h - w));
    }
    const double rel = finite ? max_err / std::max(max_ref, 1e-30) : INFINITY;
    const bool correct = finite && rel <= tolerance;
    std::printf("correct: %s (max_rel_err %.3g, tolerance %.3g", correct ? "yes" : "NO", rel,
                tolerance);
    if (!finite)
        std::printf("; %zu elements not finite where the reference's are, or the reverse, the "
                    "first at %zu",
                    bad, first_bad);
    std::printf(")\n");
    return correct;
}

int parse_run_options(int argc, char **argv, const halide_filter_metadata_t *m, RunOptions *o) {
    CLI::App app{std::string("runs ") + m->name + " (" + m->target + ") on random inputs"};
    app.add_flag("--describe", o->describe, "print the arguments and exit");
    app.add_option("--iterations", o->iterations, "calls to time")->check(CLI::PositiveNumber);
    app.add_option("--seed", o->seed, "the inputs' random seed");
    app.add_option("--check", o->check,
                   "run the problem the generator's --run --save DIR wrote and compare the output "
                   "with its reference (exit 1 when wrong)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    return -1;
}

void describe_arguments(const halide_filter_metadata_t *m) {
    std::printf("%s for %s, %d arguments:\n", m->name, m->target, m->num_arguments);
    for (int i = 0; i < m->num_arguments; i++) {
        const halide_filter_argument_t &a = m->arguments[i];
        std::printf("  %s: %s %s [", a.name,
                    a.kind == halide_argument_kind_output_buffer ? "output" : "input",
                    type_name(a.type).c_str());
        for (int d = 0; d < a.dimensions; d++)
            std::printf("%s%lld", d ? " x " : "",
                        (long long)(a.buffer_estimates ? *a.buffer_estimates[2 * d + 1] : 0));
        std::printf("]\n");
    }
}

void fill_random(halide_buffer_t *buffer, unsigned seed) {
    std::mt19937 rng(seed);
    Halide::Runtime::Buffer<void> b(*buffer);
    fill(b, rng);
}

int run_generated(int argc, char **argv, const halide_filter_metadata_t *m,
                  int (*call)(void **args), uint64_t (*last_cycles)(void)) {
    RunOptions o;
    if (int status = parse_run_options(argc, argv, m, &o); status >= 0)
        return status;
    if (o.describe) {
        describe_arguments(m);
        return 0;
    }
    std::mt19937 rng(o.seed);
    std::vector<Halide::Runtime::Buffer<void>> buffers;
    std::vector<void *> args;
    for (int i = 0; i < m->num_arguments; i++) {
        const halide_filter_argument_t &a = m->arguments[i];
        if (a.kind == halide_argument_kind_input_scalar || !a.buffer_estimates) {
            std::fprintf(stderr, "%s: argument %s is not a buffer with known extents\n", m->name,
                         a.name);
            return 1;
        }
        std::vector<int> extents;
        for (int d = 0; d < a.dimensions; d++)
            extents.push_back(int(*a.buffer_estimates[2 * d + 1]));
        buffers.emplace_back(a.type, extents);
        if (a.kind != halide_argument_kind_input_buffer)
            std::memset(buffers.back().data(), 0xFF, buffers.back().size_in_bytes()); // NaN
        else if (o.check.empty())
            fill(buffers.back(), rng);
        else if (!load_saved(o.check, a, buffers.back().raw_buffer()))
            return 1;
    }
    for (auto &b : buffers)
        args.push_back(b.raw_buffer());
    if (!o.check.empty()) {
        if (int error = call(args.data())) {
            std::fprintf(stderr, "%s failed: %d\n", m->name, error);
            return 1;
        }
        bool correct = true;
        for (int i = 0; i < m->num_arguments; i++)
            if (m->arguments[i].kind == halide_argument_kind_output_buffer)
                correct &= check_saved(o.check, m->arguments[i], buffers[size_t(i)].raw_buffer());
        return correct ? 0 : 1;
    }
    double seconds = 0;
    for (int it = 0; it < o.iterations; it++) {
        auto start = std::chrono::steady_clock::now();
        if (int error = call(args.data())) {
            std::fprintf(stderr, "%s failed: %d\n", m->name, error);
            return 1;
        }
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    std::printf(
        "%s on %s: %llu cycles on the machine model; %.3f ms of host time per call (%d call%s)\n",
        m->name, m->target, (unsigned long long)last_cycles(), 1e3 * seconds / o.iterations,
        o.iterations, o.iterations == 1 ? "" : "s");
    return 0;
}

} // namespace tandem
