// Per-pass tests: a small Stmt before, the pass, and checks on the Stmt after (Halide's
// test/correctness in spirit, on IR instead of pixels).
#include "tandem/AsyncIR.h"
#include "tandem/Kernel.h"
#include "tandem/Nest.h"

#include "lower/AccumulateInPlace.h"
#include "lower/CoreMapping.h"
#include "lower/MultiBuffer.h"
#include "lower/RejoinTails.h"
#include "lower/RowStatistics.h"
#include "lower/RunningMax.h"
#include "lower/SkipMaskedBlocks.h"
#include "lower/SoftwarePipeline.h"
#include "lower/TileCopy.h"
#include "lower/TileMma.h"
#include "lower/VectorOps.h"
#include "lower/hopper/IntraWarpgroupOverlap.h"
#include "lower/hopper/WarpSpecialize.h"
#include "lower/zpu/EngineSync.h"
#include "lower/zpu/MeshBroadcast.h"
#include "lower/zpu/ZpuMemory.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

using namespace tandem;
using namespace Halide::Internal;
using Halide::Expr;

namespace {

Expr var(const std::string &n) {
    return Variable::make(Halide::Int(32), n);
}
Expr load(Halide::Type t, const std::string &buf, const Expr &index) {
    return Load::make(t, buf, index, Halide::Buffer<>(), Parameter(), const_true(),
                      ModulusRemainder());
}
Stmt store(const std::string &buf, const Expr &value, const Expr &index) {
    return Store::make(buf, value, index, Parameter(), const_true(), ModulusRemainder());
}
Stmt loop(const std::string &name, const Expr &extent, const Stmt &body) {
    return For::make(name, 0, extent, ForType::Serial, Halide::DeviceAPI::None, body);
}
const Halide::Type bf16 = Halide::BFloat(16), f32 = Halide::Float(32);

CompileContext context() {
    CompileContext ctx;
    ctx.target = Target::parse("zpu");
    ctx.output = "C";
    ctx.inputs = {"A", "B"};
    ctx.funcs = {"A_tile", "B_tile", "acc", "C"};
    return ctx;
}

/** Replaces tandem_core_id() by a constant, to evaluate per core. */
class OnCore : public IRMutator {
public:
    explicit OnCore(int c) : core(c) {}
    int core;
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        return ir::is_core_id(op) ? Expr(core) : IRMutator::visit(op);
    }
};

int64_t constant(const Expr &e) {
    Expr s = simplify(e);
    if (const UIntImm *u = s.as<UIntImm>())
        return int64_t(u->value);
    const IntImm *i = s.as<IntImm>();
    EXPECT_TRUE(i) << "not a constant: " << s;
    return i ? i->value : -1;
}

/** How many times `call` occurs in the text of `s`. */
int occurrences(const Stmt &s, const std::string &call) {
    std::string text = ir::to_string(s);
    int n = 0;
    for (size_t at = text.find(call); at != std::string::npos; at = text.find(call, at + 1))
        n++;
    return n;
}

/** A copy nest A_tile[x + y*16] = A[x + (y + y0)*64 + k0] over y < 8, x < 16. */
Stmt a_tile_copy() {
    Expr index = var("x") + (var("y") + var("y0")) * 64 + var("k0");
    return ProducerConsumer::make_produce(
        "A_tile",
        loop("y", 8,
             loop("x", 16, store("A_tile", load(bf16, "A", index), var("x") + var("y") * 16))));
}

// ---- CoreMapping ----
TEST(CoreMapping, SpreadsTheTileLoopRoundRobin) {
    CompileContext ctx = context();
    ctx.directives["C"].cores_var = "t";
    Stmt before = loop("C.s0.t", 40, store("C_x", cast(f32, var("C.s0.t")), var("C.s0.t")));
    Stmt after = lower::map_to_cores(before, ctx);
    const For *f = after.as<For>();
    ASSERT_TRUE(f) << after;
    EXPECT_EQ(f->name, "C.s0.t.on_core");
    // 40 tiles over 16 cores: cores 0..7 run 3, cores 8..15 run 2.
    EXPECT_EQ(constant(OnCore(0).mutate(f->extent)), 3);
    EXPECT_EQ(constant(OnCore(7).mutate(f->extent)), 3);
    EXPECT_EQ(constant(OnCore(8).mutate(f->extent)), 2);
    // Iteration 2 on core 5 is tile 37.
    const Store *st = f->body.as<Store>();
    ASSERT_TRUE(st);
    Expr tile = substitute(f->name, 2, OnCore(5).mutate(st->index));
    EXPECT_EQ(constant(remove_promises(tile)), 37);
}

TEST(CoreMapping, TailOfAPartitionedLoopRunsOnOneCore) {
    CompileContext ctx = context();
    ctx.directives["C"].cores_var = "t";
    Stmt before =
        Block::make(loop("C.s0.t", 4, store("C", 1.0f, var("C.s0.t"))), store("C", 2.0f, 4));
    Stmt after = lower::map_to_cores(before, ctx);
    const Block *b = after.as<Block>();
    ASSERT_TRUE(b);
    const IfThenElse *guard = b->rest.as<IfThenElse>();
    ASSERT_TRUE(guard) << after;
    EXPECT_EQ(constant(OnCore(15).mutate(guard->condition)), 1);
    EXPECT_EQ(constant(OnCore(0).mutate(guard->condition)), 0);
}

// ---- TileCopy ----
TEST(TileCopy, CopyNestBecomesOneBoxAndAWait) {
    CompileContext ctx = context();
    Stmt after = lower::recognize_tile_copies(
        loop("t", 4, Block::make(a_tile_copy(), store("C", 0.0f, var("t")))), ctx);
    const For *f = after.as<For>();
    ASSERT_TRUE(f);
    const ProducerConsumer *pc = f->body.as<Block>()->first.as<ProducerConsumer>();
    ASSERT_TRUE(pc);
    const Block *b = pc->body.as<Block>();
    ir::CopyOp c;
    ir::WaitOp w;
    ASSERT_TRUE(ir::as_copy(b->first, &c)) << pc->body;
    ASSERT_TRUE(ir::as_wait(b->rest, &w));
    EXPECT_EQ(c.dst, "A_tile");
    EXPECT_EQ(c.src, "A");
    ASSERT_EQ(c.dims.size(), 2u);
    EXPECT_EQ(constant(c.dims[0].extent), 16);
    EXPECT_EQ(constant(c.dims[0].dst_stride), 1);
    EXPECT_EQ(constant(c.dims[0].src_stride), 1);
    EXPECT_EQ(constant(c.dims[1].extent), 8);
    EXPECT_EQ(constant(c.dims[1].dst_stride), 16);
    EXPECT_EQ(constant(c.dims[1].src_stride), 64);
    EXPECT_TRUE(can_prove(c.src_offset == var("y0") * 64 + var("k0"))) << c.src_offset;
    EXPECT_EQ(c.barrier, "A_tile.full");
    EXPECT_EQ(w.barrier, "A_tile.full");
}

TEST(TileCopy, StoreWithMathGoesThroughAStagingTile) {
    CompileContext ctx = context();
    ctx.directives["C"].async_copy = true;
    Stmt nest = loop("i", 4,
                     loop("j", 8,
                          store("C", cast(bf16, load(f32, "acc", var("j") + var("i") * 8)),
                                var("j") + (var("i") + var("i0")) * 100)));
    Stmt after = lower::recognize_tile_copies(loop("t.on_core", 2, nest), ctx);
    ASSERT_TRUE(after.as<For>()) << after;
    const Allocate *stage = after.as<For>()->body.as<Allocate>();
    ASSERT_TRUE(stage) << after;
    EXPECT_EQ(stage->name, "C_stage");
    const Block *b = stage->body.as<Block>();
    ir::CopyOp c;
    ASSERT_TRUE(ir::as_copy(b->rest, &c)) << "asynchronous store: no wait right after";
    EXPECT_EQ(c.src, "C_stage");
    EXPECT_EQ(c.dst, "C");
    EXPECT_EQ(c.barrier, "C_stage.empty");
    EXPECT_EQ(constant(c.dims[1].dst_stride), 100);
    EXPECT_EQ(constant(c.dims[1].src_stride), 8);
    EXPECT_TRUE(ir::writes(b->first, "C_stage"));
}

