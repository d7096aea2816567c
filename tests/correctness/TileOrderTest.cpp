// A GEMM whose tile order has holes: tile rows in groups of 3 (split with GuardWithIf) walked
// column by column, so the last group's missing rows are tiles a guard skips inside the tile loop.
// Every target and schedule must still match the Halide reference with no race and no deadlock
// (Ascend deadlocked: the wait for a free accumulator version ran in a skipped tile, the store
// that frees it did not).
#include "App.h"
#include "Run.h"

#include <gtest/gtest.h>

using namespace tandem;
using namespace tandem::apps;

namespace {

const int M = 1000, N = 392, K = 160;

Built gemm_with_holes(const Params &, const std::string &schedule, const Target &) {
    ImageParam A(Halide::BFloat(16), 2, "A"), B(Halide::BFloat(16), 2, "B");
    Var j("j"), i("i");
    RDom r(0, K, "r");
    Func acc("acc"), C("C");
    acc(j, i) = 0.0f;
    acc(j, i) += Halide::cast<float>(A(r, i)) * Halide::cast<float>(B(j, r));
    C(j, i) = Halide::cast<Halide::bfloat16_t>(acc(j, i));
    A.dim(0).set_bounds(0, K);
    A.dim(1).set_bounds(0, M).set_stride(K);
    B.dim(0).set_bounds(0, N);
    B.dim(1).set_bounds(0, K).set_stride(N);
    C.output_buffer().dim(0).set_bounds(0, N);
    C.output_buffer().dim(1).set_bounds(0, M).set_stride(N);
    if (schedule == "reference")
        return {{A, B}, C};

    Var jo("jo"), io("io"), ji("ji"), ii("ii"), iog("iog"), iob("iob"), g("g"), t("t");
    RVar ko("ko"), ki("ki");
    // 8 tile rows of 128 in groups of 3: the third group has 2 rows and a hole.
    C.tile(j, i, jo, io, ji, ii, 128, 128, TailStrategy::GuardWithIf)
        .split(io, iog, iob, 3, TailStrategy::GuardWithIf)
        .reorder(ji, ii, iob, jo, iog)
        .fuse(iob, jo, g)
        .fuse(g, iog, t)
        .map_to_cores(t);
    acc.compute_at(C, t);
    acc.update().split(r.x, ko, ki, 64, TailStrategy::GuardWithIf).reorder(j, i, ki, ko).tile_mma();
    Func A_tile = Func::staged(A, acc), B_tile = Func::staged(B, acc);
    A_tile.compute_at(acc, ko).async_copy().multi_buffer(2);
    B_tile.compute_at(acc, ko).async_copy().multi_buffer(2);
    C.async_copy();
    if (schedule != "pipelined")
        C.warp_specialize();
    if (schedule == "ws_pingpong")
        C.ping_pong();
    return {{A, B}, C};
}

App app() {
    App a;
    a.name = "gemm_tile_order_with_holes";
    a.build = gemm_with_holes;
    a.schedules = {"ws_pingpong", "ws", "pipelined"};
    a.target_schedules = {{"hopper", a.schedules}, {"ascend", {"ws_pingpong", "pipelined"}}};
    a.workload = [](const Params &) { return Workload{double(M) * N * K, 0, 0}; };
    a.tolerance = [](const Params &) { return 1e-2; };
    return a;
}

class TileOrderWithHoles : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(TileOrderWithHoles, MatchesReferenceWithoutHazards) {
    auto [target, schedule] = GetParam();
    RunOptions o;
    o.target = target;
    o.schedule = schedule;
    RunResult r = run(app(), o);
    EXPECT_TRUE(r.correct) << "max_rel_err " << r.max_rel_err;
    EXPECT_EQ(r.report.race_count, 0);
    EXPECT_FALSE(r.report.deadlock) << r.report.deadlock_message;
}

INSTANTIATE_TEST_SUITE_P(
    EveryTarget, TileOrderWithHoles,
    testing::Values(std::tuple{"zpu", "ws_pingpong"}, std::tuple{"zpu", "pipelined"},
                    std::tuple{"hopper:sms=4", "ws_pingpong"}, std::tuple{"hopper", "ws"},
                    std::tuple{"hopper", "pipelined"}, std::tuple{"ascend", "ws_pingpong"},
                    std::tuple{"ascend", "pipelined"}),
    [](const auto &info) {
        std::string n = std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
        for (char &c : n)
            if (!isalnum(static_cast<unsigned char>(c)))
                c = '_';
        return n;
    });

} // namespace
