// Correctness: every app x schedule x size the ZPU supports runs on the machine model and matches
// the Halide CPU JIT of the same algorithm, with no race and no deadlock.
#include "App.h"
#include "Run.h"
#include "tandem/AsyncIR.h"

#include <gtest/gtest.h>

#include <random>

using namespace tandem;
using namespace tandem::apps;

namespace {

struct Case {
    std::string app, schedule;
    std::map<std::string, std::string> params;
    std::string name;
    std::string target = "zpu";
};

std::ostream &operator<<(std::ostream &os, const Case &c) {
    return os << c.name;
}

std::string case_name(const Case &c) {
    std::string n = c.app + "_" + c.schedule;
    for (const auto &[k, v] : c.params)
        n += "_" + k + v;
    return n;
}

std::vector<Case> cases() {
    std::vector<Case> all;
    auto add = [&](const std::string &app, const std::vector<std::string> &schedules,
                   const std::map<std::string, std::string> &params) {
        for (const std::string &s : schedules) {
            Case c{app, s, params, ""};
            c.name = case_name(c);
            all.push_back(c);
        }
    };
    const std::vector<std::string> gemm_schedules = {"ws_pingpong", "ws", "pipelined", "sync"};
    // Tile multiples, ragged edges in every dim, one K tile, fewer K tiles than stages, one tile
    // in all, K tiles not a multiple of the stage count, f32 output (stored straight from acc).
    add("gemm", gemm_schedules,
        {{"M", "256"}, {"N", "256"}, {"K", "256"}, {"TM", "64"}, {"TN", "64"}, {"TK", "64"}});
    add("gemm", gemm_schedules,
        {{"M", "300"}, {"N", "260"}, {"K", "200"}, {"TM", "128"}, {"TN", "128"}, {"TK", "64"}});
    add("gemm", gemm_schedules,
        {{"M", "192"}, {"N", "160"}, {"K", "48"}, {"TM", "64"}, {"TN", "64"}, {"TK", "64"}});
    add("gemm", gemm_schedules,
        {{"M", "128"},
         {"N", "128"},
         {"K", "128"},
         {"TM", "64"},
         {"TN", "64"},
         {"TK", "64"},
         {"stages", "4"}});
    add("gemm", gemm_schedules, {{"M", "100"}, {"N", "100"}, {"K", "100"}});
    add("gemm", gemm_schedules,
        {{"M", "96"},
         {"N", "80"},
         {"K", "320"},
         {"TM", "32"},
         {"TN", "32"},
         {"TK", "64"},
         {"stages", "3"},
         {"out", "f32"}});
    add("gemm", {"ws_pingpong", "pipelined"},
        {{"M", "1000"}, {"N", "1000"}, {"K", "1000"}, {"out", "f32"}});
    for (const char *stages : {"1", "2", "3", "4"}) {
        add("gemm", {"ws_pingpong", "pipelined"},
            {{"M", "512"},
             {"N", "384"},
             {"K", "704"},
             {"TM", "128"},
             {"TN", "128"},
             {"TK", "128"},
             {"stages", stages}});
    }
    const std::vector<std::string> stream_schedules = {"double_buffered", "single_buffered",
                                                       "sync"};
    add("elementwise", stream_schedules, {{"W", "512"}, {"H", "256"}, {"TX", "256"}, {"TY", "16"}});
    add("elementwise", stream_schedules,
        {{"W", "1000"}, {"H", "333"}, {"TX", "256"}, {"TY", "16"}});
    add("elementwise", stream_schedules,
        {{"W", "100"}, {"H", "7"}, {"TX", "256"}, {"TY", "16"}, {"stages", "3"}});
    add("rmsnorm", stream_schedules, {{"D", "512"}, {"R", "128"}, {"RB", "8"}});
    add("rmsnorm", stream_schedules, {{"D", "1000"}, {"R", "77"}, {"RB", "8"}});
    add("rmsnorm", stream_schedules, {{"D", "4096"}, {"R", "20"}, {"RB", "8"}, {"stages", "3"}});
    add("rmsnorm", stream_schedules, {{"D", "7"}, {"R", "5"}, {"RB", "16"}});
    // Mesh clusters (columns of 2 and 4 cores, B or A broadcast down the column): tile counts the
    // cluster divides, a short last group (cores without a tile of their own), one tile, a K tail,
    // fewer tiles than cores, runtime shapes.
    for (const char *along : {"cluster_m", "cluster_n"}) {
        for (const char *n : {"2", "4"}) {
            add("gemm", {"ws_pingpong", "ws"},
                {{"M", "256"},
                 {"N", "256"},
                 {"K", "192"},
                 {"TM", "32"},
                 {"TN", "32"},
                 {"TK", "64"},
                 {along, n}});
            add("gemm", {"ws_pingpong"},
                {{"M", "200"},
                 {"N", "136"},
                 {"K", "72"},
                 {"TM", "32"},
                 {"TN", "32"},
                 {"TK", "32"},
                 {along, n}});
            add("gemm", {"ws_pingpong"}, {{"M", "100"}, {"N", "100"}, {"K", "100"}, {along, n}});
            add("gemm", {"ws"},
                {{"shapes", "runtime"},
                 {"M", "300"},
                 {"N", "200"},
                 {"K", "72"},
                 {"TM", "64"},
                 {"TN", "64"},
                 {along, n}});
        }
    }
    return all;
}

class AppCorrectness : public ::testing::TestWithParam<Case> {};

TEST_P(AppCorrectness, MatchesHalideReferenceWithoutHazards) {
    const Case &c = GetParam();
    RunOptions o;
    o.params = Params(c.params);
    o.schedule = c.schedule;
    o.target = c.target;
    RunResult r = run(find_app(c.app), o);
    EXPECT_TRUE(r.checked);
    EXPECT_TRUE(r.correct) << "max_rel_err " << r.max_rel_err;
    EXPECT_EQ(r.report.race_count, 0) << (r.report.races.empty() ? "" : r.report.races[0].str());
    EXPECT_FALSE(r.report.deadlock) << r.report.deadlock_message;
    EXPECT_GT(r.report.cycles, 0);
    EXPECT_LE(r.report.bound_cycles, r.report.cycles);
}

INSTANTIATE_TEST_SUITE_P(Zpu, AppCorrectness, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                             return info.param.name;
                         });

