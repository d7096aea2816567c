#include "AscendRowSplit.h"

#include "lower/MultiBuffer.h"
#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <map>
#include <numeric>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** What the tile's code shows of its rows: their number, each buffer's pitch (elements from one
 * row to the next), and the first reason it is not row by row. */
struct Rows {
    int64_t count = 0;
    std::map<std::string, int64_t> pitch;
    std::map<std::string, int> bytes;
    std::set<std::string> allocated, written;
    std::map<std::string, int64_t> elements; // of each allocation (-1: not constant)
    std::string why;
    void fail(const std::string &reason) {
        if (why.empty())
            why = reason;
    }
};

/** The loads and stores of one vector op's nest, below its row loop (`row` at 0): each must index
 * one row of its buffer, inside the op's region for it. */
class RowAccesses : public LoopScopedVisitor {
public:
    RowAccesses(const std::string &row, const ir::VectorOp &op, Rows &rows)
        : row(row), op(op), rows(rows) {}
    std::set<std::string> seen;

private:
    using LoopScopedVisitor::visit;
    const std::string &row;
    const ir::VectorOp &op;
    Rows &rows;

    void visit(const Load *l) override {
        access(l->name, l->index, l->type);
        LoopScopedVisitor::visit(l);
    }
    void visit(const Store *s) override {
        access(s->name, s->index, s->value.type());
        LoopScopedVisitor::visit(s);
    }
    void visit(const LetStmt *l) override {
        l->value.accept(this);
        ScopedBinding<Interval> bind(loops, l->name, bounds_of_expr_in_scope(l->value, loops));
        l->body.accept(this);
    }
    void visit(const Let *l) override {
        l->value.accept(this);
        ScopedBinding<Interval> bind(loops, l->name, bounds_of_expr_in_scope(l->value, loops));
        l->body.accept(this);
    }
    void access(const std::string &buffer, const Expr &index, const Halide::Type &type) {
        const ir::Region *region = nullptr;
        for (const ir::Region &r : op.regions)
            if (r.buffer == buffer)
                region = &r;
        if (region == nullptr) {
            rows.fail("vector op " + op.label + " reads " + buffer + " outside its regions");
            return;
        }
        const Expr step = affine_step(index, row);
        const int64_t *pitch = step.defined() ? as_const_int(simplify(step)) : nullptr;
        if (pitch == nullptr || *pitch <= 0) {
            rows.fail("vector op " + op.label + " indexes " + buffer + " across rows");
            return;
        }
        // Where in its row: between 0 and the pitch, whatever the loops inside the row loop.
        const Interval within =
            bounds_of_expr_in_scope(simplify(substitute(row, 0, index) - region->lo), loops);
        const int64_t *lo = within.has_lower_bound() ? as_const_int(simplify(within.min)) : nullptr;
        const int64_t *hi = within.has_upper_bound() ? as_const_int(simplify(within.max)) : nullptr;
        if (lo == nullptr || hi == nullptr || *lo < 0 || *hi >= *pitch) {
            rows.fail("vector op " + op.label + " reads " + buffer + " beyond one row");
            return;
        }
        auto [it, fresh] = rows.pitch.emplace(buffer, *pitch);
        if (!fresh && it->second != *pitch)
            rows.fail(buffer + " is indexed with rows of " + std::to_string(it->second) +
                      " and of " + std::to_string(*pitch) + " elements");
        rows.bytes[buffer] = type.bytes();
        seen.insert(buffer);
    }
};

/** The tile's vector ops and what lies outside them. */
class RowAnalysis : public IRVisitor {
public:
    explicit RowAnalysis(Rows &rows) : rows(rows) {}

private:
    using IRVisitor::visit;
    Rows &rows;

