#include "VectorCost.h"

#include "ElementLoops.h"
#include "tandem/Error.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::hopper_backend {

using namespace Halide::Internal;
using lower::affine_step;

namespace {

/** A load or store of a shared tile (not an accumulator: those are registers). */
struct SharedAccess {
    std::string buffer;
    Expr index;
    int bytes = 4;
    const void *node = nullptr; // the Load or Store
};

class SharedAccesses : public IRVisitor {
public:
    explicit SharedAccesses(const Plan &plan) : plan(plan) {}
    std::vector<SharedAccess> found;

private:
    using IRVisitor::visit;
    const Plan &plan;
    void add(const std::string &name, const Expr &index, const Halide::Type &t, const void *node) {
        if (!plan.tiles.count(name) || plan.accumulators.count(name))
            return;
        found.push_back({name, index, std::max(1, t.bytes()), node});
    }
    void visit(const Load *op) override {
        add(op->name, op->index, op->type, op);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        add(op->name, op->index, op->value.type(), op);
        IRVisitor::visit(op);
    }
};

/** The wavefronts of one warp-wide access whose lanes touch these elements (of `bytes` each):
 * the most distinct 4-byte words any one of the 32 banks holds. */
int64_t wavefronts(const std::vector<int64_t> &elements, int bytes) {
    std::map<int64_t, std::set<int64_t>> banks;
    for (int64_t e : elements) {
        const int64_t word = e * bytes / 4;
        banks[((word % 32) + 32) % 32].insert(word);
    }
    size_t most = 1;
    for (const auto &[bank, words] : banks)
        most = std::max(most, words.size());
    return int64_t(most);
}

/** Where the row-major element `e` of a swizzled tile (Tile::swizzled) lies: as
 * hopper::swizzled_128B, the 16-byte chunk of a row XORed with the row's index mod 8 in column
 * blocks of 128 bytes. */
int64_t swizzled_element(const Tile &t, int64_t e) {
    const int64_t bytes = t.buffer->type.bytes(), row_elements = swizzle_bytes / bytes,
                  chunk = 16 / bytes, row = e / t.layout[0], col = e % t.layout[0],
                  in_row = col % row_elements;
    return col / row_elements * row_elements * t.layout[1] + row * row_elements +
           ((in_row / chunk) ^ (row % 8)) * chunk + in_row % chunk;
}

/** The step of `index` along `var` as a number (0 where it does not move with it, or is not
 * affine: counted as a broadcast). */
int64_t step_along(const Expr &index, const std::string &var,
                   const std::function<int64_t(const Expr &)> &value) {
    if (var.empty())
        return 0;
    Expr step = affine_step(index, var);
    return step.defined() ? value(simplify(step)) : 0;
}

/** The elements of a nest: the product of its loops' extents (`value` takes the nest's own loop
 * vars at their first iteration). */
int64_t elements_of(const std::vector<Loop> &loops,
                    const std::function<int64_t(const Expr &)> &value) {
    int64_t n = 1;
    for (const Loop &l : loops)
        n *= std::max<int64_t>(0, value(l.extent));
    return n;
}

/** The nest's own loop vars at their first iteration and its lets at their values: what its
 * extents and steps may name besides the tile loops' vars. */
class FirstIteration : public IRVisitor {
public:
    std::map<std::string, Expr> values;

private:
    using IRVisitor::visit;
    void visit(const For *op) override {
        values[op->name] = substitute(values, op->min);
        IRVisitor::visit(op);
    }
    void visit(const LetStmt *op) override {
        values[op->name] = substitute(values, op->value);
        IRVisitor::visit(op);
    }
};

} // namespace

