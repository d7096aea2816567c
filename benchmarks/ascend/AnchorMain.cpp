// ascend_anchor gemm M N K | elementwise n tile: runs a hand-written AscendC anchor kernel
// (Handwritten*.cpp) on the Ascend model with random inputs and prints one JSON object: cycles,
// the busy pipes and whether it ran race- and deadlock-free. benchmarks/ascend_anchor.sh sets it
// beside Tandem's kernel of the same app.
#include "Handwritten.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

namespace {

using tandem::sim::DType;

void fill(tandem::sim::ascend::Machine &machine, int buffer, std::mt19937 &rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (int64_t i = 0; i < machine.elements(buffer); i++) {
        if (machine.type(buffer) == DType::BF16)
            static_cast<uint16_t *>(machine.data(buffer))[i] =
                tandem::sim::float_to_bf16(dist(rng));
        else
            static_cast<float *>(machine.data(buffer))[i] = dist(rng);
    }
}

int report(const char *kernel, const std::string &shape, const tandem::sim::Report &r) {
    std::string busy;
    for (const auto &e : r.busy)
        busy += (busy.empty() ? "" : ", ") + ("\"" + e.engine + "\": " + std::to_string(e.busy));
    std::printf(
        "{\"kernel\": \"%s\", %s, \"cycles\": %lld, \"bound_cycles\": %lld, \"busy\": {%s}, "
        "\"races\": %d, \"deadlock\": %s}\n",
        kernel, shape.c_str(), (long long)r.cycles, (long long)r.bound_cycles, busy.c_str(),
        int(r.race_count), r.deadlock ? "true" : "false");
    return r.deadlock || r.race_count ? 1 : 0;
}

/** The attention anchor at S x L x D, checked against softmax(q k^T / sqrt(D)) v in double on
 * every 7th query row (all of them at small shapes). */
int attention(tandem::sim::ascend::Machine &machine, std::mt19937 &rng, int32_t S, int32_t L,
              int32_t D, int32_t TM, int32_t TJ) {
    if (S <= 0 || L <= 0 || (TM != 64 && TM != 128) || (TJ != 64 && TJ != 128) || S % TM ||
        L % TJ || (D != 64 && D != 128)) {
        std::fprintf(stderr, "ascend_anchor: attention takes TM and TJ of 64 or 128, S a multiple "
                             "of TM, L of TJ, D 64 or 128\n");
        return 2;
    }
    int q = machine.add_gm("q", DType::BF16, int64_t(S) * D),
        k = machine.add_gm("k", DType::BF16, int64_t(L) * D),
        v = machine.add_gm("v", DType::BF16, int64_t(L) * D);
    int out = machine.add_gm("out", DType::F32, int64_t(S) * D);
    for (int b : {q, k, v})
        fill(machine, b, rng);
    const tandem::sim::Report r =
        run_handwritten_attention(machine, {q, k, v, out}, {S, L, D, TM, TJ});
    const double error = handwritten_attention_error(machine, {q, k, v, out}, {S, L, D, TM, TJ},
                                                     int64_t(S) * L * D > (1 << 24) ? 7 : 1);
    if (error > 1e-2) {
        std::fprintf(stderr,
                     "ascend_anchor: attention is wrong: max error %g of the largest output\n",
                     error);
        return 1;
    }
    return report("handwritten_attention",
                  "\"S\": " + std::to_string(S) + ", \"L\": " + std::to_string(L) +
                      ", \"D\": " + std::to_string(D) + ", \"TM\": " + std::to_string(TM) +
                      ", \"TJ\": " + std::to_string(TJ) +
                      ", \"max_err_of_largest\": " + std::to_string(error),
                  r);
}

} // namespace

int main(int argc, char **argv) {
    const std::string which = argc > 1 ? argv[1] : "";
    tandem::sim::ascend::AscendParams params; // the built-in 910B description's values
    // ASCEND_ANCHOR_TRACE=path: a Chrome/Perfetto trace of the run, as conformance_gen --trace.
    const char *trace = std::getenv("ASCEND_ANCHOR_TRACE");
    tandem::sim::ascend::Machine machine(params, /*numerics=*/true, // the kernels read their tiling
                                         /*trace=*/trace != nullptr);
    std::mt19937 rng(1);
    if (which == "gemm" && argc == 5) {
        const int32_t M = std::atoi(argv[2]), N = std::atoi(argv[3]), K = std::atoi(argv[4]);
        if (M <= 0 || N <= 0 || K <= 0 || M % 128 || N % 128 || K % 128) {
            std::fprintf(stderr, "ascend_anchor: M, N and K must be positive multiples of 128\n");
            return 2;
        }
        int a = machine.add_gm("A", DType::BF16, int64_t(M) * K),
            b = machine.add_gm("B", DType::BF16, int64_t(K) * N);
        int c = machine.add_gm("C", DType::BF16, int64_t(M) * N),
            tiling = machine.add_gm("tiling", DType::I32, 3);
        fill(machine, a, rng);
        fill(machine, b, rng);
        const int32_t shape[3] = {M, N, K};
        std::memcpy(machine.data(tiling), shape, sizeof(shape));
        tandem_ascend::run(machine, handwritten_gemm, {a, b, c, tiling},
                           AscendC::KernelMode::AIC_MODE);
        return report("handwritten_gemm",
                      "\"M\": " + std::to_string(M) + ", \"N\": " + std::to_string(N) +
                          ", \"K\": " + std::to_string(K),
                      machine.finish());
    }
    if (which == "elementwise" && argc == 4) {
        const int32_t n = std::atoi(argv[2]), tile = std::atoi(argv[3]);
        if (n <= 0 || tile <= 0 || n % tile || tile % 8) {
            std::fprintf(stderr,
                         "ascend_anchor: n must be a positive multiple of tile, tile of 8\n");
            return 2;
        }
        int ins[3], out = machine.add_gm("out", DType::F32, n),
                    tiling = machine.add_gm("tiling", DType::I32, 2);
        for (int &in : ins) {
            in = machine.add_gm("in", DType::F32, n);
            fill(machine, in, rng);
        }
        const int32_t shape[2] = {n, tile};
        std::memcpy(machine.data(tiling), shape, sizeof(shape));
        tandem_ascend::run(machine, handwritten_elementwise, {ins[0], ins[1], ins[2], out, tiling},
                           AscendC::KernelMode::AIV_MODE);
        return report("handwritten_elementwise",
                      "\"n\": " + std::to_string(n) + ", \"tile\": " + std::to_string(tile),
                      machine.finish());
    }
    if (which == "attention" && argc == 7) {
        const int rc = attention(machine, rng, std::atoi(argv[2]), std::atoi(argv[3]),
                                 std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[6]));
        if (trace)
            machine.write_trace(trace);
        return rc;
    }
    std::fprintf(stderr,
                 "usage: ascend_anchor gemm M N K | elementwise n tile | attention S L D TM TJ\n");
    return 2;
}
