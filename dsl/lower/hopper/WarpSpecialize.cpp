#include "WarpSpecialize.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

class Bytes {
public:
    explicit Bytes(const std::vector<SramBuffer> &buffers) : buffers(buffers) {}
    Expr of(const ir::CopyOp &c) const {
        Expr n = 1;
        for (const ir::CopyDim &d : c.dims)
            n = n * d.extent;
        for (const SramBuffer &b : buffers) {
            if (b.name == c.dst)
                return simplify(n * b.type.bytes());
        }
        internal_error << "copy into unknown buffer " << c.dst << "\n";
        return Expr();
    }

private:
    const std::vector<SramBuffer> &buffers;
};

/** An expect before every TMA load into smem (with its own bytes), a proxy fence before every
 * store out of smem: the single-warpgroup kernel. */
class ExpectAndFence : public IRMutator {
public:
    ExpectAndFence(const Bytes &bytes, const std::string &output) : bytes(bytes), output(output) {}

private:
    using IRMutator::visit;
    const Bytes &bytes;
    const std::string &output;
    Stmt visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (!ir::as_copy(op, &c))
            return op;
        if (c.dst == output)
            return Block::make(ir::make_fence_proxy_async(), op);
        return Block::make(ir::make_expect({c.barrier, c.slot}, bytes.of(c)), op);
    }
};

/** A proxy fence before every MMA that reads an operand no copy loads (made on chip by the
 * element code, a matmul chain's second operand): wgmma reads shared memory through the async
 * proxy, after the threads' generic writes. */
class FenceOnChipOperands : public IRMutator {
public:
    explicit FenceOnChipOperands(const Stmt &s) {
        class Loaded : public IRVisitor {
        public:
            std::set<std::string> &dsts;
            explicit Loaded(std::set<std::string> &d) : dsts(d) {}
            using IRVisitor::visit;
            void visit(const Evaluate *op) override {
                ir::CopyOp c;
                if (ir::as_copy(op, &c))
                    dsts.insert(c.dst);
            }
        } loaded(copied);
        s.accept(&loaded);
    }

private:
    using IRMutator::visit;
    std::set<std::string> copied;
    Stmt visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (ir::as_mma(op, &m) && (!copied.count(m.a) || !copied.count(m.b)))
            return Block::make(ir::make_fence_proxy_async(), op);
        return op;
    }
};

struct Group {
    std::vector<Stmt> produces; // produce F { copy; wait }
    std::vector<std::string> funcs;
};

enum class Mode { Producer, Consumer, Skip };

class Roles {
public:
    Roles(CompileContext &ctx, const Bytes &bytes) : ctx(ctx), bytes(bytes) {}
    std::map<std::string, int> rings; // group name -> versions

    /** The role of consumer `c` of `consumers` (or the producer if c < 0). */
    Stmt role(const Stmt &body, int c, int consumers) {
        consumer = c;
        this->consumers = consumers;
        in_turn = false;
        Stmt result = transform(body, c < 0 ? Mode::Producer : Mode::Consumer);
        for (const std::string &source : ctx.versions_by_consumer) {
            result = substitute(ir::stage_var(source), std::max(c, 0), result);
        }
        return result;
    }

    static constexpr const char *turn = "tile.turn";
    static constexpr const char *order = "tile.order";

private:
    CompileContext &ctx;
    const Bytes &bytes;
    int consumer = 0, consumers = 1;
    bool in_turn = false;

    bool ping_pong_consumer() const { return consumers > 1 && consumer >= 0; }

    bool has_group(const Stmt &s) const {
        for (const std::string &f : ctx.funcs) {
            if (f != ctx.output && ctx.of(f).async_copy && ir::touches(s, f))
                return true;
        }
        return false;
    }

    /** Ping-pong: tiles (and a partitioned tail) are turns taken alternately by the consumers, in
     * program order. The owner waits for its turn on the ordering barrier before its mainloop and
     * hands the tensor cores over after it, so that no consumer waits on a ring version more than a
     * lap ahead of the barrier (mbarrier parity only tells adjacent phases apart). */
    Stmt turn_unit(const Stmt &body) {
        bool outer = in_turn;
        in_turn = true;
        std::vector<Stmt> mine = flatten(transform(body, Mode::Consumer));
        Stmt skip = transform(body, Mode::Skip);
        in_turn = outer;
        Expr my_turns = int_var(turn) / consumers;
        Expr parity = consumer == 0 ? 1 - my_turns % 2 : my_turns % 2; // consumer 0 goes first
        size_t last = 0;
        for (size_t i = 0; i < mine.size(); i++) {
            if (has_ring_wait(mine[i]))
                last = i + 1;
        }
        mine.insert(mine.begin() + last, ir::make_arrive({order, (consumer + 1) % consumers}));
        mine.insert(mine.begin(), ir::make_wait({order, consumer, parity}));
        Stmt owned = IfThenElse::make(int_var(turn) % consumers == consumer, block(mine), skip);
        return Block::make(owned, ir::make_advance(turn));
    }

