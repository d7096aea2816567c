#include "TileMma.h"

#include "Nest.h"
#include "tandem/AsyncIR.h"

#include <algorithm>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

const Load *operand(const Expr &e) {
    if (const Cast *c = e.as<Cast>()) {
        if (!c->type.is_float() || c->type.bits() != 32) return nullptr;
        return c->value.as<Load>();
    }
    return e.as<Load>();
}

class RecognizeMma : public IRMutator {
public:
    explicit RecognizeMma(CompileContext &ctx) : ctx(ctx) {}
    std::set<std::string> recognized;

private:
    using IRMutator::visit;
    CompileContext &ctx;

    [[noreturn]] void fail(const std::string &func, const std::string &why) const {
        throw Error("Func '" + func + "', directive tile_mma(): " + why);
    }

    Stmt visit(const For *op) override {
        Nest nest;
        if (!as_perfect_nest(op, &nest) || !ctx.of(nest.store->name).tile_mma) {
            return IRMutator::visit(op);
        }
        const Store *st = nest.store;
        const std::string &acc = st->name;
        const Add *add = st->value.as<Add>();
        const Load *self = add ? add->a.as<Load>() : nullptr;
        if (!self || self->name != acc) return IRMutator::visit(op); // e.g. the initialisation
        const Mul *mul = add->b.as<Mul>();
        const Load *x = mul ? operand(mul->a) : nullptr;
        const Load *y = mul ? operand(mul->b) : nullptr;
        if (!x || !y) fail(acc, "the update is not acc += A * B with operands loaded from tiles");
        if (!st->value.type().is_float() || st->value.type().bits() != 32) {
            fail(acc, "the accumulator must be float32, it is " + type_name(st->value.type()));
        }
        for (const Load *l : {x, y}) {
            if (std::find(ctx.inputs.begin(), ctx.inputs.end(), l->name) != ctx.inputs.end()) {
                fail(acc, "operand " + l->name + " is read from DRAM; stage it on chip with " + l->name +
                              ".in(" + acc + ").compute_at(...)");
            }
            bool f32 = l->type.is_float() && !l->type.is_bfloat() && l->type.bits() == 32;
            if (!l->type.is_bfloat() && !f32) {
                fail(acc, "operand " + l->name + " is " + type_name(l->type) + "; the tensor core takes bf16 or f32");
            }
        }
        if (nest.loops.size() != 3 || !can_prove(self->index == st->index)) {
            fail(acc, "expected three loops (m, n, k) around acc(n, m) += A(k, m) * B(n, k), found " +
                          std::to_string(nest.loops.size()));
        }
        // Classify the loops by the indices they move: m and n move acc (n is the one along which
        // acc is contiguous, or the innermost), k moves both operands but not acc.
        const Loop *m = nullptr, *n = nullptr, *k = nullptr;
        for (const Loop &l : nest.loops) {
            if (!affine_step(st->index, l.name).defined() || !affine_step(x->index, l.name).defined() ||
                !affine_step(y->index, l.name).defined()) {
                fail(acc, "an index is not affine in loop " + l.name);
            }
            bool in_acc = !provably_zero(affine_step(st->index, l.name));
            bool in_x = !provably_zero(affine_step(x->index, l.name));
            bool in_y = !provably_zero(affine_step(y->index, l.name));
            if (!in_acc && in_x && in_y) {
                k = &l;
            } else if (in_acc && (in_x != in_y)) {
                bool contiguous = is_const_one(simplify(affine_step(st->index, l.name)));
                if (!n || (contiguous && !is_const_one(simplify(affine_step(st->index, n->name))))) {
                    if (n) m = n;
                    n = &l;
                } else {
                    m = &l;
                }
            }
        }
        if (!m || !n || !k) {
            fail(acc, "could not classify the loops as m (moves acc and A), n (moves acc and B) and k (moves A "
                      "and B)");
        }
        bool x_is_a = !provably_zero(affine_step(x->index, m->name));
        const Load *a = x_is_a ? x : y, *b = x_is_a ? y : x;
        if (!provably_zero(affine_step(a->index, n->name)) || !provably_zero(affine_step(b->index, m->name))) {
            fail(acc, "the operands do not split into A(k, m) and B(n, k)");
        }
        ir::MmaOp mma;
        mma.acc = acc;
        mma.a = a->name;
        mma.b = b->name;
        mma.acc_offset = at_loop_mins(st->index, nest.loops);
        mma.acc_stride_n = affine_step(st->index, n->name);
        mma.acc_stride_m = affine_step(st->index, m->name);
        mma.a_offset = at_loop_mins(a->index, nest.loops);
        mma.a_stride_k = affine_step(a->index, k->name);
        mma.a_stride_m = affine_step(a->index, m->name);
        mma.b_offset = at_loop_mins(b->index, nest.loops);
        mma.b_stride_n = affine_step(b->index, n->name);
        mma.b_stride_k = affine_step(b->index, k->name);
        mma.n = n->extent;
        mma.m = m->extent;
        mma.k = k->extent;
        recognized.insert(acc);
        return ir::make_mma(mma);
    }

    static std::string type_name(const Halide::Type &t) {
        std::ostringstream os;
        os << t;
        return os.str();
    }
};

} // namespace

Stmt recognize_tile_mma(const Stmt &s, CompileContext &ctx) {
    RecognizeMma r(ctx);
    Stmt result = r.mutate(s);
    for (const std::string &f : ctx.funcs) {
        if (ctx.of(f).tile_mma && !r.recognized.count(f)) {
            throw Error("Func '" + f + "', directive tile_mma(): no update nest of " + f +
                        " has the form acc(n, m) += A(k, m) * B(n, k) over three loops with A and B "
                        "staged on chip");
        }
    }
    return result;
}

} // namespace tandem::lower
