#include "ElementLoops.h"

#include "tandem/Nest.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace tandem::hopper_backend {

using namespace Halide::Internal;
using lower::affine_step;
using lower::constant_upper_bound;

namespace {

class LoadsOf : public IRVisitor {
public:
    explicit LoadsOf(const std::string &b) : buffer(b) {}
    std::vector<const Load *> loads;

private:
    const std::string buffer;
    using IRVisitor::visit;
    void visit(const Load *op) override {
        if (op->name == buffer)
            loads.push_back(op);
        IRVisitor::visit(op);
    }
};

template <class Node> class Collect : public IRVisitor {
public:
    std::vector<const Node *> nodes;

private:
    using IRVisitor::visit;
    void visit(const Node *op) override {
        nodes.push_back(op);
        IRVisitor::visit(op);
    }
};

template <class Node, class IR> std::vector<const Node *> collect(const IR &ir) {
    Collect<Node> c;
    ir.accept(&c);
    return c.nodes;
}

/** Whether `index` tells apart the values of the loops it moves along: each loop's step is affine
 * and, ordered by size, each larger than the reach of the smaller ones (like the digits of a
 * number), so that no two iterations that differ in those loops meet at one element. `moved[i]`
 * is cleared for the loops whose step is 0. */
bool tells_apart(const std::vector<Loop> &loops, const Expr &index, std::vector<bool> *moved) {
    struct Term {
        Expr step, extent;
        int64_t largest;
    };
    std::vector<Term> terms;
    for (size_t i = 0; i < loops.size(); i++) {
        Expr step = affine_step(index, loops[i].name);
        if (!step.defined())
            return false;
        step = simplify(step);
        if (is_const_zero(step)) {
            (*moved)[i] = false;
            continue;
        }
        if (proven(step < 0))
            step = simplify(-step);
        else if (!proven(step > 0))
            return false;
        // (Unbounded steps last: larger than every constant one.)
        const int64_t largest = constant_upper_bound(step);
        terms.push_back({step, loops[i].extent, largest < 0 ? INT64_MAX : largest});
    }
    std::stable_sort(terms.begin(), terms.end(),
                     [](const Term &a, const Term &b) { return a.largest < b.largest; });
    Expr reach = 0;
    for (const Term &t : terms) {
        if (!proven(t.step > reach))
            return false;
        reach = simplify(reach + t.step * (t.extent - 1));
    }
    return true;
}

/** Every store of the body writes a distinct element per iteration (tells_apart, every loop
 * moving it) and the nest reads the stored buffers only at the element it writes. */
bool independent(const std::vector<Loop> &loops, const Stmt &body) {
    for (const Store *st : collect<Store>(body)) {
        std::vector<bool> moved(loops.size(), true);
        if (!tells_apart(loops, st->index, &moved) ||
            std::find(moved.begin(), moved.end(), false) != moved.end())
            return false;
        LoadsOf self(st->name);
        body.accept(&self);
        for (const Load *l : self.loads) {
            if (!equal(l->index, st->index))
                return false;
        }
    }
    return true;
}

bool rectangular(const std::vector<Loop> &loops) {
    for (size_t i = 0; i < loops.size(); i++) {
        for (size_t j = 0; j < i; j++) {
            if (expr_uses_var(loops[i].min, loops[j].name) ||
                expr_uses_var(loops[i].extent, loops[j].name))
                return false;
        }
    }
    return true;
}

/** Whether `s` still contains `load` (an earlier substitution may have taken it). */
bool contains_load(const Stmt &s, const Load *load) {
    for (const Load *l : collect<Load>(s)) {
        if (l == load || equal(Expr(l), Expr(load)))
            return true;
    }
    return false;
}

/** The loops a thread per element may stride over the threads: those every store moves along,
 * where each store's index tells the loops' values apart (tells_apart) and the nest reads a
 * stored buffer only at the element it writes. The other loops then run in order in each
 * thread. Empty where no loop qualifies. */
std::vector<size_t> strided_loops(const std::vector<Loop> &loops, const Stmt &body) {
    const std::vector<const Store *> stores = collect<Store>(body);
    std::vector<bool> moved(loops.size(), !stores.empty());
    for (const Store *st : stores) {
        LoadsOf self(st->name);
        body.accept(&self);
        for (const Load *l : self.loads) {
            if (!equal(l->index, st->index))
                return {};
        }
        if (!tells_apart(loops, st->index, &moved))
            return {};
    }
    std::vector<size_t> r;
    for (size_t i = 0; i < loops.size(); i++) {
        if (moved[i])
            r.push_back(i);
    }
    return r;
}

/** store = store op rest (op: a sum, max or min), rest reading no other element of the store's
 * buffer; with the op's identity. */
std::optional<Reduction> fold_of(const Store *st) {
    Reduction r;
    r.store = st;
    Expr a, b;
    if (const Add *add = st->value.as<Add>())
        r.op = Reduction::Op::Add, a = add->a, b = add->b;
    else if (const Max *max = st->value.as<Max>())
        r.op = Reduction::Op::Max, a = max->a, b = max->b;
    else if (const Min *min = st->value.as<Min>())
        r.op = Reduction::Op::Min, a = min->a, b = min->b;
    else
        return std::nullopt;
    const Load *self = a.as<Load>();
    if (self && self->name == st->name && equal(self->index, st->index)) {
        r.self_load = a, r.rest = b;
    } else if ((self = b.as<Load>()) && self->name == st->name && equal(self->index, st->index)) {
        r.self_load = b, r.rest = a;
    } else {
        return std::nullopt;
    }
    LoadsOf others(st->name);
    r.rest.accept(&others);
    if (!others.loads.empty())
        return std::nullopt;
    const Halide::Type &t = st->value.type();
    r.identity = r.op == Reduction::Op::Add   ? make_zero(t)
                 : r.op == Reduction::Op::Max ? t.min()
                                              : t.max();
    return r;
}

/** store[i] = store[i] op f(k) over the innermost loop k, into a shared tile. */
std::optional<Reduction> match_reduction(const Plan &plan, const std::vector<Loop> &loops,
                                         const Stmt &body, int threads) {
    const Store *st = body.as<Store>();
    if (!st)
        return std::nullopt;
    const Loop &k = loops.back();
    Expr step = affine_step(st->index, k.name);
    if (!step.defined() || !is_const_zero(step))
        return std::nullopt;
    std::optional<Reduction> r = fold_of(st);
    if (!r || !plan.tiles.count(st->name))
        return std::nullopt;
    // Four rows or more (the loops outside k): a warp per row, shuffles only, no barrier.
    Expr rows = 1;
    for (size_t i = 0; i + 1 < loops.size(); i++)
        rows = rows * loops[i].extent;
    r->warp_per_row = loops.size() > 1 && constant_upper_bound(simplify(rows)) >= threads / 32;
    return r;
}

/** A row's reduction over the fragment's columns: tile[row] = tile[row] op f(row, col), with
 * no other load of tile in f; the body's one store not walking the columns (its others are
 * elementwise: P beside its row sum, sharing the exponentials through lets). */
std::optional<Reduction> match_row_reduction(const Plan &plan, const FragmentEpilogue &e) {
    if (e.loops.size() != 2)
        return std::nullopt;
    const Store *st = nullptr;
    for (const Store *s : collect<Store>(e.body)) {
        Expr along_col = affine_step(s->index, e.col);
        if (!plan.tiles.count(s->name) || !along_col.defined() || !is_const_zero(along_col))
            continue;
        auto fail = [&](const std::string &why) -> std::optional<Reduction> {
            throw Error("hopper: the epilogue into " + s->name +
                        " writes one element for many of the accumulator's columns, but " + why +
                        "; the emitter reduces an accumulator's rows (sum, max or min over their "
                        "columns)");
        };
        if (st)
            return fail("so does its store into " + st->name);
        st = s;
        Expr along_row = affine_step(st->index, e.row);
        if (!along_row.defined() || is_const_zero(along_row))
            return fail("reduces the whole tile to one element");
    }
    if (!st)
        return std::nullopt;
    std::optional<Reduction> r = fold_of(st);
    if (!r)
        throw Error("hopper: the epilogue into " + st->name +
                    " writes one element for many of the accumulator's columns, but it is not a "
                    "sum, max or min of the element and the accumulator's, reading no other "
                    "element of " +
                    st->name +
                    "; the emitter reduces an accumulator's rows (sum, max or min over their "
                    "columns)");
    return r;
}

} // namespace

