#include "AccumulateInPlace.h"

#include "tandem/Nest.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** Why the Stmt stays as it was. */
struct Kept {
    std::string why;
};

const Load *load_named(const Expr &e, const std::string &name) {
    const Load *l = e.as<Load>();
    return l && l->name == name ? l : nullptr;
}

Expr uncast(const Expr &e) {
    const Cast *c = e.as<Cast>();
    return c ? c->value : e;
}

/** Where the statements are: each Store's and producer's place in program order and the loops
 * around it, each Store's perfect nest (its outermost For), the Allocates by name. */
class Survey : public IRVisitor {
public:
    struct Place {
        int order = 0;
        std::vector<const For *> loops; // around the statement (its own nest's outside it)
    };
    std::map<const Store *, Place> stores;
    std::map<const Store *, const For *> nest_of; // the outermost For of its perfect nest
    std::map<const For *, Place> fors;
    std::map<std::string, std::vector<const ProducerConsumer *>> producers;
    std::map<const ProducerConsumer *, Place> produced_at;
    std::map<std::string, const Allocate *> allocations;
    std::map<std::string, std::vector<const Load *>> loads;
    std::map<const Load *, std::vector<const For *>> load_loops;
    std::map<const Load *, int> load_order;

private:
    using IRVisitor::visit;
    int order = 0;
    std::vector<const For *> stack;

    void visit(const For *op) override {
        fors[op] = {order++, stack};
        Nest nest;
        if (as_perfect_nest(op, &nest))
            nest_of.emplace(nest.store, op);
        stack.push_back(op);
        IRVisitor::visit(op);
        stack.pop_back();
    }
    void visit(const Store *op) override {
        stores[op] = {order++, stack};
        IRVisitor::visit(op);
    }
    void visit(const Load *op) override {
        loads[op->name].push_back(op);
        load_loops[op] = stack;
        load_order[op] = order++;
        IRVisitor::visit(op);
    }
    void visit(const ProducerConsumer *op) override {
        if (op->is_producer) {
            producers[op->name].push_back(op);
            produced_at[op] = {order++, stack};
        }
        IRVisitor::visit(op);
    }
    void visit(const Allocate *op) override {
        allocations.emplace(op->name, op);
        IRVisitor::visit(op);
    }
};

std::vector<const Store *> stores_to(const Survey &s, const std::string &name) {
    std::vector<const Store *> found;
    for (const auto &[st, place] : s.stores) {
        if (st->name == name)
            found.push_back(st);
    }
    std::sort(found.begin(), found.end(), [&](const Store *a, const Store *b) {
        return s.stores.at(a).order < s.stores.at(b).order;
    });
    return found;
}

/** The loops of a perfect nest. */
std::vector<Loop> loops_of(const For *root) {
    Nest nest;
    if (!as_perfect_nest(root, &nest))
        throw Kept{"a loop nest is not perfect"};
    return nest.loops;
}

/** The loop var among `loops` along which `index` steps by `step`. */
std::string var_stepping(const Expr &index, const std::vector<Loop> &loops, const Expr &step) {
    for (const Loop &l : loops) {
        const Expr s = affine_step(index, l.name);
        if (s.defined() && can_prove(s == step))
            return l.name;
    }
    return "";
}

/** The rewrite, once the survey found and checked its parts. */
struct Plan {
    std::string o, b, a, f0, f1;
    const Store *update = nullptr, *mma = nullptr, *operand = nullptr;
    const For *update_nest = nullptr, *rows = nullptr, *blocks = nullptr;
    const ProducerConsumer *produce_a = nullptr;
    std::vector<const Store *> factors, zeroings;
    std::vector<const Allocate *> factor_buffers; // (and the row sum's, if it moves)
    std::set<const For *> zeroing_nests;
    Expr f0_load, f1_load;
    std::string operand_row; // P's row var in its producer
    Expr f1_row;             // f1's index there
    const For *operand_nest = nullptr;
    // The block's row sum computed in P's loop (optional): X[row] = X[row] + T over P's loops
    // (renamed), T and P's value sharing `shared` (the exponential), X zeroed by `sum_init`.
    const Store *sum = nullptr;
    const For *sum_nest = nullptr, *sum_init = nullptr;
    std::map<std::string, Expr> sum_renamed;
    Expr shared;
    // With a producer warpgroup (lower/hopper/OverlapSoftmax): the exponentials stored into the
    // scores' accumulator in place (with the row sum), P then rounded from them in a loop of its
    // own, so that only P's loop must wait for the previous block's P V matmul.
    std::string scores;
    Expr scores_index;
};

