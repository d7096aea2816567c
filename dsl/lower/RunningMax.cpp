#include "RunningMax.h"

#include "tandem/Nest.h"

#include <cmath>
#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** Why a block loop stays as it was. */
struct Refused {
    std::string why;
};

/** The extents of an allocation other than 1, simplified. */
std::vector<Expr> shape(const Allocate *a) {
    std::vector<Expr> s;
    for (const Expr &e : a->extents) {
        if (!is_const_one(simplify(e)))
            s.push_back(simplify(e));
    }
    return s;
}

bool same_shape(const Allocate *a, const Allocate *b) {
    const std::vector<Expr> x = shape(a), y = shape(b);
    if (x.size() != y.size())
        return false;
    for (size_t i = 0; i < x.size(); i++) {
        if (!equal(x[i], y[i]))
            return false;
    }
    return true;
}

/** Expressions simplified with the fact b[i] >= m[i] (the block max and the running max at the
 * same index), and exp of a constant folded. */
class AtLeast : public IRMutator {
public:
    AtLeast(std::string b, std::string m) : b(std::move(b)), m(std::move(m)) {}

private:
    using IRMutator::visit;
    const std::string b, m;

    /** Whether e is a load of `name`, its index in *index. */
    static bool load_of(const Expr &e, const std::string &name, Expr *index) {
        const Load *l = e.as<Load>();
        if (!l || l->name != name)
            return false;
        *index = l->index;
        return true;
    }
    /** Whether x is m[i] and y is b[i], the same i. */
    bool m_then_b(const Expr &x, const Expr &y) const {
        Expr i, j;
        return load_of(x, m, &i) && load_of(y, b, &j) && equal(simplify(i), simplify(j));
    }
    /** What is known of e's sign: e >= 0 (*nonneg), e <= 0 (*nonpos). */
    void sign(const Expr &e, bool *nonneg, bool *nonpos) const {
        *nonneg = *nonpos = false;
        if (const double *f = as_const_float(e)) {
            *nonneg = *f >= 0;
            *nonpos = *f <= 0;
        } else if (const Sub *s = e.as<Sub>()) {
            *nonpos = m_then_b(s->a, s->b);
            *nonneg = m_then_b(s->b, s->a);
        } else if (const Mul *p = e.as<Mul>()) {
            bool a_nonneg, a_nonpos, b_nonneg, b_nonpos;
            sign(p->a, &a_nonneg, &a_nonpos);
            sign(p->b, &b_nonneg, &b_nonpos);
            *nonneg = (a_nonneg && b_nonneg) || (a_nonpos && b_nonpos);
            *nonpos = (a_nonneg && b_nonpos) || (a_nonpos && b_nonneg);
        }
    }

    Expr visit(const Max *op) override {
        const Expr x = mutate(op->a), y = mutate(op->b);
        if (m_then_b(x, y))
            return y;
        if (m_then_b(y, x))
            return x;
        bool nonneg, nonpos;
        if (is_const_zero(y) || is_const_zero(x)) {
            const Expr other = is_const_zero(y) ? x : y, zero = is_const_zero(y) ? y : x;
            sign(other, &nonneg, &nonpos);
            if (nonneg)
                return other;
            if (nonpos)
                return zero;
        }
        return Max::make(x, y);
    }

    Expr visit(const Min *op) override {
        const Expr x = mutate(op->a), y = mutate(op->b);
        if (m_then_b(x, y))
            return x;
        if (m_then_b(y, x))
            return y;
        bool nonneg, nonpos;
        if (is_const_zero(y) || is_const_zero(x)) {
            const Expr other = is_const_zero(y) ? x : y, zero = is_const_zero(y) ? y : x;
            sign(other, &nonneg, &nonpos);
            if (nonpos)
                return other;
            if (nonneg)
                return zero;
        }
        return Min::make(x, y);
    }

    Expr visit(const Call *op) override {
        Expr e = IRMutator::visit(op);
        const Call *c = e.as<Call>();
        if (c && c->name == "exp_f32" && c->args.size() == 1) {
            if (const double *f = as_const_float(c->args[0]))
                return make_const(c->type, std::exp(*f));
        }
        return e;
    }
};