TEST(TileCopy, PlainStoreOfAnAccumulatorIsStoredDirectly) {
    CompileContext ctx = context();
    Stmt nest = loop(
        "i", 4,
        loop("j", 8,
             store("C", load(f32, "acc", var("j") + var("i") * 8), var("j") + var("i") * 100)));
    Stmt after = lower::recognize_tile_copies(loop("t.on_core", 2, nest), ctx);
    ASSERT_TRUE(after.as<For>()) << after;
    const Block *b = after.as<For>()->body.as<Block>();
    ir::CopyOp c;
    ir::WaitOp w;
    ASSERT_TRUE(b && ir::as_copy(b->first, &c)) << after;
    EXPECT_EQ(c.src, "acc");
    EXPECT_TRUE(ir::as_wait(b->rest, &w)) << "synchronous store without async_copy";
}

// ---- TileMma ----
TEST(TileMma, MatmulNestBecomesOneOp) {
    CompileContext ctx = context();
    ctx.directives["acc"].tile_mma = true;
    Expr acc_index = var("n") + var("m") * 32;
    Expr value =
        load(f32, "acc", acc_index) + cast(f32, load(bf16, "A_tile", var("k") + var("m") * 16)) *
                                          cast(f32, load(bf16, "B_tile", var("n") + var("k") * 32));
    Stmt nest = loop("k", 16, loop("m", 8, loop("n", 32, store("acc", value, acc_index))));
    Stmt after = lower::recognize_tile_mma(nest, ctx);
    ir::MmaOp m;
    ASSERT_TRUE(ir::as_mma(after, &m)) << after;
    EXPECT_EQ(m.a, "A_tile");
    EXPECT_EQ(m.b, "B_tile");
    EXPECT_EQ(constant(m.n), 32);
    EXPECT_EQ(constant(m.m), 8);
    EXPECT_EQ(constant(m.k), 16);
    EXPECT_EQ(constant(m.acc_stride_n), 1);
    EXPECT_EQ(constant(m.acc_stride_m), 32);
    EXPECT_EQ(constant(m.a_stride_k), 1);
    EXPECT_EQ(constant(m.a_stride_m), 16);
    EXPECT_EQ(constant(m.b_stride_n), 1);
    EXPECT_EQ(constant(m.b_stride_k), 32);
}

TEST(TileMma, WithoutTheDirectiveTheNestStays) {
    CompileContext ctx = context();
    Expr value =
        load(f32, "acc", var("n")) + cast(f32, load(bf16, "A_tile", var("k"))) *
                                         cast(f32, load(bf16, "B_tile", var("n") + var("k")));
    Stmt nest = loop("k", 4, loop("n", 4, store("acc", value, var("n"))));
    EXPECT_TRUE(lower::recognize_tile_mma(nest, ctx).same_as(nest));
}

// ---- VectorOps ----
TEST(VectorOps, ElementNestBecomesAVectorOpWithWorkAndRegions) {
    CompileContext ctx = context();
    Stmt nest =
        loop("i", 4,
             loop("j", 32,
                  store("C_stage", cast(bf16, load(f32, "acc", var("j") + var("i") * 32) * 2.0f),
                        var("j") + var("i") * 32 + 128)));
    Stmt after = lower::form_vector_ops(nest, ctx);
    ir::VectorOp v;
    Stmt body;
    ASSERT_TRUE(ir::as_vector_op(after, &v, &body)) << after;
    EXPECT_TRUE(body.same_as(nest));
    // The ZPU's public cost model (machines/zpu.json): per element the first load 5, a cast 1, a
    // multiply 1 and the store 5; the constant 2.0 is materialised once.
    EXPECT_EQ(constant(v.flops), (5 + 1 + 1 + 5) * 128 + 1);
    ASSERT_EQ(v.regions.size(), 2u);
    EXPECT_EQ(v.regions[0].buffer, "C_stage");
    EXPECT_TRUE(v.regions[0].write);
    EXPECT_EQ(constant(v.regions[0].lo), 128);
    EXPECT_EQ(constant(v.regions[0].extent), 128);
    EXPECT_EQ(v.regions[1].buffer, "acc");
    EXPECT_FALSE(v.regions[1].write);
}

TEST(VectorOps, DramReadsAreRejected) {
    CompileContext ctx = context();
    Stmt nest = loop("j", 32, store("acc", load(f32, "A", var("j")), var("j")));
    EXPECT_THROW(lower::form_vector_ops(nest, ctx), Error);
}

// ---- MultiBuffer ----
TEST(MultiBuffer, VersionsOffsetEveryAccessAndTheBarrierSlot) {
    CompileContext ctx = context();
    ctx.directives["A_tile"].async_copy = true;
    ctx.directives["A_tile"].multi_buffer = 3;
    Stmt copied = lower::recognize_tile_copies(
        loop("ko", 4, Block::make(a_tile_copy(), store("C", 0.0f, var("ko")))), ctx);
    Stmt use = loop("i", 128, store("acc", cast(f32, load(bf16, "A_tile", var("i"))), var("i")));
    Stmt s = Allocate::make("A_tile", bf16, Halide::MemoryType::Auto, {128}, const_true(),
                            Block::make(copied, use));
    Stmt after = lower::multi_buffer(s, ctx);
    const Allocate *a = after.as<Allocate>();
    ASSERT_TRUE(a);
    EXPECT_EQ(constant(a->extents[0]), 3 * 128);
    EXPECT_EQ(ctx.slots["A_tile"], 3);
    std::string text = ir::to_string(after);
    EXPECT_NE(text.find("(A_tile.stage*128)"), std::string::npos) << text;
    EXPECT_NE(text.find("\"A_tile.full\", A_tile.stage"), std::string::npos) << text;
}

TEST(MultiBuffer, PingPongAlternatesTheStoreSourceByTileParity) {
    CompileContext ctx = context();
    ctx.directives["C"].async_copy = true;
    ctx.directives["C"].ping_pong = true;
    Stmt nest = loop("i", 4,
                     loop("j", 8,
                          store("C", cast(bf16, load(f32, "acc", var("j") + var("i") * 8)),
                                var("j") + (var("i") + var("t.on_core") * 4) * 8)));
    Stmt s =
        lower::form_vector_ops(lower::recognize_tile_copies(loop("t.on_core", 5, nest), ctx), ctx);
    Stmt after = lower::multi_buffer(s, ctx);
    EXPECT_EQ(ctx.slots["C_stage"], 2);
    std::string text = ir::to_string(after);
    EXPECT_NE(text.find("tandem_wait(\"C_stage.empty\", t.on_core % 2)"), std::string::npos)
        << text;
    // Drained at the end, both versions.
    EXPECT_NE(text.find("tandem_wait(\"C_stage.empty\", 1)"), std::string::npos) << text;
}

TEST(MultiBuffer, ACtaPerTileWaitsOnlyForAStoreBeforeIt) {
    // Hopper without ping_pong: each tile loop runs once per CTA. The first tile of a CTA has no
    // store to wait for; a partitioned tail after it waits for that store; one drain at the end
    // (cp.async.bulk.wait_group.read 0 waits for every store).
    CompileContext ctx = context();
    ctx.target = Target::parse("hopper");
    ctx.one_tile_per_unit = true;
    ctx.directives["C"].async_copy = true;
    ctx.directives["C"].multi_buffer = 2;
    auto tile = [](const std::string &t) {
        return loop(t, 1,
                    loop("i", 4,
                         loop("j", 8,
                              store("C", cast(bf16, load(f32, "acc", var("j") + var("i") * 8)),
                                    var("j") + (var("i") + var(t) * 4) * 8))));
    };
    Stmt s = lower::form_vector_ops(
        lower::recognize_tile_copies(Block::make(tile("t.on_core"), tile("t.tail.on_core")), ctx),
        ctx);
    Stmt after = lower::multi_buffer(s, ctx);
    EXPECT_EQ(ctx.slots.count("C_stage"), 0u) << "one version";
    EXPECT_EQ(occurrences(after, "tandem_wait(\"C_stage.empty\""), 2) << after;
    const Block *b = after.as<Block>();
    ASSERT_TRUE(b) << after;
    EXPECT_EQ(occurrences(b->first, "tandem_wait("), 0)
        << "the first tile has no store to wait for\n"
        << after;
}