/** The transcendental calls of an expression (exp, log, ...). */
std::vector<Expr> calls_of(const Expr &e) {
    std::vector<Expr> found;
    struct Calls : IRVisitor {
        std::vector<Expr> &found;
        explicit Calls(std::vector<Expr> &f) : found(f) {}
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if (op->call_type == Call::PureExtern)
                found.push_back(op);
            IRVisitor::visit(op);
        }
    } calls(found);
    e.accept(&calls);
    return found;
}

/** The block's row sum that shares P's exponentials, moved into P's loop (Plan::sum). */
void find_row_sum(const Survey &survey, const std::vector<const For *> &around, Plan *p) {
    if (!p->operand_nest)
        return;
    const std::vector<Loop> operand_loops = loops_of(p->operand_nest);
    const int from = survey.produced_at.at(p->produce_a).order;
    for (const auto &[st, place] : survey.stores) {
        const Add *add = st->value.as<Add>();
        if (!add || place.order < from || st->name == p->o || st->name == p->b ||
            st->name == p->a || !survey.nest_of.count(st))
            continue;
        const Load *self = load_named(add->a, st->name);
        Expr term = add->b;
        if (!self || !equal(self->index, st->index)) {
            self = load_named(add->b, st->name);
            term = add->a;
        }
        const For *root = survey.nest_of.at(st);
        if (!self || !equal(self->index, st->index) || survey.fors.at(root).loops != around)
            continue;
        const std::vector<Loop> loops = loops_of(root);
        if (loops.size() != operand_loops.size())
            continue;
        std::map<std::string, Expr> renamed;
        bool same = true;
        for (size_t i = 0; i < loops.size(); i++) {
            same = same && can_prove(loops[i].min == operand_loops[i].min) &&
                   can_prove(loops[i].extent == operand_loops[i].extent);
            renamed[loops[i].name] = Variable::make(Halide::Int(32), operand_loops[i].name);
        }
        const Expr row = simplify(substitute(renamed, st->index));
        const Variable *v = row.as<Variable>();
        if (!same || !v || v->name != p->operand_row || loaded(term).count(st->name))
            continue;
        const Expr t = substitute(renamed, term);
        Expr shared;
        for (const Expr &c : calls_of(t)) {
            for (const Expr &d : calls_of(p->operand->value)) {
                if (!shared.defined() && equal(c, d))
                    shared = c;
            }
        }
        if (!shared.defined())
            continue;
        // Zeroed once in the block (a nest beside it), and from P's production to here nothing
        // else touches the sum or writes what it reads.
        const Store *init = nullptr;
        for (const auto &[other, at] : survey.stores) {
            if (other == st || other->name != st->name)
                continue;
            if (init || !is_const_zero(other->value) || !survey.nest_of.count(other) ||
                survey.fors.at(survey.nest_of.at(other)).loops != around)
                return;
            init = other;
        }
        if (!init || survey.stores.at(init).order > place.order)
            return;
        const std::set<std::string> read = loaded(st->value);
        for (const auto &[other, at] : survey.stores) {
            if (at.order > from && at.order < place.order && other != init &&
                (other->name == st->name || read.count(other->name)))
                return;
        }
        for (const auto &[l, order] : survey.load_order) {
            if (l->name == st->name && order > from && order < place.order && l != self)
                return;
        }
        if (!survey.allocations.count(st->name))
            return;
        p->factor_buffers.push_back(survey.allocations.at(st->name));
        p->sum = st;
        p->sum_nest = root;
        p->sum_init = survey.nest_of.at(init);
        p->sum_renamed = renamed;
        p->shared = shared;
        return;
    }
}

