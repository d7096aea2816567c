// ascend_anchor M N K: runs the hand-written AscendC GEMM (HandwrittenGemm.cpp) on the Ascend
// model with random bf16 inputs and prints one JSON object: cycles, the busy pipes and whether it
// ran race- and deadlock-free. benchmarks/ascend_anchor.sh sets it beside Tandem's gemm.
#include "HandwrittenGemm.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: ascend_anchor M N K (multiples of 128)\n");
        return 2;
    }
    const int32_t M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
    if (M <= 0 || N <= 0 || K <= 0 || M % 128 || N % 128 || K % 128) {
        std::fprintf(stderr, "ascend_anchor: M, N and K must be positive multiples of 128\n");
        return 2;
    }
    using tandem::sim::DType;
    tandem::sim::ascend::AscendParams params; // the built-in 910B description's values
    tandem::sim::ascend::Machine machine(params, /*numerics=*/true); // the kernel reads its tiling
    int a = machine.add_gm("A", DType::BF16, int64_t(M) * K), b = machine.add_gm("B", DType::BF16, int64_t(K) * N);
    int c = machine.add_gm("C", DType::BF16, int64_t(M) * N), tiling = machine.add_gm("tiling", DType::I32, 3);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (int buffer : {a, b}) {
        auto *bits = static_cast<uint16_t *>(machine.data(buffer));
        for (int64_t i = 0; i < machine.elements(buffer); i++) bits[i] = tandem::sim::float_to_bf16(dist(rng));
    }
    const int32_t shape[3] = {M, N, K};
    std::memcpy(machine.data(tiling), shape, sizeof(shape));
    tandem_ascend::run(machine, handwritten_gemm, {a, b, c, tiling}, AscendC::KernelMode::AIC_MODE);
    tandem::sim::Report r = machine.finish();
    std::string busy;
    for (const auto &e : r.busy) busy += (busy.empty() ? "" : ", ") + ("\"" + e.engine + "\": " + std::to_string(e.busy));
    std::printf("{\"kernel\": \"handwritten_gemm\", \"M\": %d, \"N\": %d, \"K\": %d, \"cycles\": %lld, "
                "\"bound_cycles\": %lld, \"busy\": {%s}, \"races\": %d, \"deadlock\": %s}\n",
                M, N, K, (long long)r.cycles, (long long)r.bound_cycles, busy.c_str(), int(r.race_count),
                r.deadlock ? "true" : "false");
    return r.deadlock || r.race_count ? 1 : 0;
}