/** Loads of the buffers in `constants` replaced by their value; their stores and allocations
 * dropped. */
class Propagate : public IRMutator {
public:
    explicit Propagate(const std::map<std::string, Expr> &constants) : constants(constants) {}

private:
    using IRMutator::visit;
    const std::map<std::string, Expr> &constants;
    Expr visit(const Load *op) override {
        auto it = constants.find(op->name);
        return it == constants.end() ? IRMutator::visit(op) : it->second;
    }
    Stmt visit(const Store *op) override {
        return constants.count(op->name) ? Evaluate::make(0) : IRMutator::visit(op);
    }
    Stmt visit(const Allocate *op) override {
        return constants.count(op->name) ? mutate(op->body) : IRMutator::visit(op);
    }
    Stmt visit(const Free *op) override {
        return constants.count(op->name) ? Evaluate::make(0) : IRMutator::visit(op);
    }
};

/** The buffers stored beside the running max `m`: by the stores of row loops that also store
 * or read m (the state's factors). */
std::set<std::string> beside(const Stmt &s, const std::string &m) {
    struct Find : IRVisitor {
        const std::string &m;
        std::set<std::string> names;
        explicit Find(const std::string &m) : m(m) {}
        using IRVisitor::visit;
        void visit(const For *op) override {
            std::set<std::string> here;
            bool with_m = false;
            for (const Stmt &s : flatten(op->body)) {
                if (const Store *st = s.as<Store>()) {
                    here.insert(st->name);
                    with_m = with_m || st->name == m || loaded(st->value).count(m);
                }
            }
            if (with_m)
                names.insert(here.begin(), here.end());
            IRVisitor::visit(op);
        }
    } find(m);
    s.accept(&find);
    return find.names;
}

/** Those of `candidates` allocated in `s` whose every store stores one constant, with it. */
std::map<std::string, Expr> constant_buffers(const Stmt &s,
                                             const std::set<std::string> &candidates) {
    struct Find : IRVisitor {
        std::set<std::string> allocated;
        std::map<std::string, Expr> value;
        std::set<std::string> varying;
        using IRVisitor::visit;
        void visit(const Allocate *op) override {
            allocated.insert(op->name);
            IRVisitor::visit(op);
        }
        void visit(const Store *op) override {
            const Expr v = simplify(op->value);
            auto it = value.find(op->name);
            if (!is_const(v) || (it != value.end() && !equal(it->second, v)))
                varying.insert(op->name);
            else
                value[op->name] = v;
            IRVisitor::visit(op);
        }
    } find;
    s.accept(&find);
    std::map<std::string, Expr> constants;
    for (const auto &[name, v] : find.value) {
        if (candidates.count(name) && find.allocated.count(name) && !find.varying.count(name))
            constants[name] = v;
    }
    return constants;
}

/** The stores of the running max `m` and those that read it, taken out of their row loops into
 * copies of those loops (in program order); the allocations of what they store, taken out too. */
class TakeOut : public IRMutator {
public:
    TakeOut(std::string m, std::string b) : m(std::move(m)), b(std::move(b)) {}
    std::vector<Stmt> loops;                 // the copies, in order
    std::set<std::string> targets;           // what the moved stores store, m aside
    std::map<std::string, Stmt> allocations; // of the targets, taken out
    std::set<std::string> bound;             // variables bound in what is visited

private:
    using IRMutator::visit;
    const std::string m, b;

    bool m_stored = false; // the running max's store was taken

    bool moves(const Stmt &s) const {
        const Store *st = s.as<Store>();
        return st && (st->name == m || loaded(st->value).count(m));
    }

