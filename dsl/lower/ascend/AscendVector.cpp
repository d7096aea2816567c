#include "AscendVector.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"
#include "tandem/params/Ascend.h"

#include <map>
#include <set>
#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;
using Halide::Expr;

namespace {

constexpr int kLanes = 64;   // f32 elements of one repeat (256 bytes)
constexpr int kPerBlock = 8; // f32 elements of one 32-byte block
const char *const kScratch = "vector_scratch", *const kMask = "vector_mask";

struct Loop {
    std::string var;
    Expr min, extent;
};

/** The nest as rows x cols elements: a row-wise nest has two loops (rows outer, columns inner);
 * any other nest is one row of all its elements, every tensor read where the store writes. The
 * rows of a row-wise nest may be padded (AscendRows.h): `cols` is then the tiles' row pitch, and
 * the instructions run over whole padded rows; `width` is how many columns are the nest's (a
 * reduction sums only those; it may be known only at run time, in a tail tile). */
struct Shape {
    std::vector<Loop> loops;
    bool rowwise = false;
    int64_t rows = 1, cols = 0;
    Expr width;
    Expr count;            // a flat nest's elements when only a bound (cols) is constant: a tail's
    int64_t first_row = 0; // a chunk of a row-wise nest: its rows start here
};

/** What an operand is over the nest's (row, column) elements. */
enum class Kind {
    Tile,   // a rows x cols tile, dense
    Row,    // one row, the same for every row (read with a repeat stride of 0)
    PerRow, // one value per row, `rows` of them contiguous
    Blocks, // per-row values broadcast to a 32-byte block each (Brcb): block stride 0, one block
            // per row
    Scalar, // a constant
};

struct Value {
    Kind kind = Kind::Scalar;
    std::string buffer;
    Expr offset, scalar;
    int64_t pitch =
        0; // a column's tile whose rows lie `pitch` apart, not the nest's (0: the nest's)
};

/** The vector instructions' own UB room for intermediate results, beyond the tiles: f32 and, for
 * Compare's masks, uint8. Grows per op; the kernel keeps the largest op's need. */
struct Scratch {
    int64_t floats = 0, mask_bytes = 0; // this op's
    int64_t max_floats = 0, max_mask_bytes = 0;
    int64_t free_bytes = 0; // what UB has left
    Expr take(int64_t n) {
        const int64_t at = floats;
        floats += (n + kPerBlock - 1) / kPerBlock * kPerBlock;
        return Expr(int(at));
    }
    bool fits() const { return floats * 4 + (mask_bytes + 31) / 32 * 32 <= free_bytes; }
};

/** The instructions of one logical op: they touch disjoint elements of their destination, so
 * they need no barrier among them; a group that depends on an earlier one is behind a barrier. */
struct Group {
    std::vector<ir::VectorInstruction> instructions;
};

/** The loads in an Expr, outermost first. */
std::vector<const Load *> loads_in(const Expr &value) {
    class Loads : public IRVisitor {
    public:
        std::vector<const Load *> all;

    private:
        using IRVisitor::visit;
        void visit(const Load *l) override { all.push_back(l); }
    } loads;
    value.accept(&loads);
    return loads.all;
}

class Selection {
public:
    Selection(const Shape &shape, const std::set<std::string> &private_tiles, Scratch &scratch)
        : shape(shape), private_tiles(private_tiles), scratch(scratch) {}

    std::vector<Group> groups;
    bool ok = true;
    bool per_row_values =
        false; // some operand is not a dense tile (a flat nest cannot go in chunks)
    bool per_row_operands = false; // some operand has a value per row (a chunk's start on a block)

    /** Counts the reads of each tile (before gen), for reusing a private tile as a temp. */
    void count_reads(const Expr &e) {
        if (const Load *l = e.as<Load>()) {
            Value v = classify(l);
            if (v.kind == Kind::Tile) {
                auto [it, fresh] = tiles.insert({l->name, Tile{v.offset}});
                if (!fresh && !can_prove(it->second.base == v.offset))
                    it->second.one_region = false;
                it->second.reads++;
            }
            return;
        }
        for (const Expr &child : children(e))
            count_reads(child);
    }

    /** A Load as an operand, from its index's steps along the rows and the columns. */
    Value classify(const Load *l) const {
        Value v;
        if (l->type != Halide::Float(32))
            return v;
        Expr base = l->index;
        std::vector<Expr> steps;
        for (const Loop &loop : shape.loops) {
            Expr x = Variable::make(Halide::Int(32), loop.var);
            steps.push_back(simplify(substitute(loop.var, x + 1, l->index) - l->index));
            const bool chunked = shape.rowwise && &loop == &shape.loops[0];
            base = substitute(loop.var, chunked ? loop.min + int(shape.first_row) : loop.min, base);
        }
        base = simplify(base);
        for (const Loop &loop : shape.loops) {
            if (expr_uses_var(base, loop.var))
                return v;
        }
        for (const Expr &s : steps) {
            if (!is_const(s))
                return v;
        }
        v.buffer = l->name;
        v.offset = base;
        if (!shape.rowwise) {
            bool none = true;
            Expr expected = 1;
            bool dense = true;
            for (size_t i = shape.loops.size(); i-- > 0;) {
                dense = dense && can_prove(steps[i] == expected);
                none = none && is_const_zero(steps[i]);
                expected = simplify(expected * shape.loops[i].extent);
            }
            v.kind = dense ? Kind::Tile : none ? Kind::PerRow : Kind::Scalar;
            if (v.kind == Kind::Scalar)
                v.buffer.clear();
            return v;
        }
        const Expr &row = steps[0];
        if (steps.size() == 1) { // a column: rows one element wide, its one loop along them
            const int64_t *p = as_const_int(row);
            if (can_prove(row == int(shape.cols)))
                v.kind = Kind::Tile;
            else if (p && *p >= kPerBlock && *p % kPerBlock == 0)
                v.kind = Kind::Tile, v.pitch = *p;
            else if (is_const_zero(row))
                v.kind = Kind::Row;
            else if (can_prove(row == 1))
                v.kind = Kind::PerRow;
            else
                v.buffer.clear();
            return v;
        }
        const Expr &col = steps[1];
        const int64_t *p = as_const_int(row), widest = constant_upper_bound(shape.width);
        if (can_prove(col == 1) && can_prove(row == int(shape.cols)))
            v.kind = Kind::Tile;
        else if (can_prove(col == 1) && p && *p % kPerBlock == 0 && widest > 0 && *p >= widest)
            v.kind = Kind::Tile,
            v.pitch = *p; // padded rows at a pitch of its own (another tile's tail)
        else if (can_prove(col == 1) && is_const_zero(row))
            v.kind = Kind::Row;
        else if (is_const_zero(col) && can_prove(row == 1))
            v.kind = Kind::PerRow;
        else
            v.buffer.clear();
        return v;
    }