/** Whether `index` names a different element at each iteration of `loops` (affine, constant
 * steps, each loop's span within the next larger step). */
bool visits_once(const Expr &index, const std::vector<Loop> &loops) {
    std::vector<std::pair<int64_t, int64_t>> steps; // (step, extent)
    for (const Loop &l : loops) {
        const Expr step = affine_step(index, l.name);
        const Expr extent = simplify(l.extent);
        if (!step.defined() || !is_const(simplify(step)) || !is_const(extent))
            return false;
        const int64_t st = *as_const_int(simplify(step)), ex = *as_const_int(extent);
        if (ex <= 1)
            continue;
        if (st <= 0)
            return false;
        steps.emplace_back(st, ex);
    }
    std::sort(steps.begin(), steps.end());
    for (size_t i = 0; i + 1 < steps.size(); i++) {
        if (steps[i].first * steps[i].second > steps[i + 1].first)
            return false;
    }
    return true;
}

/** The scores' accumulator the exponentials read, if they may be stored into it in place
 * (Plan::scores): one matmul's accumulator read at one element per iteration of P's loops, each
 * element once, written in the block only before P and read after P only in P's loop. */
void find_scores(const Survey &survey, const CompileContext &ctx, Plan *p) {
    // The exponential's loads (in P's loop vars).
    struct Loads : IRVisitor {
        std::vector<const Load *> found;
        using IRVisitor::visit;
        void visit(const Load *op) override {
            found.push_back(op);
            IRVisitor::visit(op);
        }
    } loads;
    p->shared.accept(&loads);
    const Load *scores = nullptr;
    for (const Load *l : loads.found) {
        if (!ctx.of(l->name).tile_mma)
            continue;
        if (scores && (scores->name != l->name || !equal(scores->index, l->index)))
            return;
        scores = l;
    }
    // (A load P and the row sum share is surveyed at one of the two places.)
    auto in_p_or_sum = [&](const Load *l) {
        const std::vector<const For *> &at = survey.load_loops.at(l);
        return std::find(at.begin(), at.end(), p->operand_nest) != at.end() ||
               std::find(at.begin(), at.end(), p->sum_nest) != at.end();
    };
    if (!scores || !visits_once(scores->index, loops_of(p->operand_nest)))
        return;
    const int from = survey.produced_at.at(p->produce_a).order;
    for (const Store *st : stores_to(survey, scores->name)) {
        const std::vector<const For *> &at = survey.stores.at(st).loops;
        if (survey.stores.at(st).order > from ||
            std::find(at.begin(), at.end(), p->blocks) == at.end())
            return;
    }
    for (const Load *l : survey.loads.at(scores->name)) {
        if (survey.load_order.at(l) > from && !in_p_or_sum(l))
            return;
    }
    p->scores = scores->name;
    p->scores_index = scores->index;
}

