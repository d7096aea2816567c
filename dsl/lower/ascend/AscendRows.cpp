#include "AscendRows.h"

#include "tandem/Nest.h"

#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** The cube's buffers: what a store into a tile_mma Func reads, and those Funcs. */
class CubeTiles : public IRVisitor {
public:
    explicit CubeTiles(const CompileContext &ctx) : ctx(ctx) {}
    std::set<std::string> names;

private:
    using IRVisitor::visit;
    const CompileContext &ctx;
    bool in_mma = false;
    void visit(const Store *op) override {
        const bool mma = ctx.of(op->name).tile_mma;
        if (mma)
            names.insert(op->name);
        const bool outer = in_mma;
        in_mma = in_mma || mma;
        IRVisitor::visit(op);
        in_mma = outer;
    }
    void visit(const Load *op) override {
        if (in_mma)
            names.insert(op->name);
        IRVisitor::visit(op);
    }
};

/** A buffer's loads and stores at new indices: index(i) for each index i. */
class Reindex : public IRMutator {
public:
    explicit Reindex(const std::string &buffer) : buffer(buffer) {}

protected:
    using IRMutator::visit;
    const std::string &buffer;
    virtual Expr index(const Expr &i) const = 0;

    Expr visit(const Load *op) override {
        Expr e = IRMutator::visit(op);
        if (op->name != buffer)
            return e;
        const Load *l = e.as<Load>();
        return Load::make(l->type, l->name, index(l->index), l->image, l->param, l->predicate,
                          l->alignment);
    }
    Stmt visit(const Store *op) override {
        Stmt s = IRMutator::visit(op);
        if (op->name != buffer)
            return s;
        const Store *st = s.as<Store>();
        return Store::make(st->name, st->value, index(st->index), st->param, st->predicate,
                           st->alignment);
    }
};

class Repitch : public Reindex {
public:
    Repitch(const std::string &buffer, const Expr &width, const Expr &pitch)
        : Reindex(buffer), width(width), pitch(pitch) {}

private:
    const Expr &width, &pitch;

    /** Replaces `width` as a factor of a product. */
    class Index : public IRMutator {
    public:
        Index(const Expr &width, const Expr &pitch) : width(width), pitch(pitch) {}

    private:
        using IRMutator::visit;
        const Expr &width, &pitch;
        Expr visit(const Mul *op) override {
            if (equal(op->a, width))
                return Mul::make(pitch, mutate(op->b));
            if (equal(op->b, width))
                return Mul::make(mutate(op->a), pitch);
            return IRMutator::visit(op);
        }
    };

    /** The first subexpression of `e` that is not arithmetic on others (a variable, a max, a
     * call ...). */
    static Expr atom(const Expr &e) {
        if (const Add *a = e.as<Add>())
            return is_const(a->a) ? atom(a->b) : atom(a->a);
        if (const Sub *a = e.as<Sub>())
            return is_const(a->a) ? atom(a->b) : atom(a->a);
        if (const Mul *a = e.as<Mul>())
            return is_const(a->a) ? atom(a->b) : atom(a->a);
        return is_const(e) ? Expr() : e;
    }

    /** i = width * r + c with width = a * t + b (t a subexpression of the width, a a constant):
     * Halide's simplifier spreads the product over constant rows (width * (y + 1) + x becomes
     * width * y + 302 - t + x), so the row is i's coefficient of t over a. None when i is not
     * linear in t or the row is not whole. */
    bool rows_of(const Expr &i, Expr *row, Expr *column) const {
        const Expr t = atom(width);
        if (!t.defined())
            return false;
        const Expr v = Variable::make(t.type(), "tandem.repitch.t");
        const Expr w = substitute(t, v, width), iv = substitute(t, v, i);
        auto at = [&](const Expr &e, int x) {
            return simplify(substitute(v.as<Variable>()->name, x, e));
        };
        Expr a = simplify(at(w, 1) - at(w, 0)), q = simplify(at(iv, 1) - at(iv, 0));
        const int64_t *ac = as_const_int(a);
        if (!ac || *ac == 0 || !is_const_zero(simplify(at(w, 2) - at(w, 0) - a * 2)) ||
            !is_const_zero(simplify(at(iv, 2) - at(iv, 0) - q * 2)))
            return false;
        if (*ac < 0) { // (a width falling with t: Halide divides a sum by a positive constant)
            a = simplify(-a);
            q = simplify(-q);
        }
        *row = simplify(q / a);
        if (!can_prove(*row * a == q))
            return false;
        // (i - width * row does not depend on t: take it at t = 0)
        *column = simplify(at(iv, 0) - at(w, 0) * *row);
        return true;
    }