    /** The value of `e`; a tile result goes into `into` (a Tile). */
    Value gen(const Expr &e, const Value &into) {
        if (!ok)
            return {};
        if (const Load *l = e.as<Load>()) {
            Value v = classify(l);
            if (v.buffer.empty())
                return fail();
            per_row_values |= v.kind != Kind::Tile;
            per_row_operands |= v.kind == Kind::PerRow;
            return v;
        }
        if (scalar(e)) {
            Value c;
            c.scalar = e;
            return c;
        }
        if (e.type() != Halide::Float(32))
            return fail();
        if (const Call *c = e.as<Call>()) {
            const bool abs = c->is_intrinsic(Call::abs), sqrt = c->name == "sqrt_f32";
            if ((!abs && !sqrt) || c->args.size() != 1)
                return fail();
            Value x = gen(c->args[0], into);
            if (!ok || x.kind == Kind::Scalar || x.kind == Kind::Row)
                return fail();
            Value dst = x.kind == Kind::PerRow ? per_row() : result_tile(into);
            emit(abs ? "Abs" : "Sqrt", dst, {x}, Expr(),
                 x.kind == Kind::PerRow ? Expr(int(shape.rows)) : count());
            release(x, dst);
            return dst;
        }
        if (const Halide::Internal::Select *s = e.as<Halide::Internal::Select>())
            return select(s, into);
        Expr a, b;
        std::string op;
        if (const Add *x = e.as<Add>())
            a = x->a, b = x->b, op = "Add";
        else if (const Sub *x = e.as<Sub>())
            a = x->a, b = x->b, op = "Sub";
        else if (const Mul *x = e.as<Mul>())
            a = x->a, b = x->b, op = "Mul";
        else if (const Div *x = e.as<Div>())
            a = x->a, b = x->b, op = "Div";
        else if (const Min *x = e.as<Min>())
            a = x->a, b = x->b, op = "Min";
        else if (const Max *x = e.as<Max>())
            a = x->a, b = x->b, op = "Max";
        else
            return fail();
        const bool leaf_a = leaf(a), leaf_b = leaf(b);
        Value x, y;
        if (leaf_a || !leaf_b) {
            x = gen(a, into);
            y = gen(b, leaf_b ? into : Value());
        } else { // only b needs instructions: compute it into `into`, then combine with the leaf a
            y = gen(b, into);
            x = gen(a, into);
        }
        if (!ok)
            return {};
        if (x.kind == Kind::Scalar && y.kind == Kind::Scalar)
            return fail();
        const bool rowwise_values = (x.kind == Kind::PerRow || x.kind == Kind::Scalar) &&
                                    (y.kind == Kind::PerRow || y.kind == Kind::Scalar);
        Value dst = rowwise_values ? per_row() : !into.buffer.empty() ? into : last_read(x, y);
        const Expr n = rowwise_values ? Expr(int(shape.rows)) : count();
        if (!rowwise_values) {
            x = broadcast(x);
            y = broadcast(y);
        }
        combine(op, dst, x, y, n);
        release(x, dst);
        release(y, dst);
        return dst;
    }

    /** A reduction over the columns into one value per row: self[r] = self[r] + sum of f. */
    void reduce(const Value &self, const Expr &f) {
        Value v = uniform(gen(f, Value())); // an op's result in a temp; a tile read as it is
        if (!ok)
            return;
        if (v.kind != Kind::Tile || (shape.rows > 1 && shape.cols % kPerBlock != 0)) {
            fail();
            return;
        }
        Value part = per_row();
        Group g;
        for (int64_t r = 0; r < shape.rows; r++) {
            ir::VectorInstruction i;
            i.op = "ReduceSum";
            i.dst = part.buffer;
            i.dst_offset = simplify(part.offset + int(r));
            i.srcs = {{v.buffer, simplify(v.offset + int(r * shape.cols))},
                      {part.buffer, part.offset}};
            i.count = shape.width; // the nest's columns, not the padding
            g.instructions.push_back(i);
        }
        groups.push_back(g);
        emit_count("Add", self, {self, part}, Expr(), int(shape.rows));
    }

    /** dst = value, the value of the store: nothing when it is there already, a Duplicate of a
     * constant, else a copy on V (Muls by 1: exact, -0 and NaN kept). */
    void assign(const Value &dst, const Value &value) {
        if (!ok || (value.buffer == dst.buffer && value.offset.defined() &&
                    equal(value.offset, dst.offset)))
            return;
        if (value.kind == Kind::Scalar)
            return emit_count("Duplicate", dst, {}, value.scalar, count());
        emit("Muls", dst, {broadcast(value)}, Expr(1.0f), count());
    }