    Stmt visit(const For *op) override {
        std::vector<Stmt> kept, moved;
        for (const Stmt &s : flatten(op->body)) {
            if (!moves(s)) {
                kept.push_back(s);
                continue;
            }
            if (m_stored)
                throw Refused{"the running max is read after it is stored"};
            m_stored = s.as<Store>()->name == m;
            moved.push_back(s);
        }
        if (moved.empty()) {
            bound.insert(op->name);
            return IRMutator::visit(op);
        }
        for (const Stmt &s : moved) {
            const Store *st = s.as<Store>();
            for (const Expr &e : {st->value, st->index}) {
                for (const std::string &v : variables(e)) {
                    if (v != op->name)
                        throw Refused{"a store of the running max reads " + v};
                }
                for (const std::string &l : loaded(e)) {
                    if (l != m && l != b && !targets.count(l))
                        throw Refused{"a store of the running max reads " + l};
                }
            }
            if (st->name != m)
                targets.insert(st->name);
        }
        for (const Expr &e : {op->min, op->extent}) {
            for (const std::string &v : variables(e)) {
                if (bound.count(v))
                    throw Refused{"the running max's row loop depends on " + v};
            }
        }
        loops.push_back(
            For::make(op->name, op->min, op->extent, op->for_type, op->device_api, block(moved)));
        bound.insert(op->name);
        const Stmt rest = mutate(block(kept));
        return kept.empty()
                   ? Evaluate::make(0)
                   : For::make(op->name, op->min, op->extent, op->for_type, op->device_api, rest);
    }

    Stmt visit(const Store *op) override {
        if (op->name == m || loaded(op->value).count(m))
            throw Refused{m_stored ? "the running max is read after it is stored"
                                   : "the running max is stored or read outside a row loop"};
        return IRMutator::visit(op);
    }

    Stmt visit(const LetStmt *op) override {
        bound.insert(op->name);
        return IRMutator::visit(op);
    }

    Stmt visit(const Allocate *op) override {
        Stmt body = mutate(op->body);
        if (targets.count(op->name)) {
            allocations[op->name] = Stmt(op);
            return body;
        }
        return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition, body,
                              op->new_expr, op->free_function);
    }

    Stmt visit(const Free *op) override {
        return targets.count(op->name) ? Evaluate::make(0) : IRMutator::visit(op);
    }
};

/** The block max `b`'s allocation in a block loop, rewritten (the steps of RunningMax.h). */
Stmt carried(const Allocate *alloc, const std::string &m, const Allocate *m_alloc) {
    if (!same_shape(alloc, m_alloc))
        throw Refused{"the block max and the running max do not have the same rows"};
    const std::vector<Stmt> parts = flatten(alloc->body);
    const ProducerConsumer *produce = parts.empty() ? nullptr : parts[0].as<ProducerConsumer>();
    if (!produce || !produce->is_producer || produce->name != alloc->name)
        throw Refused{"the block max is not made first in its allocation"};
    // 1. The block max starts from the running max.
    int starts = 0;
    struct Start : IRMutator {
        const std::string &b, &m;
        int *starts;
        Start(const std::string &b, const std::string &m, int *starts)
            : b(b), m(m), starts(starts) {}
        using IRMutator::visit;
        Stmt visit(const Store *op) override {
            if (op->name != b || !is_minus_infinity(op->value))
                return IRMutator::visit(op);
            (*starts)++;
            return Store::make(op->name,
                               Load::make(op->value.type(), m, op->index, Halide::Buffer<>(),
                                          Parameter(), const_true(), ModulusRemainder()),
                               op->index, op->param, op->predicate, op->alignment);
        }
    } start(alloc->name, m, &starts);
    const Stmt made = start.mutate(parts[0]);
    if (starts == 0)
        throw Refused{"the block max does not start from -inf"};
    // 2., 3. What follows, simplified with b >= m; the buffers left constant, replaced.
    Stmt rest = block(std::vector<Stmt>(parts.begin() + 1, parts.end()));
    const std::set<std::string> factors = beside(rest, m);
    AtLeast at_least(alloc->name, m);
    for (int round = 0; round < 3; round++)
        rest = simplify(at_least.mutate(rest));
    rest = remove_no_ops(simplify(Propagate(constant_buffers(rest, factors)).mutate(rest)));
    // 4. The running max's stores, and those that read it, right after the block max.
    TakeOut take(m, alloc->name);
    rest = remove_no_ops(take.mutate(rest));
    if (take.loops.empty())
        throw Refused{"the running max is not stored in the block"};
    if (loaded(rest).count(m))
        throw Refused{"the running max is read after it is stored"};
    std::set<std::string> written = stored(rest), moved = take.targets;
    moved.insert(m);
    moved.insert(alloc->name);
    if (meets(written, moved))
        throw Refused{"the block writes what the running max's stores read or store"};
    Stmt after = block({block(take.loops), rest});
    for (const auto &[name, held] : take.allocations) {
        const Allocate *a = held.as<Allocate>();
        for (const Expr &e : a->extents) {
            for (const std::string &v : variables(e)) {
                if (take.bound.count(v))
                    throw Refused{"the allocation of " + name + " depends on " + v};
            }
        }
        after = Allocate::make(name, a->type, a->memory_type, a->extents, a->condition, after);
    }
    if (take.allocations.size() != take.targets.size())
        throw Refused{"a store of the running max writes a buffer of the kernel"};
    return Allocate::make(alloc->name, alloc->type, alloc->memory_type, alloc->extents,
                          alloc->condition, block({made, after}), alloc->new_expr,
                          alloc->free_function);
}

