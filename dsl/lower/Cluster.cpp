#include "Cluster.h"

#include "tandem/Nest.h"

#include "tandem/AsyncIR.h"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

std::vector<Expr> copy_arguments(const ir::CopyOp &c) {
    std::vector<Expr> args = {c.dst_offset, c.src_offset, c.slot};
    for (const ir::CopyDim &d : c.dims) {
        args.push_back(d.extent);
        args.push_back(d.dst_stride);
        args.push_back(d.src_stride);
    }
    return args;
}

namespace {

/** An argument of a copy as rank `rank` of a cluster of `ctas` computes it: its tile
 * ctas * q + rank (the group q of tiles the cluster runs), the core id ctas * w + rank, the grid
 * ctas * g. */
class AsRank : public IRMutator {
public:
    AsRank(int ctas, int rank) : ctas(ctas), rank(rank) {}

private:
    using IRMutator::visit;
    const int ctas, rank;
    Expr visit(const Call *op) override {
        Expr owns, tile, first;
        if (ir::as_cluster_tile(op, &owns, &tile, &first))
            return int_var("tandem.cluster.group") * ctas + rank;
        if (ir::is_core_id(op))
            return int_var("tandem.cluster.first") * ctas + rank;
        if (ir::is_grid_size(op))
            return int_var("tandem.cluster.grid") * ctas;
        if (op->is_intrinsic(Call::promise_clamped) ||
            op->is_intrinsic(Call::unsafe_promise_clamped)) {
            return mutate(op->args[0]);
        }
        return IRMutator::visit(op);
    }
};

/** (ctas * x + r) % (ctas * m) = ctas * (x % m) + r and (ctas * x + r) / (ctas * m) = x / m, for
 * 0 <= r < ctas and m != 0 (Euclidean division): the tile order's arithmetic (a tile row, a
 * column, a group) with the rank taken out, which the simplifier does not do by itself. */
class TakeOutRank : public IRMutator {
public:
    TakeOutRank(int ctas, const std::map<std::string, Expr> &at_least_one)
        : ctas(ctas), at_least_one(at_least_one) {}

private:
    using IRMutator::visit;
    const int ctas;
    const std::map<std::string, Expr> &at_least_one; // runtime extent -> max(extent, 1)
    template <class Op> Expr rewrite(const Op *op, bool mod) {
        Expr a = mutate(op->a), b = mutate(op->b);
        // A divisor n m with m != 0 at every call (a runtime extent is at least 1).
        if (can_prove(b % ctas == 0) && can_prove(substitute(at_least_one, b) > 0)) {
            for (int r = 0; r < ctas; r++) {
                Expr rest = simplify(a - r);
                if (!can_prove(rest % ctas == 0))
                    continue;
                Expr x = simplify(rest / ctas), m = simplify(b / ctas);
                return mod ? simplify((x % m) * ctas + r) : simplify(x / m);
            }
        }
        return Op::make(a, b);
    }
    Expr visit(const Mod *op) override { return rewrite(op, true); }
    Expr visit(const Div *op) override { return rewrite(op, false); }
};

std::map<std::string, Expr> at_least_one(const CompileContext &ctx) {
    std::map<std::string, Expr> out;
    for (const KernelArg &a : ctx.args) {
        for (size_t d = 0; d < a.extents.size(); d++) {
            if (d < a.runtime.size() && a.runtime[d])
                out[a.extent_name(int(d))] = max(int_var(a.extent_name(int(d))), 1);
        }
    }
    return out;
}

Expr as_rank(const Expr &e, int ctas, int rank, const std::map<std::string, Expr> &extents) {
    return simplify(TakeOutRank(ctas, extents).mutate(simplify(AsRank(ctas, rank).mutate(e))));
}

/** Every expression the same for each rank of the cluster. */
bool same_for_cluster(const std::vector<Expr> &exprs, int ctas,
                      const std::map<std::string, Expr> &extents) {
    for (const Expr &e : exprs) {
        Expr first = as_rank(e, ctas, 0, extents);
        for (int rank = 1; rank < ctas; rank++) {
            if (!can_prove(as_rank(e, ctas, rank, extents) == first))
                return false;
        }
    }
    return true;
}

/** `e` as lhs <= rhs (integers), if it is a comparison of that kind. */
bool as_at_most(const Expr &e, Expr *lhs, Expr *rhs) {
    if (const LE *op = e.as<LE>()) {
        *lhs = op->a;
        *rhs = op->b;
        return true;
    }
    if (const LT *op = e.as<LT>()) {
        *lhs = op->a + 1;
        *rhs = op->b;
        return true;
    }
    if (const GE *op = e.as<GE>()) {
        *lhs = op->b;
        *rhs = op->a;
        return true;
    }
    if (const GT *op = e.as<GT>()) {
        *lhs = op->b + 1;
        *rhs = op->a;
        return true;
    }
    return false;
}

/** a implies b: the simplifier's proof, or for comparisons x <= y and u <= v whose differences
 * are ordered (u - v <= x - y), conjunction by conjunction. */
bool implies(const Expr &a, const Expr &b) {
    if (can_prove(!a || b))
        return true;
    if (const And *both = a.as<And>()) {
        if (implies(both->a, b) || implies(both->b, b))
            return true;
    }
    Expr x, y, u, v;
    if (a.type().is_bool() && as_at_most(a, &x, &y) && as_at_most(b, &u, &v) && x.type().is_int())
        return can_prove(u - v <= x - y);
    const And *aa = a.as<And>(), *ba = b.as<And>();
    return aa && ba && implies(aa->a, ba->a) && implies(aa->b, ba->b);
}

/** The tandem_cluster_tile calls of an expression (each CTA's tile), replaced by their tile or
 * their fallback (rank 0's). */
class ClusterTiles : public IRMutator {
public:
    enum Use { Own, First } use = Own;
    std::vector<Expr> owns; // of each call, distinct

private:
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        Expr own, tile, first;
        if (!ir::as_cluster_tile(op, &own, &tile, &first))
            return IRMutator::visit(op);
        if (std::none_of(owns.begin(), owns.end(), [&](const Expr &o) { return equal(o, own); }))
            owns.push_back(own);
        return use == Own ? tile : first;
    }
};