    /** A tile for an intermediate result: a private input tile the op has finished reading, else
     * scratch. */
    Value temp() {
        for (auto &[name, tile] : tiles) {
            if (tile.reads == 0 && tile.one_region && !tile.holds && private_tiles.count(name)) {
                tile.holds = true;
                Value t;
                t.kind = Kind::Tile;
                t.buffer = name;
                t.offset = tile.base;
                return t;
            }
        }
        Value t;
        t.kind = Kind::Tile;
        t.buffer = kScratch;
        if (!free_tiles.empty()) {
            t.offset = free_tiles.back();
            free_tiles.pop_back();
        } else {
            t.offset = scratch.take(elements());
        }
        return t;
    }

    Value fail() {
        ok = false;
        return {};
    }

    /** The elements a tile holds (a bound), and those the instructions run over. */
    int64_t elements() const { return shape.rows * shape.cols; }
    int64_t rows() const { return shape.rows; }
    Expr count() const { return shape.count.defined() ? shape.count : Expr(int(elements())); }

private:
    struct Tile {
        Expr base;
        int reads = 0;          // reads of it the instructions have not made yet
        bool one_region = true; // every read at `base`
        bool holds = false;     // it holds an intermediate result
    };
    const Shape &shape;
    const std::set<std::string> &private_tiles;
    Scratch &scratch;
    std::map<std::string, Tile> tiles;
    std::map<std::string, Value>
        broadcasts;               // per-row values already in blocks, by buffer and offset
    std::vector<Expr> free_tiles; // scratch tiles whose value has been used

    /** A scratch tile whose value its one reader has now used goes back to the pool (the barrier
     * before the next writer of scratch orders the reuse). */
    void release(const Value &v, const Value &dst) {
        if (v.kind == Kind::Tile && v.buffer == kScratch &&
            !(dst.buffer == v.buffer && equal(dst.offset, v.offset)))
            free_tiles.push_back(v.offset);
    }

    /** An f32 value the same for the whole nest and read from no tile (a constant, or one
     * computed from the kernel's runtime extents): an instruction's scalar operand. */
    bool scalar(const Expr &e) const {
        if (e.type() != Halide::Float(32) || !loads_in(e).empty())
            return false;
        for (const Loop &l : shape.loops)
            if (expr_uses_var(e, l.var))
                return false;
        return true;
    }

    bool leaf(const Expr &e) const { return e.as<Load>() || scalar(e); }

    static std::vector<Expr> children(const Expr &e) {
        if (const Add *x = e.as<Add>())
            return {x->a, x->b};
        if (const Sub *x = e.as<Sub>())
            return {x->a, x->b};
        if (const Mul *x = e.as<Mul>())
            return {x->a, x->b};
        if (const Div *x = e.as<Div>())
            return {x->a, x->b};
        if (const Min *x = e.as<Min>())
            return {x->a, x->b};
        if (const Max *x = e.as<Max>())
            return {x->a, x->b};
        if (const Call *c = e.as<Call>())
            return c->args;
        if (const Halide::Internal::Select *s = e.as<Halide::Internal::Select>())
            return {s->condition, s->true_value, s->false_value};
        if (const LT *x = e.as<LT>())
            return {x->a, x->b};
        if (const LE *x = e.as<LE>())
            return {x->a, x->b};
        if (const EQ *x = e.as<EQ>())
            return {x->a, x->b};
        if (const NE *x = e.as<NE>())
            return {x->a, x->b};
        return {};
    }

    Value per_row() {
        Value v;
        v.kind = Kind::PerRow;
        v.buffer = kScratch;
        v.offset = scratch.take(shape.rows);
        return v;
    }

    /** Where a tile result goes: `into` when given, else a temp. */
    Value result_tile(const Value &into) { return into.buffer.empty() ? temp() : into; }

    /** A tile for the result of an instruction reading x and y: in place in an operand this
     * instruction reads for the last time (a private tile), so that it needs no other tile and
     * no barrier against an earlier reader of another; else temp(). */
    Value last_read(const Value &x, const Value &y) {
        for (const Value *v : {&x, &y}) {
            auto t = v->kind == Kind::Tile ? tiles.find(v->buffer) : tiles.end();
            const int reads = (x.buffer == v->buffer ? 1 : 0) + (y.buffer == v->buffer ? 1 : 0);
            if (t != tiles.end() && private_tiles.count(v->buffer) && t->second.one_region &&
                !t->second.holds && t->second.reads == reads && equal(v->offset, t->second.base)) {
                t->second.holds = true;
                return *v;
            }
        }
        return temp();
    }

    /** A per-row value as an operand of a tile instruction: its rows' blocks (Brcb, into scratch).
     */
    Value broadcast(const Value &v) {
        if (v.kind != Kind::PerRow)
            return v;
        std::ostringstream key;
        key << v.buffer << "@" << v.offset;
        auto known = broadcasts.find(key.str());
        if (known != broadcasts.end())
            return known->second;
        Value b;
        b.kind = Kind::Blocks;
        b.buffer = kScratch;
        const int64_t repeats = (shape.rows + kPerBlock - 1) / kPerBlock;
        b.offset = scratch.take(repeats * kLanes);
        Value src = v;
        if (v.buffer !=
            kScratch) { // Brcb reads eight values per repeat: copy the rows to scratch first
            src = per_row();
            emit_count("Muls", src, {v}, Expr(1.0f), int(shape.rows)); // exactly (-0 and NaN kept)
        }
        ir::VectorInstruction i;
        i.op = "Brcb";
        i.dst = b.buffer;
        i.dst_offset = b.offset;
        i.srcs = {{src.buffer, src.offset}};
        i.repeats = int(repeats);
        i.mask = 0;
        i.strides = {{1, kPerBlock}, {1, kPerBlock}};
        groups.push_back({{i}});
        broadcasts[key.str()] = b;
        return b;
    }

