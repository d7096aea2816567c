#include "RejoinTails.h"

#include <map>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** Proves two bodies of a loop the same for the main loop's iterations 0 <= loop <= last, where
 * last is the main loop's trip count minus one: the same Stmt nodes, and expressions equal there.
 */
class SameBody {
public:
    using Facts = std::vector<std::pair<std::string, Interval>>; // variable ranges
    SameBody(const std::string &loop, const Expr &last,
             const std::set<std::string> &runtime_extents)
        : loop(loop), last(last), runtime_extents(runtime_extents) {
        for (const std::string &e : runtime_extents) {
            from_end.emplace_back(e, Interval(1, Interval::pos_inf()));
            from_start.emplace_back(e, Interval(1, Interval::pos_inf()));
        }
        from_end.emplace_back(step_back, Interval(0, Interval::pos_inf()));
        from_start.emplace_back(loop, Interval(0, Interval::pos_inf()));
    }

    bool same(const Expr &a, const Expr &b) const {
        if (!a.defined() || !b.defined())
            return !a.defined() && !b.defined();
        if (equal(a, b))
            return true;
        if (a.type() != b.type())
            return false;
        // loop = last - t with t >= 0 covers the main loop's upper end, loop >= 0 its start.
        const Expr back = last - Variable::make(Halide::Int(32), step_back);
        if (proven(substitute(loop, back, a) == substitute(loop, back, b), from_end))
            return true;
        return proven(a == b, from_start);
    }

    /** Whether the simplifier reduces `goal` to true, given the intervals in `known` and, for each
     * runtime extent E divided by one constant c only, E = q c + r with q >= 0 and 0 <= r < c (how
     * it sees that (E / c) c <= E). */
    bool proven(const Expr &goal, const Facts &known) const {
        std::map<std::string, int64_t> divisor;
        std::set<std::string> several;
        visit_divisions(goal, [&](const std::string &extent, int64_t c) {
            auto [it, fresh] = divisor.emplace(extent, c);
            if (!fresh && it->second != c)
                several.insert(extent);
        });
        Scope<Interval> scope;
        for (const auto &[name, interval] : known)
            scope.push(name, interval);
        std::map<std::string, Expr> split;
        for (const auto &[extent, c] : divisor) {
            if (several.count(extent))
                continue;
            const std::string q = extent + ".quotient", r = extent + ".remainder";
            scope.push(q, Interval(0, Interval::pos_inf()));
            scope.push(r, Interval(0, int(c - 1)));
            split[extent] =
                Variable::make(Halide::Int(32), q) * int(c) + Variable::make(Halide::Int(32), r);
        }
        return is_const_one(simplify(simplify(substitute(split, goal), true, scope), true, scope));
    }

    template <class F> void visit_divisions(const Expr &e, F &&f) const {
        class V : public IRVisitor {
        public:
            const std::set<std::string> &extents;
            F &f;
            V(const std::set<std::string> &extents, F &f) : extents(extents), f(f) {}
            using IRVisitor::visit;
            void visit(const Div *op) override {
                const int64_t *c = as_const_int(op->b);
                if (c && *c > 0) {
                    for (const std::string &e : extents) {
                        if (expr_uses_var(op->a, e))
                            f(e, *c);
                    }
                }
                IRVisitor::visit(op);
            }
        } v(runtime_extents, f);
        e.accept(&v);
    }

    bool same(const Stmt &a, const Stmt &b) const {
        if (a.same_as(b))
            return true;
        if (!a.defined() || !b.defined() || a->node_type != b->node_type)
            return false;
        switch (a->node_type) {
        case IRNodeType::For: {
            const For *x = a.as<For>(), *y = b.as<For>();
            return x->name == y->name && x->for_type == y->for_type &&
                   x->device_api == y->device_api && same(x->min, y->min) &&
                   same(x->extent, y->extent) && same(x->body, y->body);
        }
        case IRNodeType::Block: {
            const Block *x = a.as<Block>(), *y = b.as<Block>();
            return same(x->first, y->first) && same(x->rest, y->rest);
        }
        case IRNodeType::Allocate: {
            const Allocate *x = a.as<Allocate>(), *y = b.as<Allocate>();
            if (x->name != y->name || x->type != y->type || x->memory_type != y->memory_type ||
                x->extents.size() != y->extents.size() || x->free_function != y->free_function) {
                return false;
            }
            for (size_t i = 0; i < x->extents.size(); i++) {
                if (!same(x->extents[i], y->extents[i]))
                    return false;
            }
            return same(x->condition, y->condition) && same(x->new_expr, y->new_expr) &&
                   same(x->body, y->body);
        }
        case IRNodeType::Free:
            return a.as<Free>()->name == b.as<Free>()->name;
        case IRNodeType::ProducerConsumer: {
            const ProducerConsumer *x = a.as<ProducerConsumer>(), *y = b.as<ProducerConsumer>();
            return x->name == y->name && x->is_producer == y->is_producer && same(x->body, y->body);
        }
        case IRNodeType::Store: {
            const Store *x = a.as<Store>(), *y = b.as<Store>();
            return x->name == y->name && same(x->index, y->index) && same(x->value, y->value) &&
                   same(x->predicate, y->predicate);
        }
        case IRNodeType::LetStmt: {
            const LetStmt *x = a.as<LetStmt>(), *y = b.as<LetStmt>();
            return x->name == y->name && same(x->value, y->value) && same(x->body, y->body);
        }
        case IRNodeType::IfThenElse: {
            const IfThenElse *x = a.as<IfThenElse>(), *y = b.as<IfThenElse>();
            return same(x->condition, y->condition) && same(x->then_case, y->then_case) &&
                   same(x->else_case, y->else_case);
        }
        case IRNodeType::Evaluate:
            return same(a.as<Evaluate>()->value, b.as<Evaluate>()->value);
        default:
            return equal(a, b);
        }
    }

private:
    const std::string step_back = "tandem.steps_from_last";
    const std::string &loop;
    Expr last;
    const std::set<std::string> &runtime_extents;
    Facts from_end, from_start;
};