    /** Rows one element wide: Halide's index is the row itself (no product by the width). */
    Expr index(const Expr &e) const override {
        if (is_const_one(width))
            return simplify(e * pitch);
        Expr row, column;
        if (rows_of(e, &row, &column))
            return simplify(row * pitch + column);
        const Expr i = simplify(Index(width, pitch).mutate(e));
        // A width known at run time left outside the products it replaced would read the rows
        // at their old pitch there: wrong elements, never silently.
        const Expr t = atom(width);
        if (t.defined() && !is_const(width) && expr_uses_vars_of(i, t)) {
            throw Error("not supported on ascend: a tile whose rows are a width known only at "
                        "run time apart is read at an index Tandem cannot lay out on 32-byte "
                        "rows (" +
                        buffer.substr(0, buffer.find('$')) + ")");
        }
        return i;
    }
    /** Whether `e` uses a variable of `t`. */
    static bool expr_uses_vars_of(const Expr &e, const Expr &t) {
        bool used = false;
        class Vars : public IRVisitor {
        public:
            std::set<std::string> names;
            using IRVisitor::visit;
            void visit(const Variable *v) override { names.insert(v->name); }
        } vars;
        t.accept(&vars);
        for (const std::string &n : vars.names)
            used |= expr_uses_var(e, n);
        return used;
    }
};

/** `buffer` laid out as rows `width` elements wide, each now `pitch` apart: every index i of a
 * load or store becomes (i / width) * pitch + i % width, simplified with the loops' constant
 * bounds (so y * 7 + x with x in [0, 7) becomes y * 8 + x). Right for any index, whatever form
 * Halide's simplifier gave it. */
class Refold : public Reindex {
public:
    Refold(const std::string &buffer, int64_t width, int64_t pitch)
        : Reindex(buffer), width(width), pitch(pitch) {}

private:
    using Reindex::visit;
    const int64_t width, pitch;
    LoopScope loops, bounds;

    Stmt visit(const For *op) override {
        push_loop(loops, op);
        const Interval &i = loops.get(op->name);
        Expr lo = find_constant_bound(i.min, Direction::Lower, loops),
             hi = find_constant_bound(i.max, Direction::Upper, loops);
        bounds.push(op->name, Interval(lo.defined() && lo.as<IntImm>() ? lo : Interval::neg_inf(),
                                       hi.defined() && hi.as<IntImm>() ? hi : Interval::pos_inf()));
        Stmt s = IRMutator::visit(op);
        bounds.pop(op->name);
        loops.pop(op->name);
        return s;
    }
    Expr index(const Expr &i) const override {
        // (the column as i - row * width where the row simplifies: Halide leaves
        // (y * 4 + x + 2) % 4 as it is)
        const Expr row = simplify(i / int(width), true, bounds);
        if (!has_division(row))
            return simplify(row * int(pitch) + (i - row * int(width)), true, bounds);
        return simplify(i / int(width) * int(pitch) + i % int(width), true, bounds);
    }
};

/** The rows of a tile Halide allocated with one extent (BoundSmallAllocations folds a small
 * constant-size allocation's extents into their product): the row pitch Halide flattened it
 * with, the smallest step above 1 of a loop along its stores' indices (a constant, else a tail's
 * width, bounded by a constant); or a column gathered from a tensor (a store stepping 1 along
 * the tile where its tensor read does not), rows of one element; else neither (one row). */
class FoldedWidth : public LoopScopedVisitor {
public:
    FoldedWidth(const std::string &buffer, const CompileContext &ctx) : buffer(buffer), ctx(ctx) {}
    int64_t width = 0; // a constant width, or the bound of `tail`
    Expr tail;
    bool column = false;
    std::set<std::string> unit_loops; // the loops a store steps 1 along

private:
    using IRVisitor::visit;
    const std::string &buffer;
    const CompileContext &ctx;
    std::vector<std::string> names;

    void visit(const For *op) override {
        names.push_back(op->name);
        LoopScopedVisitor::visit(op);
        names.pop_back();
    }
    void visit(const Store *op) override {
        IRVisitor::visit(op);
        if (op->name != buffer)
            return;
        Expr value = op->value;
        while (const Cast *c = value.as<Cast>())
            value = c->value;
        const Load *read = value.as<Load>();
        const bool tensor = read && !ctx.function_of(read->name);
        for (const std::string &v : names) {
            Expr step = affine_step(op->index, v);
            if (!step.defined())
                continue;
            const int64_t *c = as_const_int(step);
            if (c && *c > 1 && (width == 0 || tail.defined() || *c < width))
                width = *c, tail = Expr();
            const int64_t bound = c ? 0 : constant_upper_bound(step, loops);
            if (!c && bound > 1 && width == 0)
                width = bound, tail = step;
            if (c && *c == 1)
                unit_loops.insert(v);
            if (c && *c == 1 && tensor) {
                Expr along = affine_step(read->index, v);
                column |= !along.defined() || !can_prove(along == 1);
            }
        }
    }
};

/** Whether an index of a load or store of `buffer` still divides (a Refold that did not
 * simplify). */
bool divides(const Stmt &s, const std::string &buffer) {
    class Find : public IRVisitor {
    public:
        explicit Find(const std::string &buffer) : buffer(buffer) {}
        bool found = false;

    private:
        using IRVisitor::visit;
        const std::string &buffer;
        void check(const Expr &index) { found |= has_division(index); }
        void visit(const Load *op) override {
            if (op->name == buffer)
                check(op->index);
            IRVisitor::visit(op);
        }
        void visit(const Store *op) override {
            if (op->name == buffer)
                check(op->index);
            IRVisitor::visit(op);
        }
    } find(buffer);
    s.accept(&find);
    return find.found;
}