class Carry : public IRMutator {
public:
    Carry(const std::map<std::string, std::pair<std::string, std::string>> &loops,
          const std::map<std::string, const Allocate *> &allocations)
        : loops(loops), allocations(allocations) {}
    std::vector<std::string> notes;

private:
    using IRMutator::visit;
    // block loop -> (its block max, the running max)
    const std::map<std::string, std::pair<std::string, std::string>> &loops;
    const std::map<std::string, const Allocate *> &allocations;

    Stmt visit(const For *op) override {
        auto it = loops.find(op->name);
        if (it == loops.end())
            return IRMutator::visit(op);
        const auto &[b, m] = it->second;
        try {
            auto m_alloc = allocations.find(m);
            if (m_alloc == allocations.end())
                throw Refused{"the running max " + m + " is not allocated in the kernel"};
            int found = 0;
            struct Rewrite : IRMutator {
                const std::string &b, &m;
                const Allocate *m_alloc;
                int *found;
                Rewrite(const std::string &b, const std::string &m, const Allocate *m_alloc,
                        int *found)
                    : b(b), m(m), m_alloc(m_alloc), found(found) {}
                using IRMutator::visit;
                Stmt visit(const Allocate *op) override {
                    if (op->name != b)
                        return IRMutator::visit(op);
                    (*found)++;
                    return carried(op, m, m_alloc);
                }
            } rewrite(b, m, m_alloc->second, &found);
            const Stmt body = rewrite.mutate(op->body);
            if (found != 1)
                throw Refused{"the block max is not allocated once in the block loop"};
            notes.push_back("running max: the exponentials of " + op->name +
                            "'s blocks are taken against the running max (one rescale per block)");
            return For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
        } catch (const Refused &r) {
            notes.push_back("running max: the exponentials of " + op->name +
                            "'s blocks stay against the block's own max (" + r.why + ")");
            return op;
        }
    }
};

} // namespace

Stmt carry_running_max(const Stmt &s, CompileContext &ctx) {
    std::map<std::string, std::pair<std::string, std::string>> loops;
    for (const auto &[name, d] : ctx.directives) {
        if (!d.running_max.empty())
            loops[d.running_max_loop] = {name, d.running_max};
    }
    if (loops.empty())
        return s;
    std::map<std::string, const Allocate *> allocations;
    struct Find : IRVisitor {
        std::map<std::string, const Allocate *> *allocations;
        using IRVisitor::visit;
        void visit(const Allocate *op) override {
            (*allocations)[op->name] = op;
            IRVisitor::visit(op);
        }
    } find;
    find.allocations = &allocations;
    s.accept(&find);
    Carry carry(loops, allocations);
    const Stmt result = carry.mutate(s);
    ctx.notes.insert(ctx.notes.end(), carry.notes.begin(), carry.notes.end());
    return result;
}

} // namespace tandem::lower
