#include "TileMma.h"
#include "Targets.h"

#include "tandem/AsyncIR.h"
#include "tandem/Fp8.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** An operand: a load of a staged tile and the type the MMA reads its elements as. */
struct Operand {
    const Load *load = nullptr;
    Halide::Type type;
};

/** An operand load, widened to the accumulator's type (f32, or i32 from int8) or not, or bits
 * of a uint8 tile read as FP8 (tandem::from_e4m3 / from_e5m2: a decode table indexed by them). */
Operand operand(const Expr &e) {
    if (const Cast *c = e.as<Cast>()) {
        if (c->type != Halide::Float(32) && c->type != Halide::Int(32))
            return {};
        const Load *l = c->value.as<Load>();
        return {l, l ? l->type : Halide::Type()};
    }
    const Load *l = e.as<Load>();
    if (!l)
        return {};
    const Halide::Type format = fp8::format_of_table(l->name);
    if (format.bits() == 0)
        return {l, l->type};
    const Cast *index = l->index.as<Cast>();
    const Load *bits = index ? index->value.as<Load>() : nullptr;
    if (!bits || bits->type != Halide::UInt(8))
        return {};
    return {bits, format};
}

std::string type_name(const Halide::Type &t) {
    return element_type_name(t);
}

bool is_int8(const Halide::Type &t) {
    return t == Halide::Int(8);
}

/** The targets whose tensor core takes int8 (fp8 false) or FP8 operands. */
std::string targets_taking(bool fp8) {
    std::string names;
    for (const std::string &name : target_names()) {
        if (fp8 ? find_target(name)->mma_fp8 : find_target(name)->mma_int8)
            names += (names.empty() ? "" : ", ") + name;
    }
    return names;
}

class RecognizeMma : public IRMutator {
public:
    explicit RecognizeMma(CompileContext &ctx) : ctx(ctx) {}
    std::set<std::string> recognized;
    std::map<std::string, std::string> a_operand;  // of each accumulator, from MMAs with m or n
    std::map<std::string, Halide::Type> fp8_tiles; // staged tiles the MMAs read as FP8

private:
    using IRMutator::visit;
    CompileContext &ctx;

    /** Which pure argument of Func `func` (0, 1, ...) the update loop `loop` was split from, or -1
     * (a reduction variable, a fused loop, or a name not found). */
    int pure_arg_of(const std::string &func, const std::string &loop) const {
        auto f = ctx.functions.find(func);
        std::string prefix = func + ".s1.";
        if (f == ctx.functions.end() || f->second.updates().empty() || loop.rfind(prefix, 0) != 0)
            return -1;
        const Definition &update = f->second.update(0);
        std::string var = loop.substr(prefix.size());
        const std::string rebased = ".rebased"; // Halide's RebaseLoopsToZero
        if (var.size() > rebased.size() &&
            var.compare(var.size() - rebased.size(), rebased.size(), rebased) == 0) {
            var.resize(var.size() - rebased.size());
        }
        for (bool changed = true; changed;) {
            changed = false;
            for (const Split &s : update.schedule().splits()) {
                if (s.is_fuse()) {
                    if (s.old_var == var)
                        return -1;
                } else if (s.outer == var || (s.is_split() && s.inner == var)) {
                    var = s.old_var;
                    changed = true;
                }
            }
        }
        for (size_t i = 0; i < update.args().size(); i++) {
            const Variable *v = update.args()[i].as<Variable>();
            if (v && v->name == var)
                return int(i);
        }
        return -1;
    }

    [[noreturn]] void fail(const std::string &func, const std::string &why) const {
        throw Error("Func '" + func + "', directive tile_mma(): " + why);
    }

    Stmt visit(const For *op) override {
        Nest nest;
        if (!as_perfect_nest(op, &nest) || !ctx.of(nest.store->name).tile_mma) {
            return IRMutator::visit(op);
        }
        return recognize(nest, op);
    }

    /** A 1 x 1 x 1 tile: Halide removed all three loops. */
    Stmt visit(const Store *op) override {
        Nest nest;
        nest.store = op;
        return ctx.of(op->name).tile_mma ? recognize(nest, op) : op;
    }