Plan plan_of(const Stmt &s, const CompileContext &ctx, const std::string &o) {
    Survey survey;
    s.accept(&survey);
    Plan p;
    p.o = o;
    // O[i] = F0[r] * O[i] + F1[r] * B[i], B an MMA's accumulator.
    for (const Store *st : stores_to(survey, o)) {
        const Add *add = st->value.as<Add>();
        if (!add)
            continue;
        for (const auto &[x, y] : {std::pair{add->a, add->b}, std::pair{add->b, add->a}}) {
            const Mul *mx = x.as<Mul>(), *my = y.as<Mul>();
            if (!mx || !my)
                continue;
            auto other = [&](const Mul *m, const std::function<bool(const Load *)> &is) {
                if (const Load *l = m->a.as<Load>(); l && is(l))
                    return m->b;
                if (const Load *l = m->b.as<Load>(); l && is(l))
                    return m->a;
                return Expr();
            };
            const Expr f0 = other(
                mx, [&](const Load *l) { return l->name == o && equal(l->index, st->index); });
            std::string b;
            const Expr f1 = other(my, [&](const Load *l) {
                b = l->name;
                return l->name != o && equal(l->index, st->index) && ctx.of(l->name).tile_mma;
            });
            const Load *l0 = f0.defined() ? f0.as<Load>() : nullptr,
                       *l1 = f1.defined() ? f1.as<Load>() : nullptr;
            if (l0 && l1 && l0->name != l1->name && equal(l0->index, l1->index)) {
                p.update = st, p.b = b, p.f0 = l0->name, p.f1 = l1->name;
                p.f0_load = f0, p.f1_load = f1;
            }
        }
        // O[i] = F0[r] * O[i] + B[i]: the block's exponentials taken against the running max
        // (lower/RunningMax), f1 = 1.
        for (const auto &[x, y] : {std::pair{add->a, add->b}, std::pair{add->b, add->a}}) {
            const Mul *mx = x.as<Mul>();
            const Load *by = y.as<Load>();
            if (!mx || !by || by->name == o || !equal(by->index, st->index) ||
                !ctx.of(by->name).tile_mma)
                continue;
            for (const auto &[self, factor] : {std::pair{mx->a, mx->b}, std::pair{mx->b, mx->a}}) {
                const Load *ls = self.as<Load>(), *lf = factor.as<Load>();
                if (ls && lf && ls->name == o && equal(ls->index, st->index) && lf->name != o) {
                    p.update = st, p.b = by->name, p.f0 = lf->name, p.f1 = "";
                    p.f0_load = factor, p.f1_load = Expr();
                }
            }
        }
    }
    if (!p.update)
        throw Kept{"its update is not O f0 + B f1 or O f0 + B with B a matmul's"};
    if (!survey.nest_of.count(p.update))
        throw Kept{"the update of " + o + " is not a perfect loop nest"};
    p.update_nest = survey.nest_of.at(p.update);
    const std::vector<const For *> &around = survey.fors.at(p.update_nest).loops;
    if (around.empty())
        throw Kept{"the update of " + o + " is not in a loop over key blocks"};
    p.blocks = around.back();

    // The factors: one store each, in one loop over the rows beside the update.
    std::vector<std::string> factor_names = {p.f0};
    if (!p.f1.empty())
        factor_names.push_back(p.f1);
    for (const std::string &f : factor_names) {
        const std::vector<const Store *> st = stores_to(survey, f);
        if (st.size() != 1 || survey.stores.at(st[0]).loops.empty())
            throw Kept{"the rescale factor " + f + " is not stored once in a loop over the rows"};
        p.factors.push_back(st[0]);
        if (!survey.allocations.count(f))
            throw Kept{"the rescale factor " + f + " has no allocation"};
        p.factor_buffers.push_back(survey.allocations.at(f));
    }
    p.rows = survey.stores.at(p.factors[0]).loops.back();
    if (survey.stores.at(p.factors.back()).loops.back() != p.rows ||
        survey.fors.at(p.rows).loops != around)
        throw Kept{"the rescale factors are not computed in one loop beside the update"};

    // The MMA B[Ib] = B[Ib] + A * V, the only other store to B its zeroing in the block.
    for (const Store *st : stores_to(survey, p.b)) {
        const Add *add = st->value.as<Add>();
        const Load *self = add ? load_named(add->a, p.b) : nullptr;
        if (self && equal(self->index, st->index) && add->b.as<Mul>()) {
            if (p.mma)
                throw Kept{"two matmuls accumulate into " + p.b};
            p.mma = st;
        } else if (is_const_zero(st->value)) {
            p.zeroings.push_back(st);
            if (survey.nest_of.count(st))
                p.zeroing_nests.insert(survey.nest_of.at(st));
        } else {
            throw Kept{p.b + " is written other than by its matmul and its zeroing"};
        }
    }
    if (!p.mma || !survey.nest_of.count(p.mma) ||
        survey.fors.at(survey.nest_of.at(p.mma)).loops != around)
        throw Kept{"the matmul into " + p.b + " is not a loop nest beside the update"};
    for (const Store *z : p.zeroings) {
        if (survey.stores.at(z).loops.size() <= around.size() ||
            !std::equal(around.begin(), around.end(), survey.stores.at(z).loops.begin()))
            throw Kept{p.b + " is zeroed outside the key block"};
    }
    // In the block, O and B are read only by the update and the matmul.
    auto reads_in_block = [&](const std::string &buffer) {
        return std::count_if(survey.loads[buffer].begin(), survey.loads[buffer].end(),
                             [&](const Load *l) {
                                 const std::vector<const For *> &at = survey.load_loops.at(l);
                                 return std::find(at.begin(), at.end(), p.blocks) != at.end();
                             });
    };
    if (reads_in_block(o) != 1 || reads_in_block(p.b) != 2)
        throw Kept{o + " or " + p.b + " is read besides the update and the matmul"};

    // The operand made in the block: the factor of the product no store of which reads an input.
    const Mul *product = p.mma->value.as<Add>()->b.as<Mul>();
    const std::set<std::string> inputs(ctx.inputs.begin(), ctx.inputs.end());
    std::vector<const Load *> candidates;
    for (const Expr &e : {product->a, product->b}) {
        const Load *l = uncast(e).as<Load>();
        if (!l)
            throw Kept{"the matmul's factors are not loads of tiles"};
        const std::vector<const Store *> writes = stores_to(survey, l->name);
        if (writes.size() == 1 && !meets(loaded(writes[0]->value), inputs))
            candidates.push_back(l);
    }
    if (candidates.size() != 1)
        throw Kept{"no single factor of the matmul is made in the key block"};
    const Load *a_load = candidates[0];
    p.a = a_load->name;
    p.operand = stores_to(survey, p.a)[0];
    if (survey.producers[p.a].size() != 1)
        throw Kept{"the operand " + p.a + " is produced more than once"};
    p.produce_a = survey.producers[p.a][0];
    if (survey.produced_at.at(p.produce_a).loops != around)
        throw Kept{"the operand " + p.a + " is not produced in the key block"};

    // Nothing from P's production to the factors' old place writes what they read.
    std::set<std::string> read;
    for (const Store *f : p.factors) {
        const std::set<std::string> more = loaded(f->value);
        read.insert(more.begin(), more.end());
    }
    const int from = survey.produced_at.at(p.produce_a).order,
              to = survey.stores.at(p.factors[0]).order;
    if (p.f1.empty() && survey.stores.at(p.factors.back()).order < from) {
        // Made before the operand already (lower/RunningMax): they stay.
        p.factors.clear();
        p.factor_buffers.clear();
    } else if (to < from) {
        throw Kept{"the rescale factors come before the operand"};
    }
    for (const auto &[st, place] : survey.stores) {
        if (!p.factors.empty() && place.order > from && place.order < to && read.count(st->name))
            throw Kept{"the rescale factors read " + st->name + ", written after the operand"};
    }

    // f1's row for P's element: the update's row var r, the matmul's row (the var stepping B's
    // index as r steps O's), P's row in its producer (stepping its index as the matmul's row
    // steps A's).
    const Variable *r = p.f0_load.as<Load>()->index.as<Variable>();
    const std::vector<Loop> update_loops = loops_of(p.update_nest),
                            mma_loops = loops_of(survey.nest_of.at(p.mma));
    if (!r || std::none_of(update_loops.begin(), update_loops.end(),
                           [&](const Loop &l) { return l.name == r->name; }))
        throw Kept{"the factors' row is not a loop of the update"};
    std::map<std::string, Expr> renamed;
    for (const Loop &l : update_loops) {
        const std::string v =
            var_stepping(p.mma->index, mma_loops, affine_step(p.update->index, l.name));
        if (v.empty())
            throw Kept{"the matmul's accumulator does not walk the update's " + l.name};
        renamed[l.name] = Variable::make(Halide::Int(32), v);
    }
    if (!equal(simplify(substitute(renamed, p.update->index)), simplify(p.mma->index)))
        throw Kept{"the matmul writes " + p.b + " at other elements than the update reads"};
    const std::string m = renamed.at(r->name).as<Variable>()->name;
    const Expr stride = simplify(affine_step(a_load->index, m));
    if (!stride.defined() || !is_const(stride) ||
        !is_const_zero(simplify(at_loop_mins(a_load->index, mma_loops))))
        throw Kept{"the matmul does not read " + p.a + " a row at a time from its start"};
    std::vector<Loop> operand_loops;
    if (survey.nest_of.count(p.operand))
        operand_loops = loops_of(survey.nest_of.at(p.operand));
    p.operand_row = var_stepping(p.operand->index, operand_loops, stride);
    if (p.operand_row.empty() ||
        !is_const_zero(simplify(at_loop_mins(p.operand->index, operand_loops))))
        throw Kept{"the operand " + p.a + " is not written a row at a time from its start"};
    for (const Loop &l : operand_loops) {
        if (l.name == p.operand_row)
            continue;
        const Expr step = affine_step(p.operand->index, l.name);
        if (!step.defined() || !is_const_one(simplify(step)) ||
            constant_upper_bound(simplify(l.min + l.extent)) > *as_const_int(stride))
            throw Kept{"the operand " + p.a + "'s columns are not within its rows"};
    }
    p.f1_row = Variable::make(Halide::Int(32), p.operand_row);
    p.operand_nest = survey.nest_of.count(p.operand) ? survey.nest_of.at(p.operand) : nullptr;
    find_row_sum(survey, around, &p);
    if (p.sum && ctx.of(ctx.output).warp_specialize)
        find_scores(survey, ctx, &p);
    return p;
}