    /** dst = x op y (a scalar on either side), over `n` elements (tiles) or the rows (per-row). */
    void combine(const std::string &op, const Value &dst, const Value &x, const Value &y,
                 const Expr &n) {
        const bool xs = x.kind == Kind::Scalar, ys = y.kind == Kind::Scalar;
        if (!xs && !ys) {
            emit(op, dst, {x, y}, Expr(), n);
        } else if (op == "Add" || op == "Mul" || op == "Max" || op == "Min") {
            emit(op + "s", dst, {xs ? y : x}, (xs ? x : y).scalar, n);
        } else if (op == "Sub" && ys) { // t - c = t + (-c), exactly
            emit("Adds", dst, {x}, simplify(-y.scalar), n);
        } else if (op == "Sub") { // c - t = c + (-1 * t), exactly
            emit("Muls", dst, {y}, Expr(-1.0f), n);
            emit("Adds", dst, {dst}, x.scalar, n);
        } else { // Div with a scalar side: the scalar as a tile, then Div (the same rounding)
            Value c = dst.kind == Kind::PerRow ? per_row() : temp();
            emit_count("Duplicate", c, {}, (xs ? x : y).scalar,
                       dst.kind == Kind::PerRow ? Expr(int(shape.rows)) : count());
            emit(op, dst, {xs ? c : x, ys ? c : y}, Expr(), n);
        }
    }

    /** select(a < b, t, f) and the other comparisons: Compare into the mask, then Select. */
    Value select(const Halide::Internal::Select *s, const Value &into) {
        Expr a, b;
        int mode = 0;
        if (const LT *c = s->condition.as<LT>())
            a = c->a, b = c->b, mode = 0;
        else if (const LE *c = s->condition.as<LE>())
            a = c->a, b = c->b, mode = 3;
        else if (const EQ *c = s->condition.as<EQ>())
            a = c->a, b = c->b, mode = 2;
        else if (const NE *c = s->condition.as<NE>())
            a = c->a, b = c->b, mode = 5;
        else
            return fail();
        if (a.type() != Halide::Float(32))
            return fail();
        // Both values and the compared ones first: a select nested in any of them uses the mask
        // before this one's Compare writes it.
        Value t = tile_of(gen(s->true_value, Value())), f = tile_of(gen(s->false_value, Value()));
        Value x = tile_of(gen(a, Value())), y = tile_of(gen(b, Value()));
        if (!ok)
            return {};
        // Compare takes whole 256-byte repeats: the compared values are copied into scratch that
        // has them when the tile does not (what it compares past the tile, Select never reads).
        const int64_t whole = (elements() + kLanes - 1) / kLanes * kLanes;
        if (whole != elements() || shape.count.defined()) {
            x = in_whole_repeats(x, whole);
            y = in_whole_repeats(y, whole);
        }
        ir::VectorInstruction cmp;
        cmp.op = "Compare";
        cmp.dst = kMask;
        cmp.dst_offset = 0;
        cmp.srcs = {{x.buffer, x.offset}, {y.buffer, y.offset}};
        cmp.count = int(whole);
        cmp.mode = mode;
        groups.push_back({{cmp}});
        scratch.mask_bytes = std::max(scratch.mask_bytes, whole / 8);
        read(x);
        read(y);
        release(x, Value());
        release(y, Value());
        Value dst = result_tile(into);
        ir::VectorInstruction sel;
        sel.op = "Select";
        sel.dst = dst.buffer;
        sel.dst_offset = dst.offset;
        sel.srcs = {{kMask, 0}, {t.buffer, t.offset}, {f.buffer, f.offset}};
        sel.count = count();
        sel.mode = 2; // VSEL_TENSOR_TENSOR_MODE
        read(t);
        read(f);
        groups.push_back({{sel}});
        release(t, dst);
        release(f, dst);
        return dst;
    }

    /** A tile's values in scratch with room for `whole` elements (a Muls by 1: exact). */
    Value in_whole_repeats(const Value &v, int64_t whole) {
        Value t;
        t.kind = Kind::Tile;
        t.buffer = kScratch;
        t.offset = scratch.take(whole);
        emit("Muls", t, {v}, Expr(1.0f), count());
        release(v, t);
        return t;
    }

    /** A tile at the nest's row pitch: a column tile at another pitch copied into a temp. */
    Value uniform(const Value &v) {
        if (!ok || v.kind != Kind::Tile || v.pitch == 0)
            return v;
        Value t = temp();
        emit("Muls", t, {v}, Expr(1.0f), count());
        release(v, t);
        return t;
    }

    /** A value as a dense tile (a constant: a Duplicate into a temp). */
    Value tile_of(const Value &v) {
        if (!ok)
            return {};
        if (v.kind == Kind::Tile)
            return uniform(v);
        if (v.kind != Kind::Scalar)
            return fail();
        Value t = temp();
        emit_count("Duplicate", t, {}, v.scalar, count());
        return t;
    }

    /** One count-form instruction. */
    void emit_count(const std::string &op, const Value &dst, const std::vector<Value> &srcs,
                    const Expr &scalar, const Expr &n) {
        if (!ok)
            return;
        ir::VectorInstruction i;
        i.op = op;
        i.dst = dst.buffer;
        i.dst_offset = dst.offset;
        i.count = n;
        for (const Value &s : srcs)
            read(s), i.srcs.push_back({s.buffer, s.offset});
        i.scalar = scalar;
        groups.push_back({{i}});
    }