    Stmt recognize(const Nest &nest, const Stmt &original) {
        const Store *st = nest.store;
        const std::string &acc = st->name;
        const Add *add = st->value.as<Add>();
        const Load *self = add ? add->a.as<Load>() : nullptr;
        if (!self || self->name != acc)
            return original; // e.g. the initialisation
        const Mul *mul = add->b.as<Mul>();
        const Operand ox = mul ? operand(mul->a) : Operand{},
                      oy = mul ? operand(mul->b) : Operand{};
        const Load *x = ox.load, *y = oy.load;
        if (!x || !y)
            fail(acc, "the update is not acc += A * B with operands loaded from tiles");
        for (const Operand &o : {ox, oy}) {
            const Load *l = o.load;
            const Halide::Type &t = o.type;
            if (std::find(ctx.inputs.begin(), ctx.inputs.end(), l->name) != ctx.inputs.end()) {
                fail(acc, "operand " + l->name + " is read from DRAM; stage it on chip with " +
                              l->name + ".in(" + acc + ").compute_at(...)");
            }
            bool f32 = t.is_float() && !t.is_bfloat() && t.bits() == 32;
            bool f16 = t.is_float() && !t.is_bfloat() && t.bits() == 16;
            for (const bool fp8 : {false, true}) {
                if ((fp8 ? fp8::is_fp8(t) : is_int8(t)) &&
                    !(fp8 ? lowering_of(ctx.target).mma_fp8 : lowering_of(ctx.target).mma_int8)) {
                    fail(acc, "not supported on " + ctx.target.name() + ": operand " + l->name +
                                  " is " + type_name(t) + ", and the " + ctx.target.name() +
                                  " tensor core multiplies " +
                                  (lowering_of(ctx.target).mma_int8 ? "bf16, f16, f32 or int8"
                                                                    : "bf16, f16 or f32") +
                                  " (" + (fp8 ? "FP8" : "int8") + " runs on " +
                                  targets_taking(fp8) +
                                  (fp8 ? "): pass the operands as bf16 (converted before the "
                                         "call)"
                                       : "): cast the operands to bf16 where they are staged"));
                }
            }
            if (!t.is_bfloat() && !f16 && !f32 && !is_int8(t) && !fp8::is_fp8(t)) {
                fail(acc, "operand " + l->name + " is " + type_name(t) +
                              "; the tensor core takes bf16, f16, f32, FP8 (tandem::from_e4m3, "
                              "from_e5m2) or int8");
            }
            if (fp8::is_fp8(t)) {
                auto [format, added] = fp8_tiles.emplace(l->name, t);
                if (!added && format->second != t) {
                    fail(acc, "tile " + l->name + " is read as " + type_name(format->second) +
                                  " and as " + type_name(t) + "; one tile holds one FP8 format");
                }
            }
        }
        if (ox.type != oy.type && !(fp8::is_fp8(ox.type) && fp8::is_fp8(oy.type))) {
            fail(acc, "operands " + x->name + " (" + type_name(ox.type) + ") and " + y->name +
                          " (" + type_name(oy.type) +
                          ") differ in type; the tensor core multiplies two operands of one type "
                          "(or two FP8 formats): cast one of them where it is staged");
        }
        const Halide::Type want = is_int8(ox.type) ? Halide::Int(32) : Halide::Float(32);
        if (st->value.type() != want) {
            fail(acc, "the accumulator must be " + type_name(want) + " over " + type_name(ox.type) +
                          " operands, it is " + type_name(st->value.type()));
        }
        if (nest.loops.size() > 3 || !can_prove(self->index == st->index)) {
            fail(acc, "expected at most three loops (m, n, k) around acc(n, m) += A(k, m) * B(n, "
                      "k), found " +
                          std::to_string(nest.loops.size()));
        }
        // Classify the loops by the indices they move: k moves both operands but not acc; m and n
        // move acc and one operand each. Halide drops a loop of extent 1 (M = 1, a K tail of one
        // element, ...), so a role may have no loop: it then has extent 1. When only one loop moves
        // acc, the var it was split from says whether it is n (acc's first argument) or m.
        std::vector<const Loop *> acc_loops;
        const Loop *k = nullptr;
        for (const Loop &l : nest.loops) {
            if (!affine_step(st->index, l.name).defined() ||
                !affine_step(x->index, l.name).defined() ||
                !affine_step(y->index, l.name).defined()) {
                fail(acc, "an index is not affine in loop " + l.name);
            }
            bool in_acc = !provably_zero(affine_step(st->index, l.name));
            bool in_x = !provably_zero(affine_step(x->index, l.name));
            bool in_y = !provably_zero(affine_step(y->index, l.name));
            if (!in_acc && in_x && in_y && !k) {
                k = &l;
            } else if (in_acc && in_x != in_y) {
                acc_loops.push_back(&l);
            } else {
                fail(acc, "loop " + l.name +
                              " is none of m (moves acc and A), n (moves acc and B) and k (moves "
                              "A and B)");
            }
        }
        const Loop *m = nullptr, *n = nullptr;
        if (acc_loops.size() == 2) {
            // n is the one along which acc is contiguous (else the inner one).
            bool first_contiguous =
                is_const_one(simplify(affine_step(st->index, acc_loops[0]->name)));
            bool second_contiguous =
                is_const_one(simplify(affine_step(st->index, acc_loops[1]->name)));
            bool first_is_n = first_contiguous && !second_contiguous;
            n = first_is_n ? acc_loops[0] : acc_loops[1];
            m = first_is_n ? acc_loops[1] : acc_loops[0];
        } else if (acc_loops.size() == 1) {
            (pure_arg_of(acc, acc_loops[0]->name) == 1 ? m : n) = acc_loops[0];
        }
        // A moves with m, B with n; with neither (a 1 x 1 tile) A is the operand the other MMAs
        // into acc take as A (the product's first operand if there are none).
        bool x_is_a = m   ? !provably_zero(affine_step(x->index, m->name))
                      : n ? provably_zero(affine_step(x->index, n->name))
                          : !a_operand.count(acc) || a_operand[acc] == x->name;
        const Load *a = x_is_a ? x : y, *b = x_is_a ? y : x;
        if (m || n)
            a_operand[acc] = a->name;
        if ((n && !provably_zero(affine_step(a->index, n->name))) ||
            (m && !provably_zero(affine_step(b->index, m->name)))) {
            fail(acc, "the operands do not split into A(k, m) and B(n, k)");
        }
        ir::MmaOp mma;
        mma.acc = acc;
        mma.a = a->name;
        mma.b = b->name;
        // A role without a loop has extent 1; its strides never address a second element, so
        // they take the dense values (unit steps along n and k).
        auto step = [&](const Expr &index, const Loop *l, const Expr &dense) {
            return l ? affine_step(index, l->name) : dense;
        };
        auto extent = [](const Loop *l) { return l ? l->extent : Expr(1); };
        mma.acc_offset = at_loop_mins(st->index, nest.loops);
        mma.acc_stride_n = step(st->index, n, 1);
        mma.acc_stride_m = step(st->index, m, extent(n));
        mma.a_offset = at_loop_mins(a->index, nest.loops);
        mma.a_stride_k = step(a->index, k, 1);
        mma.a_stride_m = step(a->index, m, extent(k));
        mma.b_offset = at_loop_mins(b->index, nest.loops);
        mma.b_stride_n = step(b->index, n, 1);
        mma.b_stride_k = step(b->index, k, extent(n));
        mma.n = extent(n);
        mma.m = extent(m);
        mma.k = extent(k);
        recognized.insert(acc);
        return ir::make_mma(mma);
    }
};