    void visit(const Allocate *op) override {
        rows.allocated.insert(op->name);
        int64_t elements = 1;
        for (const Expr &e : op->extents) {
            const int64_t *extent = as_const_int(e);
            elements = extent && elements > 0 ? elements * *extent : -1;
        }
        rows.elements[op->name] = elements;
        IRVisitor::visit(op);
    }
    void visit(const Load *op) override {
        rows.fail("the tile loads " + op->name + " outside a vector op");
    }
    void visit(const Store *op) override {
        rows.fail("the tile stores " + op->name + " outside a vector op");
    }
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (ir::as_copy(op, &c))
            rows.written.insert(c.dst);
    }
    void visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (!ir::as_vector_op(op, &v, &body)) {
            IRVisitor::visit(op);
            return;
        }
        const For *loop = body.as<For>();
        const int64_t extent = loop ? constant_upper_bound(loop->extent) : -1;
        if (loop == nullptr || !is_const_zero(loop->min) || extent < 1) {
            rows.fail("vector op " + v.label + " has no loop over rows outermost");
            return;
        }
        // (One row count for all: the instructions cover a loop's largest extent, so a shorter
        // loop would have AIV 1 compute rows that are not the loop's.)
        if (rows.count != 0 && rows.count != extent)
            rows.fail("vector ops loop over " + std::to_string(rows.count) + " and " +
                      std::to_string(extent) + " rows");
        rows.count = extent;
        RowAccesses accesses(loop->name, v, rows);
        loop->body.accept(&accesses);
        for (const ir::Region &r : v.regions) {
            if (!accesses.seen.count(r.buffer))
                rows.fail("vector op " + v.label + " has a region of " + r.buffer +
                          " that it does not index");
            if (r.write)
                rows.written.insert(r.buffer);
        }
    }
};

/** The tile with each vector op's row loop, region and copy cut to this AIV's rows: the first
 * `first_part` rows to AIV 0, the rest to AIV 1, at their places in every buffer; the tile's own
 * buffers (local()) shrink to an AIV's rows, which split_rows_between_aivs then rebases to 0. */
class SplitRows : public IRMutator {
public:
    SplitRows(Rows &rows, const Expr &sub, int64_t first_part)
        : rows(rows), sub(sub), first_part(first_part), first(sub * int(first_part)) {}

    /** A buffer of the tile's own, of a constant size, which each AIV holds from its first row
     * on: half the rows. (One whose size Halide left to the shape keeps every row.) */
    bool local(const std::string &buffer) const {
        const auto elements = rows.elements.find(buffer);
        const auto pitch = rows.pitch.find(buffer);
        return elements != rows.elements.end() && pitch != rows.pitch.end() &&
               elements->second >= rows.count * pitch->second;
    }

private:
    using IRMutator::visit;
    Rows &rows;
    Expr sub;
    int64_t first_part;
    Expr first; // this AIV's first row

