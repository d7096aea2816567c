#include "MultiBuffer.h"

#include "Targets.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <set>
#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** Offsets every access of `buffer` by `offset` and points its barriers at version `slot`. */
class RebaseBuffer : public IRMutator {
public:
    RebaseBuffer(const std::string &buffer, const Expr &offset, const Expr &slot)
        : buffer(buffer), offset(offset), slot(slot) {}

private:
    using IRMutator::visit;
    const std::string &buffer;
    Expr offset, slot;

    Expr visit(const Load *op) override {
        Expr e = IRMutator::visit(op);
        if (op->name != buffer)
            return e;
        const Load *l = e.as<Load>();
        return Load::make(l->type, l->name, l->index + offset, l->image, l->param, l->predicate,
                          l->alignment);
    }
    Stmt visit(const Store *op) override {
        Stmt s = IRMutator::visit(op);
        if (op->name != buffer)
            return s;
        const Store *st = s.as<Store>();
        return Store::make(st->name, st->value, st->index + offset, st->param, st->predicate,
                           st->alignment);
    }
    Stmt visit(const Evaluate *op) override {
        ir::CopyOp c;
        ir::WaitOp w;
        ir::MmaOp m;
        if (ir::as_copy(op, &c)) {
            if (c.dst == buffer)
                c.dst_offset = simplify(c.dst_offset + offset);
            if (c.src == buffer)
                c.src_offset = simplify(c.src_offset + offset);
            if (slot.defined() &&
                (c.barrier == ir::full_barrier(buffer) || c.barrier == ir::empty_barrier(buffer)))
                c.slot = slot;
            return ir::make_copy(c);
        }
        if (ir::as_wait(op, &w)) {
            if (slot.defined() &&
                (w.barrier == ir::full_barrier(buffer) || w.barrier == ir::empty_barrier(buffer)))
                w.slot = slot;
            return ir::make_wait(w);
        }
        if (ir::as_mma(op, &m)) {
            if (m.acc == buffer)
                m.acc_offset = simplify(m.acc_offset + offset);
            if (m.a == buffer)
                m.a_offset = simplify(m.a_offset + offset);
            if (m.b == buffer)
                m.b_offset = simplify(m.b_offset + offset);
            return ir::make_mma(m);
        }
        return op;
    }
    Stmt visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (!ir::as_vector_op(op, &v, &body))
            return IRMutator::visit(op);
        for (ir::Region &r : v.regions) {
            if (r.buffer == buffer)
                r.lo = simplify(r.lo + offset);
        }
        return ir::make_vector_op(v, mutate(body));
    }
};

/** Largest Allocate of `buffer`, in elements (constant bound): the pitch of its versions, rounded
 * up to `align_bytes` (Ascend: 32, where every vector operand and DataCopy address in UB starts).
 */
class SlotSize : public LoopScopedVisitor {
public:
    SlotSize(const std::string &b, const CompileContext &ctx)
        : buffer(b), align_bytes(lowering_of(ctx.target).block_bytes) {}
    const std::string &buffer;
    const int align_bytes;
    int64_t elements = 0;
    int allocations = 0;

private:
    using IRVisitor::visit;
    void visit(const Allocate *op) override {
        if (op->name == buffer) {
            int64_t b = allocation_bound(op, loops);
            if (b < 0) {
                Expr n = 1;
                for (const Expr &e : op->extents)
                    n = n * e;
                std::ostringstream size;
                size << simplify(n);
                throw Error("Func '" + buffer + "': its on-chip size (" + size.str() +
                            ") has no constant bound, so its versions cannot be laid out; give the "
                            "tiles constant sizes (split/tile factors) and static input shapes");
            }
            const int64_t per = std::max<int64_t>(1, align_bytes / std::max(1, op->type.bytes()));
            elements = std::max(elements, (b + per - 1) / per * per);
            allocations++;
        }
        IRVisitor::visit(op);
    }
};

class Resize : public IRMutator {
public:
    Resize(const std::string &b, int64_t elements) : buffer(b), elements(elements) {}

private:
    using IRMutator::visit;
    const std::string &buffer;
    int64_t elements;
    Stmt visit(const Allocate *op) override {
        Stmt body = mutate(op->body);
        if (op->name != buffer) {
            return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition,
                                  body);
        }
        return Allocate::make(op->name, op->type, op->memory_type, {Expr(int(elements))},
                              op->condition, body);
    }
};