/** Hopper, on the machine model: the issue's sizes, and the pitfalls peers hit (one K tile, K
 * tiles not a multiple of 2 x stages, more tiles than SMs in the persistent loop, ragged edges,
 * stages >= 3). */
std::vector<Case> hopper_cases() {
    std::vector<Case> all;
    auto add = [&](const std::string &app, const std::vector<std::string> &schedules,
                   std::map<std::string, std::string> params,
                   const std::string &target = "hopper") {
        for (const std::string &s : schedules) {
            Case c{app, s, params, "", target};
            c.name = case_name(c) +
                     (target == "hopper" ? "" : "_sms" + target.substr(target.find('=') + 1));
            all.push_back(c);
        }
    };
    const std::vector<std::string> gemm = {"ws_pingpong", "ws", "pipelined"};
    add("gemm", gemm, {{"M", "128"}, {"N", "128"}, {"K", "64"}});
    add("gemm", gemm, {{"M", "256"}, {"N", "512"}, {"K", "192"}});
    add("gemm", gemm, {{"M", "1000"}, {"N", "1000"}, {"K", "1000"}});
    add("gemm", gemm, {{"M", "384"}, {"N", "256"}, {"K", "640"}, {"stages", "3"}});
    add("gemm", gemm, {{"M", "300"}, {"N", "200"}, {"K", "40"}, {"stages", "2"}, {"out", "f32"}});
    add("gemm", gemm, {{"M", "640"}, {"N", "384"}, {"K", "320"}}, "hopper:sms=4");
    // Found by a random sweep: a K tail right after a one-iteration K loop (two groups in one
    // straight line), and a partitioned N tail taken by either ping-pong consumer.
    add("gemm", gemm, {{"M", "23"}, {"N", "273"}, {"K", "114"}, {"stages", "1"}});
    add("gemm", gemm, {{"M", "82"}, {"N", "322"}, {"K", "109"}, {"stages", "3"}});
    // Two consumer warpgroups on the 64-row blocks of one 128 x 256 tile (one block: one owner).
    for (auto params : std::vector<std::map<std::string, std::string>>{
             {{"M", "128"}, {"N", "256"}, {"K", "64"}},
             {{"M", "256"}, {"N", "512"}, {"K", "192"}},
             {{"M", "1000"}, {"N", "1000"}, {"K", "1000"}},
             {{"M", "300"}, {"N", "200"}, {"K", "40"}, {"stages", "2"}, {"out", "f32"}},
             {{"M", "23"}, {"N", "273"}, {"K", "114"}, {"stages", "1"}},
             {{"M", "82"}, {"N", "322"}, {"K", "109"}, {"stages", "3"}}}) {
        params["TN"] = "256";
        add("gemm", {"ws_cooperative"}, params);
    }
    add("gemm", {"ws_cooperative"}, {{"M", "640"}, {"N", "768"}, {"K", "320"}, {"TN", "256"}},
        "hopper:sms=4");
    add("gemm", {"ws_cooperative", "ws_pingpong"},
        {{"M", "1000"}, {"N", "1096"}, {"K", "520"}, {"group", "3"}},
        "hopper:sms=4"); // groups of 2 tile rows (the largest divisor of 8 up to 3)
    const std::vector<std::string> stream = {"double_buffered", "single_buffered", "sync"};
    add("elementwise", stream, {{"W", "1000"}, {"H", "333"}});
    // Persistent CTAs looping over the tiles through their ring (more tiles than CTAs).
    add("elementwise", {"double_buffered"}, {{"W", "1000"}, {"H", "333"}, {"ctas_per_sm", "1"}},
        "hopper:sms=4");
    add("elementwise", {"double_buffered"},
        {{"W", "777"}, {"H", "61"}, {"ctas_per_sm", "2"}, {"stages", "3"}}, "hopper:sms=3");
    add("rmsnorm", stream, {{"D", "1000"}, {"R", "77"}});
    // Persistent CTAs (more tiles than CTAs): the ring runs ahead across tiles, w is staged once
    // per CTA, the output's two versions alternate; whole rows and chunked rows, RB rows a tile.
    for (auto params : std::vector<std::map<std::string, std::string>>{
             {{"D", "1000"}, {"R", "77"}},
             {{"D", "512"}, {"R", "45"}, {"RB", "0"}},
             {{"D", "2048"}, {"R", "9"}, {"TD", "512"}},
             {{"D", "300"}, {"R", "13"}, {"stages", "3"}, {"RB", "1"}}}) {
        params["ctas_per_sm"] = "1";
        add("rmsnorm", {"double_buffered"}, params, "hopper:sms=2");
    }
    // Two warpgroups run each CTA's software pipeline (cooperative() without warp_specialize()).
    add("rmsnorm", stream, {{"D", "1000"}, {"R", "77"}, {"warpgroups", "2"}});
    add("rmsnorm", {"double_buffered"}, {{"D", "8192"}, {"R", "9"}, {"warpgroups", "2"}});
    // Attention scores: K is a K-major wgmma B operand (d innermost); tails in both tile dims and
    // in D, one tile, more tiles than SMs.
    add("attention_scores", {"ws_pingpong"}, {{"Lq", "256"}, {"Lk", "256"}, {"D", "128"}});
    add("attention_scores", {"ws_pingpong"}, {{"Lq", "200"}, {"Lk", "136"}, {"D", "72"}});
    add("attention_scores", {"ws_pingpong"}, {{"Lq", "1"}, {"Lk", "8"}, {"D", "64"}});
    add("attention_scores", {"ws_pingpong"},
        {{"Lq", "300"}, {"Lk", "520"}, {"D", "128"}, {"TN", "64"}, {"stages", "2"}},
        "hopper:sms=3");
    // 2x1 and 1x2 clusters: the operand the pair shares multicast (B for cluster_m, A for
    // cluster_n); tails, one tile, pairs with a tile-less CTA (an odd tile count, an odd number of
    // tile rows: the cluster tails), more tiles than SMs, runtime shapes.
    for (const char *pair : {"cluster_m", "cluster_n"}) {
        add("gemm", {"ws_cooperative"},
            {{"M", "512"}, {"N", "512"}, {"K", "256"}, {"TN", "256"}, {pair, "2"}});
        add("gemm", {"ws_pingpong", "ws"}, {{"M", "200"}, {"N", "136"}, {"K", "72"}, {pair, "2"}});
        add("gemm", {"ws_pingpong"}, {{"M", "100"}, {"N", "100"}, {"K", "100"}, {pair, "2"}});
        add("gemm", {"ws_cooperative", "ws_pingpong"},
            {{"M", "1024"}, {"N", "768"}, {"K", "128"}, {pair, "2"}}, "hopper:sms=4");
        add("gemm", {"ws_cooperative"},
            {{"shapes", "runtime"}, {"M", "300"}, {"N", "200"}, {"K", "72"}, {pair, "2"}});
        add("gemm", {"ws_pingpong"},
            {{"M", "384"}, {"N", "512"}, {"K", "128"}, {pair, "2"}}); // 3 tile rows
    }
    add("gemm", {"ws_cooperative", "ws"},
        {{"M", "384"}, {"N", "100"}, {"K", "128"}, {"cluster_m", "2"}});
    add("gemm", {"ws_pingpong"}, {{"M", "130"}, {"N", "390"}, {"K", "70"}, {"cluster_n", "2"}});
    add("gemm", {"ws_cooperative", "ws"},
        {{"M", "1000"}, {"N", "1096"}, {"K", "520"}, {"cluster_n", "2"}}); // 9 columns
    return all;
}