// ---- MemoryPlanning ----
TEST(MemoryPlanning, OperandsGoToTheirScopesAndOverflowIsAnError) {
    CompileContext ctx = context();
    ir::MmaOp m{"acc", "A_tile", "B_tile", 0, 1, 8, 0, 1, 8, 0, 1, 8, 8, 8, 8};
    auto allocate = [](const std::string &n, Halide::Type t, int size, const Stmt &body) {
        return Allocate::make(n, t, Halide::MemoryType::Auto, {size}, const_true(), body);
    };
    Stmt s = allocate("acc", f32, 64,
                      allocate("A_tile", bf16, 64, allocate("B_tile", bf16, 64, ir::make_mma(m))));
    std::vector<SramBuffer> buffers;
    Stmt after = lower::plan_memory(s, ctx, &buffers, lower::plan_zpu_memory);
    ir::MmaOp same;
    EXPECT_TRUE(ir::as_mma(after, &same)) << "allocations are hoisted out";
    ASSERT_EQ(buffers.size(), 3u);
    EXPECT_EQ(buffers[0].space, sim::Space::RSRAM);
    EXPECT_EQ(buffers[1].space, sim::Space::ASRAM);
    EXPECT_EQ(buffers[2].space, sim::Space::WSRAM);
    Stmt big = allocate("acc", f32, 1 << 20, ir::make_mma(m));
    EXPECT_THROW(lower::plan_memory(big, ctx, &buffers, lower::plan_zpu_memory), Error);
}

// ---- SoftwarePipeline ----

/** Runs loops, lets, ifs, copies and waits of a pipelined Stmt and records what happens, checking
 * the protocol: a version is never overwritten before its data was used, every use is after the
 * wait on its own copy, and no copy stays unwaited. */
class Protocol : public IRVisitor {
public:
    std::map<std::string, int64_t> env;
    std::map<int64_t, int64_t>
        version_holds; // version -> iteration whose data it holds (or is loading)
    std::map<int64_t, bool> landed;
    std::vector<int64_t> used;
    int outstanding = 0, most_outstanding = 0;
    std::string error;

private:
    using IRVisitor::visit;
    int64_t eval(const Expr &e) {
        Expr s = e;
        for (const auto &[n, v] : env)
            s = substitute(n, Expr(int(v)), s);
        return constant(s);
    }
    void visit(const For *op) override {
        int64_t min = eval(op->min), extent = eval(op->extent);
        for (int64_t i = min; i < min + extent; i++) {
            env[op->name] = i;
            op->body.accept(this);
        }
        env.erase(op->name);
    }
    void visit(const LetStmt *op) override {
        env[op->name] = eval(op->value);
        op->body.accept(this);
        env.erase(op->name);
    }
    void visit(const IfThenElse *op) override {
        if (eval(op->condition))
            op->then_case.accept(this);
    }
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        ir::WaitOp w;
        if (ir::as_copy(op, &c)) {
            int64_t slot = eval(c.slot), iteration = eval(c.src_offset);
            if (version_holds.count(slot) && version_holds[slot] >= 0 && !landed[slot])
                error = "version reused while in flight";
            if (version_holds.count(slot) && version_holds[slot] >= 0 &&
                std::find(used.begin(), used.end(), version_holds[slot]) == used.end()) {
                error = "version " + std::to_string(slot) + " overwritten before iteration " +
                        std::to_string(version_holds[slot]) + " used it";
            }
            version_holds[slot] = iteration;
            landed[slot] = false;
            most_outstanding = std::max(most_outstanding, ++outstanding);
        } else if (ir::as_wait(op, &w)) {
            int64_t slot = eval(w.slot);
            if (!landed[slot])
                outstanding--;
            landed[slot] = true;
        }
    }
    void visit(const Store *op) override {
        int64_t slot = eval(op->value.as<Load>()->index) / 1000, iteration = eval(op->index);
        if (!landed[slot] || version_holds[slot] != iteration) {
            error = "iteration " + std::to_string(iteration) + " used version " +
                    std::to_string(slot) + " holding iteration " +
                    std::to_string(version_holds[slot]);
        }
        used.push_back(iteration);
    }
};

/** for (ko, 0, trips) { produce F { copy iteration ko } ; out[ko] = F[version * 1000] } */
Stmt pipelined(int trips, int versions, CompileContext &ctx, const std::string &ko = "ko") {
    ctx.directives["F"].async_copy = true;
    ctx.directives["F"].multi_buffer = versions;
    ctx.slots["F"] = versions;
    Expr stage = var("F.stage");
    ir::CopyOp c{"F", "A", stage * 1000, var(ko), {{1, 1, 1}}, "F.full", stage};
    Stmt produce = ProducerConsumer::make_produce(
        "F", Block::make(ir::make_copy(c), ir::make_wait({"F.full", stage})));
    Stmt use = store("out", load(f32, "F", stage * 1000), var(ko));
    return lower::software_pipeline(loop(ko, trips, Block::make(produce, use)), ctx);
}

/** Halide's partition of `for (ko, 0, ceil(K / 32)) for (ki, 0, min(K - 32 ko, 32)) out[32 ko + ki]
 * = v` with a runtime K: the main loop (ki runs 32; its store writes `main_value`) and the rebased
 * tail. */
Stmt partitioned(const Expr &main_value) {
    const Expr K = var("K.extent.0"), main_count = max(K / 32, 0),
               first = main_count + var("ko.rebased");
    Stmt main = loop("ko", main_count,
                     loop("ki", 32, store("out", main_value, var("ko") * 32 + var("ki"))));
    Stmt tail =
        loop("ko.rebased", max((K + 31) / 32 - main_count, 0),
             loop("ki", min(K - first * 32, 32), store("out", Expr(1.0f), first * 32 + var("ki"))));
    return Block::make(main, tail);
}

TEST(RejoinTails, AMainLoopAndItsTailBecomeOneLoop) {
    Stmt s = lower::rejoin_tails(partitioned(1.0f), {"K.extent.0"});
    const For *ko = s.as<For>();
    ASSERT_TRUE(ko) << s;
    EXPECT_EQ(ko->name, "ko");
    const Expr K = var("K.extent.0");
    EXPECT_TRUE(can_prove(ko->extent == (K + 31) / 32)) << ko->extent;
    const For *ki = ko->body.as<For>();
    ASSERT_TRUE(ki) << s;
    EXPECT_TRUE(can_prove(ki->extent == min(K - var("ko") * 32, 32)))
        << "the tail's general body: " << ki->extent;
    // The joined loop runs as many iterations as the pair, at every K.
    const Stmt pair = partitioned(1.0f);
    const For *main = pair.as<Block>()->first.as<For>(), *tail = pair.as<Block>()->rest.as<For>();
    for (int k : {1, 31, 32, 33, 64, 95}) {
        EXPECT_EQ(constant(substitute("K.extent.0", k, ko->extent)),
                  constant(substitute("K.extent.0", k, main->extent + tail->extent)));
    }
}

TEST(RejoinTails, ABodyThatIsNotTheTailsStaysSplit) {
    // The main loop stores 2, the tail 1: nothing proves the main body general, so the pair stays.
    Stmt s = lower::rejoin_tails(partitioned(2.0f), {"K.extent.0"});
    const Block *b = s.as<Block>();
    ASSERT_TRUE(b) << s;
    EXPECT_EQ(b->first.as<For>()->name, "ko");
    EXPECT_EQ(b->rest.as<For>()->name, "ko.rebased");
    // With static shapes nothing is joined.
    EXPECT_TRUE(lower::rejoin_tails(partitioned(1.0f), {}).as<Block>());
}