    /** A tile instruction: the count form when every operand is a dense tile (or per-row values
     * over the rows), else the repeat form over rows and columns. */
    void emit(const std::string &op, const Value &dst, const std::vector<Value> &srcs,
              const Expr &scalar, const Expr &n) {
        bool dense = dst.pitch == 0;
        for (const Value &s : srcs)
            dense = dense && (s.kind == Kind::Tile || s.kind == Kind::PerRow) && s.pitch == 0;
        if (dense)
            return emit_count(op, dst, srcs, scalar, n);
        const int64_t R = shape.rows, X = shape.cols;
        // A row would start inside a 32-byte block. (A tile of a runtime count runs over its
        // bound: the instructions' lanes past the count stay inside the tiles, and nothing past
        // the count is stored.)
        if (R > 1 && X % kPerBlock != 0) {
            fail();
            return;
        }
        // A column tile's own pitch, in blocks, is a repeat stride (8 bits).
        bool strides_fit = dst.pitch / kPerBlock <= 255;
        for (const Value &s : srcs)
            strides_fit = strides_fit && s.pitch / kPerBlock <= 255;
        if (!strides_fit) {
            fail();
            return;
        }
        for (const Value &s : srcs)
            read(s);
        Group g;
        // Per operand: its block and repeat strides and where it starts for (row r, column c).
        auto place = [&](const Value &v, bool columns, int64_t r,
                         int64_t c) -> std::pair<std::pair<int, int>, Expr> {
            const int64_t P = v.pitch > 0 ? v.pitch : X;
            switch (v.kind) {
            case Kind::Tile:
                return {{1, columns ? int(P / kPerBlock) : kPerBlock},
                        simplify(v.offset + int(r * P + c))};
            case Kind::Row:
                return {{1, columns ? 0 : kPerBlock}, simplify(v.offset + int(c))};
            default:
                return {{0, columns ? 1 : 0}, simplify(v.offset + int(r * kPerBlock))}; // Blocks
            }
        };
        auto instruction = [&](bool columns, int64_t r, int64_t c, int64_t mask, int64_t repeats) {
            ir::VectorInstruction i;
            i.op = op;
            auto d = place(dst, columns, r, c);
            i.dst = dst.buffer;
            i.dst_offset = d.second;
            i.strides.push_back(d.first);
            for (const Value &s : srcs) {
                auto p = place(s, columns, r, c);
                i.srcs.push_back({s.buffer, p.second});
                i.strides.push_back(p.first);
            }
            i.scalar = scalar;
            i.mask = int(mask);
            i.repeats = int(repeats);
            g.instructions.push_back(i);
        };
        // The columns up to the nest's widest row, in whole blocks: a row operand holds no more
        // (the padding past them is never stored).
        const int64_t widest = constant_upper_bound(shape.width);
        const int64_t W =
            widest > 0 ? std::min(X, (widest + kPerBlock - 1) / kPerBlock * kPerBlock) : X;
        if (R > 1 && X / kPerBlock <= 255) { // each instruction: 64 columns of up to 255 rows
            for (int64_t r = 0; r < R; r += 255)
                for (int64_t c = 0; c < W; c += kLanes)
                    instruction(true, r, c, std::min<int64_t>(kLanes, W - c),
                                std::min<int64_t>(255, R - r));
        } else if (W / kLanes <=
                   255) { // each instruction: one row's whole 64-column repeats, then its tail
            for (int64_t r = 0; r < R; r++) {
                if (W / kLanes > 0)
                    instruction(false, r, 0, kLanes, W / kLanes);
                if (W % kLanes)
                    instruction(false, r, W / kLanes * kLanes, W % kLanes, 1);
            }
        } else {
            fail();
            return;
        }
        groups.push_back(g);
    }

    void read(const Value &v) {
        auto tile = tiles.find(v.buffer);
        if (tile != tiles.end() && !tile->second.holds)
            tile->second.reads--;
    }
};

/** Whether a buffer is read anywhere in an Expr. */
class Reads : public IRVisitor {
public:
    explicit Reads(const std::string &buffer) : buffer(buffer) {}
    bool found = false;

private:
    using IRVisitor::visit;
    const std::string &buffer;
    void visit(const Load *l) override {
        found |= l->name == buffer;
        IRVisitor::visit(l);
    }
};

bool reads(const Expr &e, const std::string &buffer) {
    Reads r(buffer);
    e.accept(&r);
    return r.found;
}

/** Which tiles each vector op may use as scratch: per buffer, the copies into it and the vector
 * ops' reads and writes of it in program order, each with its innermost loop. */
class Readers : public IRVisitor {
public:
    /** A tile op `op` reads may hold its intermediate results when no copy reads the tile, a copy
     * filled it just before the op in the op's own loop, and the next access to it (in program
     * order) is a copy refilling it: then no other op reads the fill the op clobbers (a tile
     * loaded once for many iterations, or an accumulator, may not). */
    bool scratch_for(const std::string &buffer, const LetStmt *op) const {
        auto all = events.find(buffer);
        if (copied.count(buffer) || all == events.end())
            return false;
        const std::vector<Event> &e = all->second;
        for (size_t i = 0; i < e.size(); i++) {
            if (e[i].op != op || e[i].kind != Event::Read)
                continue;
            return i > 0 && e[i - 1].kind == Event::Fill && e[i - 1].loop == e[i].loop &&
                   (i + 1 == e.size() || e[i + 1].kind == Event::Fill);
        }
        return false;
    }

private:
    struct Event {
        enum Kind { Fill, Read, Write } kind;
        std::string loop;
        const LetStmt *op = nullptr;
    };
    std::map<std::string, std::vector<Event>> events;
    std::set<std::string> copied;
    std::vector<std::string> loops{""};

    using IRVisitor::visit;
    void visit(const For *op) override {
        loops.push_back(op->name);
        IRVisitor::visit(op);
        loops.pop_back();
    }
    void visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(Stmt(op), &v, &body)) {
            for (const ir::Region &r : v.regions)
                if (!r.write)
                    events[r.buffer].push_back({Event::Read, loops.back(), op});
            for (const ir::Region &r : v.regions)
                if (r.write)
                    events[r.buffer].push_back({Event::Write, loops.back(), op});
            return;
        }
        IRVisitor::visit(op);
    }
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (!ir::as_copy(Stmt(op), &c))
            return;
        copied.insert(c.src);
        events[c.dst].push_back({Event::Fill, loops.back(), nullptr});
    }
};