/** Ascend, on the machine model: the vector path (GM -> UB on MTE2, V, UB -> GM on MTE3). */
std::vector<Case> ascend_cases() {
    std::vector<Case> all;
    for (const char *s : {"double_buffered", "single_buffered", "sync"}) {
        for (const auto &[app, params] :
             std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
                 {"elementwise", {{"W", "1000"}, {"H", "333"}}},
                 {"elementwise", {{"W", "512"}, {"H", "64"}, {"stages", "3"}}},
                 {"rmsnorm", {{"D", "1000"}, {"R", "77"}}},
                 {"rmsnorm", {{"D", "4096"}, {"R", "50"}}}}) {
            Case c{app, s, params, "", "ascend"};
            c.name = case_name(c);
            all.push_back(c);
        }
    }
    for (const auto &params : std::vector<std::map<std::string, std::string>>{
             {{"Lq", "256"}, {"Lk", "384"}, {"D", "64"}},
             {{"Lq", "200"}, {"Lk", "333"}, {"D", "80"}}}) {
        Case c{"attention_scores", "resident", params, "", "ascend"};
        c.name = case_name(c);
        all.push_back(c);
        c.target = "zpu";
        c.name += "_zpu";
        all.push_back(c);
    }
    // The cube path: GM -> L1 (MTE2) -> L0A/L0B (MTE1) -> Mmad (M) -> Fixpipe (FIX).
    for (const char *s : {"ws_pingpong", "pipelined"}) {
        for (const auto &params : std::vector<std::map<std::string, std::string>>{
                 {{"M", "256"}, {"N", "256"}, {"K", "256"}},
                 {{"M", "300"}, {"N", "260"}, {"K", "200"}},
                 {{"M", "100"}, {"N", "100"}, {"K", "100"}},
                 {{"M", "23"}, {"N", "273"}, {"K", "114"}},
                 {{"M", "512"}, {"N", "384"}, {"K", "704"}, {"stages", "3"}, {"out", "f32"}}}) {
            Case c{"gemm", s, params, "", "ascend"};
            c.name = case_name(c);
            all.push_back(c);
        }
    }
    // LoadData by the shorter side of the operand tiles (backends/ascend/Cube.cpp): A by column
    // blocks in the full tiles and by strips in the 44-row tail; B by n blocks where TN is narrow.
    for (const auto &params : std::vector<std::map<std::string, std::string>>{
             {{"M", "300"}, {"N", "260"}, {"K", "200"}, {"TM", "256"}, {"TN", "128"}, {"TK", "64"}},
             {{"M", "200"},
              {"N", "70"},
              {"K", "256"},
              {"TM", "64"},
              {"TN", "32"},
              {"TK", "128"}}}) {
        Case c{"gemm", "pipelined", params, "", "ascend"};
        c.name = case_name(c);
        all.push_back(c);
    }
    return all;
}