// ---- RowStatistics ----
/** An online softmax's state as Halide lowers it (4 columns n, 3 rows s): the output st.0 reads
 * the running max st.1, then the max takes the row's block max m[s]; then o reads both. `late`:
 * the output reads the max after it is stored. */
Stmt running_state(bool late) {
    const Expr at = var("s") * 4 + var("n");
    const Stmt output = store("st.0", load(f32, "st.0", at) + load(f32, "st.1", at), at);
    const Stmt max = store("st.1", Max::make(load(f32, "st.1", at), load(f32, "m", var("s"))), at);
    const Stmt update =
        loop("s", 3, loop("n", 4, late ? Block::make(max, output) : Block::make(output, max)));
    const Stmt read =
        loop("s", 3, loop("n", 4, store("o", load(f32, "st.0", at) / load(f32, "st.1", at), at)));
    Stmt s = Block::make(update, read);
    for (const std::string name : {"st.0", "st.1"})
        s = Allocate::make(name, f32, Halide::MemoryType::Auto, {4, 3}, const_true(), s);
    return s;
}

CompileContext with_running_state() {
    CompileContext ctx = context();
    Halide::Func st("st");
    Halide::Var x, y;
    st(x, y) = {0.0f, 0.0f};
    ctx.functions.emplace("st", st.function());
    ctx.directives["st"].row_statistics = 1;
    return ctx;
}

TEST(RowStatistics, TheRunningMaxIsHeldOncePerRowAndStoredAfterItsColumns) {
    CompileContext ctx = with_running_state();
    const Stmt s = lower::row_statistics(running_state(false), ctx);
    EXPECT_TRUE(ctx.notes.empty());
    EXPECT_EQ(occurrences(s, "allocate st.1[float32 * 1 * 3]"), 1) << s;
    EXPECT_EQ(occurrences(s, "allocate st.0[float32 * 4 * 3]"), 1) << s;
    // The output's loops, then the max's own loop over the rows, once per row.
    EXPECT_EQ(occurrences(s, "st.0[(s*4) + n] = st.0[(s*4) + n] + st.1[s]"), 1) << s;
    EXPECT_EQ(occurrences(s, "st.1[s] = max(st.1[s], (float32)m[s])"), 1) << s;
    EXPECT_EQ(occurrences(s, "o[(s*4) + n] = st.0[(s*4) + n]/st.1[s]"), 1) << s;
    const Block *update = s.as<Allocate>()->body.as<Allocate>()->body.as<Block>();
    ASSERT_TRUE(update) << s;
    const Block *after = update->rest.as<Block>();
    ASSERT_TRUE(after) << s;
    const For *columns = update->first.as<For>(), *rows = after->first.as<For>();
    ASSERT_TRUE(columns && rows) << s;
    EXPECT_TRUE(columns->body.as<For>()) << "the output keeps its column loop: " << s;
    EXPECT_TRUE(rows->body.as<Store>()) << "the max has none: " << s;
}

TEST(RowStatistics, ARescaleFactorIsComputedOncePerRow) {
    // The output rescaled by exp(st.1[s] - m[s]) (as FlashAttention's by exp(m - m')): the
    // factor once per row, before the max is stored, in the rows' own loop.
    const Expr at = var("s") * 4 + var("n");
    const Expr factor = Halide::exp(load(f32, "st.1", at) - load(f32, "m", var("s")));
    const Stmt output = store("st.0", load(f32, "st.0", at) * factor, at);
    const Stmt max = store("st.1", Max::make(load(f32, "st.1", at), load(f32, "m", var("s"))), at);
    Stmt s = loop("s", 3, loop("n", 4, Block::make(output, max)));
    for (const std::string name : {"st.0", "st.1"})
        s = Allocate::make(name, f32, Halide::MemoryType::Auto, {4, 3}, const_true(), s);
    CompileContext ctx = with_running_state();
    s = lower::row_statistics(s, ctx);
    EXPECT_TRUE(ctx.notes.empty());
    EXPECT_EQ(occurrences(s, "allocate st_factor0[float32 * 1 * 3]"), 1) << s;
    EXPECT_EQ(occurrences(s, "exp_f32"), 1) << s;
    EXPECT_EQ(occurrences(s, "st_factor0[s] = (float32)exp_f32(st.1[s] - (float32)m[s])"), 1) << s;
    EXPECT_EQ(occurrences(s, "st.0[(s*4) + n] = st.0[(s*4) + n]*st_factor0[s]"), 1) << s;
    // The factor and the max in one loop over the rows (the output no longer reads the max),
    // then the output's.
    const Stmt body = s.as<Allocate>()->body.as<Allocate>()->body.as<Allocate>()->body;
    const Block *parts = body.as<Block>();
    ASSERT_TRUE(parts) << s;
    const For *rows = parts->first.as<For>(), *columns = parts->rest.as<For>();
    ASSERT_TRUE(rows && columns) << s;
    EXPECT_EQ(occurrences(rows->body, "st.1[s] = max"), 1) << s;
    EXPECT_TRUE(columns->body.as<For>()) << s;
}

/** Expects `pass` to leave `before` as it is, with one note holding `why`. */
void expect_kept(Stmt (*pass)(const Stmt &, CompileContext &), const Stmt &before,
                 CompileContext &ctx, const std::string &why) {
    const Stmt s = pass(before, ctx);
    EXPECT_TRUE(s.same_as(before)) << s;
    ASSERT_EQ(ctx.notes.size(), 1u);
    EXPECT_NE(ctx.notes[0].find(why), std::string::npos) << ctx.notes[0];
}

TEST(RowStatistics, AReadAfterTheStoreKeepsThemPerElement) {
    CompileContext ctx = with_running_state();
    expect_kept(lower::row_statistics, running_state(true), ctx, "stay per element");
}

/** One key block of online attention as lower/RowStatistics leaves it (rows s < 3, keys j < 4,
 * head dim n < 8): P from the scores S, the block's P V matmul into B, the row sum of the same
 * exponentials, the rescale factors once per row, then the output O = st.0 rescaled. `extra`
 * reads B once more (which keeps the rewrite off). With `block_max`, the block's max bmax is made
 * first (from -inf), the factors are exp(min(m - bmax, 0)) and exp(min(bmax - m, 0)) as Halide
 * simplifies them, the running max st.1 is allocated around the loop, and `extra` reads the
 * running max after its update instead. */
