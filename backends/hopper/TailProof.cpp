#include "TailProof.h"

#include <algorithm>

namespace tandem::hopper_backend {

using namespace Halide::Internal;
using Halide::Expr;

namespace {

/** A product: a constant coefficient times factors (whatever is not +, -, * or a constant). */
struct Term {
    int64_t coefficient = 1;
    std::vector<Expr> factors;
};

constexpr size_t max_terms = 64;

/** `e` as a sum of products, appended to `out`; false where it grows past max_terms. */
bool expand(const Expr &e, std::vector<Term> *out) {
    if (const IntImm *i = e.as<IntImm>()) {
        out->push_back({i->value, {}});
    } else if (const Add *add = e.as<Add>()) {
        return expand(add->a, out) && expand(add->b, out);
    } else if (const Sub *sub = e.as<Sub>()) {
        std::vector<Term> b;
        if (!expand(sub->a, out) || !expand(sub->b, &b))
            return false;
        for (Term &t : b) {
            t.coefficient = -t.coefficient;
            out->push_back(t);
        }
    } else if (const Mul *mul = e.as<Mul>()) {
        std::vector<Term> a, b;
        if (!expand(mul->a, &a) || !expand(mul->b, &b) || a.size() * b.size() > max_terms)
            return false;
        for (const Term &x : a) {
            for (const Term &y : b) {
                Term t{x.coefficient * y.coefficient, x.factors};
                t.factors.insert(t.factors.end(), y.factors.begin(), y.factors.end());
                out->push_back(t);
            }
        }
    } else {
        out->push_back({1, {e}});
    }
    return out->size() <= max_terms;
}

/** `e` as one product, or false. */
bool single_term(const Expr &e, Term *t) {
    std::vector<Term> terms;
    if (!expand(simplify(e), &terms) || terms.size() != 1 || terms[0].coefficient == 0)
        return false;
    *t = terms[0];
    return true;
}

/** t / by where `by` divides `t` (its coefficient, and each of its factors is one of t's). */
bool divide(const Term &t, const Term &by, Term *quotient) {
    if (t.coefficient % by.coefficient != 0)
        return false;
    std::vector<Expr> rest = t.factors;
    for (const Expr &f : by.factors) {
        auto same = std::find_if(rest.begin(), rest.end(),
                                 [&](const Expr &g) { return graph_equal(f, g); });
        if (same == rest.end())
            return false;
        rest.erase(same);
    }
    *quotient = {t.coefficient / by.coefficient, rest};
    return true;
}

Expr sum(const std::vector<Term> &terms) {
    Expr s = 0;
    for (const Term &t : terms) {
        Expr p = Expr(int(t.coefficient));
        for (const Expr &f : t.factors)
            p = p * f;
        s = s + p;
    }
    return simplify(s);
}

/** `e` holds, given that runtime extents are >= 1. */
bool proves(const Expr &e, const Scope<Interval> &facts) {
    return is_const_one(simplify(e, true, facts));
}

/** lo <= e <= hi by the scope's bounds (hi undefined: no upper bound asked). */
bool within(const Expr &e, const Expr &lo, const Expr &hi, const Scope<Interval> &scope,
            const Scope<Interval> &facts) {
    Interval b = bounds_of_expr_in_scope(e, scope);
    return b.has_lower_bound() && proves(b.min >= lo, facts) &&
           (!hi.defined() || (b.has_upper_bound() && proves(b.max <= hi, facts)));
}

} // namespace

int64_t proven_tail_reach(const Expr &offset, const std::vector<KernelArg::Dim> &view, size_t d,
                          const Expr &extent, const Scope<Interval> &scope,
                          const std::vector<Expr> &edges, const Scope<Interval> &facts) {
    // The clamp: min(a, R), possibly inside max(..., 0).
    Expr clamped = simplify(extent);
    if (const Max *m = clamped.as<Max>()) {
        if (is_const_zero(m->b))
            clamped = m->a;
        else if (is_const_zero(m->a))
            clamped = m->b;
    }
    const Min *clamp = clamped.as<Min>();
    if (!clamp)
        return 0;
    Expr a = clamp->a;
    const IntImm *reach = clamp->b.as<IntImm>();
    if (!reach) {
        a = clamp->b;
        reach = clamp->a.as<IntImm>();
    }
    if (!reach || reach->value <= 0)
        return 0;
    // The offset's terms: outer dims' (multiples of the next stride), this dim's (multiples of its
    // stride: the coordinate times it) and those below (their sum must stay below the stride).
    const bool outermost = d + 1 == view.size();
    Term stride, next;
    std::vector<Term> terms, coordinate, below;
    if (!single_term(view[d].stride, &stride) || !expand(simplify(offset), &terms))
        return 0;
    if (!outermost && (!single_term(view[d + 1].stride, &next) ||
                       !can_prove(view[d + 1].stride == view[d].stride * view[d].extent))) {
        return 0;
    }
    for (const Term &t : terms) {
        Term q;
        if (!outermost && divide(t, next, &q))
            continue;
        if (divide(t, stride, &q))
            coordinate.push_back(q);
        else
            below.push_back(t);
    }
    // Below: at most each lower coordinate's edge - 1 times its stride, which stays under this
    // dim's stride (the edges are within the extents, and the strides dense).
    Expr most_below = 0;
    for (size_t i = 0; i < d; i++)
        most_below = most_below + (edges[i] - 1) * view[i].stride;
    const Expr c = sum(coordinate);
    if (!below.empty() && !within(sum(below), 0, simplify(most_below), scope, facts))
        return 0;
    if (!within(c, 0, outermost ? Expr() : simplify(edges[d] - 1), scope, facts))
        return 0;
    return proves(c + a >= edges[d], facts) ? reach->value : 0;
}

} // namespace tandem::hopper_backend