class Contains : public IRVisitor {
public:
    explicit Contains(const std::string &b) : buffer(b) {}
    const std::string &buffer;
    int allocations = 0;

private:
    using IRVisitor::visit;
    void visit(const For *op) override {} // only this level
    void visit(const Allocate *op) override {
        if (op->name == buffer)
            allocations++;
        IRVisitor::visit(op);
    }
};

/** How many times `body` allocates `buffer` outside its inner loops. */
int allocations_at_this_level(const Stmt &body, const std::string &buffer) {
    Contains c(buffer);
    body.accept(&c);
    return c.allocations;
}

bool allocates_at_this_level(const Stmt &body, const std::string &buffer) {
    return allocations_at_this_level(body, buffer) > 0;
}

/** Versions of the store source S chosen by the parity of the loop that allocates it. */
class ResultSlots : public IRMutator {
public:
    /** `once`: tile loops run at most once per unit (a CTA per tile). `wait_at_start`: the first
     * write waits too, before any store (Ascend's pre-armed store flags are each consumed by one
     * wait; on the ZPU and Hopper that wait is free, so it is left out). */
    ResultSlots(const std::string &source, int slots, int64_t slot_elements, bool async, bool once,
                bool wait_at_start)
        : source(source), slots(slots), slot_elements(slot_elements), async(async), once(once),
          counted_waits(wait_at_start), stored_since_wait(wait_at_start) {}
    int loops = 0;

    Stmt at_top_level(const Stmt &s) {
        Stmt r = mutate(s);
        return async ? wait_outside_loops(r) : r;
    }

private:
    using IRMutator::visit;
    const std::string &source;
    int slots;
    int64_t slot_elements;
    bool async;
    bool once;
    bool counted_waits; // each wait consumes a store's flag (Ascend)

    /** A tile loop that runs at most once per unit: straight-line code, one version. */
    bool runs_once(const For *op) const {
        return once && is_core_loop(op->name) && allocates_at_this_level(op->body, source);
    }

