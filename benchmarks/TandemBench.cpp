// Compile time of a kernel (Halide lowering + Tandem's passes + emitting C++) and simulator
// throughput (timing-only and with numerics).
#include "App.h"
#include "Run.h"
#include "zpu/Emitter.h"
#include "zpu/Executor.h"

#include <benchmark/benchmark.h>

using namespace tandem;
using namespace tandem::apps;

namespace {

Params gemm_params(int n, int stages = 0) { // 0: the most stages that fit
    Params p;
    for (const char *k : {"M", "N", "K"})
        p.set(k, std::to_string(n));
    p.set("stages", std::to_string(stages));
    return p;
}

void BM_CompileGemm(benchmark::State &state) {
    const App &app = gemm_app();
    Params p = with_defaults(app, gemm_params(int(state.range(0))));
    for (auto _ : state) {
        Kernel k = compile_app(app, p, "ws_pingpong", Target::parse("zpu"));
        std::string code = zpu_backend::emit_cpp(k);
        benchmark::DoNotOptimize(code.data());
    }
}
BENCHMARK(BM_CompileGemm)->Arg(2048)->Arg(1000)->Unit(benchmark::kMillisecond);

void BM_CompileRmsnorm(benchmark::State &state) {
    const App &app = rmsnorm_app();
    Params p = with_defaults(app, {});
    for (auto _ : state) {
        Kernel k = compile_app(app, p, "double_buffered", Target::parse("zpu"));
        benchmark::DoNotOptimize(k.body.get());
    }
}
BENCHMARK(BM_CompileRmsnorm)->Unit(benchmark::kMillisecond);

/** Simulation only (the kernel is compiled once, outside the timed loop). */
void simulate(benchmark::State &state, const App &app, const Params &given,
              const std::string &schedule, bool numerics) {
    Params p = with_defaults(app, given);
    Kernel k = compile_app(app, p, schedule, Target::parse("zpu"));
    int64_t cycles = 0;
    for (auto _ : state) {
        sim::Machine m(sim::ZpuParams::from(k.target.lookup()), numerics);
        auto ids = add_arguments(k, m, 1);
        zpu_backend::execute(k, m, ids);
        cycles = m.finish().cycles;
    }
    state.counters["simulated_cycles"] = double(cycles);
}

void BM_SimulateGemmTiming(benchmark::State &state) {
    simulate(state, gemm_app(), gemm_params(int(state.range(0))), "ws_pingpong", false);
}
BENCHMARK(BM_SimulateGemmTiming)->Arg(2048)->Arg(4096)->Unit(benchmark::kMillisecond);

void BM_SimulateGemmNumerics(benchmark::State &state) {
    simulate(state, gemm_app(), gemm_params(int(state.range(0))), "ws_pingpong", true);
}
BENCHMARK(BM_SimulateGemmNumerics)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_SimulateElementwiseNumerics(benchmark::State &state) {
    simulate(state, elementwise_app(), {}, "double_buffered", true);
}
BENCHMARK(BM_SimulateElementwiseNumerics)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