    bool has_ring_wait(const Stmt &s) const {
        class Find : public IRVisitor {
        public:
            bool found = false;
            using IRVisitor::visit;
            void visit(const Evaluate *op) override {
                ir::WaitOp w;
                if (ir::as_wait(op, &w) && w.barrier.size() > 5 &&
                    w.barrier.compare(w.barrier.size() - 5, 5, ".full") == 0 &&
                    w.parity.defined()) {
                    found = true;
                }
            }
        } f;
        s.accept(&f);
        return f.found;
    }

    bool is_async_produce(const Stmt &s, std::string *func) const {
        const ProducerConsumer *pc = s.as<ProducerConsumer>();
        if (!pc || !pc->is_producer || pc->name == ctx.output || !ctx.of(pc->name).async_copy)
            return false;
        *func = pc->name;
        return true;
    }

    static ir::CopyOp copy_of(const Stmt &produce) {
        const Block *b = produce.as<ProducerConsumer>()->body.as<Block>();
        ir::CopyOp c;
        internal_assert(b && ir::as_copy(b->first, &c)) << "async producer without a copy\n"
                                                        << produce;
        return c;
    }

    int versions_of(const Group &g) {
        int n = std::max(1, ctx.of(g.funcs[0]).multi_buffer);
        for (const std::string &f : g.funcs) {
            if (std::max(1, ctx.of(f).multi_buffer) != n) {
                throw Error(
                    "Func '" + f + "', directive multi_buffer(" +
                    std::to_string(ctx.of(f).multi_buffer) +
                    "): on Hopper the Funcs copied together (" + g.funcs[0] + ", " + f +
                    ") share one ring of barriers, so they need the same multi_buffer count");
            }
        }
        return n;
    }

    Stmt group_stmt(const Group &g, const std::vector<Stmt> &uses, Mode mode) {
        const std::string ring = g.funcs[0] + ".ring", slot = g.funcs[0] + ".slot";
        int n = versions_of(g);
        rings[g.funcs[0]] = n;
        Stmt advance = ir::make_advance(ring);
        if (mode == Mode::Skip)
            return advance;
        Expr s = int_var(slot);
        // Every role walks the whole ring, so the lap (ring / n) gives the phase parity.
        Expr lap_parity = (int_var(ring) / n) % 2;
        std::string full = ir::full_barrier(g.funcs[0]), empty = ir::empty_barrier(g.funcs[0]);
        std::vector<Stmt> parts;
        if (mode == Mode::Producer) {
            // Empty barriers start released: the producer's first lap waits for parity 1.
            parts.push_back(ir::make_wait({empty, s, 1 - lap_parity}));
            Expr total = 0;
            std::vector<Stmt> copies;
            for (const Stmt &p : g.produces) {
                ir::CopyOp c = copy_of(p);
                c.barrier = full;
                c.slot = s;
                total = total + bytes.of(c);
                copies.push_back(ir::make_copy(c));
            }
            parts.push_back(ir::make_expect({full, s}, simplify(total)));
            parts.insert(parts.end(), copies.begin(), copies.end());
        } else {
            parts.push_back(ir::make_wait({full, s, lap_parity}));
            parts.insert(parts.end(), uses.begin(), uses.end());
            parts.push_back(ir::make_arrive({empty, s}));
        }
        Stmt body = block(parts);
        for (const std::string &f : g.funcs)
            body = substitute(ir::stage_var(f), s, body);
        return Block::make(LetStmt::make(slot, int_var(ring) % n, body), advance);
    }

