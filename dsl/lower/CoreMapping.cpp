#include "CoreMapping.h"
#include "Targets.h"

#include "Cluster.h"
#include "tandem/Nest.h"

#include "tandem/AsyncIR.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

class SpreadLoops : public IRMutator {
public:
    SpreadLoops(const std::string &stage, const std::string &var, Halide::Expr cores,
                const CompileContext &ctx, int cluster = 1)
        : stage(stage), var(var), cores(std::move(cores)), ctx(ctx), cluster(cluster) {}
    int mapped = 0;
    int64_t largest_extent = 0;
    Halide::Expr tiles; // the largest extent of the loops mapped (symbolic with runtime extents)
    std::map<std::string, Expr> owns_tile; // clusters: per mapped loop, whether the CTA has a tile

    /** The loop `local` over a mapped loop's `extent` iterations from `min` (a tile loop or the
     * straight-line tail of one). Core c runs iterations c, c + cores, ...; in a cluster every CTA
     * runs as many as its cluster's first (rank 0), and one without a tile of its own (past the
     * last iteration, or failing a guard around the whole tile that rank 0 passes) runs rank 0's,
     * storing nothing. */
    Stmt spread(const std::string &name, const Expr &min, const Expr &extent, ForType type,
                Halide::DeviceAPI api, const Stmt &body, const std::string &var_name) {
        std::string local = core_loop_name(name);
        Expr core = ir::core_id(), first = cluster > 1 ? core - core % cluster : core;
        Expr trips = (extent - first + (cores - 1)) / cores;
        Expr k = Variable::make(Halide::Int(32), local);
        Expr raw = core + k * cores, first_raw = first + k * cores;
        Expr guard, tile = raw;
        if (cluster > 1) {
            // A guard around the whole tile (a short last group of tile rows) that holds for rank
            // 0 wherever it holds for another rank: a rank it fails for has no tile of its own
            // (the guard stays, on the tile run; Cluster.h evaluates it on rank 0's).
            const IfThenElse *g = body.as<IfThenElse>();
            if (g && !g->else_case.defined() && !var_name.empty() &&
                expr_uses_var(g->condition, var_name) &&
                holds_for_first_rank(g->condition, var_name, min, cluster, ctx)) {
                guard = g->condition;
            }
            Expr owns = raw < extent;
            if (guard.defined())
                owns = owns && substitute(var_name, min + raw, guard);
            owns_tile[local] = owns;
            tile = ir::cluster_tile(owns, raw, first_raw);
        }
        // The clamp promise keeps the original range visible to bounds inference (sizes of
        // buffers that depend on the tile index stay boundable).
        Expr iteration = Call::make(Halide::Int(32), Call::promise_clamped,
                                    {min + tile, min, min + extent - 1}, Call::PureIntrinsic);
        return For::make(local, 0, trips, type, api,
                         var_name.empty() ? body : substitute(var_name, iteration, body));
    }

private:
    using IRMutator::visit;
    const std::string stage, var;
    const Halide::Expr cores; // a constant, or Hopper's grid_size() for a grid sized at launch
    const CompileContext &ctx;
    const int cluster;

    /** Halide names loops stage.var with the vars a var was split or fused from in front
     * ("C.s0.j.jo.t") and ".rebased" behind a partitioned tail: match the var's component. */
    bool matches(const std::string &name) const {
        if (name.rfind(stage + ".", 0) != 0)
            return false;
        std::vector<std::string> parts;
        std::stringstream ss(name.substr(stage.size() + 1));
        for (std::string p; std::getline(ss, p, '.');)
            parts.push_back(p);
        while (!parts.empty() && parts.back() == "rebased")
            parts.pop_back();
        return !parts.empty() && parts.back() == var;
    }

    Stmt visit(const For *op) override {
        if (!matches(op->name))
            return IRMutator::visit(op);
        mapped++;
        const IntImm *e = op->extent.as<IntImm>();
        largest_extent = std::max<int64_t>(largest_extent, e ? e->value : 0);
        tiles = tiles.defined() ? Max::make(tiles, op->extent) : op->extent;
        return spread(op->name, op->min, op->extent, op->for_type, op->device_api, op->body,
                      op->name);
    }
};

class WritesBuffer : public IRVisitor {
public:
    explicit WritesBuffer(const std::string &b) : buffer(b) {}
    bool found = false;

private:
    using IRVisitor::visit;
    const std::string &buffer;
    void visit(const Store *op) override {
        if (op->name == buffer)
            found = true;
        IRVisitor::visit(op);
    }
};

class HasMappedLoop : public IRVisitor {
public:
    bool found = false;

private:
    using IRVisitor::visit;
    void visit(const For *op) override {
        if (is_core_loop(op->name))
            found = true;
        IRVisitor::visit(op);
    }
};

/** Output writes outside the mapped loops (the straight-line tail Halide's loop partitioning
 * leaves after a tile loop) run on one core only (in a cluster: on the first cluster, as a mapped
 * loop of one iteration, so that its CTAs meet on their rings); the rest (e.g. staging
 * compute_root inputs) runs on every core, since each core has its own SRAM. */