/** A condition on the unit's tile as rank 0's tile gives it, where that is the same on every
 * rank: a unit that owns its tile passes it there (owns => c(tile)), and c holds for rank 0's
 * tile wherever it holds for another rank's (CoreMapping's guard of a short tile group). */
Expr first_rank_condition(const Expr &c, int ctas, const std::map<std::string, Expr> &extents) {
    ClusterTiles own, first;
    first.use = ClusterTiles::First;
    Expr at_own = own.mutate(c), at_first = first.mutate(c);
    if (own.owns.size() != 1)
        return c;
    for (int rank = 0; rank < ctas; rank++) {
        if (!implies(as_rank(own.owns[0], ctas, rank, extents),
                     as_rank(at_own, ctas, rank, extents)) ||
            !implies(as_rank(at_own, ctas, rank, extents), as_rank(at_first, ctas, rank, extents)))
            return c;
    }
    return at_first;
}

/** Marks the shared copies, guards the output copies of tile-less CTAs. */
class Multicast : public IRMutator {
public:
    Multicast(const CompileContext &ctx) : ctx(ctx), extents(at_least_one(ctx)) {}
    std::set<std::string> multicast_barriers; // full barriers multicast copies complete on
    std::map<std::string, bool> loops;        // tile loops with copies into smem: any shared?

private:
    using IRMutator::visit;
    const CompileContext &ctx;
    const std::map<std::string, Expr> extents;
    std::string loop; // the enclosing tile loop

    std::vector<Expr> control; // the bounds and conditions between the tile loop and the op

    bool in_ring(const std::string &full) const {
        const std::string ring = full.substr(0, full.size() - std::string(".full").size());
        for (const BarrierDecl &b : ctx.barriers) {
            if (b.name == ir::empty_barrier(ring))
                return true;
        }
        return false;
    }

    Stmt visit(const For *op) override {
        if (!is_core_loop(op->name)) {
            if (loop.empty())
                return IRMutator::visit(op);
            control.push_back(op->min);
            control.push_back(op->extent);
            Stmt result = IRMutator::visit(op);
            control.resize(control.size() - 2);
            return result;
        }
        std::string outer = loop;
        std::vector<Expr> outer_control = std::move(control);
        loop = op->name;
        control.clear();
        Stmt result = IRMutator::visit(op);
        loop = outer;
        control = std::move(outer_control);
        return result;
    }

    Stmt visit(const IfThenElse *op) override {
        if (loop.empty())
            return IRMutator::visit(op);
        Expr condition = on_first_rank(op->condition);
        control.push_back(condition);
        Stmt then_case = mutate(op->then_case);
        Stmt else_case = op->else_case.defined() ? mutate(op->else_case) : Stmt();
        control.pop_back();
        return IfThenElse::make(condition, then_case, else_case);
    }

    Expr on_first_rank(const Expr &c) { return first_rank_condition(c, ctx.cluster, extents); }

    Stmt visit(const LetStmt *op) override {
        if (loop.empty())
            return IRMutator::visit(op);
        control.push_back(op->value); // conservatively: a let the op may read
        Stmt body = mutate(op->body);
        control.pop_back();
        return LetStmt::make(op->name, op->value, body);
    }

    Stmt visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (!ir::as_copy(op, &c) || loop.empty())
            return op;
        if (c.dst == ctx.output) {
            auto owns = ctx.cluster_owns_tile.find(loop);
            internal_assert(owns != ctx.cluster_owns_tile.end())
                << "cluster: no tile ownership for loop " << loop << "\n";
            return IfThenElse::make(owns->second, op);
        }
        bool &shared = loops[loop];
        // A version of a ring (its empty barrier keeps a peer from refilling what a CTA still
        // reads), the copy, and whether it runs at all, the same on every rank.
        if (!ctx.cluster_owns_tile.count(loop) || !in_ring(c.barrier) ||
            !same_for_cluster(copy_arguments(c), ctx.cluster, extents) ||
            !same_for_cluster(control, ctx.cluster, extents))
            return op;
        c.multicast = ctx.cluster;
        multicast_barriers.insert(c.barrier);
        shared = true;
        return ir::make_copy(c);
    }
};