    Stmt transform(const Stmt &s, Mode mode) {
        if (ping_pong_consumer() && mode == Mode::Consumer && !in_turn && !s.as<For>() &&
            !s.as<IfThenElse>() && !s.as<LetStmt>() && !contains_core_loop(s) && has_group(s)) {
            return turn_unit(s); // a partitioned tail outside the tile loop
        }
        std::vector<Stmt> list = flatten(s);
        if (list.size() == 1 && !list[0].as<Block>())
            return transform_one(list[0], mode);
        std::vector<Stmt> out;
        for (size_t i = 0; i < list.size(); i++) {
            std::string f;
            if (!is_async_produce(list[i], &f)) {
                out.push_back(transform_one(list[i], mode));
                continue;
            }
            Group g;
            size_t k = i;
            while (k < list.size() && is_async_produce(list[k], &f)) {
                g.produces.push_back(list[k]);
                g.funcs.push_back(f);
                k++;
            }
            // The group's uses run up to the last statement that touches one of its Funcs, before
            // the next copy into them (a partitioned K tail is the next group, not a use).
            size_t last = k;
            for (size_t j = k; j < list.size(); j++) {
                std::string next;
                if (is_async_produce(list[j], &next) &&
                    std::find(g.funcs.begin(), g.funcs.end(), next) != g.funcs.end()) {
                    break;
                }
                for (const std::string &func : g.funcs) {
                    if (ir::touches(list[j], func))
                        last = j + 1;
                }
            }
            std::vector<Stmt> uses;
            for (size_t j = k; j < last; j++)
                uses.push_back(transform_one(list[j], mode));
            out.push_back(group_stmt(g, uses, mode));
            i = last - 1;
        }
        return block(out);
    }

    Stmt transform_one(const Stmt &s, Mode mode) {
        if (const For *f = s.as<For>()) {
            Stmt body;
            if (is_core_loop(f->name) && ping_pong_consumer() && mode == Mode::Consumer) {
                body = turn_unit(f->body);
            } else {
                body = transform(f->body, mode);
            }
            if (is_no_op(body))
                return Evaluate::make(0);
            return For::make(f->name, f->min, f->extent, f->for_type, f->device_api, body);
        }
        if (const IfThenElse *i = s.as<IfThenElse>()) {
            Stmt then_case = transform(i->then_case, mode);
            Stmt else_case = i->else_case.defined() ? transform(i->else_case, mode) : Stmt();
            if (is_no_op(then_case) && (!else_case.defined() || is_no_op(else_case)))
                return Evaluate::make(0);
            return IfThenElse::make(i->condition, then_case, else_case);
        }
        ir::VectorOp v;
        Stmt inner;
        if (const LetStmt *l = s.as<LetStmt>(); l && !ir::as_vector_op(s, &v, &inner)) {
            Stmt body = transform(l->body, mode);
            return is_no_op(body) ? body : LetStmt::make(l->name, l->value, body);
        }
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            Stmt body = transform(pc->body, mode);
            return is_no_op(body) ? body : ProducerConsumer::make(pc->name, pc->is_producer, body);
        }
        // A leaf: an op. The producer only issues ring copies (handled by groups); a consumer
        // skipping a tile runs none of its ops: its own next tile waits for its stores before
        // rewriting its staging version, and it drains them at the end.
        if (mode == Mode::Consumer) {
            ir::CopyOp c;
            if (!ir::as_copy(s, &c))
                return s;
            if (c.dst == ctx.output)
                return Block::make(ir::make_fence_proxy_async(), s);
            return Block::make(ir::make_expect({c.barrier, c.slot}, bytes.of(c)),
                               s); // a synchronous load
        }
        return Evaluate::make(0);
    }

    static bool contains_core_loop(const Stmt &s) {
        class Find : public IRVisitor {
        public:
            bool found = false;
            using IRVisitor::visit;
            void visit(const For *op) override {
                if (is_core_loop(op->name))
                    found = true;
                IRVisitor::visit(op);
            }
        } f;
        s.accept(&f);
        return f.found;
    }
};

/** Barrier declarations: a ring's full and empty barriers, and the full barrier of every other
 * TMA load (a synchronous copy waited right away). */
class DeclareBarriers : public IRVisitor {
public:
    DeclareBarriers(const CompileContext &ctx, const std::vector<SramBuffer> &buffers,
                    const std::map<std::string, int> &rings)
        : ctx(ctx), buffers(buffers), rings(rings) {}
    std::vector<BarrierDecl> barriers;

private:
    using IRVisitor::visit;
    const CompileContext &ctx;
    const std::vector<SramBuffer> &buffers;
    const std::map<std::string, int> &rings;
    std::set<std::string> seen;