Stmt guard_tails(const Stmt &s, const std::string &output, const Expr &core, SpreadLoops &spread,
                 int &tails) {
    WritesBuffer w(output);
    s.accept(&w);
    if (!w.found)
        return s;
    HasMappedLoop m;
    s.accept(&m);
    if (!m.found && spread.owns_tile.empty())
        return IfThenElse::make(ir::core_id() == core, s);
    if (!m.found) {
        return spread.spread(output + ".s0.tail" + std::to_string(tails++), 0, 1, ForType::Serial,
                             Halide::DeviceAPI::None, s, "");
    }
    if (const Block *b = s.as<Block>()) {
        return Block::make(guard_tails(b->first, output, core, spread, tails),
                           guard_tails(b->rest, output, core, spread, tails));
    }
    if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
        return ProducerConsumer::make(pc->name, pc->is_producer,
                                      guard_tails(pc->body, output, core, spread, tails));
    }
    if (const Allocate *a = s.as<Allocate>()) {
        return Allocate::make(a->name, a->type, a->memory_type, a->extents, a->condition,
                              guard_tails(a->body, output, core, spread, tails));
    }
    if (const LetStmt *l = s.as<LetStmt>()) {
        return LetStmt::make(l->name, l->value, guard_tails(l->body, output, core, spread, tails));
    }
    // A loop of the output around the mapped one (map_to_cores on a var inside another, rows
    // outside the tiles): its tail stays inside it, once per iteration.
    if (const For *f = s.as<For>(); f && !is_core_loop(f->name)) {
        return For::make(f->name, f->min, f->extent, f->for_type, f->device_api,
                         guard_tails(f->body, output, core, spread, tails));
    }
    if (const IfThenElse *i = s.as<IfThenElse>()) {
        return IfThenElse::make(
            i->condition, guard_tails(i->then_case, output, core, spread, tails),
            i->else_case.defined() ? guard_tails(i->else_case, output, core, spread, tails)
                                   : Stmt());
    }
    return s;
}

/** The tiles of a mapped loop Halide's partitioning left as straight-line code (a main loop of
 * one iteration, removed, and its tail), one core each: every piece of `s` that writes the output
 * (past the ProducerConsumer, LetStmt and Block nodes around them) runs on core `pieces %
 * units`, counting pieces; what writes no output runs on every core, as guard_tails does. */
Stmt one_core_per_piece(const Stmt &s, const std::string &output, int units, int &pieces) {
    WritesBuffer w(output);
    s.accept(&w);
    if (!w.found)
        return s;
    if (const Block *b = s.as<Block>()) {
        Stmt first = one_core_per_piece(b->first, output, units, pieces);
        return Block::make(first, one_core_per_piece(b->rest, output, units, pieces));
    }
    if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
        return ProducerConsumer::make(pc->name, pc->is_producer,
                                      one_core_per_piece(pc->body, output, units, pieces));
    }
    if (const LetStmt *l = s.as<LetStmt>())
        return LetStmt::make(l->name, l->value, one_core_per_piece(l->body, output, units, pieces));
    return IfThenElse::make(ir::core_id() == pieces++ % units, s);
}

bool is_loop_var_of_output(const Func &output, const std::string &var) {
    // Schedule dims are named like loops, with the vars they came from in front ("j.jo.t").
    for (const auto &dim : output.halide().function().definition().schedule().dims()) {
        const std::string &n = dim.var;
        if (n == var || (n.size() > var.size() &&
                         n.compare(n.size() - var.size() - 1, var.size() + 1, "." + var) == 0)) {
            return true;
        }
    }
    return false;
}

/** A warning when `tiles` leave most of the machine's units idle. */
void warn_idle(CompileContext &ctx, const std::string &var, int64_t tiles) {
    const int units = ctx.vector_units_only ? ctx.target.vector_units() : ctx.target.units();
    if (2 * tiles >= units)
        return;
    ctx.warnings.push_back("Func '" + ctx.output + "': map_to_cores(" + var + ") has " +
                           std::to_string(tiles) + " tile(s) for the " + std::to_string(units) +
                           " " + lowering_of(ctx.target).unit_noun + " of " + ctx.target.name() +
                           ", which leaves most of them idle; smaller tiles spread the work");
}

} // namespace