/** Consumers release the versions of multicast rings on every CTA of the cluster. */
class ClusterArrivals : public IRMutator {
public:
    ClusterArrivals(const std::set<std::string> &empty, int ctas) : empty(empty), ctas(ctas) {}

private:
    using IRMutator::visit;
    const std::set<std::string> &empty;
    const int ctas;
    Stmt visit(const Evaluate *op) override {
        ir::ArriveOp a;
        if (!ir::as_arrive(op, &a) || !empty.count(a.barrier))
            return op;
        a.cluster = ctas;
        return ir::make_arrive(a);
    }
};

/** The producer's tail: one more wait on each version's empty barrier of each multicast ring. */
Stmt producer_tail(const std::string &ring, int versions) {
    const std::string counter = ring + ".ring";
    Expr position = int_var(counter);
    Stmt wait = ir::make_wait(
        {ir::empty_barrier(ring), position % versions, 1 - (position / versions) % 2});
    return For::make(ring + ".cluster_tail", 0, versions, ForType::Serial, Halide::DeviceAPI::None,
                     Block::make(wait, ir::make_advance(counter)));
}

Stmt append_to_producer(const Stmt &s, const Stmt &tail) {
    const IfThenElse *roles = s.as<IfThenElse>();
    internal_assert(roles && equal(roles->condition, ir::warpgroup() == 0))
        << "cluster: no producer role\n"
        << s;
    std::function<Stmt(const Stmt &)> inside = [&](const Stmt &body) -> Stmt {
        if (const LetStmt *l = body.as<LetStmt>())
            return LetStmt::make(l->name, l->value, inside(l->body));
        return Block::make(body, tail);
    };
    return IfThenElse::make(roles->condition, inside(roles->then_case), roles->else_case);
}

} // namespace

bool same_for_cluster(const std::vector<Expr> &exprs, const CompileContext &ctx) {
    return same_for_cluster(exprs, ctx.cluster, at_least_one(ctx));
}

Expr on_first_rank(const Expr &c, const CompileContext &ctx) {
    return first_rank_condition(c, ctx.cluster, at_least_one(ctx));
}

Expr owns_tiles(const std::vector<Expr> &exprs) {
    ClusterTiles tiles;
    for (const Expr &e : exprs)
        tiles.mutate(e);
    Expr owns;
    for (const Expr &o : tiles.owns)
        owns = owns.defined() ? owns && o : o;
    return owns;
}

bool holds_for_first_rank(const Expr &cond, const std::string &var, const Expr &min, int ctas,
                          const CompileContext &ctx) {
    const std::map<std::string, Expr> extents = at_least_one(ctx);
    auto at = [&](int rank) {
        return as_rank(substitute(var, min + int_var("tandem.cluster.group") * ctas + rank, cond),
                       ctas, rank, extents);
    };
    const Expr first = at(0);
    for (int rank = 1; rank < ctas; rank++) {
        if (!implies(at(rank), first))
            return false;
    }
    return true;
}

Stmt multicast_in_clusters(const Stmt &s, CompileContext &ctx) {
    if (ctx.cluster <= 1)
        return s;
    Multicast m(ctx);
    Stmt result = m.mutate(s);
    for (const auto &[loop, shared] : m.loops) {
        if (shared)
            continue;
        ctx.notes.push_back("cluster: no copy in " + loop + " is the same for the " +
                            std::to_string(ctx.cluster) +
                            " CTAs of a cluster; nothing is multicast there");
    }
    std::set<std::string> empty;
    std::vector<Stmt> tails;
    for (const std::string &full : m.multicast_barriers) {
        const std::string ring = full.substr(0, full.size() - std::string(".full").size());
        for (BarrierDecl &b : ctx.barriers) {
            if (b.name != ir::empty_barrier(ring))
                continue;
            b.arrivals *= ctx.cluster;
            empty.insert(b.name);
            tails.push_back(producer_tail(ring, b.slots));
        }
        ctx.notes.push_back("cluster: copies completing on " + full + " are multicast to the " +
                            std::to_string(ctx.cluster) +
                            " CTAs of a cluster (where TMA moves them: a tile threads "
                            "copy stays local); their versions are released on every CTA's " +
                            ir::empty_barrier(ring));
    }
    internal_assert(empty.size() == m.multicast_barriers.size())
        << "cluster: a multicast copy completes on a barrier of no producer / consumer ring\n";
    if (empty.empty())
        return result;
    result = ClusterArrivals(empty, ctx.cluster).mutate(result);
    return append_to_producer(result, block(tails));
}

} // namespace tandem::lower
