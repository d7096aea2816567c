// One kernel for every shape (issue 14): each app compiled once per target and schedule with
// shapes=runtime, then run on the machine model at 20 shapes (1 in every dimension, tails of one
// element, primes, tile +- 1, several tiles) and checked against the Halide reference of the same
// algorithm, with no race and no deadlock. On Hopper a call whose rows are a multiple of 16 bytes
// runs the kernel's TMA variant, any other its thread-copy variant: every other shape draws the
// extents that set a row stride as multiples of 8 there, so both run (HopperTakesAnyStride).
#include "Run.h"
#include "hopper/Emitter.h"
#include "hopper/Executor.h"
#include "hopper/Plan.h"

#include <array>
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>

namespace tandem::apps {
namespace {

struct Case {
    std::string app, target;
    std::map<std::string, std::string> params; // compiled with these (the extents are estimates)
    std::vector<std::string> extents; // the runtime extents, each split by the tile in `tiles`
    std::vector<std::string> tiles;
    std::set<std::string>
        strides; // extents that set a row stride (hopper: multiples of 8 at every other shape)
};

std::string name_of(const testing::TestParamInfo<Case> &info) {
    return info.param.app + "_" + info.param.target;
}

/** 20 shapes: all ones, then each extent drawn from 1, 2, a prime, tile - 1, tile, tile + 1 and
 * up to three tiles and a bit. */
std::vector<std::map<std::string, int>> shapes_for(const Case &c, const Params &p) {
    std::mt19937 rng(14);
    std::vector<std::map<std::string, int>> shapes(1);
    for (const std::string &e : c.extents)
        shapes[0][e] = c.target == "hopper" && c.strides.count(e) ? 8 : 1;
    while (shapes.size() < 20) {
        std::map<std::string, int> shape;
        for (size_t i = 0; i < c.extents.size(); i++) {
            const int tile = p.get_int(c.tiles[i]);
            const std::vector<int> picks = {1,
                                            2,
                                            7,
                                            13,
                                            std::max(1, tile - 1),
                                            tile,
                                            tile + 1,
                                            1 + int(rng() % unsigned(3 * tile + 5))};
            int e = picks[rng() % picks.size()];
            if (c.target == "hopper" && c.strides.count(c.extents[i]) && shapes.size() % 2 == 0)
                e = (e + 7) / 8 * 8;
            shape[c.extents[i]] = e;
        }
        shapes.push_back(shape);
    }
    return shapes;
}

class RuntimeShapes : public testing::TestWithParam<Case> {};

TEST_P(RuntimeShapes, OneKernelEveryShape) {
    const Case &c = GetParam();
    const App &app = find_app(c.app);
    Params given(c.params);
    given.set("shapes", "runtime");
    const Params compiled = with_defaults(app, given, c.target);
    const Target target = Target::parse(c.target);
    for (const std::string &schedule : schedules_for(app, c.target)) {
        SCOPED_TRACE(c.app + " on " + c.target + ", schedule " + schedule);
        const Kernel kernel = compile_app(app, compiled, schedule, target);
        ASSERT_TRUE(kernel.has_runtime_shapes());
        Built reference = app.build(compiled, "reference", target); // one JIT for every shape
        RunOptions options;
        options.target = c.target;
        for (const std::map<std::string, int> &shape : shapes_for(c, compiled)) {
            Params at = compiled;
            std::string text;
            for (const auto &[k, v] : shape) {
                at.set(k, std::to_string(v));
                text += " " + k + "=" + std::to_string(v);
            }
            SCOPED_TRACE("at" + text);
            RunResult r;
            try {
                r = run_kernel(app, kernel, at, schedule, options, &reference);
            } catch (const std::exception &e) {
                ADD_FAILURE() << e.what();
                continue;
            }
            EXPECT_TRUE(r.correct) << "max_rel_err " << r.max_rel_err;
            EXPECT_EQ(r.report.race_count, 0)
                << (r.report.races.empty() ? "" : r.report.races[0].str());
            EXPECT_FALSE(r.report.deadlock) << r.report.deadlock_message;
        }
    }
}

std::vector<Case> cases() {
    std::vector<Case> all;
    for (const std::string target : {"zpu", "ascend", "hopper"}) {
        const std::string t = target == "hopper" ? "64" : "32"; // wgmma: 64-row tiles
        all.push_back({"gemm",
                       target,
                       {{"M", "64"},
                        {"N", "64"},
                        {"K", "64"},
                        {"TM", t},
                        {"TN", t},
                        {"TK", t},
                        {"group", "3"}},
                       {"M", "N", "K"},
                       {"TM", "TN", "TK"},
                       {"N", "K"}});
        all.push_back({"elementwise",
                       target,
                       {{"W", "100"}, {"H", "20"}, {"TX", "64"}, {"TY", "8"}},
                       {"W", "H"},
                       {"TX", "TY"},
                       {"W"}});
        // Rows in chunks of TD (at the estimate D = 200 whole rows would fit).
        all.push_back({"rmsnorm",
                       target,
                       {{"D", "200"}, {"R", "16"}, {"RB", "2"}, {"TD", "64"}},
                       {"D", "R"},
                       {"TD", "RB"},
                       {"D"}});
        if (target != "hopper") {
            all.push_back({"attention_scores",
                           target,
                           {{"Lq", "64"}, {"Lk", "64"}, {"D", "64"}, {"TM", "32"}, {"TN", "32"}},
                           {"Lq", "Lk"},
                           {"TM", "TN"},
                           {}});
        } else { // wgmma tiles: 64 rows; S's rows (f32) in multiples of 16 bytes
            all.push_back({"attention_scores",
                           target,
                           {{"Lq", "64"}, {"Lk", "64"}, {"D", "64"}, {"TM", "64"}, {"TN", "64"}},
                           {"Lq", "Lk"},
                           {"TM", "TN"},
                           {"Lk"}});
        }
    }
    return all;
}

INSTANTIATE_TEST_SUITE_P(Apps, RuntimeShapes, testing::ValuesIn(cases()), name_of);

TEST(RuntimeShapes, StaticExtentMustMatch) {
    // A static dim (attention's head size) at another extent is an error naming the argument.
    const App &app = find_app("attention_scores");
    const Params p = with_defaults(app,
                                   Params({{"shapes", "runtime"},
                                           {"Lq", "40"},
                                           {"Lk", "40"},
                                           {"D", "32"},
                                           {"TM", "16"},
                                           {"TN", "16"}}),
                                   "zpu");
    const Kernel kernel = compile_app(app, p, "resident", Target::parse("zpu"));
    try {
        kernel.bind_shapes({{64, 40}, {32, 40}, {40, 40}});
        FAIL() << "a head size of 64 was accepted by a kernel compiled for 32";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("dimension 0 has extent 64; the kernel takes 32"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(kernel.bind_shapes({{32, 0}, {32, 40}, {40, 0}}), Error); // an extent of 0
}

TEST(RuntimeShapes, ARuntimeKLoopIsOneLoopPipelinedAcrossTiles) {
    // Halide splits a runtime K loop into a main loop and a tail; RejoinTails joins them again, so
    // the producer runs ahead from one tile into the next as with static shapes. The grouped tile
    // order's padding tiles are skipped by a guard: there it runs ahead inside a tile only.
    const App &app = find_app("gemm");
    auto notes = [&](const std::string &group) {
        const Params p =
            with_defaults(app, Params({{"shapes", "runtime"}, {"group", group}}), "zpu");
        std::string all;
        for (const std::string &n : compile_app(app, p, "ws_pingpong", Target::parse("zpu")).notes)
            all += n + "\n";
        return all;
    };
    const std::string plain = notes("1");
    EXPECT_NE(plain.find("over the flattened nest"), std::string::npos) << plain;
    EXPECT_EQ(plain.find("partitioned by Halide"), std::string::npos) << plain;
    const std::string grouped = notes("3");
    EXPECT_NE(grouped.find("a guard inside"), std::string::npos) << grouped;
}

TEST(RuntimeShapes, InputsMustCoverWhatTheAlgorithmReads) {
    // gemm reads B(j, r) for r below A's extent 0 (K): a B of fewer rows is refused at the call,
    // on every target, naming the argument, the region and the extents (RequiredRegions.h).
    const App &app = find_app("gemm");
    for (const std::string target : {"zpu", "ascend", "hopper"}) {
        SCOPED_TRACE(target);
        const Params p = with_defaults(
            app, Params({{"shapes", "runtime"}, {"M", "64"}, {"N", "64"}, {"K", "64"}}), target);
        const Kernel kernel =
            compile_app(app, p, schedules_for(app, target).front(), Target::parse(target));
        EXPECT_NO_THROW(kernel.bind_shapes({{64, 32}, {48, 64}, {48, 32}}));
        EXPECT_NO_THROW(kernel.bind_shapes({{64, 32}, {56, 72}, {48, 32}})); // larger inputs: fine
        try {
            kernel.bind_shapes({{64, 32}, {48, 40}, {48, 32}});
            FAIL() << "a B of 40 rows was taken for K = 64";
        } catch (const ShapeError &e) {
            EXPECT_FALSE(e.target_limit);
            EXPECT_NE(std::string(e.what()).find(
                          "B dimension 1 is read at [0, (A.extent.0 + -1)]; its extent must be at "
                          "least A.extent.0 (here A.extent.0 = 64, B.extent.1 = 40)"),
                      std::string::npos)
                << e.what();
        }
        EXPECT_THROW(kernel.bind_shapes({{64, 30}, {48, 64}, {48, 32}}),
                     ShapeError); // A short of C's rows
    }
}

TEST(RuntimeShapes, HopperTakesAnyStride) {
    // K = 71 bf16 makes rows of A of 142 bytes, N = 77 rows of B and C of 154: TMA cannot step
    // them. Where only A's rows fail, the call runs the variant whose threads copy A's tiles and
    // TMA the rest; where more fail, the one whose threads copy every tensor; K = 72 and N = 80
    // run the TMA variant. All are in the CUDA, the launcher choosing by the same rule.
    const App &app = find_app("gemm");
    const Params p = with_defaults(
        app, Params({{"shapes", "runtime"}, {"M", "128"}, {"N", "128"}, {"K", "64"}}), "hopper");
    const Kernel kernel = compile_app(app, p, "ws_pingpong", Target::parse("hopper"));
    RunOptions options;
    options.target = "hopper";
    const hopper_backend::Plan tma = hopper_backend::plan_kernel(kernel);
    const std::vector<std::string> classes = hopper_backend::pitch_classes(tma);
    ASSERT_EQ(classes.size(), 3u); // the rows of A (K), of B and of C (N each)
    for (const auto &[k, n, threads] :
         std::vector<std::tuple<int, int, std::set<std::string>>>{{71, 77, {"A", "B", "C"}},
                                                                  {71, 80, {"A"}},
                                                                  {72, 77, {"A", "B", "C"}},
                                                                  {72, 80, {}},
                                                                  {1, 77, {"A", "B", "C"}},
                                                                  {9, 8, {"A"}}}) {
        Params at = p;
        at.set("K", std::to_string(k));
        at.set("N", std::to_string(n));
        SCOPED_TRACE("K = " + std::to_string(k) + ", N = " + std::to_string(n));
        const RunResult r = run_kernel(app, kernel, at, "ws_pingpong", options, nullptr);
        EXPECT_TRUE(r.correct) << r.max_rel_err;
        EXPECT_EQ(r.report.race_count, 0);
        // The variant the executor and the dispatcher choose: its threads copy `threads`.
        const Shapes shapes = kernel.bind_shapes({{k, 128}, {n, k}, {n, 128}});
        std::map<std::string, Halide::Expr> values;
        for (const auto &[name, value] : shapes)
            values[name] = Halide::Expr(int(value));
        const unsigned failing = hopper_backend::failing_pitches(tma, classes, [&](size_t i) {
            return Halide::Internal::is_const_one(Halide::Internal::simplify(
                Halide::Internal::substitute(values, tma.launch_checks[i].holds)));
        });
        const hopper_backend::Plan chosen =
            failing ? hopper_backend::plan_kernel(kernel,
                                                  hopper_backend::stride_policy(classes, failing))
                    : tma;
        std::set<std::string> copied;
        for (const std::string &arg : chosen.thread_args)
            copied.insert(user_text(arg));
        EXPECT_EQ(copied, threads);
    }
    const std::string cuda = hopper_backend::emit_cuda(kernel, "any");
    for (const char *fn : {"__global__ void __launch_bounds__(384, 1) any_tma(",
                           "__global__ void __launch_bounds__(384, 1) any_threads(",
                           "__global__ void __launch_bounds__(384, 1) any_threads_A(",
                           "__global__ void __launch_bounds__(384, 1) any_threads_B(",
                           "extern \"C\" cudaError_t prepare_any(", "failing |= "}) {
        EXPECT_NE(cuda.find(fn), std::string::npos) << fn;
    }
    // The dispatcher's table: the TMA variant for no failing pitch, one variant per pitch, the
    // one that thread-copies all for the rest (its bits: every pitch).
    EXPECT_NE(cuda.find("{0u, prepare_any_tma, "), std::string::npos);
    EXPECT_NE(cuda.find("{7u, prepare_any_threads, "), std::string::npos);
    for (unsigned bit : {1u, 2u, 4u}) {
        EXPECT_NE(cuda.find("{" + std::to_string(bit) + "u, prepare_any_threads_"),
                  std::string::npos)
            << bit;
    }
}

TEST(RuntimeShapes, HopperTailChecksHoldWhereProven) {
    // The executor evaluates every tail check as hopper::check_tail does on the GPU (an error
    // where the GPU kernel would trap); with TANDEM_HOPPER_CHECK_PROVEN_TAILS it keeps those
    // TailProof removed too. Every one of them holds at tails, ones and primes.
    setenv("TANDEM_HOPPER_CHECK_PROVEN_TAILS", "1", 1);
    const App &gemm = find_app("gemm");
    RunOptions options;
    options.target = "hopper";
    for (const std::string schedule : {"ws_pingpong", "ws_cooperative", "ws"}) {
        const Params p = with_defaults(
            gemm, Params({{"shapes", "runtime"}, {"M", "64"}, {"N", "64"}, {"K", "64"}}), "hopper");
        const Kernel kernel = compile_app(gemm, p, schedule, Target::parse("hopper"));
        for (const auto &[m, n, k] : std::vector<std::array<const char *, 3>>{
                 {"201", "136", "72"}, {"1", "256", "520"}, {"130", "8", "24"}}) {
            SCOPED_TRACE(schedule + " " + m + "x" + n + "x" + k);
            Params at = p;
            at.set("M", m);
            at.set("N", n);
            at.set("K", k);
            const RunResult r = run_kernel(gemm, kernel, at, schedule, options, nullptr);
            EXPECT_TRUE(r.correct) << r.max_rel_err;
        }
    }
    unsetenv("TANDEM_HOPPER_CHECK_PROVEN_TAILS");
}

TEST(RuntimeShapes, HopperTakesATallerB) {
    // A B with more rows than A's K is a legal call (RequiredRegions), and its extra rows may hold
    // anything (NaN here). The last K tile's box reaches past K; on the GPU its wgmma multiplies
    // the whole tile, so the padding must be zeros, not B's rows: B's tensor map ends at the K
    // rows the algorithm reads (TensorMap::bounds, checked in PtxasTest HopperTails), and the
    // model's TMA ends there too. The model's wgmma multiplies only the copy's K, so it cannot
    // show the padding itself: this checks the call is taken and computed right.
    const App &app = find_app("gemm");
    const Params p = with_defaults(
        app, Params({{"shapes", "runtime"}, {"M", "64"}, {"N", "64"}, {"K", "64"}}), "hopper");
    for (const std::string schedule : {"ws_pingpong", "ws_cooperative"}) {
        SCOPED_TRACE(schedule);
        const Kernel kernel = compile_app(app, p, schedule, Target::parse("hopper"));
        const int M = 50, N = 48, K = 40, rows = K + 7;
        const Shapes shapes = kernel.bind_shapes({{K, M}, {N, rows}, {N, M}});
        sim::hopper::Machine machine(
            sim::hopper::HopperParams::from(Target::parse("hopper").lookup()));
        const int a = machine.add_global("A", sim::DType::BF16, int64_t(K) * M);
        const int b = machine.add_global("B", sim::DType::BF16, int64_t(N) * rows);
        const int c = machine.add_global("C", sim::DType::BF16, int64_t(N) * M);
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        auto *A = static_cast<uint16_t *>(machine.data(a));
        auto *B = static_cast<uint16_t *>(machine.data(b));
        for (int i = 0; i < K * M; i++)
            A[i] = sim::float_to_bf16(u(rng));
        for (int i = 0; i < N * rows; i++)
            B[i] = sim::float_to_bf16(i < N * K ? u(rng) : NAN);
        std::map<std::string, int> ids;
        for (const KernelArg &arg : kernel.args)
            ids[arg.name] = arg.name == kernel.args[0].name   ? a
                            : arg.name == kernel.args[1].name ? b
                                                              : c;
        hopper_backend::execute(kernel, machine, ids, shapes);
        const sim::Report report = machine.finish();
        EXPECT_EQ(report.race_count, 0);
        const auto *C = static_cast<const uint16_t *>(machine.data(c));
        int wrong = 0;
        for (int m = 0; m < M; m++) {
            for (int n = 0; n < N; n++) {
                float want = 0;
                for (int k = 0; k < K; k++)
                    want += sim::bf16_to_float(A[m * K + k]) * sim::bf16_to_float(B[k * N + n]);
                const float got = sim::bf16_to_float(C[m * N + n]);
                wrong += !(std::abs(got - want) <= 0.02f * (1 + std::abs(want)));
            }
        }
        EXPECT_EQ(wrong, 0) << "of " << M * N;
    }
}

} // namespace
} // namespace tandem::apps