Stmt online_block(bool extra, bool block_max = false) {
    const Expr s = var("s"), j = var("j"), n = var("n");
    const Expr e = Halide::exp(load(f32, "S", s * 4 + j));
    const Stmt p = ProducerConsumer::make_produce(
        "P", loop("s", 3, loop("j", 4, store("P", Cast::make(bf16, e), s * 4 + j))));
    const Stmt v =
        loop("j", 4, loop("n", 8, store("V_tile", load(bf16, "V", j * 8 + n), j * 8 + n)));
    const Expr product = Cast::make(f32, load(bf16, "P", s * 4 + j)) *
                         Cast::make(f32, load(bf16, "V_tile", j * 8 + n));
    const Stmt b = ProducerConsumer::make_produce(
        "B",
        Block::make(
            loop("s", 3, loop("n", 8, store("B", 0.0f, s * 8 + n))),
            loop("j", 4,
                 loop("s", 3,
                      loop("n", 8, store("B", load(f32, "B", s * 8 + n) + product, s * 8 + n))))));
    const Stmt sum =
        Block::make(loop("s", 3, store("bsum", 0.0f, s)),
                    loop("s", 3, loop("j", 4, store("bsum", e + load(f32, "bsum", s), s))));
    const Expr f0 = load(f32, "f0", s), f1 = load(f32, "f1", s);
    const Expr m_minus_b = load(f32, "st.1", s) - load(f32, "bmax", s),
               b_minus_m = load(f32, "bmax", s) - load(f32, "st.1", s);
    const Stmt rows =
        loop("s", 3,
             lower::block(
                 {store("f0", Halide::exp(block_max ? Min::make(m_minus_b, 0.0f) : m_minus_b), s),
                  store("f1", Halide::exp(block_max ? Min::make(b_minus_m, 0.0f) : b_minus_m), s),
                  store("st.2", f0 * load(f32, "st.2", s) + f1 * load(f32, "bsum", s), s),
                  store("st.1", Max::make(load(f32, "st.1", s), load(f32, "bmax", s)), s)}));
    const Expr at = s * 8 + n;
    const Stmt output =
        loop("s", 3,
             loop("n", 8, store("st.0", f0 * load(f32, "st.0", at) + f1 * load(f32, "B", at), at)));
    std::vector<Stmt> body = {p, v, b, sum, rows, output};
    if (extra)
        body.push_back(loop("s", 3, store("o", load(f32, block_max ? "st.1" : "B", s * 8), s)));
    Stmt st = lower::block(body);
    for (const std::string name : {"P", "V_tile", "B", "bsum", "f0", "f1"})
        st = Allocate::make(name, name == "P" || name == "V_tile" ? bf16 : f32,
                            Halide::MemoryType::Auto, {32}, const_true(), st);
    if (!block_max)
        return loop("c", 5, st);
    const Stmt made = ProducerConsumer::make_produce(
        "bmax",
        Block::make(
            loop("s", 3, store("bmax", f32.min(), s)),
            loop("s", 3,
                 loop("j", 4,
                      store("bmax", Max::make(load(f32, "bmax", s), load(f32, "S", s * 4 + j)),
                            s)))));
    st = Allocate::make("bmax", f32, Halide::MemoryType::Auto, {3}, const_true(),
                        Block::make(made, st));
    return Allocate::make("st.1", f32, Halide::MemoryType::Auto, {3}, const_true(),
                          loop("c", 5, st));
}

CompileContext with_online_state() {
    CompileContext ctx = context();
    ctx.inputs = {"V"};
    Halide::Func st("st");
    Halide::Var x, y;
    st(x, y) = {0.0f, 0.0f, 0.0f};
    ctx.functions.emplace("st", st.function());
    ctx.directives["st"].row_statistics = 1;
    ctx.directives["B"].tile_mma = true;
    return ctx;
}

TEST(AccumulateInPlace, TheBlockMatmulAccumulatesIntoTheRescaledOutput) {
    CompileContext ctx = with_online_state();
    const Stmt s = lower::accumulate_in_place(online_block(false), ctx);
    EXPECT_TRUE(ctx.notes.empty()) << ctx.notes[0];
    // No block accumulator: the matmul adds into O, which f0 rescaled first; f1 went into P.
    EXPECT_EQ(occurrences(s, "B["), 0) << s;
    EXPECT_EQ(occurrences(s, "st.0[(s*8) + n] = f0[s]*(float32)st.0[(s*8) + n]"), 1) << s;
    EXPECT_EQ(occurrences(s, "st.0[(s*8) + n] = (float32)st.0[(s*8) + n] + (float32("), 1) << s;
    EXPECT_EQ(occurrences(s, "P[(s*4) + j] = bfloat16((P.shared*f1[s]))"), 1) << s;
    // One exponential per score: P and the row sum in one loop, sharing it.
    EXPECT_EQ(occurrences(s, "exp_f32((float32)S["), 1) << s;
    EXPECT_EQ(occurrences(s, "bsum[s] = P.shared + "), 1) << s;
    // The factors before P, the running sum after the row sum.
    std::ostringstream printed;
    printed << s;
    const std::string text = printed.str();
    EXPECT_LT(text.find("f1[s] ="), text.find("P[(s*4) + j] ="));
    EXPECT_LT(text.find("P[(s*4) + j] ="), text.find("st.2[s] ="));
    EXPECT_TRUE(ctx.of("st.0").tile_mma);
    EXPECT_FALSE(ctx.of("B").tile_mma);
}

TEST(AccumulateInPlace, AnotherReadOfTheBlockSumsKeepsTheStmt) {
    CompileContext ctx = with_online_state();
    expect_kept(lower::accumulate_in_place, online_block(true), ctx,
                "is read besides the update and the matmul");
    EXPECT_TRUE(ctx.of("B").tile_mma);
}

TEST(AccumulateInPlace, WithAProducerWarpgroupTheExponentialsStayInTheScores) {
    CompileContext ctx = with_online_state();
    ctx.output = "st";
    ctx.directives["st"].warp_specialize = true;
    ctx.directives["S"].tile_mma = true;
    const Stmt s = lower::accumulate_in_place(online_block(false), ctx);
    EXPECT_TRUE(ctx.notes.empty()) << ctx.notes[0];
    // The exponential stored into S in place beside the row sum, P rounded from S afterwards
    // in a loop of its own (only that loop must wait for the previous block's P V).
    EXPECT_EQ(occurrences(s, "exp_f32((float32)S["), 1) << s;
    EXPECT_EQ(occurrences(s, "S[(s*4) + j] = P.shared"), 1) << s;
    EXPECT_EQ(occurrences(s, "P[(s*4) + j] = bfloat16(((float32)S[(s*4) + j]*f1[s]))"), 1) << s;
    std::ostringstream printed;
    printed << s;
    const std::string text = printed.str();
    EXPECT_LT(text.find("bsum[s] = P.shared"), text.find("P[(s*4) + j] ="));
}

CompileContext with_running_max() {
    CompileContext ctx = with_online_state();
    ctx.directives["bmax"].running_max = "st.1";
    ctx.directives["bmax"].running_max_loop = "c";
    return ctx;
}

TEST(RunningMax, TheBlockMaxStartsFromTheRunningMaxAndTheBlocksFactorGoes) {
    CompileContext ctx = with_running_max();
    const Stmt s = lower::carry_running_max(online_block(false, true), ctx);
    ASSERT_EQ(ctx.notes.size(), 1u);
    EXPECT_NE(ctx.notes[0].find("against the running max"), std::string::npos) << ctx.notes[0];
    EXPECT_EQ(occurrences(s, "bmax[s] = st.1[s]"), 1) << s;
    // b >= m: exp(min(b - m, 0)) = 1, the factor f1 replaced by it; min(m - b, 0) = m - b.
    EXPECT_EQ(occurrences(s, "f1"), 0) << s;
    EXPECT_EQ(occurrences(s, "min("), 0) << s;
    EXPECT_EQ(occurrences(s, "st.2[s] = bsum[s] + (f0[s]*(float32)st.2[s])"), 1) << s;
    // The running max and f0 right after the block max, before P.
    std::ostringstream printed;
    printed << s;
    const std::string text = printed.str();
    EXPECT_LT(text.find("bmax[s] = max("), text.find("f0[s] = "));
    EXPECT_LT(text.find("f0[s] = "), text.find("st.1[s] = bmax[s]"));
    EXPECT_LT(text.find("st.1[s] = bmax[s]"), text.find("P[(s*4) + j] ="));
    // The output then takes the block's P V as it is, accumulated in place.
    CompileContext next = with_running_max();
    const Stmt in_place = lower::accumulate_in_place(s, next);
    EXPECT_TRUE(next.notes.empty()) << next.notes[0];
    EXPECT_EQ(occurrences(in_place, "B["), 0) << in_place;
    EXPECT_EQ(occurrences(in_place, "st.0[(s*8) + n] = f0[s]*(float32)st.0[(s*8) + n]"), 1)
        << in_place;
}

TEST(RunningMax, AReadOfTheRunningMaxAfterItsUpdateKeepsTheStmt) {
    CompileContext ctx = with_running_max();
    expect_kept(lower::carry_running_max, online_block(true, true), ctx, "read after it is stored");
}