INSTANTIATE_TEST_SUITE_P(Ascend, AppCorrectness, ::testing::ValuesIn(ascend_cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                             return info.param.name;
                         });

INSTANTIATE_TEST_SUITE_P(Hopper, AppCorrectness, ::testing::ValuesIn(hopper_cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                             return info.param.name;
                         });

// The issue's acceptance run at 2048^3 with the default schedule (ws_pingpong, the most stages
// that fit: 2): the DRAM loads overlap the MMAs, the vector core's epilogue of one tile runs under
// the next tile's MMAs (the accumulator alternates two versions, the store of a tile is issued
// after the next tile's MMAs), and a K step's A rows hop RSRAM -> ASRAM under the previous step's
// MMAs. Efficiency 0.89 of the busiest engine (tensor: each core's first load and last epilogue
// have nothing to hide under); 0.81 of the problem's roofline (zpu v4; 0.58 on v3, where the
// control stream ran the MMAs and vector ops itself).
TEST(GemmAcceptance, PipelinedAt2048IsCorrectAndEfficient) {
    RunOptions o;
    RunResult r = run(gemm_app(), o);
    EXPECT_TRUE(r.correct) << r.max_rel_err;
    EXPECT_EQ(r.report.race_count, 0);
    EXPECT_GE(r.efficiency(), 0.87);
    EXPECT_GE(r.roofline_fraction(), 0.8);
    EXPECT_LT(r.compile_ms, 1000);
}

