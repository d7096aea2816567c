// Errors: each bad schedule fails at compile time with a message naming the Func, the directive
// and the reason (Halide's test/error in spirit).
#include "tandem/Fp8.h"
#include "tandem/Kernel.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace tandem;

namespace {

/** A small GEMM whose schedule each test bends. */
struct Gemm {
    ImageParam A{Halide::BFloat(16), 2, "A"}, B;
    Var j{"j"}, i{"i"}, jo{"jo"}, io{"io"}, ji{"ji"}, ii{"ii"}, t{"t"};
    RDom r{0, 128, "r"};
    RVar ko{"ko"}, ki{"ki"};
    Func acc{"acc"}, C{"C"}, A_tile, B_tile;

    /** `relu`: C = max(acc, 0), vector work after the matmul (else a cast alone). */
    explicit Gemm(int M = 128, int N = 128, int K = 128, Halide::Type b = Halide::BFloat(16),
                  bool relu = false)
        : B{b, 2, "B"} {
        r = RDom(0, K, "r");
        acc(j, i) = 0.0f;
        acc(j, i) += Halide::cast<float>(A(r, i)) * Halide::cast<float>(B(j, r));
        C(j, i) = Halide::cast(Halide::BFloat(16),
                               relu ? Halide::max(acc(j, i), 0.0f) : Halide::Expr(acc(j, i)));
        A.dim(0).set_bounds(0, K);
        A.dim(1).set_bounds(0, M).set_stride(K);
        B.dim(0).set_bounds(0, N);
        B.dim(1).set_bounds(0, K).set_stride(N);
        C.output_buffer().dim(0).set_bounds(0, N);
        C.output_buffer().dim(1).set_bounds(0, M).set_stride(N);
        A_tile = Func::staged(A, acc);
        B_tile = Func::staged(B, acc);
    }

    /** The good schedule, with tiles T x T x TK. */
    Gemm &schedule(int T = 64, int TK = 64, int stages = 2) {
        C.tile(j, i, jo, io, ji, ii, T, T, TailStrategy::GuardWithIf)
            .fuse(jo, io, t)
            .map_to_cores(t);
        acc.compute_at(C, t);
        acc.update()
            .split(r.x, ko, ki, TK, TailStrategy::GuardWithIf)
            .reorder(j, i, ki, ko)
            .tile_mma();
        A_tile.compute_at(acc, ko).async_copy().multi_buffer(stages);
        B_tile.compute_at(acc, ko).async_copy().multi_buffer(stages);
        C.async_copy();
        return *this;
    }