Stmt peel_loops(const Stmt &nest, std::vector<Loop> *loops) {
    Stmt s = nest;
    while (const For *f = s.as<For>()) {
        loops->push_back({f->name, f->min, f->extent});
        s = f->body;
    }
    return s;
}

FragmentEpilogue map_epilogue(const Plan &plan, const ir::VectorOp &v, const Stmt &nest,
                              const std::string &acc, const ir::MmaOp *tile, bool reads_acc) {
    FragmentEpilogue e;
    std::vector<Loop> &loops = e.loops;
    e.body = peel_loops(nest, &loops);
    const Stmt &body = e.body;
    LoadsOf reads(acc);
    body.accept(&reads);
    auto fail = [&](const std::string &why) {
        throw Error("hopper: vector op " + v.label +
                    (reads_acc ? " reads the accumulator " + acc
                               : " writes an MMA operand made on chip over the tile of " + acc) +
                    "; the emitter maps only a 2-D per-element nest onto the wgmma fragments (" +
                    why + ")");
    };
    if (loops.size() > 2 || !collect<For>(body).empty())
        fail("it is not one or two loops around the element code");
    // The element the nest walks: its accumulator load, or (walking another's fragments) its
    // store into the operand.
    Expr index;
    if (reads_acc) {
        if (reads.loads.empty())
            fail("no element load of the accumulator");
        for (const Load *l : reads.loads) {
            if (!equal(l->index, reads.loads[0]->index))
                fail("it reads more than one element");
        }
        index = reads.loads[0]->index;
    } else {
        for (const Store *st : collect<Store>(body)) {
            auto t = plan.tiles.find(st->name);
            if (t == plan.tiles.end() || !t->second.on_chip)
                fail("it also writes " + st->name + ", which is not an MMA operand");
            if (index.defined() && !equal(index, st->index))
                fail("it writes more than one element");
            index = st->index;
        }
    }
    // A loop Halide removed (a tile of one row or one column) stays at 0.
    const Accumulator &a = plan.accumulators.at(acc);
    e.accumulators = {acc};
    for (const auto &[name, other] : plan.accumulators) {
        LoadsOf of(name);
        body.accept(&of);
        if (name == acc || of.loads.empty())
            continue;
        if (other.m != a.m || other.n != a.n || !proven(other.stride_m == a.stride_m))
            fail("it also reads " + name + ", whose MMA tile is not " + acc + "'s");
        for (const Load *l : of.loads) {
            if (!equal(l->index, reads.loads[0]->index))
                fail("it reads " + name + " at another element than " + acc);
        }
        e.accumulators.push_back(name);
    }
    for (const Store *st : collect<Store>(body)) {
        // (In place: the element it reads, rescaled.)
        if (plan.accumulators.count(st->name) &&
            (!reads_acc || st->name != acc || !equal(st->index, index)))
            fail("it writes the accumulator " + st->name + " other than at the element it reads");
    }
    int row = -1, col = -1;
    for (int i = 0; i < int(loops.size()); i++) {
        if (!is_const_zero(simplify(loops[i].min)))
            fail("a loop does not start at 0");
        Expr step = affine_step(index, loops[i].name);
        if (!step.defined() || is_const_zero(step))
            fail("the accumulator index does not walk " + loops[i].name);
        // One loop stepping 1 walks a row's columns, unless the tile is one column (its MMA
        // has n = 1, as the J tail of a chain's block: its rows are 1 element apart).
        const bool one_column =
            tile && is_const_one(simplify(tile->n)) && !is_const_one(simplify(tile->m));
        bool column = proven(step == 1) && col < 0 &&
                      (loops.size() == 2 || (!proven(a.stride_m == 1) && !one_column));
        (column ? col : row) = i;
    }
    if (loops.size() == 2 && (row < 0 || col < 0))
        fail("no loop walks the accumulator's columns");
    Expr base = index;
    for (const Loop &l : loops)
        base = substitute(l.name, 0, base);
    if (reads_acc && !is_const_zero(simplify(base)))
        fail("the accumulator index does not start at 0");
    e.rows = row >= 0 ? loops[row].extent : Halide::Expr(1);
    e.cols = col >= 0 ? loops[col].extent : Halide::Expr(1);
    int64_t rows = constant_upper_bound(e.rows), cols = constant_upper_bound(e.cols);
    if (rows < 0 || cols < 0 || rows > a.m || cols > a.n)
        fail("the nest is larger than the MMA tile");
    e.row = row >= 0 ? loops[row].name : internal_prefix + "row_in_tile";
    e.col = col >= 0 ? loops[col].name : internal_prefix + "col_in_tile";

    for (const Store *st : collect<Store>(body)) {
        auto t = plan.tiles.find(st->name);
        if (t != plan.tiles.end() && t->second.ring_blocks) {
            if (e.ring_tile.empty())
                e.ring_tile = st->name;
            e.block_columns = swizzle_bytes / t->second.buffer->type.bytes();
        }
    }

    if (reads_acc)
        e.row_reduction = match_row_reduction(plan, e);
    std::set<std::string> written;
    for (const Store *st : collect<Store>(body))
        written.insert(st->name);
    for (const Load *l : collect<Load>(body)) {
        auto t = plan.tiles.find(l->name);
        if (t == plan.tiles.end() || written.count(l->name) || t->second.on_chip ||
            l->type != Halide::Float(32) || expr_uses_var(l->index, e.col) ||
            std::any_of(e.row_loads.begin(), e.row_loads.end(), [&](const Load *other) {
                return other->name == l->name && equal(other->index, l->index);
            }))
            continue;
        e.row_loads.push_back(l);
    }

    // The paired store: the body's single store, into a plain bf16 or f32 tile or an MMA operand
    // made on chip (P: 128B-swizzling moves 16-byte chunks, so an even element's pair stays
    // beside it), where columns col and col + 1 are adjacent elements and col lands on an even
    // one.
    const Store *st = body.as<Store>();
    auto t = st ? plan.tiles.find(st->name) : plan.tiles.end();
    for (const Store *other : collect<Store>(body)) {
        auto o = plan.tiles.find(other->name);
        if (o != plan.tiles.end() && o->second.on_chip)
            e.operands.push_back(other);
    }
    if (t == plan.tiles.end() || (t->second.kind != TileKind::Plain && !t->second.on_chip))
        return e;
    const Halide::Type &type = t->second.buffer->type;
    if (!(type.is_bfloat() && type.bits() == 16) && !(type.is_float() && type.bits() == 32))
        return e;
    if (t->second.dynamic_layout) {
        // map_tile_index: base + row * layout[0] + col
        Expr step_col = affine_step(st->index, e.col);
        if (t->second.layout[0] % 2 != 0 || !step_col.defined() || !proven(step_col == 1))
            return e;
    } else {
        Expr step_col = affine_step(st->index, e.col), step_row = affine_step(st->index, e.row);
        if (!step_col.defined() || !step_row.defined() || !proven(step_col == 1) ||
            !proven(step_row % 2 == 0))
            return e;
    }
    Expr start = simplify(substitute(e.row, 0, substitute(e.col, 0, st->index)));
    if (t->second.rebased()) {
        // On the GPU: version * an even version stride + the part within the version.
        Expr within;
        version_of(t->second, start, &within);
        start = within;
    }
    if (proven(start % 2 == 0))
        e.pair = st;
    return e;
}