// The roofline is a bound: no run on the model is shorter, whatever the description charges. On
// Hopper the model pays the launch (launch_cycles) and finds a problem that fits in L2 there
// (l2_warm); until session 60 the roofline had neither, and with the launch off the user kernels
// ran up to 2.5x "faster than their roofline" (results/session60_user_kernels_launch_l2.log).
TEST(Roofline, NoRunOnTheHopperModelIsShorter) {
    struct Problem {
        const char *app;
        std::map<std::string, std::string> params;
    };
    const std::vector<Problem> problems = {
        {"rmsnorm", {{"D", "4096"}, {"R", "1024"}}}, // 32 MB: fits in L2
        {"rmsnorm", {{"D", "8192"}, {"R", "1024"}}}, // 64 MB: does not
        {"elementwise", {{"W", "2048"}, {"H", "1024"}}},
        {"gemm", {{"M", "512"}, {"N", "512"}, {"K", "512"}}},
        {"attention_scores", {{"Lq", "512"}, {"Lk", "512"}, {"D", "64"}}},
    };
    for (const Problem &p : problems) {
        for (const char *target : {"hopper", "hopper:launch_cycles=0", "hopper:l2_warm=0",
                                   "hopper:launch_cycles=0,l2_warm=0"}) {
            SCOPED_TRACE(std::string(p.app) + " on " + target);
            RunOptions o;
            o.target = target;
            o.numerics = false;
            o.params = Params(p.params);
            RunResult r = run(find_app(p.app), o);
            EXPECT_GT(r.roofline_fraction(), 0.0);
            EXPECT_LE(r.roofline_fraction(), 1.0)
                << r.report.cycles << " cycles, roofline " << r.roofline_cycles;
        }
    }
}