/** The row step of the first tile the value reads along the columns (a reduction's rows). */
Expr row_pitch_read(const Expr &value, const Loop &rows, const Loop &cols) {
    Expr x = Variable::make(Halide::Int(32), cols.var),
         r = Variable::make(Halide::Int(32), rows.var);
    for (const Load *l : loads_in(value)) {
        if (can_prove(simplify(substitute(cols.var, x + 1, l->index) - l->index) == 1))
            return simplify(substitute(rows.var, r + 1, l->index) - l->index);
    }
    return Expr();
}

/** The step of the first tile the value reads at a multiple of 32 bytes along `rows` (the
 * padded rows of a column). */
Expr column_pitch_read(const Expr &value, const Loop &rows) {
    for (const Load *l : loads_in(value)) {
        Expr step = affine_step(l->index, rows.var);
        const int64_t *p = step.defined() ? as_const_int(step) : nullptr;
        if (p && *p >= kPerBlock && *p % kPerBlock == 0)
            return step;
    }
    return Expr();
}

/** The nest's shape, or none (rows = 0) when its extents have no constant bounds. */
Shape shape_of(const std::vector<Loop> &loops, const Store *store) {
    Shape s;
    s.loops = loops;
    // Row-wise: two loops, the store dense over both, or one value per row (a reduction). Rows
    // `pitch` apart, wider than any row of the nest and a multiple of 32 bytes, are padded rows:
    // the instructions cover them whole. A row count known only at run time (a tail) is bounded:
    // the count form takes the count, the repeat form runs over the bound's rows (inside the
    // tiles; nothing past the count is stored).
    auto rowwise = [&s](const Expr &rows, int64_t pitch, const Expr &width) {
        s.rowwise = true;
        s.rows = constant_upper_bound(rows);
        s.cols = pitch;
        s.width = width;
        if (!as_const_int(rows))
            s.count = simplify(rows * int(pitch));
        return s;
    };
    const int64_t rows = loops.empty() ? 0 : constant_upper_bound(loops[0].extent);
    if (loops.size() == 2) {
        const int64_t width = constant_upper_bound(loops[1].extent);
        Expr x = Variable::make(Halide::Int(32), loops[1].var),
             r = Variable::make(Halide::Int(32), loops[0].var);
        Expr col = simplify(substitute(loops[1].var, x + 1, store->index) - store->index);
        Expr row = simplify(substitute(loops[0].var, r + 1, store->index) - store->index);
        Expr pitch = can_prove(col == 1) ? row
                     : is_const_zero(col) && can_prove(row == 1)
                         ? row_pitch_read(store->value, loops[0], loops[1])
                         : Expr();
        const int64_t *p = pitch.defined() ? as_const_int(pitch) : nullptr;
        const int64_t *exact = as_const_int(loops[1].extent);
        if (rows >= 1 && width >= 1 && p &&
            ((exact && *p == *exact) || (*p % kPerBlock == 0 && *p >= width)))
            return rowwise(loops[0].extent, *p, loops[1].extent);
    }
    // A column: one loop over padded rows one element wide; the store one element per row, or
    // one value per row (a reduction) of a tile read so.
    if (loops.size() == 1) {
        // (A cast to a narrower type: the rows are its f32 values', a block each where it reads
        // no tile so.)
        const Expr stored = affine_step(store->index, loops[0].var);
        const bool narrowing = store->value.type() != Halide::Float(32);
        Expr step = stored;
        if ((step.defined() && is_const_one(step)) || narrowing)
            step = column_pitch_read(store->value, loops[0]);
        if (!step.defined() && narrowing && stored.defined() && !is_const_one(stored))
            step = kPerBlock;
        const int64_t *p = step.defined() ? as_const_int(step) : nullptr;
        if (rows >= 1 && p && *p >= kPerBlock && *p % kPerBlock == 0)
            return rowwise(loops[0].extent, *p, 1);
    }
    // One loop of a count known at run time (a tail): the instructions take the count, the
    // tiles hold its bound.
    if (loops.size() == 1 && !as_const_int(loops[0].extent)) {
        const int64_t bound = constant_upper_bound(loops[0].extent);
        if (bound < 1)
            return Shape{{}, false, 0, 0, Expr(), Expr()};
        s.cols = bound;
        s.count = s.width = loops[0].extent;
        return s;
    }
    std::vector<int64_t> extents;
    for (const Loop &l : loops) {
        const int64_t *e = as_const_int(l.extent);
        if (!e || *e < 1)
            return Shape{{}, false, 0, 0, Expr(), Expr()};
        extents.push_back(*e);
    }
    s.cols = 1;
    for (int64_t e : extents)
        s.cols *= e;
    s.width = Expr(int(s.cols));
    return s;
}

/** The groups of one chunk, once per chunk: every operand outside the scratch moves by the
 * chunk's offset (the scratch and the mask are the chunk's own, reused). */
std::vector<Group> repeat_in_chunks(const std::vector<Group> &one, int64_t parts, int64_t chunk) {
    std::vector<Group> all;
    for (int64_t k = 0; k < parts; k++) {
        for (Group g : one) {
            for (ir::VectorInstruction &i : g.instructions) {
                auto shift = [&](const std::string &buffer, Expr &offset) {
                    if (buffer != kScratch && buffer != kMask)
                        offset = simplify(offset + int(k * chunk));
                };
                shift(i.dst, i.dst_offset);
                for (auto &[buffer, offset] : i.srcs)
                    shift(buffer, offset);
            }
            all.push_back(g);
        }
    }
    return all;
}