void check_zeroing(const ir::VectorOp &v, const Stmt &nest, const std::string &acc) {
    std::vector<Loop> loops;
    Stmt body = peel_loops(nest, &loops);
    const Store *st = body.as<Store>();
    if (!st || st->name != acc || !is_const_zero(st->value) || v.regions.size() != 1) {
        throw Error("hopper: vector op " + v.label + " writes the accumulator " + acc +
                    "; in registers it can only be zeroed (an epilogue reads it)");
    }
}

Expr Reduction::combine(const Expr &x, const Expr &y) const {
    return op == Op::Add ? Add::make(x, y) : op == Op::Max ? Max::make(x, y) : Min::make(x, y);
}

const std::string held_name = internal_prefix + "held";

TileNest map_tile_nest(const Plan &plan, const Stmt &nest, int threads) {
    TileNest n;
    n.body = peel_loops(nest, &n.loops);
    const std::vector<Loop> &loops = n.loops;
    const Stmt &body = n.body;
    const bool flat = !loops.empty() && collect<For>(body).empty();
    if (flat && independent(loops, body) && rectangular(loops)) {
        n.kind = TileNest::Kind::Elementwise;
        n.code = body;
        std::set<std::string> written;
        for (const Store *st : collect<Store>(body))
            written.insert(st->name);
        for (const Load *l : collect<Load>(body)) {
            bool invariant = !written.count(l->name);
            for (const Loop &loop : loops)
                invariant = invariant && !expr_uses_var(l->index, loop.name);
            if (!invariant || !contains_load(n.code, l))
                continue;
            const std::string name = internal_prefix + "scalar" + std::to_string(n.scalars.size());
            n.scalars.push_back({name, Expr(l)});
            n.code = substitute(Expr(l), Variable::make(l->type, name), n.code);
        }
        return n;
    }
    if (flat) {
        if (std::optional<Reduction> r = match_reduction(plan, loops, body, threads)) {
            n.kind = TileNest::Kind::Reduction;
            n.reduction = *r;
            return n;
        }
    }
    const std::vector<size_t> strided =
        flat && rectangular(loops) ? strided_loops(loops, body) : std::vector<size_t>{};
    if (!strided.empty()) {
        n.kind = TileNest::Kind::ThreadPerElement;
        n.code = body;
        // One 32-bit store, read only at its element: the other loops accumulate in a register.
        const Store *st = body.as<Store>();
        if (st && strided.size() < loops.size() && st->value.type().bits() == 32 &&
            !st->value.type().is_bfloat()) {
            n.held = st;
            const Expr r = Variable::make(st->value.type(), held_name);
            Expr value = st->value;
            for (const Load *l : collect<Load>(body)) {
                if (l->name == st->name)
                    value = substitute(Expr(l), r, value);
            }
            n.code =
                Store::make(held_name, value, 0, Parameter(), const_true(), ModulusRemainder());
        }
        for (size_t i = loops.size(); i-- > 0;) {
            if (std::find(strided.begin(), strided.end(), i) == strided.end())
                n.code = For::make(loops[i].name, loops[i].min, loops[i].extent, ForType::Serial,
                                   Halide::DeviceAPI::None, n.code);
        }
        for (size_t i : strided)
            n.strided.push_back(loops[i]);
        return n;
    }
    n.kind = TileNest::Kind::Serial;
    return n;
}

