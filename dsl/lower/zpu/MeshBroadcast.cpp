#include "MeshBroadcast.h"

#include "lower/Cluster.h"
#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"
#include "tandem/params/Zpu.h"

#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** The copies completing on one barrier (the versions of one buffer) and their waits. */
struct Ring {
    int copies = 0;
    bool alike = true; // every copy a column leaf can make, each copy and wait alike on the ranks
};

/** Walks the control stream with the bounds, conditions and lets around each op. Without
 * `shared` it finds the rings whose copies can be broadcast; with it, it broadcasts them and
 * guards the output copies. Conditions on the tile become rank 0's where that is the same
 * (Cluster.h on_first_rank). */
class ColumnCopies : public IRMutator {
public:
    ColumnCopies(const CompileContext &ctx, const std::set<std::string> &reachable)
        : ctx(ctx), reachable(reachable) {}
    std::map<std::string, Ring> rings;             // by completion barrier
    const std::set<std::string> *shared = nullptr; // rewriting: the rings broadcast

private:
    using IRMutator::visit;
    const CompileContext &ctx;
    const std::set<std::string> &reachable; // on-chip buffers a column leaf from DRAM can write
    std::vector<Expr> control;
    std::vector<std::string> loops;
    std::set<std::string> touched; // rewriting: the shared buffers statements so far touch

    /** Records which shared buffers the leaf statement `s` touches (program order). */
    void touch(const Stmt &s) {
        if (!shared)
            return;
        for (const std::string &barrier : *shared) {
            const std::string buffer = barrier.substr(0, barrier.size() - 5); // ".full"
            if (ir::touches(s, buffer))
                touched.insert(buffer);
        }
    }

    /** The rank that loads and broadcasts `c`: the copy into version g % versions (g the copy's
     * place in the pipeline's order) is rank g % n's, so that the ranks' ODMA units take the
     * shared loads in turn; rank 0 where the version is not of that form. */
    Expr sender_of(const ir::CopyOp &c) const {
        if (const Mod *m = c.slot.as<Mod>()) {
            Expr sender = simplify(m->a % ctx.cluster);
            if (same_for_cluster({sender}, ctx))
                return sender;
        }
        return 0;
    }

    /** The first copies of a buffer, in the software pipeline's prologue before any loop: each
     * into a version no core has used yet, so nothing needs to be free first. */
    bool first_use(const ir::CopyOp &c) const {
        for (const std::string &l : loops) {
            if (l.size() < 9 || l.compare(l.size() - 9, 9, ".prologue") != 0)
                return false;
        }
        return !touched.count(c.dst);
    }

    bool is_input(const std::string &name) const {
        for (const KernelArg &a : ctx.args) {
            if (a.name == name)
                return !a.output;
        }
        return false;
    }

    Stmt visit(const For *op) override {
        control.push_back(op->min);
        control.push_back(op->extent);
        loops.push_back(op->name);
        Stmt result = IRMutator::visit(op);
        loops.pop_back();
        control.resize(control.size() - 2);
        return result;
    }

    Stmt visit(const Store *op) override {
        touch(op);
        return op;
    }

    Stmt visit(const IfThenElse *op) override {
        Expr condition = on_first_rank(op->condition, ctx);
        control.push_back(condition);
        Stmt then_case = mutate(op->then_case);
        Stmt else_case = op->else_case.defined() ? mutate(op->else_case) : Stmt();
        control.pop_back();
        return IfThenElse::make(condition, then_case, else_case);
    }