class Instructions : public IRMutator {
public:
    Instructions(const Readers &readers, Scratch &scratch) : readers(readers), scratch(scratch) {}

private:
    const Readers &readers;
    Scratch &scratch;
    using IRMutator::visit;

    Stmt visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (!ir::as_vector_op(Stmt(op), &v, &body))
            return IRMutator::visit(op);
        Stmt mapped = instructions(op, v, body);
        if (mapped.defined())
            return mapped;
        throw Error(
            "Func '" + v.label.substr(0, v.label.find('$')) +
            "', directive compute_at(): on ascend its element "
            "nest " +
            v.label +
            " has no AscendC vector instructions. AscendVector maps f32 maps over tiles, "
            "padded rows and columns (+, -, *, /, min, max, abs, sqrt, selects, row sums, casts to "
            "bfloat16) whose temporaries fit in the " +
            std::to_string(scratch.free_bytes) +
            " bytes of UB the tiles leave; smaller tiles or fewer stages leave more");
    }

    /** The op with its AscendC instructions, or none. */
    Stmt instructions(const LetStmt *op, const ir::VectorOp &v, const Stmt &body) {
        std::vector<Loop> loops;
        Stmt s = body;
        while (const For *f = s.as<For>()) {
            loops.push_back({f->name, f->min, f->extent});
            s = f->body;
        }
        const Store *store = s.as<Store>();
        // A bfloat16 store of a float value: the value in f32, then a Cast (CAST_RINT: ties to
        // even, as Halide's cast rounds).
        const Cast *to_bf16 = store ? store->value.as<Cast>() : nullptr;
        if (to_bf16 &&
            (to_bf16->type != Halide::BFloat(16) || to_bf16->value.type() != Halide::Float(32)))
            to_bf16 = nullptr;
        if (!store || (store->value.type() != Halide::Float(32) && !to_bf16))
            return Stmt();
        const Shape shape = shape_of(loops, store);
        if (shape.rows == 0)
            return Stmt();
        std::set<std::string> private_tiles;
        for (const ir::Region &r : v.regions)
            if (!r.write && readers.scratch_for(r.buffer, op))
                private_tiles.insert(r.buffer);
        // The store as a value of the nest: a tile, or one value per row (a reduction).
        Expr stored = Load::make(Halide::Float(32), store->name, store->index, Halide::Buffer<>(),
                                 Halide::Internal::Parameter(), const_true(), ModulusRemainder());
        std::vector<Group> groups;
        scratch.floats = 0;
        scratch.mask_bytes = 0;
        const Value dst = Selection(shape, private_tiles, scratch).classify(stored.as<Load>());
        // self[r] = self[r] + f: a sum over the columns.
        const bool reduction = dst.kind == Kind::PerRow && !to_bf16;
        const Add *add = reduction ? store->value.as<Add>() : nullptr;
        if (reduction) {
            const Load *a = add ? add->a.as<Load>() : nullptr;
            if (!add || !a || a->name != store->name || !equal(a->index, store->index) ||
                reads(add->b, store->name))
                return Stmt();
            if (!can_prove(dst.offset % kPerBlock == 0))
                return Stmt();
        }
        if (reduction || dst.kind == Kind::Tile || to_bf16) {
            // A dense map into the destination tile. A bfloat16 store: its f32 value in a tile
            // (scratch unless an operand tile holds it), then one Cast into the dense bfloat16
            // destination (32-byte aligned: 16 elements); a column's bfloat16 rows (32 bytes: 16
            // elements) are narrower than its f32 rows, so a Cast per row.
            const Expr value = to_bf16 ? to_bf16->value : store->value;
            const Expr step =
                shape.loops.size() == 1 ? affine_step(store->index, shape.loops[0].var) : Expr();
            const bool per_row = to_bf16 && shape.rowwise && step.defined() && is_const(step) &&
                                 !can_prove(step == int(shape.cols));
            const Expr at =
                per_row ? simplify(substitute(shape.loops[0].var, shape.loops[0].min, store->index))
                        : dst.offset;
            if (to_bf16 &&
                ((!per_row && dst.kind != Kind::Tile) || (per_row && !can_prove(step % 16 == 0)) ||
                 !can_prove(at % 16 == 0) || reads(value, store->name)))
                return Stmt();
            // An update (dst = dst + f) reads each element where it writes it, and leaves the
            // destination alone until the last instruction.
            const bool update = reads(value, store->name);
            for (const Load *l : loads_in(value))
                if (l->name == store->name && !equal(l->index, store->index))
                    return Stmt();
            auto map = [&](Selection &select) {
                const Value dst = select.classify(stored.as<Load>());
                if (reduction) {
                    select.count_reads(add->b);
                    return select.reduce(dst, add->b);
                }
                select.count_reads(value);
                if (!to_bf16)
                    return select.assign(dst, select.gen(value, update ? Value() : dst));
                Value f = select.gen(value, Value());
                if (select.ok && (f.kind != Kind::Tile || (!per_row && f.pitch != 0))) {
                    Value t = select.temp();
                    select.assign(t, f);
                    f = t;
                }
                if (!select.ok)
                    return;
                Group casts;
                for (int64_t r = 0; r < (per_row ? select.rows() : 1); r++) {
                    ir::VectorInstruction cast;
                    cast.op = "Cast";
                    cast.dst = store->name;
                    cast.dst_offset = per_row ? simplify(at + step * int(r)) : dst.offset;
                    const int64_t pitch = f.pitch > 0 ? f.pitch : shape.cols;
                    cast.srcs = {
                        {f.buffer, per_row ? simplify(f.offset + int(r * pitch)) : f.offset}};
                    cast.count = per_row ? Expr(1) : select.count();
                    cast.mode = 1; // RoundMode::CAST_RINT
                    casts.instructions.push_back(cast);
                }
                select.groups.push_back(casts);
            };
            // A map that needs more scratch than UB has left goes in chunks: of whole (maybe
            // padded) rows, any divisor of the rows, each chunk's operands where its rows are
            // (a row the same for all, a per-row value its rows'); else of a flat tile, halving.
            // A chunk runs over its bound (a runtime count's lanes past it stay in the tiles).
            const int64_t n = shape.rows * shape.cols;
            std::vector<int64_t> splits;
            for (int64_t parts = 1; parts <= (per_row         ? 1
                                              : shape.rowwise ? shape.rows
                                                              : 64);
                 parts = shape.rowwise ? parts + 1 : parts * 2)
                if (!shape.rowwise || shape.rows % parts == 0)
                    splits.push_back(parts);
            for (int64_t parts : splits) {
                if (!groups.empty())
                    break;
                Shape piece = shape;
                if (parts > 1)
                    piece.count = Expr();
                if (parts > 1 && shape.rowwise) {
                    piece.rows = shape.rows / parts;
                } else if (parts > 1) { // every operand a dense tile here: one flat row, in chunks
                    if (n % (parts * kLanes) != 0)
                        break;
                    piece.rows = 1;
                    piece.cols = n / parts;
                }
                std::vector<Group> chunks;
                bool mapped = true, fits = true, per_row_values = false;
                int64_t floats = 0, mask_bytes = 0;
                for (int64_t k = 0; k < (shape.rowwise ? parts : 1) && mapped; k++) {
                    piece.first_row = k * piece.rows;
                    scratch.floats = 0;
                    scratch.mask_bytes = 0;
                    Selection select(piece, private_tiles, scratch);
                    map(select);
                    mapped = select.ok && !select.groups.empty();
                    // (a chunk's per-row values start on a 32-byte block: whole blocks of rows)
                    const bool aligned = piece.first_row % kPerBlock == 0 ||
                                         (!select.per_row_operands && !reduction);
                    fits = fits && scratch.fits() && aligned;
                    per_row_values |= select.per_row_values;
                    floats = std::max(floats, scratch.floats);
                    mask_bytes = std::max(mask_bytes, scratch.mask_bytes);
                    chunks.insert(chunks.end(), select.groups.begin(), select.groups.end());
                }
                scratch.floats = floats;
                scratch.mask_bytes = mask_bytes;
                if (!mapped)
                    break; // it cannot be mapped at all
                if (fits)
                    groups = parts > 1 && !shape.rowwise
                                 ? repeat_in_chunks(chunks, parts, piece.rows * piece.cols)
                                 : chunks;
                else if (per_row_values && !shape.rowwise)
                    break;
            }
        }
        if (groups.empty())
            return Stmt();
        scratch.max_floats = std::max(scratch.max_floats, scratch.floats);
        scratch.max_mask_bytes = std::max(scratch.max_mask_bytes, scratch.mask_bytes);
        // A barrier before each group that touches what an earlier one wrote, or writes what one
        // read: the V pipe overlaps its instructions otherwise.
        std::vector<Stmt> sequence;
        std::set<std::string> written, read;
        for (const Group &g : groups) {
            bool depends = false;
            for (const ir::VectorInstruction &i : g.instructions) {
                depends |= written.count(i.dst) || read.count(i.dst);
                for (const auto &src : i.srcs)
                    depends |= written.count(src.first) > 0;
            }
            if (depends && !sequence.empty())
                sequence.push_back(ir::make_pipe_barrier("V"));
            for (const ir::VectorInstruction &i : g.instructions)
                sequence.push_back(ir::make_vector_instruction(i));
            for (const ir::VectorInstruction &i : g.instructions) {
                written.insert(i.dst);
                for (const auto &src : i.srcs)
                    read.insert(src.first);
            }
        }
        // Its regions stay: a tile holding an intermediate result is V's until the ring's flag
        // releases it after the op, as before.
        return ir::make_vector_op(v, Block::make(sequence));
    }
};

} // namespace