VectorCost vector_cost(const Plan &plan, const ir::VectorOp &v, const Stmt &nest, int threads,
                       const std::function<int64_t(const Expr &)> &evaluate) {
    FirstIteration first;
    nest.accept(&first);
    auto value = [&](const Expr &e) { return evaluate(simplify(substitute(first.values, e))); };
    VectorCost cost;
    const int warps = std::max(1, threads / 32);
    const Plan::FragmentUse use = plan.fragment_use(v, nest);
    if (use.kind == Plan::FragmentUse::Kind::Zeroing)
        return cost; // registers only
    try {
        if (use.kind != Plan::FragmentUse::Kind::None) {
            const FragmentEpilogue e = map_epilogue(plan, v, nest, use.acc, nullptr,
                                                    use.kind == Plan::FragmentUse::Kind::Epilogue);
            // Each instruction: a warp's 32 lanes at rows fragment_row (8 of them) and columns
            // 2 (lane % 4) of the fragment (the accumulators it reads are registers).
            const int64_t instructions = (elements_of(e.loops, value) + 31) / 32;
            // A row's value (FragmentEpilogue::row_loads, a row reduction's element): each
            // quad's threads share the row, a warp's instruction covers 8 rows (one wavefront).
            const int64_t per_row = (std::max<int64_t>(0, value(e.rows)) + 7) / 8;
            SharedAccesses found(plan);
            e.body.accept(&found);
            for (const SharedAccess &a : found.found) {
                const bool row_load =
                    std::any_of(e.row_loads.begin(), e.row_loads.end(), [&](const Load *l) {
                        return l->name == a.buffer && equal(l->index, a.index);
                    });
                if (row_load || (e.row_reduction && a.buffer == e.row_reduction->store->name)) {
                    cost.wavefronts += per_row;
                    continue;
                }
                const Tile &t = plan.tiles.at(a.buffer);
                // The paired store: one instruction for two adjacent columns.
                const int pair = a.node == e.pair ? 2 : 1;
                int64_t per = (32 * pair * a.bytes + 127) / 128;
                if (!t.swizzled) {
                    const int64_t row = t.dynamic_layout ? t.layout[0]
                                                         : step_along(a.index, e.row, value),
                                  col = t.dynamic_layout ? 1 : step_along(a.index, e.col, value);
                    std::vector<int64_t> lanes;
                    for (int lane = 0; lane < 32; lane++) {
                        for (int j = 0; j < pair; j++)
                            lanes.push_back(lane / 4 * row + (2 * (lane % 4) + j) * col);
                    }
                    per = std::max(per, wavefronts(lanes, a.bytes));
                }
                cost.wavefronts += (instructions + pair - 1) / pair * per;
            }
            if (e.row_reduction)
                cost.rounds += 2 * 2; // per half of a thread's rows: a quad's 2 shuffles
            return cost;
        }
        const TileNest n = map_tile_nest(plan, nest, threads);
        // (An elementwise nest's code reads its invariant loads from registers.)
        SharedAccesses found(plan);
        (n.kind == TileNest::Kind::Elementwise ? n.code : n.body).accept(&found);
        const int64_t elements = elements_of(n.loops, value);
        // (A held store's element: read and written once per strided element.)
        const int64_t held = n.held ? elements_of(n.strided, value) : 0;
        const std::vector<Loop> &lanes_along =
            n.kind == TileNest::Kind::ThreadPerElement ? n.strided : n.loops;
        const std::string inner = lanes_along.empty() ? "" : lanes_along.back().name;
        for (const SharedAccess &a : found.found) {
            if (n.kind == TileNest::Kind::Serial) {
                cost.rounds += elements;
                continue;
            }
            // Strided over the threads: lane i at the innermost (strided) loop's element i.
            const int64_t step = step_along(a.index, inner, value);
            if (step == 0)
                continue; // a row's element, read or written once per row
            const Tile &t = plan.tiles.at(a.buffer);
            std::vector<int64_t> lanes;
            for (int lane = 0; lane < 32; lane++) {
                const int64_t e = lane * step;
                lanes.push_back(t.swizzled && e >= 0 ? swizzled_element(t, e) : e);
            }
            const int64_t times = n.held && a.buffer == n.held->name ? held : elements;
            cost.wavefronts += (times + 31) / 32 * wavefronts(lanes, a.bytes);
        }
        if (n.kind == TileNest::Kind::Reduction) {
            const int64_t k = n.loops.empty() ? 1 : value(n.loops.back().extent);
            const int64_t rows = k > 0 ? elements / k : 0;
            // 5 shuffle rounds per row and a load before them; a warp per row takes its warp's
            // rows in turn, else the warps meet through shared memory and a barrier per row.
            cost.rounds += n.reduction.warp_per_row ? (rows + warps - 1) / warps * 6 : rows * 8;
        }
    } catch (const Error &) {
        // A nest the emitter refuses: the refusal is its own (the emitter runs the same mapping).
        return VectorCost();
    }
    return cost;
}

} // namespace tandem::hopper_backend
