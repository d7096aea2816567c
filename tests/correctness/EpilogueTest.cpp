// A GEMM with a fused epilogue (bias + ReLU; or a scale and a residual tile added), written as a
// user writes it (the algorithm, then a schedule with Tandem's directives), on every target and
// schedule: it must match the Halide reference with no race and no deadlock (on ascend a mix
// kernel: the cube cores hand each tile to the vector cores through a GM workspace).
#include "App.h"
#include "Run.h"

#include <gtest/gtest.h>

using namespace tandem;
using namespace tandem::apps;

namespace {

const int M = 150, N = 136, K = 200;

/** epilogue "bias_relu": C = bf16(max(acc + bias(j), 0)); "scale_residual": C = f32(acc * 0.125 +
 * R(j, i) - 1), R an M x N input staged per tile. */
Built gemm_epilogue(const std::string &epilogue, const std::string &schedule) {
    ImageParam A(Halide::BFloat(16), 2, "A"), B(Halide::BFloat(16), 2, "B"),
        bias(Halide::Float(32), 1, "bias"), R(Halide::Float(32), 2, "R");
    const bool residual = epilogue == "scale_residual";
    Var j("j"), i("i");
    RDom r(0, K, "r");
    Func acc("acc"), C("C");
    acc(j, i) = 0.0f;
    acc(j, i) += Halide::cast<float>(A(r, i)) * Halide::cast<float>(B(j, r));
    if (residual)
        C(j, i) = acc(j, i) * 0.125f + R(j, i) - 1.0f;
    else
        C(j, i) = Halide::cast<Halide::bfloat16_t>(Halide::max(acc(j, i) + bias(j), 0.0f));
    A.dim(0).set_bounds(0, K);
    A.dim(1).set_bounds(0, M).set_stride(K);
    B.dim(0).set_bounds(0, N);
    B.dim(1).set_bounds(0, K).set_stride(N);
    bias.dim(0).set_bounds(0, N);
    R.dim(0).set_bounds(0, N);
    R.dim(1).set_bounds(0, M).set_stride(N);
    C.output_buffer().dim(0).set_bounds(0, N);
    C.output_buffer().dim(1).set_bounds(0, M).set_stride(N);
    const std::vector<ImageParam> inputs =
        residual ? std::vector<ImageParam>{A, B, R} : std::vector<ImageParam>{A, B, bias};
    if (schedule == "reference")
        return {inputs, C};

    Var jo("jo"), io("io"), ji("ji"), ii("ii"), t("t");
    RVar ko("ko"), ki("ki");
    C.tile(j, i, jo, io, ji, ii, 64, 64, TailStrategy::GuardWithIf).fuse(jo, io, t).map_to_cores(t);
    acc.compute_at(C, t);
    acc.update().split(r.x, ko, ki, 64, TailStrategy::GuardWithIf).reorder(j, i, ki, ko).tile_mma();
    Func A_tile = Func::staged(A, acc), B_tile = Func::staged(B, acc),
         in_tile = Func::staged(residual ? R : bias, C);
    A_tile.compute_at(acc, ko).async_copy().multi_buffer(3);
    B_tile.compute_at(acc, ko).async_copy().multi_buffer(3);
    in_tile.compute_at(C, t);
    C.async_copy();
    if (schedule == "ws" || schedule == "ws_pingpong")
        C.warp_specialize();
    if (schedule == "ws_pingpong")
        C.ping_pong();
    return {inputs, C};
}

App app(const std::string &epilogue) {
    App a;
    a.name = "gemm_" + epilogue;
    a.build = [epilogue](const Params &, const std::string &schedule, const Target &) {
        return gemm_epilogue(epilogue, schedule);
    };
    a.schedules = {"ws_pingpong", "ws", "pipelined"};
    a.target_schedules = {{"hopper", a.schedules}, {"ascend", a.schedules}};
    a.workload = [](const Params &) { return Workload{double(M) * N * K, 3.0 * M * N, 0}; };
    a.tolerance = [](const Params &) { return 1e-2; };
    return a;
}

class Epilogue : public testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {
};

TEST_P(Epilogue, MatchesReference) {
    auto [epilogue, target, schedule] = GetParam();
    RunOptions o;
    o.target = target;
    o.schedule = schedule;
    RunResult r = run(app(epilogue), o);
    EXPECT_TRUE(r.correct) << "max_rel_err " << r.max_rel_err;
    EXPECT_EQ(r.report.race_count, 0);
    EXPECT_FALSE(r.report.deadlock) << r.report.deadlock_message;
}

INSTANTIATE_TEST_SUITE_P(EveryTarget, Epilogue,
                         testing::Combine(testing::Values("bias_relu", "scale_residual"),
                                          testing::Values("zpu", "hopper", "ascend"),
                                          testing::Values("ws_pingpong", "ws", "pipelined")),
                         [](const auto &info) {
                             return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" +
                                    std::get<2>(info.param);
                         });

} // namespace