    /** Straight-line code outside the tile loops (a partitioned tail, or a kernel of one tile)
     * reuses version 0: before the first write after a store of it (or at the start), wait for
     * that store. Exactly one wait per store: flags (Ascend) are consumed by their waits. */
    bool stored_since_wait;
    Stmt wait_outside_loops(const Stmt &s) {
        if (const Block *b = s.as<Block>()) {
            Stmt first = wait_outside_loops(b->first);
            return Block::make(first, wait_outside_loops(b->rest));
        }
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            return ProducerConsumer::make(pc->name, pc->is_producer, wait_outside_loops(pc->body));
        }
        if (const Allocate *a = s.as<Allocate>()) {
            return Allocate::make(a->name, a->type, a->memory_type, a->extents, a->condition,
                                  wait_outside_loops(a->body));
        }
        ir::VectorOp v;
        Stmt body;
        if (const LetStmt *l = s.as<LetStmt>(); l && !ir::as_vector_op(s, &v, &body)) {
            return LetStmt::make(l->name, l->value, wait_outside_loops(l->body));
        }
        if (const IfThenElse *i = s.as<IfThenElse>()) {
            // A guarded tail: each branch starts from the state before it; afterwards a store may
            // have happened.
            bool before = stored_since_wait;
            Stmt then_case = wait_outside_loops(i->then_case);
            bool after_then = stored_since_wait;
            stored_since_wait = before;
            Stmt else_case = i->else_case.defined() ? wait_outside_loops(i->else_case) : Stmt();
            stored_since_wait = after_then || stored_since_wait;
            return IfThenElse::make(i->condition, then_case, else_case);
        }
        if (const For *f = s.as<For>(); f && runs_once(f)) {
            return For::make(f->name, f->min, f->extent, f->for_type, f->device_api,
                             wait_outside_loops(f->body));
        }
        if (const For *f = s.as<For>();
            f && once_loop_inside(f->body) && (stored_since_wait || !counted_waits)) {
            // A loop around straight-line tiles (rows outside a tile loop that runs once per
            // unit): each iteration follows the one before, whose store may still read the
            // version, so its first write waits as after a store (a wait that finds no store
            // pending is free on the ZPU and Hopper; Ascend's counted flags wait only where a
            // store came before the loop).
            stored_since_wait = stored_since_wait || stores_source(f->body);
            Stmt body = wait_outside_loops(f->body);
            return For::make(f->name, f->min, f->extent, f->for_type, f->device_api, body);
        }
        if (s.as<For>() && allocates_inside(s)) { // tile loops wait inside
            if (ir::touches(s, source))
                stored_since_wait = true;
            return s;
        }
        ir::CopyOp c;
        if (ir::as_copy(s, &c) && c.src == source) {
            stored_since_wait = true;
            return s;
        }
        if (!ir::writes(s, source) || !stored_since_wait)
            return s;
        stored_since_wait = false;
        return Block::make(ir::make_wait({ir::empty_barrier(source), 0}), s);
    }

    /** True if `s` holds a tile loop that runs once per unit (runs_once). */
    bool once_loop_inside(const Stmt &s) const {
        class Find : public IRVisitor {
        public:
            explicit Find(const ResultSlots &r) : slots(r) {}
            const ResultSlots &slots;
            bool found = false;
            using IRVisitor::visit;
            void visit(const For *op) override {
                found = found || slots.runs_once(op);
                IRVisitor::visit(op);
            }
        } f(*this);
        s.accept(&f);
        return f.found;
    }

    /** True if `s` stores out of the source. */
    bool stores_source(const Stmt &s) const {
        class Find : public IRVisitor {
        public:
            explicit Find(const std::string &b) : buffer(b) {}
            const std::string &buffer;
            bool found = false;
            using IRVisitor::visit;
            void visit(const Evaluate *op) override {
                ir::CopyOp c;
                found = found || (ir::as_copy(op, &c) && c.src == buffer);
            }
        } f(source);
        s.accept(&f);
        return f.found;
    }

    /** True if a loop inside `s` allocates the source in its body (a tile loop). */
    bool tile_loop_inside(const Stmt &s) const {
        return allocations_inside(s) > allocations_at_this_level(s, source);
    }

    /** How many times `s` allocates the source, loops included. */
    int allocations_inside(const Stmt &s) const {
        class Find : public IRVisitor {
        public:
            explicit Find(const std::string &b) : buffer(b) {}
            const std::string &buffer;
            int found = 0;
            using IRVisitor::visit;
            void visit(const Allocate *op) override {
                if (op->name == buffer)
                    found++;
                IRVisitor::visit(op);
            }
        } f(source);
        s.accept(&f);
        return f.found;
    }

    bool allocates_inside(const Stmt &s) const { return allocations_inside(s) > 0; }

    Stmt insert_wait(const Stmt &body, const Expr &slot) {
        if (!async)
            return body;
        // Into a guarded tile (a hole in the tile order): the store that frees the version is in
        // the same branch (Ascend counts the flags: a wait without its set deadlocks).
        return insert_before_first_access(body, source, true,
                                          ir::make_wait({ir::empty_barrier(source), slot}),
                                          /*into_branches=*/true);
    }

    Stmt visit(const For *op) override {
        if (runs_once(op)) { // straight-line code: wait_outside_loops waits in it
            return For::make(op->name, op->min, op->extent, op->for_type, op->device_api,
                             mutate(op->body));
        }
        Stmt body = mutate(op->body);
        int allocations = allocations_at_this_level(op->body, source);
        if (allocations > 1 || (allocations == 1 && tile_loop_inside(body))) {
            // Straight-line tiles (Halide partitioned an inner tile loop into its tail, or into
            // tiles of its own): each uses version 0 and waits for the last store before it, as
            // outside every loop (an iteration may follow a store).
            loops++;
            if (async) {
                stored_since_wait = true;
                body = wait_outside_loops(body);
            }
        } else if (allocates_at_this_level(op->body, source)) {
            loops++;
            Expr slot = 0;
            if (slots > 1) {
                slot = simplify((Variable::make(Halide::Int(32), op->name) - op->min) % slots);
                body = RebaseBuffer(source, slot * Expr(int(slot_elements)), slot).mutate(body);
            }
            body = insert_wait(body, slot);
        }
        return For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
    }
};