    Kernel compile_for(const std::string &target = "zpu") {
        return compile(C, {A, B}, Target::parse(target), "gemm");
    }
};

/** Runs `f`, expecting a tandem::Error whose message holds every fragment, each in the user's
 * words (a Func's unique name as the user wrote it: in_user_words). */
template <typename F> void expect_error(F &&f, const std::vector<std::string> &fragments) {
    try {
        f();
        FAIL() << "expected an error mentioning '" << fragments.front() << "'";
    } catch (const Error &e) {
        std::string msg = e.what();
        for (const std::string &frag : fragments) {
            EXPECT_NE(msg.find(in_user_words(frag)), std::string::npos)
                << "fragment: " << in_user_words(frag) << "\nmessage: " << msg;
        }
    }
}

TEST(ScheduleErrors, GoodScheduleCompiles) {
    Gemm g;
    g.schedule();
    EXPECT_NO_THROW(g.compile_for());
}

TEST(ScheduleErrors, MultiBufferZero) {
    Gemm g;
    expect_error([&] { g.A_tile.multi_buffer(0); },
                 {g.A_tile.name(), "multi_buffer(0)", "at least 1"});
}

TEST(ScheduleErrors, AsyncCopyOutsideEveryLoop) {
    Gemm g;
    g.schedule();
    g.A_tile.compute_root();
    expect_error([&] { g.compile_for(); }, {g.A_tile.name(), "async_copy()", "outside every loop"});
}

TEST(ScheduleErrors, SramOverflow) {
    Gemm g(1024, 1024, 1024);
    // 4 versions of a 256 x 1024 bf16 tile: 2 MB of RSRAM (A is staged there: no DRAM -> ASRAM
    // route)
    g.schedule(256, 1024, 4);
    expect_error([&] { g.compile_for(); },
                 {g.A_tile.name(), "multi_buffer(4)", "SRAM overflow", "RSRAM"});
}

TEST(ScheduleErrors, SramOverflowWithSmallerTargetScope) {
    Gemm g(256, 256, 256);
    g.schedule(128, 128, 2);
    // ASRAM holds the one 128 x 128 bf16 box each MMA reads (32768 bytes).
    expect_error(
        [&] {
            compile(g.C, {g.A, g.B}, Target::parse("zpu:asram_bytes=16384"), "gemm");
        },
        {"SRAM overflow", "ASRAM", "16384"});
}

TEST(ScheduleErrors, TargetsWithoutBackend) {
    Gemm g;
    g.schedule();
    expect_error([&] { g.compile_for("ascend:cube_cores=0"); },
                 {"ascend", "'cube_cores' must be at least 1"});
    expect_error([&] { g.compile_for("hopper:tensor_cores=4"); },
                 {"unknown parameter", "tensor_cores"});
    expect_error([&] { g.compile_for("tpu"); }, {"unknown target", "tpu"});
    expect_error([&] { g.compile_for("zpu:dma_channels=0"); }, {"dma_channels", "at least 1"});
    expect_error([&] { g.compile_for("zpu:warp_size=32"); }, {"unknown parameter", "warp_size"});
}

TEST(ScheduleErrors, AscendHandedAccumulatorOverflowsUb) {
    // The cube hands each 128 x 128 f32 tile of acc (64 KB) to the vector cores for the ReLU:
    // their copy of it is named, and the directive that sized it (not compute_at, which the user
    // never wrote on it).
    Gemm g(256, 256, 256, Halide::BFloat(16), /*relu=*/true);
    g.schedule(128, 64, 2);
    expect_error([&] { g.compile_for("ascend:ub_bytes=65536"); },
                 {"the vector cores' copy of acc", "tile_mma", "UB overflow"});
}

TEST(ScheduleErrors, HopperSharedMemoryOverflow) {
    Gemm g(1024, 1024, 1024);
    g.schedule(128, 256, 4); // 4 versions of 128 x 256 bf16 A and 256 x 128 B tiles: 512 KB
    expect_error([&] { g.compile_for("hopper"); },
                 {"multi_buffer(4)", "shared memory overflow", "227 KB"});
}

TEST(ScheduleErrors, HopperAccumulatorTooLargeForRegisters) {
    Gemm g(1024, 1024, 1024);
    g.schedule(256, 64, 2); // a 256 x 256 f32 accumulator: 512 registers per thread
    expect_error([&] { g.compile_for("hopper"); }, {g.acc.name(), "registers per thread"});
}

TEST(ScheduleErrors, HopperPingPongNeedsWarpSpecialize) {
    Gemm g;
    g.schedule();
    g.C.ping_pong();
    expect_error([&] { g.compile_for("hopper"); },
                 {g.C.name(), "ping_pong()", "add warp_specialize()"});
}

TEST(ScheduleErrors, CooperativeIsHoppersAndNeedsWarpSpecializeWithoutPingPong) {
    Gemm zpu;
    zpu.schedule();
    zpu.C.warp_specialize().cooperative();
    expect_error([&] { zpu.compile_for("zpu"); }, {zpu.C.name(), "cooperative()", "zpu has none"});
    Gemm alone;
    alone.schedule();
    alone.C.cooperative();
    expect_error([&] { alone.compile_for("hopper"); },
                 {alone.C.name(), "cooperative()", "needs warp_specialize()"});
    Gemm both;
    both.schedule();
    both.C.warp_specialize().ping_pong().cooperative();
    expect_error([&] { both.compile_for("hopper"); },
                 {both.C.name(), "cooperative()", "exclude ping_pong()"});
    Gemm inner;
    inner.schedule();
    inner.C.warp_specialize();
    inner.A_tile.cooperative();
    expect_error([&] { inner.compile_for("hopper"); },
                 {inner.A_tile.name(), "cooperative()", "output Func"});
}

TEST(ScheduleErrors, ClustersAreHopperAndZpuMeshColumnsAndNeedWarpSpecializeOnHopper) {
    Gemm ascend;
    ascend.schedule();
    ascend.C.warp_specialize().cluster(2);
    expect_error([&] { ascend.compile_for("ascend"); },
                 {ascend.C.name(), "cluster(2)", "ascend has neither"});
    Gemm three;
    three.schedule();
    three.C.cluster(3);
    expect_error([&] { three.compile_for("zpu"); },
                 {three.C.name(), "cluster(3)", "column of zpu's mesh", "4 rows", "divides 4"});
    Gemm flat;
    flat.schedule();
    flat.C.cluster(2);
    expect_error([&] { flat.compile_for("zpu:cores=4"); },
                 {flat.C.name(), "cluster(2)", "1 rows", "divides 1"});
    Gemm alone;
    alone.schedule();
    alone.C.cluster(2);
    expect_error([&] { alone.compile_for("hopper"); },
                 {alone.C.name(), "cluster(2)", "add warp_specialize()"});
    Gemm inner;
    inner.schedule();
    inner.C.warp_specialize();
    inner.B_tile.cluster(2);
    expect_error([&] { inner.compile_for("hopper"); },
                 {inner.B_tile.name(), "cluster(2)", "output Func"});
    Gemm big;
    expect_error([&] { big.C.cluster(9); }, {big.C.name(), "cluster(9)", "1 to 8 CTAs"});
    Gemm good;
    good.schedule();
    good.C.warp_specialize().cluster(2);
    EXPECT_EQ(good.compile_for("hopper").cluster, 2);
    // Row-major tiles, three to a row: pairs straddle rows and share no copy. A launch shape only.
    Gemm straddling(128, 192, 128);
    straddling.schedule();
    straddling.C.warp_specialize().cluster(2);
    Kernel k = straddling.compile_for("hopper");
    EXPECT_EQ(k.cluster, 2);
    EXPECT_TRUE(std::any_of(k.notes.begin(), k.notes.end(), [](const std::string &n) {
        return n.find("nothing is multicast") != std::string::npos;
    }));
}

TEST(ScheduleErrors, HopperRingsNeedOneVersionCount) {
    Gemm g;
    g.schedule(64, 64, 2);
    g.B_tile.multi_buffer(3);
    g.C.warp_specialize();
    expect_error([&] { g.compile_for("hopper"); },
                 {g.B_tile.name(), "multi_buffer(3)", "same multi_buffer count"});
}

TEST(ScheduleErrors, MmaOperandsOfOneType) {
    // bf16 x f16: no tensor core multiplies two types (wgmma, Ascend's Mmad), on any target.
    for (const char *target : {"zpu", "ascend", "hopper"}) {
        Gemm g(128, 128, 128, Halide::Float(16));
        g.schedule();
        expect_error([&] { g.compile_for(target); },
                     {"acc", "differ in type", "(bfloat16)", "(float16)"});
    }
}

/** An FP8 GEMM (tandem/Fp8.h): A and B hold e4m3 bits, both K-major (B as N x K), 128 x 128 x
 * 128; `decode_in_epilogue` adds A's first column, read as e4m3, to every output. */
Kernel compile_fp8_gemm(const std::string &target, bool decode_in_epilogue = false) {
    ImageParam A(Halide::UInt(8), 2, "A"), B(Halide::UInt(8), 2, "B");
    Var j("j"), i("i"), jo("jo"), io("io"), ji("ji"), ii("ii"), t("t");
    RDom r(0, 128, "r");
    RVar ko("ko"), ki("ki");
    Func acc("acc"), C("C");
    acc(j, i) = 0.0f;
    acc(j, i) += from_e4m3(A(r, i)) * from_e4m3(B(r, j));
    C(j, i) = decode_in_epilogue ? acc(j, i) + from_e4m3(A(0, i)) : Halide::Expr(acc(j, i));
    for (ImageParam *p : {&A, &B}) {
        p->dim(0).set_bounds(0, 128);
        p->dim(1).set_bounds(0, 128).set_stride(128);
    }
    C.output_buffer().dim(0).set_bounds(0, 128);
    C.output_buffer().dim(1).set_bounds(0, 128).set_stride(128);
    C.tile(j, i, jo, io, ji, ii, 64, 64, TailStrategy::GuardWithIf).fuse(jo, io, t).map_to_cores(t);
    acc.compute_at(C, t);
    acc.update()
        .split(r.x, ko, ki, 128, TailStrategy::GuardWithIf)
        .reorder(j, i, ki, ko)
        .tile_mma();
    Func::staged(A, acc).compute_at(acc, ko).async_copy().multi_buffer(2);
    Func::staged(B, acc).compute_at(acc, ko).async_copy().multi_buffer(2);
    C.async_copy();
    return compile(C, {A, B}, Target::parse(target), "fp8_gemm");
}

TEST(ScheduleErrors, Fp8IsHoppersAndFeedsItsTensorCoreOnly) {
    // On hopper the staged tiles and the inputs become e4m3 (uint8 outside Tandem's IR).
    const Kernel k = compile_fp8_gemm("hopper");
    EXPECT_EQ(k.args[0].type, fp8::e4m3());
    EXPECT_EQ(fp8::storage(k.args[0].type), Halide::UInt(8));
    EXPECT_NE(k.stmt_text().find("input  A: e4m3"), std::string::npos);
    for (const char *target : {"zpu", "ascend"}) {
        expect_error(
            [&] { compile_fp8_gemm(target); },
            {"acc", std::string("not supported on ") + target, "is e4m3", "FP8 runs on hopper"});
    }
    // FP8 values anywhere but in the tensor core's operands: no target reads them.
    expect_error([&] { compile_fp8_gemm("hopper", true); },
                 {"not supported on hopper", "FP8 values feed the tensor core only"});
}

TEST(ScheduleErrors, VectorizeIsNotForTheZpu) {
    Gemm g;
    g.schedule();
    g.C.vectorize(g.ji, 8);
    expect_error([&] { g.compile_for(); }, {"C", "vectorize", "whole tiles"});
}

TEST(ScheduleErrors, MultiBufferWithoutAsyncCopy) {
    Gemm h;
    h.C.tile(h.j, h.i, h.jo, h.io, h.ji, h.ii, 64, 64, TailStrategy::GuardWithIf)
        .fuse(h.jo, h.io, h.t)
        .map_to_cores(h.t);
    h.acc.compute_at(h.C, h.t);
    h.acc.update()
        .split(h.r.x, h.ko, h.ki, 64, TailStrategy::GuardWithIf)
        .reorder(h.j, h.i, h.ki, h.ko)
        .tile_mma();
    h.A_tile.compute_at(h.acc, h.ko).multi_buffer(2);
    h.B_tile.compute_at(h.acc, h.ko);
    expect_error([&] { h.compile_for(); },
                 {h.A_tile.name(), "multi_buffer(2)", "add async_copy()"});
}

TEST(ScheduleErrors, PingPongNeedsAsyncStore) {
    Gemm h;
    h.C.tile(h.j, h.i, h.jo, h.io, h.ji, h.ii, 64, 64, TailStrategy::GuardWithIf)
        .fuse(h.jo, h.io, h.t)
        .map_to_cores(h.t);
    h.acc.compute_at(h.C, h.t);
    h.acc.update()
        .split(h.r.x, h.ko, h.ki, 64, TailStrategy::GuardWithIf)
        .reorder(h.j, h.i, h.ki, h.ko)
        .tile_mma();
    h.A_tile.compute_at(h.acc, h.ko);
    h.B_tile.compute_at(h.acc, h.ko);
    h.C.ping_pong();
    expect_error([&] { h.compile_for(); },
                 {h.C.name(), "ping_pong()", "async_copy() on " + h.C.name()});
}

TEST(ScheduleErrors, KernelDirectivesBelongToTheOutput) {
    Gemm g;
    g.schedule();
    g.acc.warp_specialize();
    expect_error([&] { g.compile_for(); },
                 {g.acc.name(), "warp_specialize()", "output Func " + g.C.name()});
    Gemm h;
    h.schedule();
    h.A_tile.ping_pong();
    expect_error([&] { h.compile_for(); },
                 {h.A_tile.name(), "ping_pong()", "output Func " + h.C.name()});
    Gemm k;
    k.schedule();
    k.acc.map_to_cores(k.j);
    expect_error([&] { k.compile_for(); },
                 {k.acc.name(), "map_to_cores(j)", "output Func's tile loop"});
}

TEST(ScheduleErrors, MapToCoresNeedsALoopVar) {
    Gemm g;
    g.schedule();
    Var nowhere("nowhere");
    g.C.map_to_cores(nowhere);
    expect_error([&] { g.compile_for(); },
                 {g.C.name(), "map_to_cores(nowhere)", "no loop over nowhere"});
}

TEST(ScheduleErrors, AsyncCopyOnAComputedFunc) {
    Gemm g;
    g.schedule();
    g.acc.async_copy();
    expect_error([&] { g.compile_for(); },
                 {g.acc.name(), "async_copy()", "not a plain copy of an input"});
}

TEST(ScheduleErrors, AsyncCopyOnAnInlinedFunc) {
    Gemm g;
    g.schedule();
    g.B_tile.compute_inline();
    expect_error([&] { g.compile_for(); }, {g.B_tile.name(), "async_copy()", "inline"});
}

TEST(ScheduleErrors, TileMmaOnSomethingElse) {
    ImageParam a(Halide::Float(32), 1, "a");
    Var x("x"), xo("xo"), xi("xi");
    Func sq("sq"), out("out");
    RDom k(0, 64, "k");
    sq(x) = 0.0f;
    sq(x) += a(k) * a(k) + Halide::cast<float>(x);
    out(x) = sq(x);
    a.dim(0).set_bounds(0, 64);
    out.output_buffer().dim(0).set_bounds(0, 64);
    out.split(x, xo, xi, 16, TailStrategy::GuardWithIf).map_to_cores(xo);
    Func::staged(a, sq).compute_at(out, xo);
    sq.compute_at(out, xo);
    sq.update().tile_mma();
    expect_error([&] { compile(out, {a}, Target::parse("zpu"), "k"); }, {sq.name(), "tile_mma()"});
}

TEST(ScheduleErrors, VectorCodeReadingDram) {
    // An input the output's vector code reads is staged per tile by default, with a note.
    for (const std::string &target : Target::names()) {
        ImageParam a(Halide::Float(32), 1, "a");
        Var x("x"), xo("xo"), xi("xi");
        Func out("out");
        out(x) = a(x) * 2.0f;
        a.dim(0).set_bounds(0, 64);
        out.output_buffer().dim(0).set_bounds(0, 64);
        out.split(x, xo, xi, 16, TailStrategy::GuardWithIf).map_to_cores(xo);
        Kernel k = compile(out, {a}, Target::parse(target), "k");
        bool noted = false;
        for (const std::string &note : k.notes)
            noted |= note.find("a is read from DRAM by out") != std::string::npos;
        EXPECT_TRUE(noted) << target;
    }
    // Without a tile loop to stage it in, it stays an error naming the target.
    ImageParam a(Halide::Float(32), 1, "a");
    Var x("x");
    Func out("out");
    out(x) = a(x) * 2.0f;
    a.dim(0).set_bounds(0, 64);
    out.output_buffer().dim(0).set_bounds(0, 64);
    expect_error([&] { compile(out, {a}, Target::parse("ascend"), "k"); },
                 {out.name(), "reads a in DRAM", "on ascend", "stage a"});
}

/** Two passes, each a kernel of its own: twice(x, y) = 2 a(x, y) at the root with its own
 * map_to_cores, then out(x, y) = twice(x + dx, y) + 1. */
struct TwoKernels {
    ImageParam a{Halide::Float(32), 2, "a"};
    Var x{"x"}, y{"y"}, xo{"xo"}, xi{"xi"};
    Func twice{"twice"}, out{"out"};
    explicit TwoKernels(int dx = 0, bool runtime = false) {
        twice(x, y) = a(x, y) * 2.0f;
        out(x, y) = twice(x + dx, y) + 1.0f;
        a.dim(0).set_min(0);
        a.dim(1).set_min(0).set_stride(a.dim(0).extent());
        out.output_buffer().dim(0).set_min(0);
        out.output_buffer().dim(1).set_min(0).set_stride(out.output_buffer().dim(0).extent());
        a.dim(0).set_extent(64 + dx);
        out.output_buffer().dim(0).set_extent(64);
        if (!runtime) { // else the rows are known at the call
            a.dim(1).set_extent(8);
            out.output_buffer().dim(1).set_extent(8);
        }
        for (Func *f : {&twice, &out})
            f->split(y, xo, xi, 2, TailStrategy::GuardWithIf).map_to_cores(xo);
        twice.compute_root();
    }
};

TEST(ScheduleErrors, ARootFuncWithItsOwnCoresIsAKernelOfItsOwn) {
    TwoKernels p;
    const Kernel k = compile(p.out, {p.a}, Target::parse("zpu"), "two");
    ASSERT_EQ(k.stages.size(), 2u);
    EXPECT_EQ(k.stages[0].name, "two_twice");
    EXPECT_EQ(k.stages[0].args.back().name, "twice");
    EXPECT_TRUE(k.stages[0].args.back().output);
    ASSERT_EQ(k.intermediates.size(), 1u);
    EXPECT_EQ(k.intermediates[0].extents, (std::vector<int>{64, 8}));
    ASSERT_EQ(k.args.size(), 2u); // the caller's: a and out, not the intermediate
    EXPECT_EQ(k.args[0].name, "a");
    EXPECT_NE(k.stmt_text().find("kernel two_twice"), std::string::npos);
    EXPECT_NE(k.stages[1].arg("twice"), nullptr); // the second kernel reads it from DRAM
    EXPECT_FALSE(k.stages[1].arg("twice")->output);
}

TEST(ScheduleErrors, AKernelOfItsOwnIsReadFromZero) {
    TwoKernels p(3);
    expect_error([&] { compile(p.out, {p.a}, Target::parse("zpu"), "two"); },
                 {"twice", "kernel of its own", "must start at 0", "[3, 66]"});
}

TEST(ScheduleErrors, APipelineOfKernelsTakesRuntimeShapes) {
    // The intermediate's rows are the output's, known at the call.
    TwoKernels p(0, true);
    const Kernel k = compile(p.out, {p.a}, Target::parse("hopper"), "two");
    ASSERT_EQ(k.stages.size(), 2u);
    ASSERT_EQ(k.intermediate_extents.size(), 1u);
    const Shapes at =
        k.with_intermediates({{k.args[0].extent_name(1), 9}, {k.args.back().extent_name(1), 7}});
    EXPECT_EQ(at.at(k.intermediates[0].extent_name(1)), 7);
    EXPECT_EQ(k.intermediates[0].elements(at), 64 * 7);
}

TEST(ScheduleErrors, ShapesMustStartAtZero) {
    ImageParam a(Halide::Float(32), 1, "a");
    Var x("x");
    Func out("out");
    out(x) = a(x) * 2.0f;
    out.output_buffer().dim(0).set_bounds(0, 64);
    expect_error([&] { compile(out, {a}, Target::parse("zpu"), "k"); },
                 {"'a'", "must start at 0", "set_min(0)"});
}

TEST(ScheduleErrors, RuntimeShapesMustBeDense) {
    // Runtime extents, but the row stride of a left free: a.stride.1 stays in the kernel.
    ImageParam a(Halide::Float(32), 2, "a");
    Var x("x"), y("y");
    Func out("out");
    out(x, y) = a(x, y) * 2.0f;
    a.dim(0).set_min(0);
    a.dim(1).set_min(0);
    out.output_buffer().dim(0).set_min(0);
    out.output_buffer().dim(1).set_min(0).set_stride(out.output_buffer().dim(0).extent());
    expect_error([&] { compile(out, {a}, Target::parse("zpu"), "k"); },
                 {"a.stride.1", "dense stride"});
}

} // namespace
