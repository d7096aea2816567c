#include "AscendVectorSelection.h"

#include <sstream>

namespace tandem::lower::ascend_vector {

using namespace Halide::Internal;

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

void Selection::count_reads(const Expr &e) {
    if (const Load *l = e.as<Load>()) {
        if (gatherable(l)) { // its tile holds no intermediate result: a Gather reads it
            auto [it, fresh] = tiles.insert({l->name, Tile{Expr(0)}});
            it->second.one_region = false;
            return;
        }
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

bool misaligned(const Expr &offset) {
    const Expr rest = simplify(offset % kPerBlock);
    const int64_t *m = as_const_int(rest);
    return m && *m != 0;
}

Value Selection::classify(const Load *l) const {
    Value v;
    if (l->type != Halide::Float(32))
        return v;
    Expr base = l->index, first = l->index; // at the chunk's first element, and the nest's
    std::vector<Expr> steps;
    for (const Loop &loop : shape.loops) {
        Expr x = Variable::make(Halide::Int(32), loop.var);
        steps.push_back(simplify(substitute(loop.var, x + 1, l->index) - l->index));
        const bool chunked = shape.rowwise && &loop == &shape.loops[0];
        base = substitute(loop.var, chunked ? loop.min + int(shape.first_row) : loop.min, base);
        first = substitute(loop.var, loop.min, first);
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
    // An operand that starts inside a 32-byte block (a shifted window: in(x + 1, y)) has no
    // vector instruction (a chunk's own start, the nest's first element's plus whole rows of a
    // tile or a row of per-row values: AscendVector's chunking decides). A start that depends on
    // a loop outside the nest must be provably on a block (a column of a tile read row by row,
    // in(x, y) with y outside: session 49's fuzzing).
    if (misaligned(simplify(first)) || !can_prove(simplify(first) % kPerBlock == 0))
        return v;
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

/** The element offset of a Load at the nest's first element (a chunk's first row), and its steps
 * along the nest's loops; none when a step is not constant or the start moves with a loop. */
static bool affine(const Load *l, const Shape &shape, Expr *base, std::vector<int64_t> *steps) {
    Expr b = l->index;
    for (const Loop &loop : shape.loops) {
        Expr x = Variable::make(Halide::Int(32), loop.var);
        const int64_t *step =
            as_const_int(simplify(substitute(loop.var, x + 1, l->index) - l->index));
        if (!step)
            return false;
        steps->push_back(*step);
        const bool chunked = shape.rowwise && &loop == &shape.loops[0];
        b = substitute(loop.var, chunked ? loop.min + int(shape.first_row) : loop.min, b);
    }
    *base = simplify(b);
    for (const Loop &loop : shape.loops)
        if (expr_uses_var(*base, loop.var))
            return false;
    return true;
}

bool Selection::gatherable(const Load *l) const {
    if (l->type != Halide::Float(32) || !classify(l).buffer.empty())
        return false;
    Expr base;
    std::vector<int64_t> steps;
    if (!affine(l, shape, &base, &steps))
        return false;
    for (int64_t s : steps)
        if (s < 0)
            return false;
    // Rows x columns (a row-wise nest: two loops, or a column's one), or one flat loop; the start
    // on a known place within its 32-byte block.
    const bool rows_and_columns = shape.rowwise && (steps.size() == 1 || steps.size() == 2);
    const bool flat = !shape.rowwise && steps.size() <= 1;
    return (rows_and_columns || flat) && as_const_int(simplify(base % kPerBlock));
}

Value Selection::gather(const Load *l, const Value &into) {
    Expr base;
    std::vector<int64_t> steps;
    affine(l, shape, &base, &steps);
    GatherTable t;
    t.rows = shape.rows;
    t.pitch = shape.cols;
    if (shape.rowwise) {
        t.row_step = steps[0];
        t.col_step = steps.size() == 2 ? steps[1] : 0;
        t.width = steps.size() == 2 ? constant_upper_bound(shape.width) : 1;
    } else {
        t.col_step = steps.empty() ? 0 : steps[0];
        t.width = shape.cols;
    }
    if (t.width < 1 || t.width > t.pitch)
        return fail();
    // The source tensor starts on the block the first element is in; srcBaseAddr is the rest.
    const int64_t within = *as_const_int(simplify(base % kPerBlock));
    const int64_t reach = (t.rows - 1) * t.row_step + (t.width - 1) * t.col_step;
    Value dst = result_tile(into);
    ir::VectorInstruction i;
    i.op = "Gather";
    i.dst = dst.buffer;
    i.dst_offset = dst.offset;
    i.srcs = {{l->name, simplify(base - int(within))}, {kGatherOffsets, tables.offset_of(t)}};
    i.count = count();
    i.gather_base = within * 4;
    i.gather_window = within + reach + 1;
    groups.push_back({{i}});
    gathers = true;
    return dst;
}

Value Selection::widen(const Load *l, const Value &into) {
    if (!l)
        return fail();
    // The int32 tile read where an f32 one would be (the same 4-byte layout).
    const Expr as_float = Load::make(Halide::Float(32), l->name, l->index, l->image, l->param,
                                     l->predicate, l->alignment);
    const Value x = classify(as_float.as<Load>());
    if (x.buffer.empty() || x.kind != Kind::Tile || x.pitch != 0)
        return fail();
    Value dst = result_tile(into);
    if (dst.pitch != 0)
        return fail();
    emit_count("Cast", dst, {x}, Expr(), count()); // mode 0: RoundMode::CAST_NONE
    release(x, dst);
    return dst;
}

Value Selection::gen(const Expr &e, const Value &into) {
    if (!ok)
        return {};
    if (const Load *l = e.as<Load>()) {
        Value v = classify(l);
        if (v.buffer.empty() && gatherable(l))
            return gather(l, Value());
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
    if (const Cast *c = e.as<Cast>()) { // (a float32 call's value, printed as a cast)
        if (c->value.type() == Halide::Int(32))
            return widen(c->value.as<Load>(), into);
        if (c->value.type() != Halide::Float(32))
            return fail();
        return gen(c->value, into);
    }
    if (const Call *c = e.as<Call>()) {
        if (c->args.size() != 1)
            return fail();
        // AscendC's basic API has no Tanh: tanh(v) = 2 / (1 + exp(-2v)) - 1, exact at the
        // infinities (exp -> 0 or inf) and within a few ulps of 1 elsewhere.
        if (c->name == "tanh_f32")
            return gen(2.0f / (1.0f + Halide::exp(c->args[0] * -2.0f)) - 1.0f, into);
        const std::string op = c->is_intrinsic(Call::abs) ? "Abs"
                               : c->name == "sqrt_f32"    ? "Sqrt"
                               : c->name == "exp_f32"     ? "Exp"
                               : c->name == "log_f32"     ? "Ln"
                                                          : "";
        if (op.empty())
            return fail();
        Value x = gen(c->args[0], into);
        if (!ok || x.kind == Kind::Scalar || x.kind == Kind::Row)
            return fail();
        Value dst = x.kind == Kind::PerRow ? per_row() : result_tile(into);
        emit(op, dst, {x}, Expr(), x.kind == Kind::PerRow ? Expr(int(shape.rows)) : count());
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

void Selection::reduce(const Value &self, const Expr &f, const std::string &op) {
    Value v = uniform(gen(f, Value())); // an op's result in a temp; a tile read as it is
    if (!ok)
        return;
    if (v.kind != Kind::Tile || (shape.rows > 1 && shape.cols % kPerBlock != 0)) {
        fail();
        return;
    }
    if (op != "Add")
        return reduce_extreme(self, v, op);
    if (const Value rows = row_reduction(v, op); !rows.buffer.empty())
        return emit_count("Add", self, {self, rows}, Expr(), int(shape.rows));
    Value part = per_row();
    Group g;
    for (int64_t r = 0; r < shape.rows; r++) {
        ir::VectorInstruction i;
        i.op = "ReduceSum";
        i.dst = part.buffer;
        i.dst_offset = simplify(part.offset + int(r));
        i.srcs = {{v.buffer, simplify(v.offset + int(r * shape.cols))}, {part.buffer, part.offset}};
        i.count = shape.width; // the nest's columns, not the padding
        g.instructions.push_back(i);
    }
    groups.push_back(g);
    emit_count("Add", self, {self, part}, Expr(), int(shape.rows));
}

Value Selection::row_reduction(const Value &v, const std::string &op) {
    const int64_t *width = as_const_int(shape.width);
    if (!ok || !width || shape.count.defined() || v.kind != Kind::Tile || v.pitch != 0 ||
        shape.cols % kPerBlock != 0)
        return {};
    const std::string suffix = op == "Add" ? "Sum" : op;
    // One instruction per 255 repeats of `rows` repeats, `step` elements of each operand further
    // per repeat (dst, then the sources).
    auto repeated = [&](const std::string &name, const Value &dst, const std::vector<Value> &srcs,
                        int64_t mask, int64_t rows, const std::vector<int64_t> &step,
                        const std::vector<std::pair<int, int>> &strides) {
        Group g;
        for (int64_t r = 0; r < rows; r += 255) {
            ir::VectorInstruction i;
            i.op = name;
            i.dst = dst.buffer;
            i.dst_offset = simplify(dst.offset + int(r * step[0]));
            for (size_t k = 0; k < srcs.size(); k++)
                i.srcs.push_back({srcs[k].buffer, simplify(srcs[k].offset + int(r * step[k + 1]))});
            i.mask = int(mask);
            i.repeats = int(std::min<int64_t>(255, rows - r));
            i.strides = strides;
            g.instructions.push_back(i);
        }
        groups.push_back(g);
    };
    const int cols_blocks = int(shape.cols / kPerBlock);
    Value values; // one per row (rounded up to a block: the last repeat's spare lanes)
    values.kind = Kind::PerRow;
    values.buffer = kScratch;
    if (*width == shape.cols && shape.cols % kLanes == 0 && cols_blocks <= 255) {
        // Whole rows of 64k lanes: fold the row's 64-lane chunks into the first (op by repeat,
        // a repeat a row), then a BlockReduce to a value per block (eight per row) and one to a
        // value per row (eight rows a repeat): ReduceDataBlock's rate, 64 f32 per cycle.
        Value src = v;
        int rep_blocks = cols_blocks;
        if (shape.cols > kLanes) {
            Value t;
            t.kind = Kind::Tile;
            t.buffer = kScratch;
            t.offset = scratch.take(shape.rows * kLanes);
            for (int64_t c = kLanes; c < shape.cols; c += kLanes) {
                Value chunk = v;
                chunk.offset = simplify(v.offset + int(c));
                const Value &first = c == kLanes ? v : t;
                const int first_blocks = c == kLanes ? cols_blocks : 8;
                repeated(op, t, {first, chunk}, kLanes, shape.rows,
                         {kLanes, c == kLanes ? shape.cols : kLanes, shape.cols},
                         {{1, 8}, {1, first_blocks}, {1, cols_blocks}});
            }
            src = t;
            rep_blocks = 8;
        }
        const int64_t row_groups = (shape.rows + kPerBlock - 1) / kPerBlock;
        Value blocks;
        blocks.kind = Kind::Tile;
        blocks.buffer = kScratch;
        blocks.offset = scratch.take(row_groups * kPerBlock * kPerBlock);
        repeated("BlockReduce" + suffix, blocks, {src}, kLanes, shape.rows,
                 {kPerBlock, int64_t(rep_blocks) * kPerBlock}, {{1, 1}, {1, rep_blocks}});
        values.offset = scratch.take(row_groups * kPerBlock);
        repeated("BlockReduce" + suffix, values, {blocks}, kLanes, row_groups, {kPerBlock, kLanes},
                 {{1, 1}, {1, 8}});
        read(v);
        return values;
    }
    if (*width >= 1 && *width <= kLanes) {
        // A row in one repeat: WholeReduce of its lanes, a repeat a row.
        values.offset = scratch.take(shape.rows);
        repeated("WholeReduce" + suffix, values, {v}, *width, shape.rows, {1, shape.cols},
                 {{1, 1}, {1, cols_blocks}});
        if (op != "Add") // (value only)
            for (ir::VectorInstruction &i : groups.back().instructions)
                i.mode = 2;
        read(v);
        return values;
    }
    return {};
}

void Selection::reduce_extreme(const Value &self, const Value &v, const std::string &op) {
    if (const Value rows = row_reduction(v, op); !rows.buffer.empty())
        return emit_count(op, self, {self, rows}, Expr(), int(shape.rows));
    // Row r's ReduceMax (or ReduceMin) writes its value at the start of its own sharedTmpBuffer
    // (the docs allow dst inside it; 32-byte aligned, so the 8 bytes dst needs), `per` floats
    // apart: the rows need no barrier among them.
    const int64_t repeats = std::max<int64_t>(1, (shape.cols + kLanes - 1) / kLanes);
    const int64_t per = (repeats * 2 + kPerBlock - 1) / kPerBlock * kPerBlock;
    if (per / kPerBlock > 255) {
        fail();
        return;
    }
    Value part;
    part.kind = Kind::Tile;
    part.buffer = kScratch;
    part.offset = scratch.take(shape.rows * per);
    Group g;
    for (int64_t r = 0; r < shape.rows; r++) {
        ir::VectorInstruction i;
        i.op = "Reduce" + op;
        i.dst = part.buffer;
        i.dst_offset = simplify(part.offset + int(r * per));
        i.srcs = {{v.buffer, simplify(v.offset + int(r * shape.cols))},
                  {part.buffer, i.dst_offset}};
        i.count = shape.width; // the nest's columns, not the padding
        g.instructions.push_back(i);
    }
    read(v);
    groups.push_back(g);
    // The rows' values side by side: WholeReduceMax of one lane per repeat (a repeat a row's
    // block, the value-only order: dstRepStride counts values).
    Value rows_values = per_row();
    Group gather;
    for (int64_t r = 0; r < shape.rows; r += 255) {
        ir::VectorInstruction i;
        i.op = "WholeReduce" + op;
        i.dst = rows_values.buffer;
        i.dst_offset = simplify(rows_values.offset + int(r));
        i.srcs = {{part.buffer, simplify(part.offset + int(r * per))}};
        i.mask = 1;
        i.repeats = int(std::min<int64_t>(255, shape.rows - r));
        i.strides = {{1, 1}, {1, int(per / kPerBlock)}};
        i.mode = 2; // ReduceOrder::ORDER_ONLY_VALUE
        gather.instructions.push_back(i);
    }
    groups.push_back(gather);
    emit_count(op, self, {self, rows_values}, Expr(), int(shape.rows));
}

Value Selection::column_operand(const Expr &f) {
    count_reads(f);
    Value v = uniform(gen(f, Value()));
    if (ok && v.kind != Kind::Tile)
        return fail();
    return v;
}

void Selection::assign(const Value &dst, const Value &value) {
    if (!ok ||
        (value.buffer == dst.buffer && value.offset.defined() && equal(value.offset, dst.offset)))
        return;

    if (value.kind == Kind::Scalar)
        return emit_count("Duplicate", dst, {}, value.scalar, count());
    emit("Muls", dst, {broadcast(value)}, Expr(1.0f), count());
}

void Selection::assign_update(const Value &dst, const Value &value) {
    bool last_made_it = ok && !groups.empty() && !groups.back().instructions.empty() &&
                        value.kind == Kind::Tile && dst.kind == Kind::Tile &&
                        value.pitch == dst.pitch && value.buffer != dst.buffer;
    for (const ir::VectorInstruction &i :
         last_made_it ? groups.back().instructions : std::vector<ir::VectorInstruction>())
        last_made_it = last_made_it && i.dst == value.buffer;
    if (!last_made_it)
        return assign(dst, value);
    // (Each element of an update reads the destination where it writes it: in place.)
    for (ir::VectorInstruction &i : groups.back().instructions) {
        i.dst = dst.buffer;
        i.dst_offset = simplify(dst.offset + (i.dst_offset - value.offset));
    }
}

Value Selection::temp() {
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

Value Selection::fail() {
    ok = false;
    return {};
}

void Selection::release(const Value &v, const Value &dst) {
    if (v.kind == Kind::Tile && v.buffer == kScratch &&
        !(dst.buffer == v.buffer && equal(dst.offset, v.offset)))
        free_tiles.push_back(v.offset);
}

bool Selection::scalar(const Expr &e) const {
    if (e.type() != Halide::Float(32) || !loads_in(e).empty())
        return false;
    for (const Loop &l : shape.loops)
        if (expr_uses_var(e, l.var))
            return false;
    return true;
}

std::vector<Expr> Selection::children(const Expr &e) {
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

Value Selection::per_row() {
    Value v;
    v.kind = Kind::PerRow;
    v.buffer = kScratch;
    v.offset = scratch.take(shape.rows);
    return v;
}

Value Selection::last_read(const Value &x, const Value &y) {
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

Value Selection::broadcast(const Value &v) {
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
    // Brcb reads eight values per repeat from a 32-byte block: a buffer's rows that are not
    // whole blocks from a block's start are copied to scratch first.
    const bool whole_blocks =
        shape.rows % kPerBlock == 0 && can_prove(v.offset % int(kPerBlock) == 0);
    if (v.buffer != kScratch && !whole_blocks) {
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

void Selection::combine(const std::string &op, const Value &dst, const Value &x, const Value &y,
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

void Selection::compare(const Value &x, const Value &y, int64_t whole, int mode) {
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
}

void Selection::select_by_mask(const Value &dst, const Value &t, const Value &f, const Expr &n) {
    ir::VectorInstruction sel;
    sel.op = "Select";
    sel.dst = dst.buffer;
    sel.dst_offset = dst.offset;
    sel.srcs = {{kMask, 0}, {t.buffer, t.offset}, {f.buffer, f.offset}};
    sel.count = n;
    sel.mode = 2; // VSEL_TENSOR_TENSOR_MODE
    read(t);
    read(f);
    groups.push_back({{sel}});
}

Value Selection::select(const Halide::Internal::Select *s, const Value &into) {
    using Halide::Internal::Select;
    // Two conditions (a causal mask and a tail's): a select in a select, one Compare each.
    if (const And *c = s->condition.as<And>())
        return gen(
            Select::make(c->a, Select::make(c->b, s->true_value, s->false_value), s->false_value),
            into);
    if (const Or *c = s->condition.as<Or>())
        return gen(
            Select::make(c->a, s->true_value, Select::make(c->b, s->true_value, s->false_value)),
            into);
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
    const bool on_position = a.type() == Halide::Int(32) && b.type() == Halide::Int(32);
    if (a.type() != Halide::Float(32) && !on_position)
        return fail();
    if (!on_position && per_row_only({s->true_value, s->false_value, a, b}))
        return select_rows(mode, s->true_value, s->false_value, a, b);
    // Both values and the compared ones first: a select nested in any of them uses the mask
    // before this one's Compare writes it.
    Value t = tile_of(gen(s->true_value, Value())), f = tile_of(gen(s->false_value, Value()));
    Value x, y;
    if (on_position) { // a - b against 0: the difference of two positions is one position
        x = position(simplify(a - b));
        y = tile_of(gen(Expr(0.0f), Value()));
    } else {
        x = tile_of(gen(a, Value()));
        y = tile_of(gen(b, Value()));
    }
    if (!ok)
        return {};
    // Compare takes whole 256-byte repeats: the compared values are copied into scratch that
    // has them when the tile does not (what it compares past the tile, Select never reads).
    const int64_t whole = (elements() + kLanes - 1) / kLanes * kLanes;
    if (whole != elements() || shape.count.defined()) {
        x = in_whole_repeats(x, whole);
        y = in_whole_repeats(y, whole);
    }
    compare(x, y, whole, mode);
    release(x, Value());
    release(y, Value());
    Value dst = result_tile(into);
    select_by_mask(dst, t, f, count());
    release(t, dst);
    release(f, dst);
    return dst;
}

bool Selection::per_row_only(const std::vector<Expr> &values) const {
    bool any = false;
    for (const Expr &e : values) {
        for (const Load *l : loads_in(e)) {
            if (classify(l).kind != Kind::PerRow)
                return false;
            any = true;
        }
    }
    return any;
}

Value Selection::select_rows(int mode, const Expr &true_value, const Expr &false_value,
                             const Expr &a, const Expr &b) {
    // Compare takes whole 256-byte repeats: the compared rows in scratch that has them.
    const int64_t whole = (shape.rows + kLanes - 1) / kLanes * kLanes;
    auto rows = [&](const Expr &e, int64_t room) {
        Value v = gen(e, Value());
        if (!ok || (v.kind == Kind::PerRow && room == shape.rows))
            return v;
        Value c;
        c.kind = Kind::PerRow;
        c.buffer = kScratch;
        c.offset = scratch.take(room);
        if (v.kind == Kind::Scalar)
            emit_count("Duplicate", c, {}, v.scalar, int(shape.rows));
        else
            emit_count("Muls", c, {v}, Expr(1.0f), int(shape.rows)); // exactly (-0 and NaN kept)
        return c;
    };
    // Both values and the compared ones first, as select()'s.
    const Value t = rows(true_value, shape.rows), f = rows(false_value, shape.rows);
    const Value x = rows(a, whole), y = rows(b, whole);
    if (!ok)
        return {};
    compare(x, y, whole, mode);
    Value dst = per_row();
    select_by_mask(dst, t, f, int(shape.rows));
    return dst;
}

Value Selection::position(const Expr &e) {
    if (!ok)
        return {};
    // The nest's loops: a row-wise nest's rows then columns, a flat nest's one loop its columns.
    const Loop *row = nullptr, *col = nullptr;
    if (shape.rowwise && shape.loops.size() == 2)
        row = &shape.loops[0], col = &shape.loops[1];
    else if (!shape.rowwise && shape.loops.size() == 1)
        col = &shape.loops[0];
    else
        return fail();
    // e = alpha * column + beta * row + gamma, gamma the same for every element.
    auto step = [&](const Loop *l) -> int64_t {
        if (!l)
            return 0;
        const Expr x = Variable::make(Halide::Int(32), l->var);
        const int64_t *d = as_const_int(simplify(substitute(l->var, x + 1, e) - e));
        return d ? *d : INT64_MIN;
    };
    const int64_t alpha = step(col), beta = step(row);
    if (alpha == INT64_MIN || beta == INT64_MIN)
        return fail();
    Expr gamma = e; // at the nest's (a chunk's) first element
    if (row)
        gamma = substitute(row->var, row->min + int(shape.first_row), gamma);
    gamma = substitute(col->var, col->min, gamma);
    gamma = simplify(gamma);
    for (const Loop &l : shape.loops)
        if (expr_uses_var(gamma, l.var))
            return fail();
    // The columns' part with gamma: alpha * i + gamma at column i of a row (one row, the same
    // for every row: read with a repeat stride of 0).
    Value columns;
    columns.kind = Kind::Row;
    columns.buffer = kScratch;
    columns.offset = scratch.take(shape.cols);
    emit_count("CreateVecIndex", columns, {}, Expr(0.0f), int(shape.cols));
    if (alpha != 1)
        emit_count("Muls", columns, {columns}, Expr(float(alpha)), int(shape.cols));
    emit_count("Adds", columns, {columns}, Halide::cast<float>(gamma), int(shape.cols));
    Value t = temp();
    if (beta == 0) {
        emit("Muls", t, {columns}, Expr(1.0f), count());
        return t;
    }
    Value rows = per_row(); // beta * r at row r
    emit_count("CreateVecIndex", rows, {}, Expr(0.0f), int(shape.rows));
    if (beta != 1)
        emit_count("Muls", rows, {rows}, Expr(float(beta)), int(shape.rows));
    emit("Add", t, {columns, broadcast(rows)}, Expr(), count());
    return t;
}

Value Selection::in_whole_repeats(const Value &v, int64_t whole) {
    Value t;
    t.kind = Kind::Tile;
    t.buffer = kScratch;
    t.offset = scratch.take(whole);
    emit("Muls", t, {v}, Expr(1.0f), count());
    release(v, t);
    return t;
}

Value Selection::uniform(const Value &v) {
    if (!ok || v.kind != Kind::Tile || v.pitch == 0)
        return v;
    Value t = temp();
    emit("Muls", t, {v}, Expr(1.0f), count());
    release(v, t);
    return t;
}

Value Selection::tile_of(const Value &v) {
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

void Selection::emit_count(const std::string &op, const Value &dst, const std::vector<Value> &srcs,
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

void Selection::emit(const std::string &op, const Value &dst, const std::vector<Value> &srcs,
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

void Selection::read(const Value &v) {
    auto tile = tiles.find(v.buffer);
    if (tile != tiles.end() && !tile->second.holds)
        tile->second.reads--;
}

} // namespace tandem::lower::ascend_vector