/** The on-chip buffers copies load into. */
class FindCopyTargets : public IRVisitor {
public:
    std::set<std::string> names;

private:
    using IRVisitor::visit;
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (ir::as_copy(op, &c) && c.barrier == ir::full_barrier(c.dst))
            names.insert(c.dst);
    }
};

/** The buffers allocated inside the tile loop (a tile's own: its state, its intermediates). */
class FindTileBuffers : public IRVisitor {
public:
    std::set<std::string> names;

private:
    using IRVisitor::visit;
    int in_tile = 0;
    void visit(const For *op) override {
        const bool tile = is_core_loop(op->name);
        in_tile += tile;
        IRVisitor::visit(op);
        in_tile -= tile;
    }
    void visit(const Allocate *op) override {
        if (in_tile)
            names.insert(op->name);
        IRVisitor::visit(op);
    }
};

/** The on-chip buffers stored to the output (or to a mix kernel's workspace). */
class FindStoreSource : public IRVisitor {
public:
    explicit FindStoreSource(const CompileContext &ctx) : ctx(ctx) {}
    const CompileContext &ctx;
    std::set<std::string> sources;

private:
    using IRVisitor::visit;
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (ir::as_copy(op, &c) && is_store_target(ctx, c.dst))
            sources.insert(c.src);
    }
};

} // namespace

Stmt rebase_buffer(const Stmt &s, const std::string &buffer, const Expr &offset, const Expr &slot) {
    return RebaseBuffer(buffer, offset, slot).mutate(s);
}