/** Gives the tiles the MMAs read as FP8, and the inputs copied into them, their FP8 type: copies
 * and the tensor core take the bits as they are, and the machine models then read the values.
 * Anything else that reads FP8 bits, or a tile's bits made on chip, is refused. */
class ReadAsFp8 : public IRMutator {
public:
    ReadAsFp8(const std::map<std::string, Halide::Type> &tiles, CompileContext &ctx)
        : tiles(tiles), ctx(ctx) {}
    std::map<std::string, Halide::Type> inputs; // read as FP8, by name

    Stmt run(const Stmt &s) {
        Stmt result = mutate(s);
        for (const auto &[tile, format] : tiles) {
            if (!copied.count(tile)) {
                fail("the tile_mma() operand " + user_text(tile) + " is read as " +
                     type_name(format) +
                     " but is not copied from an input: FP8 operands are staged from input "
                     "tensors of their bits");
            }
        }
        for (KernelArg &a : ctx.args) {
            auto f = inputs.find(a.name);
            if (f != inputs.end())
                a.type = f->second;
        }
        return result;
    }

private:
    using IRMutator::visit;
    const std::map<std::string, Halide::Type> &tiles;
    CompileContext &ctx;
    std::set<std::string> copied;
    std::string store; // the buffer the statement being visited stores into