/** A consumer's loop over key blocks after lower/hopper/MmaInFlight: the scores S = Q K (its
 * ring of K), their max (touches neither O, P nor V), P from them, O += P V (its ring of V),
 * then the running max. `post_reads_o` makes the last statement read O. */
Stmt consumer_blocks(bool post_reads_o) {
    const Expr i = var("i"), c = var("c");
    const Expr k_slot = var("k.ring") % 2, v_slot = var("v.slot");
    ir::MmaOp qk{"S", "Q", "K", 0, 1, 8, 0, 1, 8, k_slot * 64, 1, 8, 8, 8, 8};
    ir::MmaOp pv{"O", "P", "V", 0, 1, 8, 0, 1, 8, v_slot * 64, 1, 8, 8, 8, 8};
    const Stmt x =
        lower::block({ir::make_wait({"V.full", v_slot, var("v.ring") / 2 % 2}),
                      ir::make_fence_proxy_async(), ir::make_mma(pv), ir::make_mma_wait("O", 0),
                      ir::make_arrive({"V.empty", v_slot}), ir::make_advance("v.ring"),
                      post_reads_o ? store("m", load(f32, "O", 0), 0) : store("m", c, 0)});
    return loop(
        "c", 4,
        lower::block({loop("i", 64, store("S", 0.0f, i)),
                      ir::make_wait({"K.full", k_slot, var("k.ring") / 2 % 2}), ir::make_mma(qk),
                      ir::make_mma_wait("S", 0), ir::make_arrive({"K.empty", k_slot}),
                      ir::make_advance("k.ring"), store("bmax", load(f32, "S", 0), 0),
                      loop("i", 64, store("P", Cast::make(bf16, load(f32, "S", i)), i)),
                      LetStmt::make("v.slot", var("v.ring") % 2, x)}));
}

TEST(IntraWarpgroupOverlap, TheSecondMmaRunsUnderTheNextIterationsVectorWork) {
    CompileContext ctx = context();
    const Stmt s = lower::overlap_within_warpgroup(consumer_blocks(false), ctx);
    ASSERT_EQ(ctx.notes.size(), 1u);
    EXPECT_NE(ctx.notes[0].find("one iteration late"), std::string::npos) << ctx.notes[0];
    // Iteration 0 without P V, iterations 1..3, then the last P V.
    const std::vector<Stmt> parts = lower::flatten(s);
    const auto loop_at = std::find_if(parts.begin(), parts.end(), [](const Stmt &p) {
        return p.as<For>() && p.as<For>()->name == "c";
    });
    ASSERT_NE(loop_at, parts.end()) << s;
    const For *steady = loop_at->as<For>();
    const Stmt before = lower::block(std::vector<Stmt>(parts.begin(), loop_at)),
               after = lower::block(std::vector<Stmt>(loop_at + 1, parts.end()));
    EXPECT_EQ(occurrences(before, "tandem_mma(\"O\""), 0) << s;
    EXPECT_EQ(occurrences(before, "m[0] = 0"), 1) << s;
    EXPECT_TRUE(is_const(steady->min, 1) && is_const(steady->extent, 3)) << s;
    EXPECT_EQ(occurrences(after, "tandem_mma(\"O\""), 1) << s;
    // In the loop: S's MMA, then P V's, a wait for S's alone, the max, the wait for P V and V's
    // release, then P (which P V read) and the running max.
    std::ostringstream printed;
    printed << Stmt(steady);
    const std::string text = printed.str();
    const std::vector<std::string> order = {"tandem_mma(\"S\"",
                                            "tandem_mma(\"O\"",
                                            "tandem_mma_wait(\"S\", 1)",
                                            "bmax[0] =",
                                            "tandem_mma_wait(\"O\", 0)",
                                            "tandem_arrive(\"V.empty\"",
                                            "P[i] =",
                                            "m[0] ="};
    for (size_t k = 0; k + 1 < order.size(); k++) {
        ASSERT_NE(text.find(order[k]), std::string::npos) << order[k] << "\n" << text;
        EXPECT_LT(text.find(order[k]), text.find(order[k + 1])) << order[k] << "\n" << text;
    }
    // P V of iteration c - 1 uses that iteration's V version.
    EXPECT_EQ(occurrences(Stmt(steady), "let v.slot = v.ring % 2"), 2) << text;
}

TEST(IntraWarpgroupOverlap, AStatementAfterTheSecondMmaReadingItsAccumulatorKeepsTheLoop) {
    CompileContext ctx = context();
    expect_kept(lower::overlap_within_warpgroup, consumer_blocks(true), ctx,
                "after the second touches O");
}

/** The online softmax's key blocks c of tile t (4 rows s, blocks of 4 keys j): the block max
 * over a causal mask (key c * 4 + j after row t * 4 + s: -inf), `masked` false: over keys that
 * no mask hides. */
Stmt causal_blocks(bool masked) {
    const Expr s = var("s"), j = var("j"), c = var("c"), t = var("t");
    const Expr x = load(f32, "S", s * 4 + j);
    const Expr value = masked ? Select::make(t * 4 + s < c * 4 + j, f32.min(), x) : x;
    return loop(
        "c", 8,
        lower::block(
            {loop("s", 4, store("bmax", f32.min(), s)),
             loop("s", 4, loop("j", 4, store("bmax", Max::make(load(f32, "bmax", s), value), s))),
             loop("s", 4, store("st", load(f32, "bmax", s), s))}));
}

TEST(SkipMaskedBlocks, TheBlockLoopEndsAtTheTilesLastDiagonal) {
    CompileContext ctx = context();
    ctx.directives["bmax"].masked_block_max = "c";
    const Stmt s = lower::skip_masked_blocks(causal_blocks(true), ctx);
    const For *blocks = s.as<For>();
    ASSERT_TRUE(blocks) << s;
    // Block c sees a key of row t * 4 + 3 while c * 4 <= t * 4 + 3: blocks 0..t.
    for (int t = 0; t < 10; t++) {
        const Expr extent = simplify(substitute("t", t, blocks->extent));
        EXPECT_TRUE(is_const(extent, std::min(t + 1, 8))) << t << ": " << extent;
    }
    ASSERT_EQ(ctx.notes.size(), 1u);
    EXPECT_NE(ctx.notes[0].find("ends where the mask hides"), std::string::npos) << ctx.notes[0];
}

TEST(SkipMaskedBlocks, WithoutAMaskEveryBlockRuns) {
    CompileContext ctx = context();
    ctx.directives["bmax"].masked_block_max = "c";
    const Stmt before = causal_blocks(false);
    const Stmt s = lower::skip_masked_blocks(before, ctx);
    ASSERT_TRUE(s.as<For>()) << s;
    EXPECT_TRUE(is_const(s.as<For>()->extent, 8)) << s;
    ASSERT_EQ(ctx.notes.size(), 1u);
    EXPECT_NE(ctx.notes[0].find("no bound found"), std::string::npos) << ctx.notes[0];
}

TEST(SoftwarePipeline, CorrectForAnyTripCountAndVersionCount) {
    for (int versions : {1, 2, 3, 4}) {
        for (int trips : {1, 2, 3, 5, 7, 8}) {
            CompileContext ctx = context();
            Stmt s = pipelined(trips, versions, ctx);
            Protocol p;
            s.accept(&p);
            SCOPED_TRACE("versions " + std::to_string(versions) + ", trips " +
                         std::to_string(trips));
            EXPECT_EQ(p.error, "") << s;
            EXPECT_EQ(p.used.size(), size_t(trips));
            EXPECT_EQ(p.outstanding, 0) << "every copy is waited";
            EXPECT_EQ(p.most_outstanding, std::min(versions, trips))
                << "runs ahead by versions - 1";
        }
    }
}