namespace {

/** `offset` as k rows of a tail-dependent pitch and b columns: the pitch, whose bound is the
 * tile's largest pitch (Tile::stmt_pitch), so that k and b follow from the offset's bound. */
Expr pitch_in(const Tile &t, const Expr &offset, int64_t columns) {
    const int64_t largest = constant_upper_bound(offset);
    for (int64_t k = 1; t.stmt_pitch > 0 && largest > 0 && k <= 16; k++) {
        const int64_t b = largest - k * t.stmt_pitch;
        if (b < 0 || b >= columns)
            continue;
        const Expr pitch = simplify((offset - int(b)) / Halide::Expr(int(k)));
        const std::optional<int64_t> shortest = lower::constant_lower_bound(pitch);
        if (proven(pitch * Halide::Expr(int(k)) + int(b) == offset) &&
            constant_upper_bound(pitch) == t.stmt_pitch && shortest && *shortest > b)
            return pitch;
    }
    return Expr();
}

/** The Stmt's row pitches a nest over a `dynamic_layout` tile may use: where a loop steps by
 * whole rows of a tail-dependent pitch, or the index starts whole rows into a version, that pitch
 * (Tile::stmt_pitch tells how many rows); else every constant pitch of the tile's copies
 * (Tile::stmt_pitches). */
std::vector<Expr> pitch_candidates(const Tile &t, const std::vector<Expr> &steps,
                                   const Expr &within) {
    for (const Expr &step : steps) {
        if (is_const(step))
            continue;
        const Expr pitch = pitch_in(t, step, 1);
        return pitch.defined() ? std::vector<Expr>{pitch} : std::vector<Expr>{};
    }
    if (!is_const(within)) {
        const Expr pitch = pitch_in(t, within, t.layout[0]);
        return pitch.defined() ? std::vector<Expr>{pitch} : std::vector<Expr>{};
    }
    std::vector<Expr> r;
    for (int64_t p : t.stmt_pitches)
        r.push_back(Halide::Expr(int(p)));
    return r;
}

/** The nest's place on the GPU if the Stmt's rows are `pitch` apart: each loop steps by whole
 * rows or by columns within one (at most one loop each), and the index's start lies a whole
 * number of rows and a column inside its version. */
std::optional<TileIndex> place_at_pitch(const Tile &t, const Expr &index,
                                        const std::vector<Loop> &loops,
                                        const std::vector<Expr> &steps, const Expr &pitch) {
    TileIndex x;
    Expr base = index;
    for (size_t i = 0; i < loops.size(); i++) {
        const Expr &step = steps[i];
        if (is_const_zero(step))
            continue;
        const int64_t largest = constant_upper_bound(step), row = constant_upper_bound(pitch);
        const int64_t rows = largest > 0 && row > 0 && largest % row == 0 ? largest / row : 0;
        if (rows > 0 && proven(Halide::Expr(int(rows)) * pitch == step)) {
            if (!x.outer.empty())
                return std::nullopt;
            x.outer = loops[i].name;
            x.outer_rows = rows;
        } else if (is_const(step) && proven(step > 0) &&
                   (!is_const(pitch) || proven(step < pitch))) {
            // (A constant step is columns where the pitch varies: the Stmt's index is
            // row * pitch + column with the column inside the row.)
            if (!x.inner.empty())
                return std::nullopt;
            x.inner = loops[i].name;
            x.inner_columns = *as_const_int(step);
        } else {
            return std::nullopt;
        }
        base = substitute(loops[i].name, 0, base);
    }
    x.rows_of_tile = x.outer_rows == 1 && x.inner_columns == 1;
    // The start within the version: `a` rows and `b` columns (a stencil's window in(x + 1,
    // y + 2)), a * layout[0] + b on the GPU.
    const std::optional<int64_t> shortest = lower::constant_lower_bound(pitch);
    for (int a = 0; a <= 16; a++) {
        Expr b;
        const Expr version = version_of(t, a ? base - pitch * a : base, &b);
        const int64_t *column = as_const_int(b);
        if (column && *column >= 0 && shortest && *column < *shortest) {
            x.version = version;
            x.version_start = a == 0 && *column == 0;
            x.row_offset = a;
            x.column_offset = *column;
            return x;
        }
    }
    return std::nullopt;
}

/** Whether the nest stays inside the rows at `pitch`: not where its last column (or row) lies
 * past the pitch's longest row (the GPU's rows) wherever it runs. */
bool fits(const Tile &t, const TileIndex &x, const std::vector<Loop> &loops, const Expr &pitch) {
    auto last = [&](const std::string &var) -> int64_t {
        for (const Loop &l : loops) {
            if (l.name == var)
                return lower::constant_lower_bound(l.min + l.extent - 1).value_or(0);
        }
        return 0;
    };
    return x.column_offset + x.inner_columns * last(x.inner) < constant_upper_bound(pitch) &&
           (t.layout.size() < 2 || x.row_offset + x.outer_rows * last(x.outer) < t.layout[1]);
}

bool same_place(const TileIndex &a, const TileIndex &b) {
    return a.outer == b.outer && a.inner == b.inner && a.outer_rows == b.outer_rows &&
           a.inner_columns == b.inner_columns && a.row_offset == b.row_offset &&
           a.column_offset == b.column_offset && proven(a.version == b.version);
}

/** map_tile_index for a `dynamic_layout` tile: rows and columns of the Stmt's pitch placed on
 * the GPU's rows of layout[0]. */
TileIndex map_dynamic_index(const Tile &t, const Expr &index, const std::vector<Loop> &loops) {
    const std::string &name = t.buffer->name;
    if (t.layout.size() > 2) {
        throw Error("hopper: element nest over " + name + ", a " + std::to_string(t.layout.size()) +
                    "-D tile whose rows differ on the GPU; the emitter rewrites at most 2-D "
                    "tiles to the full-tile layout");
    }
    std::vector<Expr> steps;
    for (const Loop &l : loops) {
        Expr step = affine_step(index, l.name);
        if (!step.defined())
            throw Error("hopper: the index of " + name + " is not affine in " + l.name);
        steps.push_back(simplify(step));
    }
    Expr base = index, within;
    for (const Loop &l : loops)
        base = substitute(l.name, 0, base);
    version_of(t, base, &within);
    // Where the tile's pitches allow several placements, those that leave the rows go.
    const std::vector<Expr> pitches = pitch_candidates(t, steps, within);
    std::optional<TileIndex> found;
    for (const Expr &pitch : pitches) {
        std::optional<TileIndex> x = place_at_pitch(t, index, loops, steps, pitch);
        if (!x || (pitches.size() > 1 && !fits(t, *x, loops, pitch)))
            continue;
        if (found && !same_place(*x, *found)) {
            throw Error("hopper: element nest over " + name +
                        " could be rows of more than one of its tail-sized tiles' pitches; the "
                        "emitter cannot tell where its elements lie on the full tile");
        }
        found = x;
    }
    if (!found) {
        std::ostringstream text;
        text << index;
        throw Error("hopper: element nest over " + name + " reads or writes it at " + text.str() +
                    ", which is not whole rows and columns of its tail-sized tile; the emitter "
                    "cannot place it on the full tile");
    }
    return *found;
}

} // namespace