class Rewrite : public IRMutator {
public:
    explicit Rewrite(const Plan &p) : p(p) {}

private:
    using IRMutator::visit;
    const Plan &p;

    static Stmt nothing() { return Evaluate::make(0); }

    /** P's nest (rewritten) with the row sum's update beside P's store, the call they share
     * computed once; or (Plan::scores) that call stored into the scores in place beside the row
     * sum, then P from the scores in a nest of its own. */
    Stmt with_row_sum(const Stmt &nest) const {
        const Store *st = innermost(nest);
        const std::string name = p.a + ".shared";
        const Expr shared = Variable::make(p.shared.type(), name);
        const Stmt sum = substitute(p.shared, shared, substitute(p.sum_renamed, Stmt(p.sum)));
        if (p.scores.empty()) {
            return around(
                nest, LetStmt::make(
                          name, p.shared,
                          block({with_value(st, substitute(p.shared, shared, st->value)), sum})));
        }
        const Expr scores =
            Load::make(p.shared.type(), p.scores, p.scores_index, Halide::Buffer<>(), Parameter(),
                       const_true(), ModulusRemainder());
        const Stmt in_place = Store::make(p.scores, shared, p.scores_index, Parameter(),
                                          const_true(), ModulusRemainder());
        return block({around(nest, LetStmt::make(name, p.shared, block({in_place, sum}))),
                      around(nest, with_value(st, substitute(p.shared, scores, st->value)))});
    }
    static const Store *innermost(const Stmt &nest) {
        const For *f = nest.as<For>();
        return f ? innermost(f->body) : nest.as<Store>();
    }
    /** The loops of `nest` around `body`. */
    static Stmt around(const Stmt &nest, const Stmt &body) {
        const For *f = nest.as<For>();
        return f ? For::make(f->name, f->min, f->extent, f->for_type, f->device_api,
                             around(f->body, body))
                 : body;
    }
    static Stmt with_value(const Store *st, const Expr &value) {
        return Store::make(st->name, value, st->index, st->param, st->predicate, st->alignment);
    }