Stmt map_to_cores(const Stmt &s, CompileContext &ctx) {
    const Directives d = ctx.of(ctx.output);
    // A kernel without a tile MMA runs on the vector units where the machine has its own
    // (Ascend's AIV cores; the cube cores' kernels run on the AIC).
    ctx.vector_units_only = std::none_of(ctx.directives.begin(), ctx.directives.end(),
                                         [](const auto &d) { return d.second.tile_mma; });
    if (d.cores_var.empty()) {
        ctx.notes.push_back("no map_to_cores on " + ctx.output +
                            ": the kernel runs on core 0 only");
        ctx.grid = 1;
        return IfThenElse::make(ir::core_id() == 0, s);
    }
    // The ZPU has a fixed number of cores. On Hopper a CTA per tile, or with ping_pong or
    // cooperative a persistent grid of at most one CTA per SM that loops over tiles (the producer
    // then loads the next tile while the consumers finish this one), or persistent(n) CTAs per SM.
    int units = ctx.vector_units_only ? ctx.target.vector_units() : ctx.target.units();
    if (lowering_of(ctx.target).grid_of_tiles) {
        int64_t tiles = 1;
        SpreadLoops probe(ctx.output + ".s0", d.cores_var, 1, ctx);
        probe.mutate(s);
        tiles = std::max<int64_t>(1, probe.largest_extent);
        // A tile count known only at run time: a persistent grid, launched as the smaller of
        // the grid and the call's tile count (the CTAs past it would find no tile).
        const bool runtime = probe.mapped && !is_const(simplify(probe.tiles));
        const bool persistent =
            d.ping_pong || (d.cooperative && d.warp_specialize) || d.persistent > 0 || runtime;
        if (runtime)
            tiles = std::numeric_limits<int>::max();
        units =
            int(persistent ? std::min<int64_t>(tiles, int64_t(units) * std::max(1, d.persistent))
                           : tiles);
        if (d.cluster > 1) {
            // Whole clusters: the last one's CTAs past the tile count run without a tile of their
            // own.
            ctx.cluster = d.cluster;
            units = (units + d.cluster - 1) / d.cluster * d.cluster;
        }
        ctx.one_tile_per_unit = !persistent;
        if (persistent && probe.mapped) {
            // The grid is sized at launch from the GPU's SM count (min(SMs x per SM, tiles)): the
            // tile loop strides by grid_size(); the model launches `units` (its SMs).
            ctx.ctas_per_sm = std::max(1, d.persistent);
            ctx.tiles = simplify(probe.tiles);
        }
    }
    if (d.cluster > 1 && !lowering_of(ctx.target).grid_of_tiles) {
        // A fixed number of cores, a multiple of the cluster (Validate): core c's cluster is
        // c / cluster.
        ctx.cluster = d.cluster;
    }
    ctx.grid = units;
    const Expr stride = ctx.ctas_per_sm ? ir::grid_size() : Expr(units);
    SpreadLoops spread(ctx.output + ".s0", d.cores_var, stride, ctx, ctx.cluster);
    Stmt result = spread.mutate(s);
    if (spread.mapped == 0 && ctx.output_func &&
        is_loop_var_of_output(*ctx.output_func, d.cores_var)) {
        // Halide removed the loop: one tile, or a main loop of one tile and its partitioned
        // tail. Each straight-line tile gets a core of its own (a cluster runs them on one).
        int pieces = 0;
        const int spread_over = lowering_of(ctx.target).grid_of_tiles ? 1 << 30 : units;
        Stmt tiles = d.cluster > 1 ? IfThenElse::make(ir::core_id() == 0, s)
                                   : one_core_per_piece(s, ctx.output, spread_over, pieces);
        pieces = std::max(pieces, 1);
        warn_idle(ctx, d.cores_var, pieces);
        ctx.notes.push_back(
            "map_to_cores: the loop over " + d.cores_var + " has " + std::to_string(pieces) +
            " iteration(s), which Halide's partitioning left as straight-line "
            "code: spread over " +
            std::to_string(std::min(pieces, units)) + " " + lowering_of(ctx.target).unit_noun);
        ctx.grid = lowering_of(ctx.target).grid_of_tiles ? pieces : units;
        ctx.ctas_per_sm = 0;
        ctx.cluster = 1;
        ctx.tiles = Expr();
        return tiles;
    }
    if (spread.mapped == 0) {
        throw Error("Func '" + ctx.output + "', directive map_to_cores(" + d.cores_var +
                    "): " + ctx.output + " has no loop over " + d.cores_var +
                    " after lowering; name a loop var of its pure stage (after split/tile/fuse)");
    }
    ctx.notes.push_back("map_to_cores: loop " + d.cores_var + " of " + ctx.output +
                        " spread over " + std::to_string(units) + " " +
                        lowering_of(ctx.target).unit_noun + " (" + std::to_string(spread.mapped) +
                        " loop(s) after Halide's partitioning)");
    // A static tile count (a partitioned tail's tile included) below half the machine's units.
    if (spread.largest_extent > 0 && is_const(simplify(spread.tiles))) {
        warn_idle(ctx, d.cores_var, spread.largest_extent + (spread.mapped > 1 ? 1 : 0));
    }
    int tails = 0;
    result = guard_tails(result, ctx.output, simplify(stride - 1), spread, tails);
    ctx.cluster_owns_tile = spread.owns_tile;
    if (ctx.cluster > 1) {
        const std::string &units = lowering_of(ctx.target).unit_noun;
        ctx.notes.push_back("cluster: " + std::to_string(ctx.cluster) +
                            " consecutive iterations of " + d.cores_var + " per cluster of " +
                            std::to_string(ctx.cluster) + " " + units +
                            " (one without a tile of its own runs rank 0's and stores "
                            "nothing)");
    }
    return result;
}

} // namespace tandem::lower