TileIndex map_tile_index(const Tile &t, const Expr &index, const std::vector<Loop> &loops) {
    TileIndex x;
    if (!t.dynamic_layout && !t.rebased() && !t.swizzled) {
        x.as_in_stmt = true;
        x.element = index;
        return x;
    }
    if (t.on_chip) {
        // Element code writes a matmul's operand made on chip at its wgmma fragments' rows and
        // columns (CodeGen::gpu_index): only the version comes from the Stmt's index.
        Expr base = index, within;
        for (const Loop &l : loops)
            base = substitute(l.name, 0, base);
        x.version = version_of(t, base, &within);
        x.version_start = is_const_zero(within);
        return x;
    }
    if (t.dynamic_layout)
        return map_dynamic_index(t, index, loops);
    Expr base = index;
    for (const Loop &l : loops) {
        Expr step = affine_step(index, l.name);
        if (!step.defined()) {
            base = substitute(l.name, 0, base);
            continue;
        }
        if (is_const_zero(step))
            continue;
        if (proven(step == 1) && x.inner.empty())
            x.inner = l.name;
        else if (x.outer.empty())
            x.outer = l.name, x.rows_of_tile = proven(step == int(t.layout[0]));
        else if (t.swizzled)
            throw Error("hopper: element nest over " + t.buffer->name +
                        " walks it along more dims than the tile has");
        base = substitute(l.name, 0, base);
    }
    base = simplify(base);
    Expr within;
    x.version = version_of(t, base, &within);
    x.version_start = is_const_zero(within);
    // Within a version the Stmt's layout is the GPU's.
    x.element = simplify(index - base + within);
    return x;
}

} // namespace tandem::hopper_backend
