#include "FirstMma.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** Sets the accumulate flag of every MMA into `acc` in the Stmt after its zeroing; `ran` is the
 * condition "an MMA of acc ran since the zeroing" at each point. ok = false when a flag cannot be
 * expressed (the caller then keeps the zeroing). */
class Flags : public IRMutator {
public:
    explicit Flags(const std::string &acc) : acc(acc) {}
    Expr ran = const_false();
    bool ok = true;

private:
    using IRMutator::visit;
    const std::string &acc;
    std::vector<std::string> bound; // variables bound inside the Stmt walked so far

    bool has_mma(const Stmt &s) const {
        bool found = false;
        visit_mmas(s, [&](const ir::MmaOp &m) { found = found || m.acc == acc; });
        return found;
    }
    template <class F> static void visit_mmas(const Stmt &s, F &&f) {
        class V : public IRVisitor {
        public:
            F &f;
            explicit V(F &f) : f(f) {}
            using IRVisitor::visit;
            void visit(const Evaluate *op) override {
                ir::MmaOp m;
                if (ir::as_mma(Stmt(op), &m))
                    f(m);
            }
        } v(f);
        s.accept(&v);
    }
    bool uses_bound(const Expr &e) const {
        for (const std::string &v : bound)
            if (expr_uses_var(e, v))
                return true;
        return false;
    }

    Stmt visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (!ir::as_mma(op, &m) || m.acc != acc)
            return op;
        m.accumulate = simplify(ran);
        ran = const_true();
        return ir::make_mma(m);
    }

    Stmt visit(const For *op) override {
        if (!has_mma(op->body))
            return op;
        Expr before = ran;
        Expr var = Variable::make(Halide::Int(32), op->name);
        bound.push_back(op->name);
        ran = before || var > op->min; // an earlier iteration ran the body's MMAs
        Stmt body = mutate(op->body);
        Expr end = simplify(ran);
        bound.pop_back();
        // After the loop: the last iteration's state, if there was one.
        Expr last = simplify(substitute(op->name, op->min + op->extent - 1, end));
        if (uses_bound(last))
            ok = false;
        ran = simplify(before || (op->extent > 0 && last));
        return For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
    }

    Stmt visit(const IfThenElse *op) override {
        if (!has_mma(op->then_case) && (!op->else_case.defined() || !has_mma(op->else_case)))
            return op;
        Expr before = ran;
        Stmt then_case = mutate(op->then_case);
        Expr after_then = ran;
        ran = before;
        Stmt else_case = op->else_case.defined() ? mutate(op->else_case) : Stmt();
        ran = simplify(select(op->condition, after_then, ran));
        return IfThenElse::make(op->condition, then_case, else_case);
    }

    Stmt visit(const LetStmt *op) override {
        if (!has_mma(op->body))
            return op; // (another accumulator's zeroing, inside a loop whose variable ran reads)
        bound.push_back(op->name);
        Stmt body = mutate(op->body);
        bound.pop_back();
        if (expr_uses_var(ran, op->name))
            ok = false;
        return LetStmt::make(op->name, op->value, body);
    }
};

class FirstMma : public IRMutator {
public:
    explicit FirstMma(CompileContext &ctx) : ctx(ctx) {}
    std::set<std::string> accumulators;

    Stmt mutate(const Stmt &s) override {
        if (const Block *b = s.as<Block>()) {
            std::string acc;
            if (is_zeroing(b->first, &acc)) {
                Flags flags(acc);
                Stmt rest = flags.mutate(b->rest);
                if (flags.ok) {
                    accumulators.insert(acc);
                    return mutate(rest);
                }
            }
        }
        return IRMutator::mutate(s);
    }

private:
    CompileContext &ctx;

    bool is_zeroing(const Stmt &s, std::string *acc) const {
        ir::VectorOp v;
        Stmt body;
        if (!ir::as_vector_op(s, &v, &body))
            return false;
        Nest nest;
        if (!as_perfect_nest(body, &nest) || !ctx.of(nest.store->name).tile_mma)
            return false;
        if (!is_const_zero(nest.store->value))
            return false;
        *acc = nest.store->name;
        return true;
    }
};

} // namespace

Stmt overwrite_first_mma(const Stmt &s, CompileContext &ctx) {
    FirstMma first(ctx);
    Stmt result = first.mutate(s);
    for (const std::string &acc : first.accumulators) {
        ctx.notes.push_back("first mma: the first MMA of each tile of " + acc +
                            " overwrites it (no zeroing pass)");
    }
    return result;
}

} // namespace tandem::lower