TEST(GemmAcceptance, PipeliningBeatsOneStage) {
    RunOptions o;
    o.numerics = false;
    o.params.set("stages", "1");
    RunResult one = run(gemm_app(), o);
    o.params.set("stages", "2");
    RunResult two = run(gemm_app(), o);
    EXPECT_LT(two.report.cycles, one.report.cycles);
    EXPECT_GT(two.efficiency(), one.efficiency());
}

} // namespace

namespace {

// Random sizes (fixed seed, so a failure reproduces) over every gemm schedule of both targets:
// the sweep that found the Hopper K-tail and ping-pong tail bugs, kept as a regression net.
TEST(RandomSizes, GemmOnEveryTargetAndSchedule) {
    std::mt19937 rng(20261122);
    for (int i = 0; i < 4; i++) {
        std::map<std::string, std::string> p = {{"M", std::to_string(1 + rng() % 400)},
                                                {"N", std::to_string(1 + rng() % 400)},
                                                {"K", std::to_string(1 + rng() % 600)},
                                                {"stages", std::to_string(1 + rng() % 4)}};
        for (const char *target : {"zpu", "hopper", "ascend"}) {
            for (const char *schedule : {"ws_pingpong", "ws", "pipelined"}) {
                RunOptions o;
                o.params = Params(p);
                o.schedule = schedule;
                o.target = target;
                RunResult r = run(gemm_app(), o);
                SCOPED_TRACE(std::string(target) + " " + schedule + " M=" + p["M"] +
                             " N=" + p["N"] + " K=" + p["K"] + " stages=" + p["stages"]);
                EXPECT_TRUE(r.correct) << r.max_rel_err;
                EXPECT_EQ(r.report.race_count, 0);
                EXPECT_FALSE(r.report.deadlock) << r.report.deadlock_message;
            }
        }
    }
}

// A persistent Hopper grid is sized at launch from the GPU's SM count (the tile loop strides by
// tandem_grid_size()): a kernel compiled for 132 SMs runs right on a GPU with fewer, here models of
// 1, 3 and 7 SMs, and with fewer tiles than SMs.
TEST(PersistentGrid, SizedAtLaunchFromTheSmCount) {
    struct Persistent {
        const char *app, *schedule;
        std::map<std::string, std::string> params;
    };
    const std::vector<Persistent> kernels = {
        {"gemm", "ws_pingpong", {{"M", "640"}, {"N", "384"}, {"K", "320"}}},
        {"gemm", "ws_cooperative", {{"M", "1000"}, {"N", "1096"}, {"K", "200"}, {"TN", "256"}}},
        {"gemm", "ws_pingpong", {{"M", "700"}, {"N", "304"}, {"K", "96"}, {"shapes", "runtime"}}},
        {"rmsnorm",
         "double_buffered",
         {{"D", "1000"}, {"R", "77"}, {"RB", "4"}, {"ctas_per_sm", "2"}}},
    };
    for (const Persistent &k : kernels) {
        const App &app = find_app(k.app);
        const Params p = with_defaults(app, Params(k.params), "hopper");
        const Kernel kernel = compile_app(app, p, k.schedule, Target::parse("hopper"));
        ASSERT_GT(kernel.ctas_per_sm, 0) << k.app << " " << k.schedule;
        for (const char *target : {"hopper:sms=1", "hopper:sms=3", "hopper:sms=7", "hopper"}) {
            SCOPED_TRACE(std::string(k.app) + " " + k.schedule + " on " + target);
            RunOptions o;
            o.target = target;
            RunResult r = run_kernel(app, kernel, p, k.schedule, o);
            EXPECT_TRUE(r.correct) << r.max_rel_err;
            EXPECT_EQ(r.report.race_count, 0);
            EXPECT_FALSE(r.report.deadlock) << r.report.deadlock_message;
        }
    }
}

} // namespace

