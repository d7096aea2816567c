// Regression cases of the schedule fuzzer: every failure it found, and the degenerate GEMMs of
// issue 9 (M, N or K = 1 and one-element tails) on every target and schedule. Each runs on the
// target's machine model and must match the Halide reference with no race and no deadlock.
#include "App.h"
#include "Fuzz.h"
#include "Run.h"
#include "hopper/Emitter.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace tandem;
using namespace tandem::apps;

namespace {

/** "app target schedule k=v ...", as a fuzz failure line gives it. */
struct Case {
    std::string text;
};

std::ostream &operator<<(std::ostream &os, const Case &c) {
    return os << c.text;
}

std::vector<Case> found_by_the_fuzzer() {
    return {
        // Halide removed the m, n or k loop of the tile MMA (extent 1).
        {"gemm zpu ws_pingpong M=64 N=96 K=1"},
        {"gemm ascend pipelined M=236 N=1 K=13"},
        {"gemm zpu sync M=129 N=1 K=5 TM=64 TN=32 TK=16 out=f32 stages=1"},
        {"gemm zpu ws_pingpong M=119 N=1 K=263 TM=64 TN=48 TK=64 out=f32 stages=1"},
        {"attention_scores zpu resident Lq=300 Lk=17 D=205 TM=32 TN=16"},
        {"attention_scores ascend resident Lq=300 Lk=1 D=1 TM=256 TN=128"},
        // A tensor dim of extent 1 has the stride of the next: boxes matched the wrong dim.
        {"elementwise hopper double_buffered W=1 H=288"},
        {"elementwise hopper sync W=1 H=33 TX=128 TY=32 stages=4"},
        {"rmsnorm hopper single_buffered D=1 R=4"},
        {"gemm hopper pipelined M=129 N=128 K=1"},
        {"gemm hopper ws_pingpong M=64 N=1 K=80"},
        // Result slots rebased twice, or straight-line tiles sharing a slot without a wait.
        {"attention_scores zpu resident Lq=96 Lk=63 D=1 TM=32 TN=16"},
        {"attention_scores ascend resident Lq=96 Lk=63 D=16 TM=32 TN=16"},
        {"attention_scores ascend resident Lq=300 Lk=202 D=1"},
        // Defaults that refused the shape: long rows, a deep D.
        {"rmsnorm zpu double_buffered D=110732 R=2"},
        {"rmsnorm ascend sync D=104765 R=2"},
        {"rmsnorm hopper single_buffered D=122501 R=1"},
        {"attention_scores ascend resident Lq=110 Lk=127 D=246"},
        {"attention_scores ascend resident Lq=1 Lk=127 D=256"},
        // The cube's fractal layouts (session 21): a tile one element wide (N or K tail of 1, a
        // one-row resident Q read a K slice at a time) and a D tail of one column.
        {"attention_scores ascend resident Lq=300 Lk=1 D=1"},
        {"attention_scores ascend resident Lq=17 Lk=129 D=17"},
        {"attention_scores ascend resident Lq=92 Lk=128 D=193 TD=32 TM=128 TN=128"},
        {"attention_scores ascend resident Lq=79 Lk=245 D=65 TD=32 TM=256 TN=128"},
        {"gemm ascend ws_pingpong M=70 N=1 K=96 TM=64 TN=64 TK=64"},
        {"gemm ascend ws_pingpong M=1 N=136 K=72"},
        {"gemm ascend pipelined M=17 N=3 K=5"},
        // attention_scores on Hopper (session 28): K as a K-major B whose copies are 1-D (D = 1,
        // Lk = 1: the strides cannot tell the layout), a D tail of one column, and defaults whose
        // four stages did not fit beside the f32 staging.
        {"attention_scores hopper ws_pingpong Lq=212 Lk=266 D=1"},
        {"attention_scores hopper ws_pingpong Lq=1 Lk=1 D=193"},
        {"attention_scores hopper ws_pingpong Lq=300 Lk=128 D=65"},
        {"attention_scores hopper ws_pingpong Lq=127 Lk=129 D=36"},
        // out = one input (a copy): its tile was stored straight back out of the input's ring.
        {"pointwise zpu single_buffered W=1021 H=337 TX=128 TY=3 expr=7 stages=3"},
        {"pointwise ascend double_buffered W=1 H=65 expr=16"},
        {"pointwise ascend single_buffered W=128 H=324 TX=32 TY=1 expr=12 stages=2"},
        {"pointwise ascend double_buffered W=2 H=395 TX=256 TY=8 expr=16 stages=1"},
        // A 1x1 tail tile next to a 1-row main tile (the Hopper emitter took its row stride).
        {"gemm hopper ws_pingpong M=1 N=129 K=1"},
        // An input the simplified expression does not read.
        {"pointwise ascend double_buffered W=2297 H=17 expr=2"},
        // Global strides TMA cannot take (not multiples of 16 bytes): thread copies on hopper.
        {"gemm hopper pipelined M=129 N=128 K=1 out=bf16"},
        {"gemm hopper ws_pingpong M=127 N=1 K=2 out=bf16"},
        {"gemm hopper ws_pingpong M=183 N=127 K=31 out=bf16"},
        {"elementwise hopper double_buffered W=807 H=257"},
        // A tile's store issued after the next tile's vector op rewrote its one staging version
        // (zpu engine syncs: the deferred store goes before the step that waits for the version).
        {"pointwise zpu single_buffered H=600 W=318 expr=5"},
        // The reference contracted a * b + x into a fused multiply-add, the kernel rounds each op:
        // where the terms cancel the one element differed (the reference is StrictFloat now).
        {"elementwise zpu single_buffered H=1 TX=128 TY=3 W=1 stages=3 seed=10640"},
        // The output staged through a ring of two column blocks (a fourth operand stage): the
        // stage counts and the Hopper plan must agree on which tiles get the ring (a tile of 103
        // rows is padded on the GPU; a one-row tail copy has no row pitch; ring slots per
        // ping-pong version).
        {"gemm hopper ws_pingpong M=256 N=128 K=66 out=f32"},
        {"gemm hopper ws_pingpong M=103 N=256 K=150 out=f32"},
        {"gemm hopper ws_pingpong M=129 N=144 K=110 out=f32"},
        {"gemm hopper ws_pingpong M=128 N=320 K=65 out=f32"}, // a tail tile's stage copy, 64 wide
        {"gemm hopper ws_cooperative M=130 N=300 K=1 TN=256"},
        {"gemm hopper ws_cooperative M=96 N=255 K=31 TN=256"},
        // Ascend's vector instructions kept an intermediate in a tile the op reads again in a
        // later iteration (an accumulator, a tile loaded once): only a tile a copy refills in the
        // op's own loop may hold one.
        {"rmsnorm ascend sync D=31 R=6 RB=3 TD=1"},
        {"rmsnorm ascend single_buffered D=1 R=157 RB=1 TD=7 stages=3"},
        {"rmsnorm ascend double_buffered D=2 R=4 RB=4 TD=1 stages=1"},
        // Ascend's padded UB rows: a tile one element wide has no product by its width in
        // Halide's index (the mix kernel's acc.ub at N = 1, a one-column tail tile).
        {"gemm ascend pipelined K=1 M=64 N=1 TK=32 TM=64 TN=48 epilogue=bias_relu group=2 out=f32 "
         "stages=5"},
        {"gemm ascend ws_pingpong K=15 M=37 N=17 TK=16 TM=256 TN=16 epilogue=bias_relu group=1 "
         "out=bf16 stages=5"},
        {"gemm ascend ws_pingpong K=83 M=320 N=1 TK=32 TM=256 TN=48 epilogue=bias_relu group=2 "
         "out=bf16 stages=5"},
        // A folded accumulator (Halide gave it one extent) with no row step is a row or a
        // column: it keeps Halide's layout (taking it for one row made the Fixpipe's rows overlap).
        {"gemm ascend pipelined K=193 M=32 N=33 TK=64 TM=32 TN=16 epilogue=bias_relu group=8 "
         "out=f32 stages=0"},
        {"gemm ascend ws_pingpong K=128 M=32 N=1 TK=32 TM=32 TN=256 epilogue=bias_relu group=1 "
         "out=f32 stages=4"},
        // Tiles Halide folds to one extent get padded rows; columns of a tensor become rows of one
        // element; rows of a runtime count (a guarded tile-row group).
        {"elementwise ascend sync H=2 TX=7 TY=32 W=3000 stages=4"},
        {"elementwise ascend double_buffered H=20 TX=1 TY=8 W=30"},
        {"elementwise ascend sync H=3 TX=7 TY=2 W=242 stages=1"},
        {"pointwise ascend single_buffered H=15 TX=1 TY=16 W=2 expr=3 stages=3"},
        {"rmsnorm ascend sync D=1 R=230 RB=0 TD=0 stages=1"},
        {"gemm ascend ws_pingpong K=2 M=313 N=177 TK=512 TM=16 TN=64 epilogue=bias_relu group=2 "
         "out=bf16 stages=4"},
        {"gemm ascend pipelined K=64 M=87 N=257 TK=32 TM=128 TN=64 epilogue=bias_relu group=1 "
         "out=bf16 stages=0"},
        // Tiles at pitches of their own (a tail's staging beside a full tile's accumulator), a
        // one-column accumulator, a one-row folded one, a bfloat16 column.
        {"gemm ascend pipelined K=2 M=2 N=87 TK=32 TM=16 TN=48 epilogue=bias_relu group=1 out=f32 "
         "stages=3"},
        {"gemm ascend ws_pingpong K=2 M=127 N=33 TK=16 TM=256 TN=32 epilogue=bias_relu group=8 "
         "out=f32 stages=2"},
        {"gemm ascend ws_pingpong K=1 M=33 N=7 TK=16 TM=16 TN=256 epilogue=bias_relu group=3 "
         "out=f32 stages=2"},
        {"gemm ascend pipelined K=63 M=32 N=33 TK=32 TM=32 TN=32 epilogue=bias_relu group=2 "
         "out=bf16 stages=4"},
        {"gemm ascend ws_pingpong K=129 M=320 N=1 TK=128 TM=128 TN=256 epilogue=bias_relu group=8 "
         "out=bf16 stages=4"},
        {"gemm ascend pipelined K=32 M=272 N=320 TK=32 TM=128 TN=128 epilogue=bias_relu group=2 "
         "out=bf16 stages=3"},
        // Chunks of rows not whole 32-byte blocks, where no operand has a value per row.
        {"pointwise ascend double_buffered H=15 W=1023 expr=15"},
        {"pointwise ascend double_buffered H=63 W=256 expr=13"},
        // ZPU mesh clusters: the straight-line tail tile the first cluster runs on all its cores
        // was stored by each of them (now by rank 0).
        {"gemm zpu ws_pingpong K=128 M=65 N=32 TK=64 TM=32 TN=32 cluster_m=4 epilogue=bias_relu "
         "group=1 out=f32 stages=3"},
        {"gemm zpu ws_pingpong K=128 M=2 N=186 TK=64 TM=64 TN=16 cluster_m=2 epilogue=bias_relu "
         "group=1 in=f16 out=f16 stages=0"},
    };
}

std::vector<Case> degenerate_gemms() {
    std::vector<Case> all;
    const std::vector<std::string> shapes = {
        "M=1 N=1 K=1", "M=1 N=200 K=96", "M=70 N=1 K=96", "M=70 N=96 K=1", "M=65 N=65 K=65",
    };
    for (const char *target : {"zpu", "hopper", "ascend"}) {
        for (const std::string &schedule : schedules_for(gemm_app(), target)) {
            for (const std::string &shape : shapes) {
                // Small tiles so that 65 is a tail of one element in every dim.
                all.push_back({"gemm " + std::string(target) + " " + schedule + " " + shape +
                               " TM=64 TN=64 TK=64"});
            }
        }
    }
    return all;
}

class FuzzRegression : public testing::TestWithParam<Case> {};

TEST_P(FuzzRegression, MatchesReferenceWithoutHazards) {
    std::istringstream in(GetParam().text);
    std::string app, kv;
    RunOptions o;
    in >> app >> o.target >> o.schedule;
    while (in >> kv) {
        const std::string key = kv.substr(0, kv.find('=')), value = kv.substr(kv.find('=') + 1);
        if (key == "seed")
            o.seed = std::stoull(value); // the inputs' seed, as the fuzzer drew it
        else
            o.params.set(key, value);
    }
    RunResult r = run(find_app(app), o);
    if (o.target == "hopper") {
        // The GPU's code too: what TMA cannot copy, threads do (never a refusal).
        const App &a = find_app(app);
        Kernel kernel = compile_app(a, with_defaults(a, o.params, "hopper"), o.schedule,
                                    Target::parse("hopper"));
        EXPECT_NO_THROW(hopper_backend::emit_cuda(kernel));
    }
    EXPECT_TRUE(r.correct) << "max_rel_err " << r.max_rel_err;
    EXPECT_EQ(r.report.race_count, 0)
        << (r.report.races.empty() ? "" : r.report.races.front().str());
    EXPECT_FALSE(r.report.deadlock) << r.report.deadlock_message;
}

/** Compiling `app` on ascend at `params` with `schedule` is a user error whose message holds each
 * of `parts`. */
void expect_ascend_user_error(const char *app, std::initializer_list<const char *> params,
                              const char *schedule, std::initializer_list<const char *> parts) {
    const App &a = find_app(app);
    Params p;
    for (const char *kv : params) {
        const std::string s = kv;
        p.set(s.substr(0, s.find('=')), s.substr(s.find('=') + 1));
    }
    try {
        compile_app(a, with_defaults(a, p, "ascend"), schedule, Target::parse("ascend"));
        ADD_FAILURE() << app << " compiled";
    } catch (const Error &e) {
        const std::string m = e.what();
        for (const char *part : parts)
            EXPECT_NE(m.find(part), std::string::npos) << m;
    }
}

// The cube reads L1 in 16 x 16 fractals: a resident Q read 100 columns at a time is a user error
// naming the Func, the directive and the reason (the fuzzer drew it; it had read the wrong data).
TEST(FuzzUserErrors, AscendKStepOffTheFractals) {
    expect_ascend_user_error(
        "attention_scores", {"D=212", "Lk=61", "Lq=33", "TD=100", "TM=32", "TN=64"}, "resident",
        {"Func 'acc', directive tile_mma()", "16 x 16 fractals", "multiple of 16"});
}

// A vector op whose temporaries do not fit the UB its tiles leave has no AscendC instructions: a
// user error naming the Func (fuzz seed 80 drew it; chunks of rows whose per-row values did not
// start on a 32-byte block had been an internal error first).
TEST(FuzzUserErrors, AscendVectorOpWithoutRoomForItsTemporaries) {
    expect_ascend_user_error("rmsnorm", {"D=1999", "R=31", "RB=16", "TD=1000", "stages=2"}, "sync",
                             {"Func 'out'", "bytes of UB for their intermediate results",
                              "but the tiles take", "use smaller tiles"});
}

// Nd2Nz's source row pitch is a 16-bit field: a K of 70000 is a user error naming the tile.
TEST(FuzzUserErrors, AscendRowPitchPastNd2NzsField) {
    expect_ascend_user_error("gemm", {"M=128", "N=128", "K=70000"}, "ws_pingpong",
                             {"directive async_copy()", "70000 elements apart"});
}

// ---- the fuzzer's work bound (session 35) ----
// A legal schedule whose simulation would take minutes (fuzz_session34: a batched matmul with
// 3 x 1 x 2 tiles, 133 s on the Ascend model) is too_large: refused before the model runs, not a
// failure.

Kernel tiny_tile_gemm(int size, Params *params) {
    const App &gemm = find_app("gemm");
    for (const char *k : {"M", "N", "K"})
        params->set(k, std::to_string(size));
    for (const char *k : {"TM", "TN", "TK"})
        params->set(k, "16");
    *params = with_defaults(gemm, *params, "ascend");
    return compile_app(gemm, *params, "ws_pingpong", Target::parse("ascend"));
}

TEST(FuzzWorkBound, StepsGrowWithTheWork) {
    Params p;
    const double small = double(kernel_steps(tiny_tile_gemm(192, &p), {})),
                 large = double(kernel_steps(tiny_tile_gemm(384, &p), {}));
    // Twice the extents: eight times the k-steps of 16 x 16 x 16 tiles (144 and 576 tiles, each
    // core's share whole on the 24 cube cores).
    EXPECT_GT(small, 0);
    EXPECT_NEAR(large / small, 8.0, 1.5) << small << " " << large;
}

// A persistent Hopper kernel's tile loop runs (tiles - CTA) / tandem_grid_size() times: the
// count read the grid size as unknown and took the loop once (fuzz seed 393: a chain of 4324
// tiles of 1 x 2 counted as 132, 4 minutes on the model where the bound is seconds).
TEST(FuzzWorkBound, APersistentTileLoopCountsEveryTile) {
    const App &gemm = find_app("gemm");
    auto steps = [&](int m) {
        Params p;
        for (const auto &[k, v] : std::map<std::string, std::string>{
                 {"M", std::to_string(m)}, {"N", "64"}, {"K", "64"}, {"TM", "64"}, {"TN", "64"}})
            p.set(k, v);
        p = with_defaults(gemm, p, "hopper");
        return double(
            kernel_steps(compile_app(gemm, p, "ws_pingpong", Target::parse("hopper:sms=4")), {}));
    };
    // 8 and 32 tiles on 4 SMs: four times the tiles, four times the steps.
    EXPECT_NEAR(steps(2048) / steps(512), 4.0, 0.5);
}

TEST(FuzzWorkBound, RefusedBeforeTheModelRunsAboveTheBound) {
    RunOptions o;
    o.target = "ascend";
    o.schedule = "ws_pingpong";
    const Kernel k = tiny_tile_gemm(96, &o.params);
    const int64_t steps = kernel_steps(k, {});
    o.max_steps = steps - 1;
    EXPECT_THROW(run(find_app("gemm"), o), TooLarge);
    o.max_steps = steps;
    EXPECT_TRUE(run(find_app("gemm"), o).correct);
}

TEST(FuzzWorkBound, TooLargeIsNotAFailure) {
    FuzzCase c;
    c.app = "gemm";
    c.target = "ascend";
    c.schedule = "ws_pingpong";
    tiny_tile_gemm(2048, &c.params); // 128^3 k-steps of 16 x 16 x 16 tiles
    const FuzzResult r = run_case(c);
    EXPECT_EQ(r.outcome, Outcome::TooLarge) << r.message;
    EXPECT_FALSE(r.failure());
    EXPECT_NE(r.message.find("steps"), std::string::npos) << r.message;
}

std::string name(const testing::TestParamInfo<Case> &info) {
    std::string n;
    for (char c : info.param.text)
        n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return n;
}

INSTANTIATE_TEST_SUITE_P(Found, FuzzRegression, testing::ValuesIn(found_by_the_fuzzer()), name);
INSTANTIATE_TEST_SUITE_P(DegenerateGemm, FuzzRegression, testing::ValuesIn(degenerate_gemms()),
                         name);

} // namespace
