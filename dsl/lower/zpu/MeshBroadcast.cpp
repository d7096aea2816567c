#include "MeshBroadcast.h"

#include "lower/Cluster.h"
#include "tandem/AsyncIR.h"
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
        Stmt result = IRMutator::visit(op);
        control.resize(control.size() - 2);
        return result;
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
                Expr owns = owns_tiles(copy_arguments(c));
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
            if (!shared->count(c.barrier))
                return op;
            c.multicast = ctx.cluster;
            return Block::make(ir::make_mesh_barrier(c.barrier + " free"), ir::make_copy(c));
        }
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
                                " are loaded by rank 0 and broadcast down its mesh column to the " +
                                cores +
                                " (VLink), with a mesh barrier before each (the version "
                                "is free on every core) and after each wait (it landed)");
        }
    }
    if (shared.empty()) {
        ctx.notes.push_back("mesh cluster: no copy from DRAM into a memory a column leaf reaches "
                            "is the same for the " +
                            cores + "; nothing is broadcast");
    }
    ColumnCopies rewrite(ctx, reachable);
    rewrite.shared = &shared;
    return rewrite.mutate(result);
}

} // namespace tandem::lower