/** Moves a Free that ends a consume block after the block: Halide places it either way, and the
 * bodies compare in this form. */
class FreesAfterConsume : public IRMutator {
    using IRMutator::visit;
    Stmt visit(const ProducerConsumer *op) override {
        Stmt body = mutate(op->body);
        const Block *b = body.as<Block>();
        if (op->is_producer || !b || !b->rest.as<Free>())
            return ProducerConsumer::make(op->name, false, body);
        return Block::make(ProducerConsumer::make(op->name, false, b->first), b->rest);
    }
};

class Rejoin : public IRMutator {
public:
    explicit Rejoin(const std::set<std::string> &runtime_extents)
        : runtime_extents(runtime_extents) {}

private:
    using IRMutator::visit;
    const std::set<std::string> &runtime_extents;

    static void flatten(const Stmt &s, std::vector<Stmt> *out) {
        if (const Block *b = s.as<Block>()) {
            flatten(b->first, out);
            flatten(b->rest, out);
        } else {
            out->push_back(s);
        }
    }

    /** The main loop and its tail as one loop, or an undefined Stmt when they are not such a pair
     * or the main loop's body cannot be proven the tail's. */
    Stmt join(const Stmt &main, const Stmt &tail) const {
        const For *m = main.as<For>(), *t = tail.as<For>();
        if (!m || !t || t->name != m->name + ".rebased" || !is_const_zero(m->min) ||
            !is_const_zero(t->min) || m->for_type != t->for_type ||
            m->device_api != t->device_api || is_const(m->extent)) {
            return Stmt();
        }
        const Expr count = m->extent;
        const Max *clamped = count.as<Max>();
        const Expr unclamped = clamped && is_const_zero(clamped->b) ? clamped->a : count;
        const Stmt general = simplify(
            substitute(t->name, Variable::make(Halide::Int(32), m->name) - count, t->body));
        if (!SameBody(m->name, unclamped - 1, runtime_extents)
                 .same(FreesAfterConsume().mutate(m->body), FreesAfterConsume().mutate(general))) {
            return Stmt();
        }

        // The tail's count is max(end - count, 0) (GuardWithIf) or end - count: the joined loop
        // ends at end.
        Expr extent = count + t->extent;
        const Max *rest = t->extent.as<Max>();
        const Sub *to_end =
            rest && is_const_zero(rest->b) ? rest->a.as<Sub>() : t->extent.as<Sub>();
        if (to_end && equal(to_end->b, count))
            extent = rest ? max(to_end->a, count) : to_end->a;
        Scope<Interval> extents;
        for (const std::string &e : runtime_extents)
            extents.push(e, Interval(1, Interval::pos_inf()));
        return For::make(m->name, 0, simplify(extent, true, extents), m->for_type, m->device_api,
                         general);
    }

    Stmt visit(const Block *op) override {
        std::vector<Stmt> stmts;
        flatten(op, &stmts);
        bool changed = false;
        for (Stmt &s : stmts) {
            Stmt mutated = mutate(s);
            changed = changed || !mutated.same_as(s);
            s = mutated;
        }
        for (size_t i = 0; i + 1 < stmts.size();) {
            Stmt joined = join(stmts[i], stmts[i + 1]);
            if (!joined.defined()) {
                i++;
                continue;
            }
            stmts[i] = joined;
            stmts.erase(stmts.begin() + long(i) + 1);
            changed = true;
        }
        return changed ? Block::make(stmts) : Stmt(op);
    }
};

} // namespace

Stmt rejoin_tails(const Stmt &s, const std::set<std::string> &runtime_extents) {
    if (runtime_extents.empty())
        return s;
    return Rejoin(runtime_extents).mutate(s);
}

} // namespace tandem::lower
