// Stage::online_softmax (tandem/Func.h): FlashAttention's online softmax, a rewrite of the Funcs
// of a textbook softmax-weighted sum (attention's P V) into key blocks and a running state, as
// Halide's rfactor rewrites a reduction. The matching proves the textbook form; the rewrite is
// the same math (P rounded before the division).
#include "tandem/Error.h"
#include "tandem/Func.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace tandem {

using namespace Halide::Internal;
using lower::is_minus_infinity;

namespace {

/** A call of a Func of the pipeline (not an input, not an intrinsic). */
const Call *func_call(const Expr &e) {
    const Call *c = e.defined() ? e.as<Call>() : nullptr;
    return c && c->call_type == Call::Halide && c->func.defined() ? c : nullptr;
}

/** The pure value `c` calls, the callee's args replaced by the call's. */
Expr inline_call(const Call *c) {
    const Function f(c->func);
    std::map<std::string, Expr> args;
    for (size_t i = 0; i < f.args().size(); i++)
        args[f.args()[i]] = c->args[i];
    return substitute(args, f.definition().values()[c->value_index]);
}

/** Calls of the Func `name` replaced. */
class ReplaceCalls : public IRMutator {
public:
    ReplaceCalls(std::string name, std::function<Expr(const std::vector<Expr> &)> by)
        : name(std::move(name)), by(std::move(by)) {}

private:
    using IRMutator::visit;
    std::string name;
    std::function<Expr(const std::vector<Expr> &)> by;
    Expr visit(const Call *c) override {
        if (c->call_type != Call::Halide || c->name != name)
            return IRMutator::visit(c);
        std::vector<Expr> args;
        for (const Expr &a : c->args)
            args.push_back(mutate(a));
        return by(args);
    }
};

bool same(const Expr &a, const Expr &b) {
    return equal(simplify(a), simplify(b));
}

/** A Func's or RVar's name as the user wrote it (Halide's unique names end in $n). */
std::string user(const std::string &name) {
    return name.substr(0, name.find('$'));
}

/** The one update of the reduction `c` calls, as `self op term` over an RDom of one RVar, the
 * term in the call's context with the RVar renamed `key`; undefined where it is not that. */
template <class Op> Expr reduction_term(const Call *c, const std::string &key, Expr *range_extent) {
    const Function f(c->func);
    if (f.updates().size() != 1 || f.definition().values().size() != 1)
        return Expr();
    const Definition &u = f.updates()[0];
    const std::vector<ReductionVariable> &rvars = u.schedule().rvars();
    if (rvars.size() != 1 || !is_const_zero(rvars[0].min))
        return Expr();
    for (size_t i = 0; i < f.args().size(); i++) {
        const Variable *v = u.args()[i].as<Variable>();
        if (!v || v->name != f.args()[i])
            return Expr();
    }
    const Op *op = u.values()[0].as<Op>();
    if (!op)
        return Expr();
    const Call *self = func_call(op->a);
    Expr term = op->b;
    if (!self || self->name != f.name()) {
        self = func_call(op->b);
        term = op->a;
    }
    if (!self || self->name != f.name() || !equal(Call::make(f, u.args()), Expr(self)))
        return Expr();
    std::map<std::string, Expr> args;
    for (size_t i = 0; i < f.args().size(); i++)
        args[f.args()[i]] = c->args[i];
    args[rvars[0].var] = Variable::make(Halide::Int(32), key);
    *range_extent = rvars[0].extent;
    return substitute(args, term);
}

} // namespace