    /** Of `extent` elements of a buffer from its first row on, rows `pitch` apart, this AIV's
     * (whatever covered the rows' elements covers each AIV's: each reads and writes only
     * inside its own rows). */
    Expr part(const Expr &extent, int64_t pitch) const {
        const Expr split = int(first_part * pitch);
        return simplify(select(sub == 0, min(extent, split), max(extent - split, 0)));
    }
    Stmt visit(const Allocate *op) override {
        Stmt body = mutate(op->body);
        if (!local(op->name))
            return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition,
                                  body, op->new_expr, op->free_function);
        // AIV 1's rows, as many as AIV 0's, start at element 0 (the rows past them, a padded
        // tile's last, stay).
        const int64_t mine = rows.elements.at(op->name) - first_part * rows.pitch.at(op->name);
        return Allocate::make(op->name, op->type, op->memory_type, {Expr(int(mine))}, op->condition,
                              body, op->new_expr, op->free_function);
    }
    Stmt visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (!ir::as_vector_op(op, &v, &body))
            return IRMutator::visit(op);
        const For *loop = body.as<For>();
        const Expr row = Variable::make(Halide::Int(32), loop->name);
        Stmt nest = For::make(loop->name, 0, part(loop->extent, 1), loop->for_type,
                              loop->device_api, substitute(loop->name, row + first, loop->body));
        for (ir::Region &r : v.regions) {
            r.lo = simplify(r.lo + first * int(rows.pitch.at(r.buffer)));
            r.extent = part(r.extent, rows.pitch.at(r.buffer));
        }
        v.flops = simplify(v.flops / 2);
        return ir::make_vector_op(v, nest);
    }

    Stmt visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (!ir::as_copy(op, &c))
            return op;
        const bool to = rows.pitch.count(c.dst) > 0, from = rows.pitch.count(c.src) > 0;
        if (!to && !from) {
            if (rows.allocated.count(c.dst))
                rows.fail("a copy fills " + c.dst + ", which no vector op reads by rows");
            return op;
        }
        if (to && from) {
            rows.fail("a copy between " + c.src + " and " + c.dst + " on chip");
            return op;
        }
        const int64_t pitch = rows.pitch.at(to ? c.dst : c.src);
        // The dim that steps from row to row on chip; the others stay inside a row.
        int row_dim = -1;
        int64_t within = 0;
        for (size_t d = 0; d < c.dims.size(); d++) {
            const int64_t *stride = as_const_int(to ? c.dims[d].dst_stride : c.dims[d].src_stride);
            const int64_t *extent = as_const_int(c.dims[d].extent);
            if (stride && *stride == pitch && row_dim < 0 && (!extent || *extent > 1))
                row_dim = int(d);
            else if (extent && *extent == 1)
                continue;
            else if (stride && extent && *stride > 0)
                within += (*extent - 1) * *stride;
            else
                within = pitch; // not inside one row
        }
        if (row_dim >= 0 && within < pitch) {
            ir::CopyDim &d = c.dims[row_dim];
            c.dst_offset = simplify(c.dst_offset + first * d.dst_stride);
            c.src_offset = simplify(c.src_offset + first * d.src_stride);
            d.extent = part(d.extent, 1);
            return ir::make_copy(c);
        }
        // Rows one after another on both sides: one contiguous run of elements.
        if (c.dims.size() == 1 && is_const_one(c.dims[0].dst_stride) &&
            is_const_one(c.dims[0].src_stride)) {
            c.dst_offset = simplify(c.dst_offset + first * int(pitch));
            c.src_offset = simplify(c.src_offset + first * int(pitch));
            c.dims[0].extent = part(c.dims[0].extent, pitch);
            return ir::make_copy(c);
        }
        rows.fail("a copy of " + (to ? c.dst : c.src) + " does not move whole rows");
        return op;
    }
};

} // namespace

Stmt split_rows_between_aivs(const Stmt &tile, const Expr &sub, std::string *why) {
    Rows rows;
    RowAnalysis analysis(rows);
    tile.accept(&analysis);
    for (const std::string &b : rows.written)
        if (rows.pitch.count(b) && !rows.allocated.count(b))
            rows.fail("the tile writes " + b + ", which outlives it");
    // AIV 1's rows start on a 32-byte block of every buffer: the halves are multiples of
    // `step` rows. (The vector instructions cover a row loop's largest extent, so each half must
    // be as large as the other: AIV 1 computes up to row 2 * half.)
    int64_t step = 1;
    for (const auto &[buffer, pitch] : rows.pitch) {
        const int64_t bytes = pitch * rows.bytes[buffer];
        step = std::lcm(step, 32 / std::gcd(bytes, int64_t(32)));
    }
    if (rows.count < 2 || rows.count % (2 * step) != 0)
        rows.fail("the tile has " + std::to_string(rows.count) + " rows, which do not halve on " +
                  std::to_string(step) + "-row (32-byte) boundaries");
    Stmt split;
    if (rows.why.empty()) {
        SplitRows rows_of_mine(rows, sub, rows.count / 2);
        split = rows_of_mine.mutate(tile);
        // Each AIV's rows of the tile's own buffers from element 0 (SplitRows halved them).
        for (const std::string &buffer : rows.allocated)
            if (rows_of_mine.local(buffer))
                split = rebase_buffer(split, buffer,
                                      simplify(-(sub * int(rows.count / 2 * rows.pitch[buffer]))),
                                      Expr());
    }
    *why = rows.why;
    return rows.why.empty() ? split : Stmt();
}

} // namespace tandem::lower