class PadRows : public LoopScopedMutator {
public:
    PadRows(const CompileContext &ctx, const std::set<std::string> &cube) : ctx(ctx), cube(cube) {}
    int padded = 0;

private:
    using IRMutator::visit;
    const CompileContext &ctx;
    const std::set<std::string> &cube;

    Stmt visit(const Allocate *op) override {
        Stmt body = mutate(op->body);
        const int per_block = 32 / std::max(1, op->type.bytes());
        const bool ub =
            ctx.function_of(op->name) && !cube.count(op->name) && op->name != ctx.output;
        const int64_t width =
            op->extents.empty() ? -1 : constant_upper_bound(op->extents[0], loops);
        // A tile's rows and columns; a batch's or a head's unit sides beyond them stay as they are.
        size_t sides = op->extents.size();
        while (sides > 2 && is_const_one(op->extents[sides - 1]))
            sides--;
        if (!ub || width <= 0 || sides > 2 || 32 % op->type.bytes() != 0)
            return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition,
                                  body, op->new_expr, op->free_function);
        if (sides == 1)
            return fold(op, body, width, per_block);
        const int64_t pitch = (width + per_block - 1) / per_block * per_block;
        const IntImm *w = op->extents[0].as<IntImm>();
        // Rows one element wide that lie one after another in their tensor are one row.
        FoldedWidth rows(op->name, ctx);
        if (is_const_one(op->extents[0]))
            body.accept(&rows);
        if ((w && w->value == pitch) || (is_const_one(op->extents[0]) && !rows.column))
            return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition,
                                  body, op->new_expr, op->free_function);
        // A constant width: each index i as (i / width) * pitch + i % width, right whatever form
        // Halide gave it (width * (y + 2) + x is width * y + x + 2 * width), where the loops'
        // bounds simplify it; else the width's products and terms rewritten (Repitch).
        Stmt refolded = w ? Refold(op->name, w->value, pitch).mutate(body) : Stmt();
        body = refolded.defined() && !divides(refolded, op->name)
                   ? refolded
                   : Repitch(op->name, op->extents[0], Expr(int(pitch))).mutate(body);
        padded++;
        std::vector<Expr> extents = op->extents;
        extents[0] = Expr(int(pitch));
        return Allocate::make(op->name, op->type, op->memory_type, extents, op->condition, body,
                              op->new_expr, op->free_function);
    }

    /** A tile of one extent (`size` elements): its rows, if it has any, padded like a 2-D one's;
     * else rounded up to whole blocks. */
    Stmt fold(const Allocate *op, Stmt body, int64_t size, int64_t per_block) {
        FoldedWidth rows(op->name, ctx);
        body.accept(&rows);
        int64_t width = rows.width > 0 && rows.width < size ? rows.width : rows.column ? 1 : 0;
        int64_t elements = (size + per_block - 1) / per_block * per_block;
        if (width > 0 && (width % per_block != 0 || rows.tail.defined())) {
            const int64_t pitch = (width + per_block - 1) / per_block * per_block;
            elements = (size + width - 1) / width * pitch;
            body = rows.tail.defined() ? Repitch(op->name, rows.tail, Expr(int(pitch))).mutate(body)
                                       : Refold(op->name, width, pitch).mutate(body);
            padded++;
        }
        return Allocate::make(op->name, op->type, op->memory_type, {Expr(int(elements))},
                              op->condition, body, op->new_expr, op->free_function);
    }
};

} // namespace

int64_t folded_row_width(const Stmt &body, const std::string &buffer, const CompileContext &ctx) {
    FoldedWidth rows(buffer, ctx);
    body.accept(&rows);
    return rows.tail.defined() ? -1 : rows.width;
}

std::set<std::string> unit_step_loops(const Stmt &body, const std::string &buffer,
                                      const CompileContext &ctx) {
    FoldedWidth rows(buffer, ctx);
    body.accept(&rows);
    return rows.unit_loops;
}

Stmt refold(const Stmt &s, const std::string &buffer, int64_t width, int64_t pitch) {
    return Refold(buffer, width, pitch).mutate(s);
}

Stmt repitch(const Stmt &s, const std::string &buffer, const Expr &width, const Expr &pitch) {
    return Repitch(buffer, width, pitch).mutate(s);
}

Stmt pad_ub_rows(const Stmt &s, CompileContext &ctx) {
    CubeTiles cube(ctx);
    s.accept(&cube);
    PadRows pad(ctx, cube.names);
    Stmt result = pad.mutate(s);
    if (pad.padded > 0) {
        ctx.notes.push_back(
            "ascend rows: " + std::to_string(pad.padded) +
            " UB tile allocation(s) with rows padded to 32 bytes (one constant pitch per tile)");
    }
    return result;
}

} // namespace tandem::lower