OnlineSoftmax Stage::online_softmax(const RVar &keys, int block, const Func &consumer) {
    Function acc = f_.function();
    const std::string name = acc.name(), key = keys.name();
    const std::string base = user(name); // the new Funcs' names start so
    auto fail = [&](const std::string &why) {
        throw Error("Func '" + base + "', directive online_softmax(): " + why +
                    "; the online softmax rewrites acc += cast(exp(X(j) - row_max) / row_sum) * "
                    "V(j) over the keys j, row_max the max of X(j) from -inf, row_sum the sum of "
                    "the exponentials from 0");
    };
    if (block < 1)
        fail("the block of keys must be at least 1, not " + std::to_string(block));
    // acc = 0, then acc += A * B, with A = cast(P(j, rows...)) and B free of P.
    if (acc.updates().size() != 1 || acc.definition().values().size() != 1 ||
        !is_const_zero(acc.definition().values()[0]))
        fail(base + " is not a zero followed by one update");
    const Definition &update = acc.updates()[0];
    Expr key_extent;
    for (const ReductionVariable &r : update.schedule().rvars()) {
        if (r.var == key) {
            if (!is_const_zero(r.min) || !as_const_int(r.extent))
                fail("the keys' RDom must run from 0 over a constant extent");
            key_extent = r.extent;
        }
    }
    if (!key_extent.defined())
        fail(user(key) + " is not an RVar of " + base + "'s update");
    const int64_t keys_count = *as_const_int(key_extent);
    const Add *sum = update.values()[0].as<Add>();
    const Mul *product = sum ? sum->b.as<Mul>() : nullptr;
    Expr self = sum ? sum->a : Expr();
    if (sum && !product) {
        product = sum->a.as<Mul>();
        self = sum->b;
    }
    if (!product || !self.defined() || !equal(self, Call::make(acc, update.args())))
        fail("its update is not " + base + " + A * B");
    Expr a = product->a, b = product->b;
    // (An input's call is a Func's too: the wrapper Halide puts around it, which reads it.)
    auto p_of = [&](const Expr &e) -> const Call * {
        const Cast *cast = e.as<Cast>();
        const Call *c = func_call(cast ? cast->value : e);
        const Call *wrapped = c ? inline_call(c).as<Call>() : nullptr;
        return wrapped && wrapped->call_type == Call::Image ? nullptr : c;
    };
    const Call *p = p_of(a);
    if (!p) {
        std::swap(a, b);
        p = p_of(a);
    }
    if (!p || p->args.empty() || !equal(p->args[0], Variable::make(Halide::Int(32), key)))
        fail("neither factor of the product calls a Func with the key " + user(key) + " first");
    // P = cast(E / row_sum), E = exp(X - row_max).
    const Expr p_value = inline_call(p);
    const Cast *rounding = p_value.as<Cast>();
    const Div *div = (rounding ? rounding->value : p_value).as<Div>();
    const Call *e = div ? func_call(div->a) : nullptr, *row_sum = div ? func_call(div->b) : nullptr;
    if (!e || !row_sum)
        fail(user(p->name) + " is not E(j) / row_sum (cast or not)");
    const Expr e_value = inline_call(e);
    const Call *exp = e_value.as<Call>();
    const Sub *centred =
        exp && exp->name == "exp_f32" && exp->args.size() == 1 ? exp->args[0].as<Sub>() : nullptr;
    const Call *row_max = centred ? func_call(centred->b) : nullptr;
    if (!row_max)
        fail(user(e->name) + " is not exp(X(j) - row_max)");
    const Expr x = centred->a; // X(j) in acc's names
    // The rows: row_max and row_sum are called with the same Vars of acc, and P with the key and
    // them.
    std::vector<Var> rows;
    for (size_t i = 0; i < row_max->args.size(); i++) {
        const Variable *v = row_max->args[i].as<Variable>();
        const auto &args = acc.args();
        if (!v || std::find(args.begin(), args.end(), v->name) == args.end() ||
            i >= row_sum->args.size() || !equal(row_sum->args[i], row_max->args[i]) ||
            i + 1 >= p->args.size() || !equal(p->args[i + 1], row_max->args[i]))
            fail(user(row_max->name) + " and " + user(row_sum->name) + " are not called with " +
                 base + "'s own Vars, and " + user(p->name) + " with the key and the same");
        rows.push_back(Var(v->name));
    }
    if (row_sum->args.size() != rows.size() || p->args.size() != rows.size() + 1)
        fail(user(p->name) + ", " + user(row_max->name) + " and " + user(row_sum->name) +
             " do not take the same rows");
    // row_max = -inf, then max(row_max, X(r)) over the keys; row_sum = 0, then + E(r).
    Expr max_extent, sum_extent;
    const Function max_f(row_max->func), sum_f(row_sum->func);
    const Expr max_term = reduction_term<Max>(row_max, key, &max_extent);
    if (!is_minus_infinity(max_f.definition().values()[0]) || !max_term.defined() ||
        !same(max_extent, key_extent) || !same(max_term, x))
        fail(user(row_max->name) + " is not the max of X(j) over the same keys from -inf");
    const Expr sum_term = reduction_term<Add>(row_sum, key, &sum_extent);
    const Call *sum_e = func_call(sum_term);
    if (!is_const_zero(sum_f.definition().values()[0]) || !sum_e || sum_e->name != e->name ||
        !same(sum_extent, key_extent) || !same(inline_call(sum_e), e_value))
        fail(user(row_sum->name) + " is not the sum of " + user(e->name) +
             "(j) over the same keys from 0");
    for (const Call *other : {row_max, row_sum, e, p}) {
        bool reads = false;
        ReplaceCalls find(other->name, [&](const std::vector<Expr> &) {
            reads = true;
            return Expr(0);
        });
        find.mutate(b);
        if (reads)
            fail("the other factor of the product reads " + user(other->name));
    }

    // The rewrite (tandem/Func.h): blocks of tj keys, block c from start(c), its keys before
    // c tj masked.
    const int tj = int(std::min<int64_t>(block, keys_count));
    const int blocks = int((keys_count + tj - 1) / tj);
    const Halide::Type f32 = Halide::Float(32);
    const Expr ninf = f32.min();
    std::vector<Var> all;
    for (const std::string &v : acc.args())
        all.push_back(Var(v));
    Var k(base + "_key"), c(base + "_block");
    RDom ji(0, tj, base + "_block_keys"), rc(0, blocks, base + "_blocks");
    auto start = [&](const Expr &blk) { return Halide::min(blk * tj, int(keys_count) - tj); };
    auto at = [&](const Expr &e, const Expr &position) { return substitute(key, position, e); };
    auto with = [](std::vector<Var> v, const std::vector<Expr> &more) {
        std::vector<Expr> args(v.begin(), v.end());
        args.insert(args.end(), more.begin(), more.end());
        return args;
    };
    auto finite = [&](const Expr &m) { return Halide::select(m == ninf, 0.0f, m); };
    OnlineSoftmax o;
    o.block_max = Func(base + "_block_max");
    o.exps = Func(base + "_exps");
    o.operand = Func(base + "_operand");
    o.block_sum = Func(base + "_block_sum");
    o.block_acc = Func(base + "_block_acc");
    o.state = Func(base + "_state");
    Halide::Func &bmax = o.block_max.halide(), &exps = o.exps.halide(),
                 &operand = o.operand.halide(), &bsum = o.block_sum.halide(),
                 &bacc = o.block_acc.halide(), &state = o.state.halide();
    // X as a value and its mask (selects of -inf: a causal mask), and the keys block c sees:
    // its own, not masked.
    Expr value = x, mask = Halide::Internal::const_true();
    while (const Select *masked = value.as<Select>()) {
        if (!is_minus_infinity(masked->false_value))
            break;
        mask = mask && masked->condition;
        value = masked->true_value;
    }
    auto seen = [&](const Expr &position) { return position >= c * tj && at(mask, position); };
    // Where every block sees all its keys (no mask, the keys a whole number of blocks), each
    // block's max is one of its values: x - max is at most 0 and the maxima are finite, so the
    // guards below are not needed (they cost the vector code a pass over each block).
    const bool every_key_seen = is_const_one(simplify(mask)) && keys_count % tj == 0;
    // max(x c) = max(x) c for a constant c > 0 (attention's scale): the max of x, then one
    // product per row instead of one per key.
    Expr maximized = value, times = 1.0f;
    if (const Mul *scaled = value.as<Mul>(); scaled && every_key_seen) {
        const double *factor = as_const_float(scaled->b);
        if (factor && *factor > 0) {
            maximized = scaled->a;
            times = scaled->b;
        }
    }
    const Expr first = start(c) + ji.x;
    bmax(with(rows, {c})) = ninf;
    bmax(with(rows, {c})) =
        Halide::max(bmax(with(rows, {c})), Halide::select(seen(first), at(maximized, first), ninf));
    const auto block_max = [&](const Expr &blk) { return bmax(with(rows, {blk})) * times; };
    // The keys the block does not see are multiplied by 0, not selected out (Halide would not
    // compute the scores a select leaves out, and the block's matmul would not start at its
    // first key); below the block's max, exp(min(x - max, 0)) is exp(x - max).
    std::vector<Expr> per_key = with(rows, {c});
    per_key.insert(per_key.begin(), k);
    if (every_key_seen)
        exps(per_key) = Halide::exp(at(value, k) - block_max(c));
    else
        exps(per_key) =
            Halide::exp(Halide::min(at(value, k) - finite(bmax(with(rows, {c}))), 0.0f)) *
            Halide::select(seen(k), 1.0f, 0.0f);
    operand(per_key) = rounding ? Halide::cast(rounding->type, exps(per_key)) : exps(per_key);
    std::vector<Expr> at_first = with(rows, {c});
    at_first.insert(at_first.begin(), first);
    bsum(with(rows, {c})) = 0.0f;
    bsum(with(rows, {c})) += exps(at_first);
    ReplaceCalls to_operand(p->name, [&](const std::vector<Expr> &) { return operand(at_first); });
    bacc(with(all, {c})) = Halide::cast(acc.output_types()[0], 0);
    bacc(with(all, {c})) += to_operand.mutate(at(a, first)) * at(b, first);
    const std::vector<Expr> element(all.begin(), all.end());
    // The running max is kept in the block max's units (before `times`): the block max can then
    // start from it (lower/RunningMax), which makes block_scale 1.
    state(element) = {0.0f, ninf, 0.0f};
    Expr m = state(element)[1], block_m = bmax(with(rows, {rc.x}));
    Expr m_new = Halide::max(m, block_m);
    // (Every key seen: m_new is a block's max, finite; m - m_new of the first block is -inf,
    // whose exp is 0.)
    // A block a mask hides whole for a row has block_m = -inf, and exponentials and sums of 0
    // there: its factor only needs to be finite (at most 1), and it is 1 where block_m = m_new.
    Expr limit = every_key_seen ? m_new : finite(m_new);
    Expr old_scale = Halide::exp((m - limit) * times),
         block_scale = every_key_seen
                           ? Halide::exp((block_m - limit) * times)
                           : Halide::exp(Halide::min(finite(block_m) - limit, 0.0f) * times);
    state(element) = {state(element)[0] * old_scale + bacc(with(all, {rc.x})) * block_scale, m_new,
                      state(element)[2] * old_scale + bsum(with(rows, {rc.x})) * block_scale};
    // The consumer reads the output over the sum.
    ReplaceCalls to_state(
        name, [&](const std::vector<Expr> &args) { return state(args)[0] / state(args)[2]; });
    Halide::Func out = consumer.halide();
    out.function().mutate(&to_state);

    // The running max and sum read only themselves and the rows' Funcs: the same along the
    // columns before the first row Var (lower/RowStatistics holds them once per row).
    int columns = 0;
    while (columns < int(all.size()) && std::none_of(rows.begin(), rows.end(), [&](const Var &r) {
               return r.name() == all[columns].name();
           }))
        columns++;
    if (columns > 0)
        record_row_statistics(state, columns);
    // A block whose every key the mask hides leaves the state as it was (lower/SkipMaskedBlocks).
    const std::string block_loop = state.name() + ".s1." + rc.x.name();
    if (!is_const_one(simplify(mask)))
        record_masked_block_max(bmax, block_loop);
    record_running_max(bmax, state.name() + ".1", block_loop);

    std::vector<VarOrRVar> order(all.begin(), all.end());
    order.push_back(rc.x);
    state.update().reorder(order);
    std::vector<VarOrRVar> mma = {all[0]};
    if (all.size() > 1)
        mma.push_back(all[1]);
    mma.push_back(ji.x);
    o.block_acc.update().reorder(mma).tile_mma();
    o.block = rc.x;
    o.block_keys = ji.x;
    return o;
}

} // namespace tandem