    Stmt visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt nest;
        if (ir::as_vector_op(op, &v, &nest)) {
            touch(op);
            return op;
        }
        control.push_back(op->value);
        Stmt body = mutate(op->body);
        control.pop_back();
        return LetStmt::make(op->name, op->value, body);
    }

    Stmt visit(const Evaluate *op) override {
        ir::CopyOp c;
        ir::WaitOp w;
        if (ir::as_copy(op, &c)) {
            if (c.dst == ctx.output) {
                // The tile the copy names is the core's own; a store the same for every rank (a
                // straight-line tail the first cluster runs on all its cores) is rank 0's.
                Expr owns = owns_tiles(copy_arguments(c));
                if (!owns.defined() && same_for_cluster(copy_arguments(c), ctx))
                    owns = ir::core_id() % ctx.cluster == 0;
                return shared && owns.defined() ? IfThenElse::make(owns, op) : Stmt(op);
            }
            if (!shared) {
                Ring &r = rings[c.barrier];
                r.copies++;
                r.alike = r.alike && reachable.count(c.dst) && is_input(c.src) &&
                          same_for_cluster(copy_arguments(c), ctx) &&
                          same_for_cluster(control, ctx);
                return op;
            }
            const bool first = first_use(c);
            touch(op);
            if (!shared->count(c.barrier))
                return op;
            c.multicast = ctx.cluster;
            c.sender = sender_of(c);
            if (first)
                return ir::make_copy(c);
            return Block::make(ir::make_mesh_barrier(c.barrier + " free"), ir::make_copy(c));
        }
        touch(op);
        if (ir::as_wait(op, &w)) {
            if (!shared) {
                Ring &r = rings[w.barrier];
                r.alike =
                    r.alike && same_for_cluster({w.slot}, ctx) && same_for_cluster(control, ctx);
                return op;
            }
            if (!shared->count(w.barrier))
                return op;
            return Block::make(op, ir::make_mesh_barrier(w.barrier + " landed"));
        }
        return op;
    }
};

/** The element range [lo, hi) a box of `dims` (extent, stride) from `offset` spans; undefined
 * where a stride may be negative. */
std::pair<Expr, Expr> span(const Expr &offset, const std::vector<std::pair<Expr, Expr>> &dims) {
    Expr hi = offset + 1;
    for (const auto &[extent, stride] : dims) {
        if (!can_prove(stride >= 0))
            return {Expr(), Expr()}; // not a range from `offset` up: nothing is proven apart
        hi = hi + (Halide::max(extent, 1) - 1) * stride;
    }
    return {offset, hi};
}

/** Moves each broadcast (its "free" barrier and copy, in their guard) past the MMAs after it in
 * its block that read other versions of its buffer. On the core alone the copy goes right before
 * the iteration's first MMA, after the engine sync that frees the version it refills; there the
 * barrier before it would hold that MMA back by a barrier's time. After the MMAs, the barrier
 * runs while the tensor core works. */
class SinkBroadcasts : public IRMutator {
public:
    explicit SinkBroadcasts(const std::vector<SramBuffer> &buffers) : buffers(buffers) {}
    int moved = 0;

private:
    using IRMutator::visit;
    const std::vector<SramBuffer> &buffers;

    /** The broadcast `s` holds (a guarded "free" barrier and copy), if it is one. */
    static bool as_broadcast(const Stmt &s, ir::CopyOp *c) {
        const IfThenElse *guard = s.as<IfThenElse>();
        const Stmt body = guard && !guard->else_case.defined() ? guard->then_case : s;
        const Block *b = body.as<Block>();
        std::string label;
        return b && ir::as_mesh_barrier(b->first, &label) && ir::as_copy(b->rest, c) &&
               c->multicast > 1;
    }