TEST(SoftwarePipeline, PrologueIsCappedByTheTripCount) {
    CompileContext ctx = context();
    Stmt s = pipelined(1, 4, ctx);
    const Block *b = s.as<Block>();
    ASSERT_TRUE(b) << s;
    const For *prologue = b->first.as<For>();
    ASSERT_TRUE(prologue);
    EXPECT_EQ(prologue->name, "ko.prologue");
    EXPECT_EQ(constant(prologue->extent), 1);
}

TEST(SoftwarePipeline, ATileLoopRunOncePerUnitHasNoRunAheadCopies) {
    // Hopper's CTA per tile: the prologue copies the one tile before its waits; nothing to run
    // ahead to, so no copy into a next tile's version that no CTA would ever wait for.
    CompileContext ctx = context();
    ctx.target = Target::parse("hopper");
    ctx.one_tile_per_unit = true;
    Stmt s = pipelined(1, 2, ctx, "t.on_core");
    Protocol p;
    s.accept(&p);
    EXPECT_EQ(p.error, "") << s;
    EXPECT_EQ(p.used.size(), 1u);
    EXPECT_EQ(p.outstanding, 0);
    EXPECT_EQ(occurrences(s, "tandem_copy("), 1) << s;
}

// ---- WarpSpecialize (Hopper) ----
// ---- EngineSync ----

/** for t { for ko { mma(acc version t % versions) }; epilogue acc -> C_stage; store C_stage } */
Stmt tile_loop_with_epilogue(int acc_versions) {
    Expr version = acc_versions > 1 ? var("t") % acc_versions * 64 : Expr(0);
    ir::MmaOp m{"acc", "A_tile", "B_tile", version, 1, 8, 0, 1, 8, 0, 1, 8, 8, 8, 8};
    ir::VectorOp epilogue{"C_stage", 64, {{"C_stage", 0, 64, true}, {"acc", version, 64, false}}};
    ir::CopyOp c{"C", "C_stage", var("t") * 64, 0, {{64, 1, 1}}, "C_stage.empty", 0};
    Stmt body = Block::make({loop("ko", 4, ir::make_mma(m)),
                             ir::make_vector_op(epilogue, Evaluate::make(0)), ir::make_copy(c)});
    return loop("t", 5, body);
}

std::vector<SramBuffer> epilogue_buffers(int acc_versions) {
    std::vector<SramBuffer> b(4);
    b[0].name = "acc", b[0].slots = acc_versions, b[0].slot_elements = 64;
    b[1].name = "A_tile", b[1].slot_elements = 64, b[1].space = sim::Space::ASRAM;
    b[2].name = "B_tile", b[2].slot_elements = 64, b[2].space = sim::Space::WSRAM;
    b[3].name = "C_stage", b[3].slot_elements = 64;
    return b;
}

TEST(EngineSync, TheEpilogueOfATileRunsUnderTheNextTilesMmas) {
    CompileContext ctx = context();
    ctx.directives["C"].async_copy = true;
    Stmt after = lower::sync_engines(tile_loop_with_epilogue(2), ctx, epilogue_buffers(2));
    std::string text = ir::to_string(after);
    // The epilogue waits for the tile's MMAs; the store waits for the epilogue and is issued one
    // tile later, after that tile's MMAs; the MMAs never wait for the vector core (the other
    // accumulator version); the kernel drains nothing more (the last store synced the vector core).
    EXPECT_EQ(occurrences(after, "tandem_sync(\"tensor\")"), 1) << text;
    EXPECT_EQ(occurrences(after, "tandem_sync(\"vector\")"), 2) << text;
    EXPECT_NE(text.find("if (t > 0)"), std::string::npos) << text;
    EXPECT_NE(text.find("C_stage\", 0, 1, 64, 1, 1, \"C_stage.empty\""), std::string::npos) << text;
    EXPECT_LT(text.find("tandem_mma"), text.find("tandem_sync(\"vector\")")) << text;
}

TEST(EngineSync, OneAccumulatorVersionMakesTheMmasWaitForTheEpilogue) {
    CompileContext ctx = context();
    ctx.directives["C"].async_copy = true;
    Stmt after = lower::sync_engines(tile_loop_with_epilogue(1), ctx, epilogue_buffers(1));
    std::string text = ir::to_string(after);
    // The next tile's MMAs overwrite what the epilogue reads: a vector sync before them, which
    // also orders the deferred store after the epilogue (no sync of its own).
    size_t mma = text.find("tandem_mma");
    size_t sync = text.rfind("tandem_sync(\"vector\")", mma);
    EXPECT_NE(sync, std::string::npos) << text;
    EXPECT_EQ(occurrences(after, "tandem_sync(\"vector\")"), 2) << text;
}

// ---- MeshBroadcast ----
/** A copy of `extent` elements of `src` into version `slot` of `dst`, completing on dst's full
 * barrier (or into the output C from C_stage, on its empty barrier). */
Stmt copy(const std::string &dst, const std::string &src, const Expr &src_offset,
          const Expr &slot) {
    ir::CopyOp c;
    c.dst = dst, c.src = src;
    c.dst_offset = dst == "C" ? src_offset : slot * 64;
    c.src_offset = dst == "C" ? slot * 64 : src_offset;
    c.dims = {{64, 1, 1}};
    c.barrier = dst == "C" ? ir::empty_barrier(src) : ir::full_barrier(dst);
    c.slot = slot;
    return ir::make_copy(c);
}

/** The tile loop of clusters of 2 cores over 40 tiles, tile-major over 4 tile rows (tile t: row
 * t % 4, column t / 4): each k step copies A's panel of the tile row and B's of the tile column,
 * then the tile is stored; the core past the tile count runs its rank 0's tile. */
Stmt clustered_tile_loop(CompileContext &ctx) {
    ctx.cluster = 2;
    ctx.args.resize(3);
    ctx.args[0].name = "A", ctx.args[1].name = "B", ctx.args[2].name = "C";
    ctx.args[2].output = true;
    const std::string on_core = lower::core_loop_name("C.s0.t");
    Expr core = ir::core_id(), first = core - core % 2, k = var(on_core);
    Expr tile = ir::cluster_tile(core + k * 16 < 40, core + k * 16, first + k * 16);
    Expr step = var("ko"), slot = step % 2;
    Stmt steps = loop("ko", 4,
                      Block::make({copy("A_tile", "A", (tile % 4) * 256 + step * 64, slot),
                                   copy("B_tile", "B", (tile / 4) * 256 + step * 64, slot),
                                   ir::make_wait({ir::full_barrier("A_tile"), slot}),
                                   ir::make_wait({ir::full_barrier("B_tile"), slot})}));
    return loop(on_core, (40 - first + 15) / 16,
                Block::make(steps, copy("C", "C_stage", tile * 64, 0)));
}

std::vector<SramBuffer> clustered_buffers() {
    std::vector<SramBuffer> b(3);
    b[0].name = "A_tile", b[0].slots = 2, b[0].slot_elements = 64, b[0].space = sim::Space::RSRAM;
    b[1].name = "B_tile", b[1].slots = 2, b[1].slot_elements = 64, b[1].space = sim::Space::WSRAM;
    b[2].name = "C_stage", b[2].slot_elements = 64;
    return b;
}

TEST(MeshBroadcast, TheColumnsSharedPanelIsBroadcastBetweenTwoBarriers) {
    CompileContext ctx = context();
    Stmt before = clustered_tile_loop(ctx);
    Stmt after = lower::broadcast_in_mesh_columns(before, ctx, clustered_buffers());
    std::string text = ir::to_string(after);
    // B's panel (tile / 4) is the same for ranks 2w and 2w + 1, A's (tile % 4) is not; the
    // ranks send B's versions in turn (the copy of step ko is rank ko % 2's).
    EXPECT_NE(text.find("\"B_tile.full\", ko % 2, 2, ko % 2)"), std::string::npos) << text;
    EXPECT_EQ(text.find("\"A_tile.full\", ko % 2, 2"), std::string::npos) << text;
    // A mesh barrier before B's copy (the version is free on both cores), one after its wait.
    size_t free = text.find("tandem_mesh_barrier(\"B_tile.full free\")");
    size_t copy_b = text.find("tandem_copy(\"B_tile\"");
    size_t wait_b = text.find("tandem_wait(\"B_tile.full\"");
    size_t landed = text.find("tandem_mesh_barrier(\"B_tile.full landed\")");
    EXPECT_LT(free, copy_b) << text;
    EXPECT_LT(wait_b, landed) << text;
    EXPECT_NE(landed, std::string::npos) << text;
    EXPECT_EQ(occurrences(after, "tandem_mesh_barrier"), 2) << text;
    // Only a core that owns its tile stores it.
    EXPECT_NE(text.find("if ((tandem_core_id() + (C.s0.t.on_core*16)) < 40)"), std::string::npos)
        << text;
}