Stmt multi_buffer(const Stmt &s, CompileContext &ctx) {
    const TargetLowering &target = lowering_of(ctx.target);
    Stmt result = s;
    for (const std::string &f : ctx.funcs) {
        const Directives d = ctx.of(f);
        if (f == ctx.output || d.multi_buffer <= 1)
            continue;
        SlotSize size(f, ctx);
        result.accept(&size);
        if (size.allocations == 0) {
            throw Error("Func '" + f + "', directive multi_buffer(" +
                        std::to_string(d.multi_buffer) + "): " + f +
                        " has no storage of its own (is it computed inline?)");
        }
        Expr stage = Variable::make(Halide::Int(32), ir::stage_var(f));
        result = RebaseBuffer(f, stage * Expr(int(size.elements)), stage).mutate(result);
        result = Resize(f, size.elements * d.multi_buffer).mutate(result);
        ctx.slots[f] = d.multi_buffer;
        ctx.notes.push_back("multi_buffer: " + f + " has " + std::to_string(d.multi_buffer) +
                            " versions of " + std::to_string(size.elements) + " elements");
    }

    const Directives out = ctx.of(ctx.output);
    if (out.ping_pong && !out.async_copy) {
        throw Error("Func '" + ctx.output +
                    "', directive ping_pong(): the result slots alternate so that the "
                    "store of one tile overlaps the work of the next, which needs an asynchronous "
                    "store: add "
                    "async_copy() on " +
                    ctx.output);
    }
    int slots = out.ping_pong ? 2 : std::max(1, out.multi_buffer);
    FindStoreSource find(ctx);
    result.accept(&find);
    std::vector<Stmt> drains;
    for (const std::string &source : find.sources) {
        SlotSize size(source, ctx);
        result.accept(&size);
        // A mix kernel's vector cores each take every other tile of their cube core: the tile
        // after is two cube tiles away, so the store out of UB keeps one version.
        bool versioned =
            slots > 1 && size.allocations > 0 && !(ctx.mix && !ctx.of(source).tile_mma);
        bool by_consumer = out.ping_pong && target.versions_by_consumer && versioned;
        ResultSlots r(source, versioned && !by_consumer ? slots : 1, size.elements, out.async_copy,
                      ctx.one_tile_per_unit, target.store_waits_before_first);
        result = r.at_top_level(result);
        if (by_consumer) {
            // Hopper ping-pong: every tile a consumer stores (tails too) uses that consumer's
            // version; WarpSpecialize binds the version variable per consumer role.
            Expr stage = Variable::make(Halide::Int(32), ir::stage_var(source));
            result = RebaseBuffer(source, stage * Expr(int(size.elements)), stage).mutate(result);
            r.loops = std::max(r.loops, 1);
        }
        if (versioned && r.loops == 0) {
            ctx.notes.push_back("result slots: " + source +
                                " is not allocated inside a tile loop (one tile?), so "
                                "it keeps one version");
        }
        int used = (versioned && r.loops > 0) ? slots : 1;
        if (used > 1) {
            result = Resize(source, size.elements * used).mutate(result);
            ctx.slots[source] = used;
            if (by_consumer)
                ctx.versions_by_consumer.push_back(source);
            ctx.notes.push_back("result slots: " + source + " alternates " + std::to_string(used) +
                                " versions by tile parity");
        }
        // Hopper drains with cp.async.bulk.wait_group.read 0, which waits for every store of the
        // warpgroup: one drain, not one per version.
        int drained = target.one_drain_for_all_stores ? 1 : used;
        if (out.async_copy) {
            for (int i = 0; i < drained; i++)
                drains.push_back(ir::make_wait({ir::empty_barrier(source), i}));
        }
    }
    if (slots > 1 && target.accumulator_slots) {
        for (const std::string &f : ctx.funcs) {
            if (!ctx.of(f).tile_mma || find.sources.count(f))
                continue;
            SlotSize size(f, ctx);
            result.accept(&size);
            if (size.allocations == 0)
                continue;
            ResultSlots r(f, slots, size.elements, /*async=*/false, ctx.one_tile_per_unit, false);
            result = r.at_top_level(result);
            if (r.loops == 0)
                continue;
            result = Resize(f, size.elements * slots).mutate(result);
            ctx.slots[f] = slots;
            ctx.notes.push_back(
                "result slots: the accumulator " + f + " alternates " + std::to_string(slots) +
                " versions by tile parity (the next tile's MMAs overlap this tile's epilogue)");
        }
    }
    if (out.ping_pong && target.versions_by_consumer) {
        // Ping-pong consumers issue the copies of Funcs without async_copy themselves (copy, then
        // wait), and compute per tile on chip what the tile needs (an online softmax's running
        // state, a block's maxima and sums) while the other consumer works on the next tile:
        // each consumer gets its own version of such a buffer (and of a copy's full barrier).
        // Accumulators live in each consumer's registers.
        FindCopyTargets targets;
        result.accept(&targets);
        FindTileBuffers tile_buffers;
        result.accept(&tile_buffers);
        std::set<std::string> own = targets.names;
        own.insert(tile_buffers.names.begin(), tile_buffers.names.end());
        for (const std::string &f : own) {
            // (a Tuple's values are buffers `func.0`, `func.1` ...)
            const size_t dot = f.rfind('.');
            const bool value = dot != std::string::npos && dot + 1 < f.size() &&
                               f.find_first_not_of("0123456789", dot + 1) == std::string::npos;
            const std::string func = value ? f.substr(0, dot) : f;
            // (A Tuple's value an MMA accumulates into, AccumulateInPlace's output: registers.)
            if (ctx.of(f).async_copy || ctx.slots.count(f) || ctx.of(func).tile_mma ||
                ctx.of(f).tile_mma || find.sources.count(f))
                continue;
            SlotSize size(f, ctx);
            result.accept(&size);
            if (size.allocations == 0)
                continue;
            Expr stage = Variable::make(Halide::Int(32), ir::stage_var(f));
            result = RebaseBuffer(f, stage * Expr(int(size.elements)), stage).mutate(result);
            result = Resize(f, size.elements * 2).mutate(result);
            ctx.slots[f] = 2;
            ctx.versions_by_consumer.push_back(f);
            ctx.notes.push_back("ping_pong: " + f +
                                (targets.names.count(f) ? " is copied" : " is computed") +
                                " by each consumer into its own version");
        }
    }
    for (const Stmt &d : drains) {
        ir::WaitOp w;
        internal_assert(ir::as_wait(d, &w));
        result = append_where_used(
            result, d, w.barrier.substr(0, w.barrier.size() - std::string(".empty").size()));
    }
    return result;
}

} // namespace tandem::lower