Stmt select_vector_instructions(const Stmt &s, CompileContext &ctx,
                                std::vector<SramBuffer> &buffers) {
    const sim::ascend::AscendParams p = sim::ascend::AscendParams::from(ctx.target.lookup());
    int64_t used = 0;
    for (const SramBuffer &b : buffers) {
        if (b.ascend_mem == sim::ascend::Mem::UB)
            used = std::max(used, (b.offset_bytes + b.bytes() + 31) / 32 * 32);
    }
    Readers readers;
    s.accept(&readers);
    Scratch scratch;
    scratch.free_bytes = p.ub_bytes - used;
    Stmt result = Instructions(readers, scratch).mutate(s);
    // The instructions' intermediate results: UB beyond the tiles.
    auto add = [&](const char *name, Halide::Type type, int64_t elements) {
        SramBuffer b;
        b.name = name;
        b.ascend_mem = sim::ascend::Mem::UB;
        b.type = type;
        b.slot_elements = elements;
        b.offset_bytes = used;
        used += (b.bytes() + 31) / 32 * 32;
        buffers.push_back(b);
    };
    if (scratch.max_floats > 0)
        add(kScratch, Halide::Float(32), scratch.max_floats);
    if (scratch.max_mask_bytes > 0)
        add(kMask, Halide::UInt(8), (scratch.max_mask_bytes + 31) / 32 * 32);
    if (scratch.max_floats > 0 || scratch.max_mask_bytes > 0) {
        ctx.notes.push_back("ascend: UB " + std::to_string(used) + " of " +
                            std::to_string(p.ub_bytes) +
                            " bytes with the vector instructions' scratch (" +
                            std::to_string(scratch.max_floats * 4) + " bytes f32, " +
                            std::to_string(scratch.max_mask_bytes) + " bytes of compare masks)");
    }
    return result;
}

} // namespace tandem::lower