    [[noreturn]] void fail(const std::string &why) const {
        throw Error("not supported on " + ctx.target.name() + ": " + why);
    }

    Expr visit(const Load *op) override {
        const Halide::Type table = fp8::format_of_table(op->name);
        if (table.bits() != 0) {
            fail("Func '" + user_text(store) + "' reads " + type_name(table) +
                 " values (tandem::from_" + type_name(table) +
                 ") outside a tile_mma() operand; FP8 values feed the tensor core "
                 "only");
        }
        if (tiles.count(op->name)) {
            fail("Func '" + user_text(store) + "' reads the tile " + user_text(op->name) +
                 ", whose bits tile_mma() reads as " + type_name(tiles.at(op->name)) +
                 "; FP8 values feed the tensor core only");
        }
        return IRMutator::visit(op);
    }

    Stmt visit(const Store *op) override {
        if (tiles.count(op->name)) {
            fail("the tile_mma() operand " + user_text(op->name) + " is read as " +
                 type_name(tiles.at(op->name)) +
                 " but computed on chip; FP8 operands are copied from input tensors of their "
                 "bits");
        }
        store = op->name;
        return IRMutator::visit(op);
    }

    Stmt visit(const Evaluate *op) override {
        ir::CopyOp copy;
        if (!ir::as_copy(op, &copy))
            return IRMutator::visit(op);
        auto tile = tiles.find(copy.dst);
        const bool input =
            std::find(ctx.inputs.begin(), ctx.inputs.end(), copy.src) != ctx.inputs.end();
        if (tile == tiles.end()) {
            if (input && inputs.count(copy.src)) {
                fail("input " + user_text(copy.src) + " is read as " + type_name(inputs[copy.src]) +
                     " by tile_mma() and copied to " + user_text(copy.dst) +
                     " as well; FP8 values feed the tensor core only");
            }
            return op;
        }
        if (!input) {
            fail("the tile_mma() operand " + user_text(copy.dst) + " is read as " +
                 type_name(tile->second) + " but copied from " + user_text(copy.src) +
                 ", not from an input: FP8 operands are staged from input tensors of their bits");
        }
        auto [format, added] = inputs.emplace(copy.src, tile->second);
        if (!added && format->second != tile->second) {
            fail("input " + user_text(copy.src) + " is read as " + type_name(format->second) +
                 " and as " + type_name(tile->second) + "; one tensor holds one FP8 format");
        }
        copied.insert(copy.dst);
        return op;
    }

    Stmt visit(const Allocate *op) override {
        auto tile = tiles.find(op->name);
        Stmt body = mutate(op->body);
        if (tile == tiles.end())
            return body.same_as(op->body) ? Stmt(op)
                                          : Allocate::make(op->name, op->type, op->memory_type,
                                                           op->extents, op->condition, body);
        return Allocate::make(op->name, tile->second, op->memory_type, op->extents, op->condition,
                              body);
    }
};

} // namespace

Stmt recognize_tile_mma(const Stmt &s, CompileContext &ctx) {
    RecognizeMma r(ctx);
    r.mutate(s); // learns which operand is A from the MMAs that have an m or n loop
    r.recognized.clear();
    Stmt result = r.mutate(s);
    for (const std::string &f : ctx.funcs) {
        if (ctx.of(f).tile_mma && !r.recognized.count(f)) {
            throw Error(
                "Func '" + f + "', directive tile_mma(): no update nest of " + f +
                " has the form acc(n, m) += A(k, m) * B(n, k) over three loops with A and B "
                "staged on chip");
        }
    }
    return ReadAsFp8(r.fp8_tiles, ctx).run(result);
}

} // namespace tandem::lower