    bool moved(const std::string &buffer) const {
        return buffer == p.b || std::any_of(p.factor_buffers.begin(), p.factor_buffers.end(),
                                            [&](const Allocate *a) { return a->name == buffer; });
    }
    Stmt visit(const Allocate *op) override {
        return moved(op->name) ? mutate(op->body) : IRMutator::visit(op);
    }
    Stmt visit(const Free *op) override { return moved(op->name) ? nothing() : op; }
    Stmt visit(const Store *op) override {
        if (std::find(p.factors.begin(), p.factors.end(), op) != p.factors.end() ||
            std::find(p.zeroings.begin(), p.zeroings.end(), op) != p.zeroings.end())
            return nothing();
        if (op == p.mma) {
            const Expr self = Load::make(op->value.type(), p.o, op->index, Halide::Buffer<>(),
                                         Parameter(), const_true(), ModulusRemainder());
            return Store::make(p.o, self + op->value.as<Add>()->b, op->index, Parameter(),
                               op->predicate, ModulusRemainder());
        }
        if (op == p.operand && !p.f1.empty()) {
            const Expr f1 = Load::make(p.f1_load.type(), p.f1, p.f1_row, Halide::Buffer<>(),
                                       Parameter(), const_true(), ModulusRemainder());
            const Cast *rounded = op->value.as<Cast>();
            const Expr value =
                rounded ? Cast::make(rounded->type, rounded->value * f1) : op->value * f1;
            return Store::make(op->name, value, op->index, op->param, op->predicate, op->alignment);
        }
        return op;
    }
    Stmt visit(const For *op) override {
        if (op == p.update_nest || p.zeroing_nests.count(op) ||
            (p.sum && (op == p.sum_nest || op == p.sum_init)))
            return nothing();
        Stmt s = IRMutator::visit(op);
        if (p.sum && op == p.operand_nest)
            return block({p.sum_init, with_row_sum(s)});
        if (op != p.blocks)
            return s;
        const For *f = s.as<For>();
        Stmt body = f->body;
        for (const Allocate *a : p.factor_buffers)
            body = Allocate::make(a->name, a->type, a->memory_type, a->extents, a->condition, body);
        return For::make(f->name, f->min, f->extent, f->for_type, f->device_api, body);
    }
    Stmt visit(const ProducerConsumer *op) override {
        if (op != p.produce_a)
            return IRMutator::visit(op);
        // The factors, O rescaled by f0, then P (times f1).
        std::vector<Stmt> factors;
        for (const Store *f : p.factors)
            factors.push_back(f);
        const Stmt factor_loop =
            factors.empty() ? nothing()
                            : For::make(p.rows->name, p.rows->min, p.rows->extent, p.rows->for_type,
                                        p.rows->device_api, block(factors));
        struct Rescale : IRMutator {
            const Plan &p;
            explicit Rescale(const Plan &p) : p(p) {}
            using IRMutator::visit;
            Stmt visit(const Store *op) override {
                const Expr self = Load::make(op->value.type(), p.o, op->index, Halide::Buffer<>(),
                                             Parameter(), const_true(), ModulusRemainder());
                return Store::make(op->name, p.f0_load * self, op->index, op->param, op->predicate,
                                   op->alignment);
            }
        } rescale(p);
        return block({factor_loop, rescale.mutate(Stmt(p.update_nest)), IRMutator::visit(op)});
    }
};

} // namespace

Stmt accumulate_in_place(const Stmt &s, CompileContext &ctx) {
    Stmt result = s;
    for (const auto &[name, d] : std::map<std::string, Directives>(ctx.directives)) {
        auto f = ctx.functions.find(name);
        if (d.row_statistics <= 0 || f == ctx.functions.end() || f->second.outputs() < 3)
            continue;
        const std::string o = name + ".0";
        try {
            const Plan p = plan_of(result, ctx, o);
            result = remove_no_ops(Rewrite(p).mutate(result));
            // The matmul now accumulates into O.
            ctx.directives[o] = ctx.of(p.b);
            ctx.directives[p.b].tile_mma = false;
        } catch (const Kept &k) {
            ctx.notes.push_back("the online softmax's output " + name +
                                " is not accumulated in place by its P V matmul (" + k.why + ")");
        }
    }
    return result;
}

} // namespace tandem::lower