TEST(MeshBroadcast, AMemoryNoColumnLeafReachesKeepsEachCoresOwnCopy) {
    CompileContext ctx = context();
    Stmt before = clustered_tile_loop(ctx);
    // VLink goes from DRAM to WSRAM and RSRAM only (machines/zpu.json vlink_route).
    std::vector<SramBuffer> buffers = clustered_buffers();
    buffers[1].space = sim::Space::ASRAM;
    Stmt after = lower::broadcast_in_mesh_columns(before, ctx, buffers);
    EXPECT_EQ(occurrences(after, "tandem_mesh_barrier"), 0) << after;
    bool noted = false;
    for (const std::string &n : ctx.notes)
        noted = noted || n.find("nothing is broadcast") != std::string::npos;
    EXPECT_TRUE(noted);
}

TEST(WarpSpecialize, RolesShareARingOfBarriers) {
    CompileContext ctx = context();
    ctx.target = Target::parse("hopper");
    for (const char *f : {"A_tile", "B_tile"}) {
        ctx.directives[f].async_copy = true;
        ctx.directives[f].multi_buffer = 3;
    }
    ctx.directives["C"].warp_specialize = true;
    ctx.directives["C"].ping_pong = true;
    auto produce = [](const std::string &f, const std::string &src) {
        Expr stage = var(f + ".stage");
        ir::CopyOp c{f, src, stage * 64, var("ko") * 64, {{64, 1, 1}}, f + ".full", stage};
        return ProducerConsumer::make_produce(
            f, Block::make(ir::make_copy(c), ir::make_wait({f + ".full", stage})));
    };
    ir::MmaOp m{"acc",
                "A_tile",
                "B_tile",
                0,
                1,
                8,
                var("A_tile.stage") * 64,
                1,
                8,
                var("B_tile.stage") * 64,
                1,
                8,
                8,
                8,
                8};
    Stmt mainloop = loop("ko", 5,
                         Block::make({produce("A_tile", "A"), produce("B_tile", "B"),
                                      ProducerConsumer::make_consume("A_tile", ir::make_mma(m))}));
    Stmt body = loop("t.on_core", 3, mainloop);
    std::vector<SramBuffer> buffers(2);
    buffers[0].name = "A_tile", buffers[0].type = bf16, buffers[0].slots = 3,
    buffers[0].slot_elements = 64;
    buffers[1].name = "B_tile", buffers[1].type = bf16, buffers[1].slots = 3,
    buffers[1].slot_elements = 64;
    Stmt after = lower::specialize_warps(body, ctx, buffers);
    EXPECT_EQ(ctx.warpgroups, 3);
    std::string text = ir::to_string(after);
    // One expect for both tiles of a stage (2 x 64 bf16), the producer's empty wait pre-armed.
    EXPECT_NE(text.find("tandem_expect(\"A_tile.full\", A_tile.slot, 256)"), std::string::npos)
        << text;
    EXPECT_NE(text.find("tandem_wait(\"A_tile.empty\", A_tile.slot, 1 - ((A_tile.ring/3) % 2))"),
              std::string::npos);
    EXPECT_NE(text.find("tandem_setmaxnreg(40, 0)"), std::string::npos);
    EXPECT_NE(text.find("tandem_setmaxnreg(232, 1)"), std::string::npos);
    // Consumers take turns and hand the tensor cores over.
    EXPECT_NE(text.find("tandem_wait(\"tile.order\", 1"), std::string::npos) << text;
    EXPECT_NE(text.find("tandem_arrive(\"tile.order\", 0)"), std::string::npos);
    std::set<std::string> names;
    for (const BarrierDecl &b : ctx.barriers)
        names.insert(b.name + "/" + std::to_string(b.slots));
    EXPECT_EQ(names, (std::set<std::string>{"A_tile.full/3", "A_tile.empty/3", "tile.order/2"}));
}

TEST(WarpSpecialize, AConsumerSkippingATileRunsNoWait) {
    // Ping-pong: the store wait before a consumer rewrites its staging version stays in its own
    // tiles; in the tiles it skips it waits for nothing (its next own tile waits for its stores).
    CompileContext ctx = context();
    ctx.target = Target::parse("hopper");
    ctx.directives["A_tile"].async_copy = true;
    ctx.directives["A_tile"].multi_buffer = 2;
    ctx.directives["C"].async_copy = true;
    ctx.directives["C"].warp_specialize = true;
    ctx.directives["C"].ping_pong = true;
    ir::CopyOp load{"A_tile",     "A",           var("A_tile.stage") * 64, var("ko") * 64,
                    {{64, 1, 1}}, "A_tile.full", var("A_tile.stage")};
    Stmt produce = ProducerConsumer::make_produce(
        "A_tile",
        Block::make(ir::make_copy(load), ir::make_wait({"A_tile.full", var("A_tile.stage")})));
    ir::MmaOp m{"acc",
                "A_tile",
                "A_tile",
                0,
                1,
                8,
                var("A_tile.stage") * 64,
                1,
                8,
                var("A_tile.stage") * 64,
                1,
                8,
                8,
                8,
                8};
    Stmt mainloop = loop(
        "ko", 4, Block::make(produce, ProducerConsumer::make_consume("A_tile", ir::make_mma(m))));
    ir::CopyOp store_c{"C", "C_stage", var("t.on_core") * 64, 0, {{64, 1, 1}}, "C_stage.empty", 0};
    Stmt epilogue = Block::make(
        {ir::make_wait({"C_stage.empty", 0}), store("C_stage", 0.0f, 0), ir::make_copy(store_c)});
    std::vector<SramBuffer> buffers(2);
    buffers[0].name = "A_tile", buffers[0].type = bf16, buffers[0].slots = 2,
    buffers[0].slot_elements = 64;
    buffers[1].name = "C_stage", buffers[1].type = bf16, buffers[1].slot_elements = 64;
    Stmt after = lower::specialize_warps(loop("t.on_core", 4, Block::make(mainloop, epilogue)), ctx,
                                         buffers);
    EXPECT_EQ(occurrences(after, "tandem_wait(\"C_stage.empty\""), 2)
        << "one per consumer, in its own tiles\n"
        << after;
}

TEST(WarpSpecialize, DifferentVersionCountsInOneRingAreAnError) {
    CompileContext ctx = context();
    ctx.target = Target::parse("hopper");
    ctx.directives["A_tile"].async_copy = ctx.directives["B_tile"].async_copy = true;
    ctx.directives["A_tile"].multi_buffer = 2;
    ctx.directives["B_tile"].multi_buffer = 3;
    ctx.directives["C"].warp_specialize = true;
    auto produce = [](const std::string &f) {
        ir::CopyOp c{f, "A", 0, 0, {{4, 1, 1}}, f + ".full", 0};
        return ProducerConsumer::make_produce(
            f, Block::make(ir::make_copy(c), ir::make_wait({f + ".full", 0})));
    };
    std::vector<SramBuffer> buffers(2);
    buffers[0].name = "A_tile", buffers[0].type = bf16;
    buffers[1].name = "B_tile", buffers[1].type = bf16;
    Stmt body = loop("ko", 2, Block::make(produce("A_tile"), produce("B_tile")));
    EXPECT_THROW(lower::specialize_warps(body, ctx, buffers), Error);
}

} // namespace
