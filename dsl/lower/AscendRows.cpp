#include "AscendRows.h"

#include "Nest.h"

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
        if (mma) names.insert(op->name);
        const bool outer = in_mma;
        in_mma = in_mma || mma;
        IRVisitor::visit(op);
        in_mma = outer;
    }
    void visit(const Load *op) override {
        if (in_mma) names.insert(op->name);
        IRVisitor::visit(op);
    }
};

class Repitch : public IRMutator {
public:
    Repitch(const std::string &buffer, const Expr &width, const Expr &pitch)
        : buffer(buffer), width(width), pitch(pitch) {}

private:
    using IRMutator::visit;
    const std::string &buffer;
    const Expr &width, &pitch;

    /** Replaces `width` as a factor of a product. */
    class Index : public IRMutator {
    public:
        Index(const Expr &width, const Expr &pitch) : width(width), pitch(pitch) {}

    private:
        using IRMutator::visit;
        const Expr &width, &pitch;
        Expr visit(const Mul *op) override {
            if (equal(op->a, width)) return Mul::make(pitch, mutate(op->b));
            if (equal(op->b, width)) return Mul::make(mutate(op->a), pitch);
            return IRMutator::visit(op);
        }
    };

    /** Rows one element wide: Halide's index is the row itself (no product by the width). */
    Expr index(const Expr &e) {
        if (is_const_one(width)) return simplify(e * pitch);
        return simplify(Index(width, pitch).mutate(e));
    }
    Expr visit(const Load *op) override {
        Expr e = IRMutator::visit(op);
        if (op->name != buffer) return e;
        const Load *l = e.as<Load>();
        return Load::make(l->type, l->name, index(l->index), l->image, l->param, l->predicate, l->alignment);
    }
    Stmt visit(const Store *op) override {
        Stmt s = IRMutator::visit(op);
        if (op->name != buffer) return s;
        const Store *st = s.as<Store>();
        return Store::make(st->name, st->value, index(st->index), st->param, st->predicate, st->alignment);
    }
};

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
        const bool ub = ctx.functions.count(op->name) && !cube.count(op->name) && op->name != ctx.output;
        const int64_t width = op->extents.empty() ? -1 : constant_upper_bound(op->extents[0], loops);
        if (!ub || width <= 0 || op->extents.size() > 2 || 32 % op->type.bytes() != 0)
            return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition, body,
                                  op->new_expr, op->free_function);
        const int64_t pitch = (width + per_block - 1) / per_block * per_block;
        std::vector<Expr> extents = op->extents;
        extents[0] = Expr(int(pitch));
        if (op->extents.size() == 2) {
            const IntImm *w = op->extents[0].as<IntImm>();
            if (w && w->value == pitch) return Allocate::make(op->name, op->type, op->memory_type, op->extents,
                                                              op->condition, body, op->new_expr, op->free_function);
            body = Repitch(op->name, op->extents[0], extents[0]).mutate(body);
            padded++;
        }
        return Allocate::make(op->name, op->type, op->memory_type, extents, op->condition, body, op->new_expr,
                              op->free_function);
    }
};

} // namespace

Stmt repitch(const Stmt &s, const std::string &buffer, const Expr &width, const Expr &pitch) {
    return Repitch(buffer, width, pitch).mutate(s);
}

Stmt pad_ub_rows(const Stmt &s, CompileContext &ctx) {
    CubeTiles cube(ctx);
    s.accept(&cube);
    PadRows pad(ctx, cube.names);
    Stmt result = pad.mutate(s);
    if (pad.padded > 0) {
        ctx.notes.push_back("ascend rows: " + std::to_string(pad.padded) +
                            " UB tile allocation(s) with rows padded to 32 bytes (one constant pitch per tile)");
    }
    return result;
}

} // namespace tandem::lower