namespace {

/** The copies of a kernel multicast to a cluster, and its output copies only some CTAs make. */
struct ClusterCopies : Halide::Internal::IRVisitor {
    int multicast = 0, cluster = 2;
    using IRVisitor::visit;
    void visit(const Halide::Internal::Call *op) override {
        ir::CopyOp c;
        if (ir::as_copy(Halide::Internal::Evaluate::make(op), &c) && c.multicast == cluster)
            multicast++;
        IRVisitor::visit(op);
    }
};

int multicast_copies(const std::map<std::string, std::string> &params,
                     const std::string &target = "hopper", int cluster = 2) {
    const App &app = find_app("gemm");
    Kernel k =
        compile_app(app, with_defaults(app, Params(params), target),
                    target == "hopper" ? "ws_cooperative" : "ws_pingpong", Target::parse(target));
    EXPECT_EQ(k.cluster, cluster);
    ClusterCopies v;
    v.cluster = cluster;
    k.body.accept(&v);
    return v.multicast;
}

} // namespace

// What a 2x1 (1x2) cluster shares: B's (A's) tile, one copy per loop Halide's partitioning left;
// with an odd number of tile rows or columns too (a short last group or pair: its missing tiles'
// CTAs have no tile of their own), and with runtime shapes. (Where clusters are refused:
// ScheduleErrors.ClustersAreHopperAndZpuMeshColumnsAndNeedWarpSpecializeOnHopper.)
TEST(Clusters, TheSharedOperandIsMulticast) {
    EXPECT_EQ(multicast_copies(
                  {{"M", "1024"}, {"N", "1024"}, {"K", "256"}, {"TN", "256"}, {"cluster_m", "2"}}),
              1);
    EXPECT_EQ(multicast_copies(
                  {{"M", "1024"}, {"N", "1024"}, {"K", "256"}, {"TN", "256"}, {"cluster_n", "2"}}),
              1);
    EXPECT_EQ(multicast_copies(
                  {{"M", "384"}, {"N", "768"}, {"K", "128"}, {"TN", "256"}, {"cluster_m", "2"}}),
              1);
    EXPECT_EQ(multicast_copies({{"shapes", "runtime"}, {"TN", "256"}, {"cluster_m", "2"}}), 1);
    EXPECT_EQ(multicast_copies(
                  {{"M", "384"}, {"N", "768"}, {"K", "128"}, {"TN", "256"}, {"cluster_n", "2"}}),
              1);
    EXPECT_EQ(multicast_copies({{"shapes", "runtime"}, {"TN", "256"}, {"cluster_n", "2"}}), 1);
}

// ZPU mesh columns: what the column's cores share is broadcast (the run-ahead copy, the
// pipeline's prologue copy, a K tail's): B's panel down a column of tile rows (cluster_m), A's
// along tile columns (cluster_n; A's DRAM -> RSRAM copy, its RSRAM -> ASRAM hops stay each core's
// own); with a short last group and with runtime shapes.
TEST(Clusters, TheColumnsSharedOperandIsBroadcast) {
    for (const char *along : {"cluster_m", "cluster_n"}) {
        for (int n : {2, 4}) {
            const std::string size = std::to_string(n);
            EXPECT_EQ(multicast_copies({{"M", "512"},
                                        {"N", "512"},
                                        {"K", "512"},
                                        {"TM", "128"},
                                        {"TN", "128"},
                                        {"TK", "256"},
                                        {along, size}},
                                       "zpu", n),
                      2)
                << along << " = " << n;
            EXPECT_EQ(multicast_copies({{"M", "384"},
                                        {"N", "384"},
                                        {"K", "300"},
                                        {"TM", "128"},
                                        {"TN", "128"},
                                        {"TK", "128"},
                                        {along, size}},
                                       "zpu", n),
                      3)
                << along << " = " << n << ", 3 tiles along it, a K tail (its own copy)";
            EXPECT_EQ(
                multicast_copies(
                    {{"shapes", "runtime"}, {"TM", "128"}, {"TN", "128"}, {along, size}}, "zpu", n),
                2)
                << along << " = " << n << ", runtime shapes";
        }
    }
}