    void declare(const std::string &name, int slots, int initial_phase) {
        if (seen.insert(name).second)
            barriers.push_back({name, slots, 1, initial_phase});
    }
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (!ir::as_copy(op, &c) || c.dst == ctx.output)
            return;
        std::string base = c.barrier.substr(0, c.barrier.size() - 5); // strip ".full"
        auto ring = rings.find(base);
        if (ring != rings.end()) {
            declare(ir::full_barrier(base), ring->second, 0);
            declare(ir::empty_barrier(base), ring->second, 1);
            return;
        }
        int slots = 1;
        for (const SramBuffer &b : buffers) {
            if (b.name == c.dst)
                slots = b.slots;
        }
        declare(c.barrier, slots, 0);
    }
};

} // namespace

Stmt specialize_warps(const Stmt &input, CompileContext &ctx,
                      const std::vector<SramBuffer> &buffers) {
    const Stmt s = FenceOnChipOperands(input).mutate(input);
    const Directives out = ctx.of(ctx.output);
    Bytes bytes(buffers);
    if (out.ping_pong && !out.warp_specialize) {
        throw Error("Func '" + ctx.output +
                    "', directive ping_pong(): on Hopper the two consumer warpgroups of "
                    "ping-pong need a producer warpgroup; add warp_specialize() on " +
                    ctx.output);
    }
    if (!out.warp_specialize) {
        ctx.warpgroups = 1;
        Stmt result = ExpectAndFence(bytes, ctx.output).mutate(s);
        DeclareBarriers d(ctx, buffers, {});
        result.accept(&d);
        ctx.barriers = d.barriers;
        ctx.consumer_warpgroups = out.cooperative ? 2 : 1;
        ctx.notes.push_back(
            out.cooperative
                ? "cooperative: two warpgroups run the software pipeline, its vector ops "
                  "strided over their 256 threads (the model runs them as one agent)"
                : "hopper: one warpgroup runs the software pipeline");
        return result;
    }
    int consumers = out.ping_pong ? 2 : 1;
    Roles roles(ctx, bytes);
    Stmt producer = roles.role(s, -1, consumers);
    std::vector<Stmt> consumer;
    for (int c = 0; c < consumers; c++)
        consumer.push_back(roles.role(s, c, consumers));
    auto with_rings = [&](Stmt body) {
        for (const auto &[name, versions] : roles.rings)
            body = LetStmt::make(name + ".ring", 0, body);
        if (consumers > 1)
            body = LetStmt::make(Roles::turn, 0, body);
        return body;
    };
    // Registers: the producer gives its share to the consumers (HOPPER-FACTS.md).
    // Build the chain: if (wg == 0) producer else if (wg == 1) consumer 0 else consumer 1.
    Stmt chain, result;
    for (int c = consumers - 1; c >= 0; c--) {
        const int threads = 128 * (1 + consumers * (out.cooperative ? 2 : 1));
        Stmt body = with_rings(
            Block::make(ir::make_setmaxnreg(threads == 384 ? 232 : 240, true), consumer[c]));
        chain = chain.defined() ? IfThenElse::make(ir::warpgroup() == 1 + c, body, chain) : body;
    }
    // With one consumer warpgroup (256 threads) the pool has room: the producer keeps 48, where
    // its thread copies' 8 loads in flight fit without spilling (40 spills them); with two, 40
    // (40 + 2 x 232 of the 512 registers a thread slot of the SM's 64K holds).
    const int all_threads = 128 * (1 + consumers * (out.cooperative ? 2 : 1));
    result = IfThenElse::make(
        ir::warpgroup() == 0,
        with_rings(Block::make(ir::make_setmaxnreg(all_threads == 384 ? 40 : 48, false), producer)),
        chain);
    ctx.warpgroups = 1 + consumers;
    ctx.consumer_warpgroups = out.cooperative ? 2 : 1;
    DeclareBarriers d(ctx, buffers, roles.rings);
    result.accept(&d);
    ctx.barriers = d.barriers;
    if (consumers > 1)
        ctx.barriers.push_back({Roles::order, consumers, 1, 0});
    ctx.notes.push_back("warp_specialize: a producer warpgroup and " + std::to_string(consumers) +
                        " consumer warpgroup(s) joined by mbarrier rings");
    if (out.cooperative)
        ctx.notes.push_back(
            "cooperative: the consumer role runs on two warpgroups, each on alternate 64-row "
            "MMA blocks of every tile (the model runs it as one agent)");
    return result;
}

} // namespace tandem::lower