    /** Whether `t` may run before the broadcast `c`: it syncs nothing the copy needs and touches
     * c's buffer only through MMA operands provably in other versions (each residue of the
     * copy's version variable modulo the versions, both ranges constant apart). */
    bool independent(const Stmt &t, const ir::CopyOp &c) const {
        ir::MmaOp m;
        class Syncs : public IRVisitor { // a mesh barrier, or a wait on the copy's versions
        public:
            explicit Syncs(const std::string &barrier) : barrier(barrier) {}
            const std::string &barrier;
            bool found = false;
            using IRVisitor::visit;
            void visit(const Evaluate *op) override {
                ir::WaitOp w;
                std::string label;
                found = found || ir::as_mesh_barrier(op, &label) ||
                        (ir::as_wait(op, &w) && w.barrier == barrier);
            }
        } syncs(c.barrier);
        t.accept(&syncs);
        if (syncs.found)
            return false;
        if (!ir::touches(t, c.dst))
            return true;
        if (!ir::as_mma(t, &m) || m.acc == c.dst)
            return false;
        const SramBuffer *buffer = nullptr;
        for (const SramBuffer &b : buffers)
            buffer = b.name == c.dst ? &b : buffer;
        const std::set<std::string> vars = variables(c.slot);
        if (!buffer || vars.size() > 1)
            return false;
        std::vector<std::pair<Expr, Expr>> dims;
        for (const ir::CopyDim &d : c.dims)
            dims.push_back({d.extent, d.dst_stride});
        const auto [lo, hi] = span(c.dst_offset, dims);
        if (!lo.defined())
            return false;
        std::vector<std::pair<Expr, Expr>> read;
        if (m.a == c.dst)
            read.push_back(span(m.a_offset, {{m.k, m.a_stride_k}, {m.m, m.a_stride_m}}));
        if (m.b == c.dst)
            read.push_back(span(m.b_offset, {{m.n, m.b_stride_n}, {m.k, m.b_stride_k}}));
        for (const auto &[rlo, rhi] : read) {
            if (!rlo.defined())
                return false;
            for (int r = 0; r < std::max(1, buffer->slots); r++) {
                Expr apart = hi <= rlo || rhi <= lo;
                if (!vars.empty()) {
                    const std::string &x = *vars.begin();
                    apart = substitute(x, int_var(x + ".period") * buffer->slots + r, apart);
                }
                if (!can_prove(apart))
                    return false;
            }
        }
        return true;
    }

    Stmt visit(const Block *op) override {
        std::vector<Stmt> seq;
        for (Stmt s = op; s.defined();) {
            const Block *b = s.as<Block>();
            seq.push_back(mutate(b ? b->first : s));
            s = b ? b->rest : Stmt();
        }
        for (size_t i = 0; i < seq.size(); i++) {
            ir::CopyOp c;
            if (!as_broadcast(seq[i], &c))
                continue;
            size_t j = i + 1;
            while (j < seq.size() && independent(seq[j], c))
                j++;
            if (j == i + 1)
                continue;
            Stmt broadcast = seq[i];
            seq.erase(seq.begin() + long(i));
            seq.insert(seq.begin() + long(j - 1), broadcast);
            moved++;
            i = j - 1; // past it
        }
        return block(seq);
    }
};

} // namespace

Stmt broadcast_in_mesh_columns(const Stmt &s, CompileContext &ctx,
                               const std::vector<SramBuffer> &buffers) {
    if (ctx.cluster <= 1)
        return s;
    const sim::ZpuParams params = sim::ZpuParams::from(ctx.target.lookup());
    std::set<std::string> reachable;
    for (const SramBuffer &b : buffers) {
        if (params.link_route[1][size_t(sim::Space::DRAM)][size_t(b.space)])
            reachable.insert(b.name);
    }
    ColumnCopies find(ctx, reachable);
    Stmt result = find.mutate(s);
    std::set<std::string> shared;
    const std::string cores = std::to_string(ctx.cluster) + " cores of a cluster";
    for (const auto &[barrier, ring] : find.rings) {
        if (ring.copies == 0)
            continue; // a store's drain
        if (ring.alike) {
            shared.insert(barrier);
            ctx.notes.push_back("mesh cluster: the copies completing on " + barrier +
                                " are loaded by one of the " + cores +
                                " in turn and broadcast down the mesh column to the others "
                                "(VLink), with a mesh barrier before each (the version is free "
                                "on every core) and after each wait (it landed)");
        }
    }
    if (shared.empty()) {
        ctx.notes.push_back("mesh cluster: no copy from DRAM into a memory a column leaf reaches "
                            "is the same for the " +
                            cores + "; nothing is broadcast");
    }
    ColumnCopies rewrite(ctx, reachable);
    rewrite.shared = &shared;
    result = rewrite.mutate(result);
    SinkBroadcasts sink(buffers);
    result = sink.mutate(result);
    if (sink.moved) {
        ctx.notes.push_back("mesh cluster: each broadcast is issued after the MMAs that read "
                            "other versions of its buffer, so that its barrier runs under them");
    }
    return result;
}

} // namespace tandem::lower
