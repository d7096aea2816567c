// The happens-before race check shared by the machine models. See Hazards.h.

#include "sim/Hazards.h"

#include "sim/Numerics.h"

#include <numeric>

namespace tandem::sim {

std::string Race::str() const {
    std::string text = "race on buffer '" + buffer + "': " + first + " and " + second;
    if (!reason.empty()) {
        return text + ": " + reason;
    }
    return text +
           " touch the same elements (at least one writes) and neither happens before the other";
}

namespace detail {

ElementSet element_set(const Box &box) {
    ElementSet set;
    int64_t offset = box.offset;
    int64_t span = 0;
    std::array<Dim, 2 * kMaxRank> sorted;
    int count = 0;
    for (const Dim &d : box.dims) {
        if (d.extent <= 0) {
            set.empty = true;
            return set;
        }
        if (d.extent == 1 || d.stride == 0) {
            continue;
        }
        Dim dim = d;
        if (dim.stride < 0) {
            offset += (dim.extent - 1) * dim.stride;
            dim.stride = -dim.stride;
        }
        span += (dim.extent - 1) * dim.stride;
        if (count == int(sorted.size())) {
            set.exact = false;
            continue;
        }
        int at = count++;
        while (at > 0 && sorted[at - 1].stride > dim.stride) {
            sorted[at] = sorted[at - 1];
            --at;
        }
        sorted[at] = dim;
    }
    set.offset = offset;
    set.lo = offset;
    set.hi = offset + span;
    if (!set.exact) {
        return set;
    }
    set.period = 0;
    for (int i = 0; i < count; ++i) {
        set.period = std::gcd(set.period, sorted[i].stride);
    }
    for (int i = 0; i < count; ++i) {
        const Dim &dim = sorted[i];
        if (set.rank > 0) {
            Dim &last = set.dims[set.rank - 1];
            if (dim.stride % last.stride == 0 && dim.stride <= last.extent * last.stride) {
                // {i * s + j * r * s} with r <= extent fills [0, (e - 1) + (e' - 1) * r] * s.
                last.extent = last.extent + (dim.extent - 1) * (dim.stride / last.stride);
                continue;
            }
        }
        if (set.rank == kMaxRank) {
            set.exact = false;
            return set;
        }
        set.dims[set.rank++] = dim;
    }
    return set;
}

namespace {

constexpr int64_t kOverlapSearchBudget = 1 << 16; // search nodes before answering "overlap"

struct OverlapTerm {
    int64_t stride, k_min, k_max;
};

// Is there k with k_min <= k_t <= k_max and sum_{t' <= t} k_t' * stride_t' == rest?
bool solve_overlap(const OverlapTerm *terms, const int64_t *inner_lo, const int64_t *inner_hi,
                   int t, int64_t rest, int64_t &budget) {
    if (t < 0) {
        return rest == 0;
    }
    const OverlapTerm &term = terms[t];
    int64_t k_lo = std::max(term.k_min, ceil_div(rest - inner_hi[t], term.stride));
    int64_t k_hi = std::min(term.k_max, floor_div(rest - inner_lo[t], term.stride));
    if (t == 0) {
        return k_lo <= k_hi;
    }
    for (int64_t k = k_lo; k <= k_hi; ++k) {
        if (--budget < 0) {
            return true; // give up: conservative
        }
        if (solve_overlap(terms, inner_lo, inner_hi, t - 1, rest - k * term.stride, budget)) {
            return true;
        }
    }
    return false;
}

} // namespace

/** Do the element sets share an element? Exact unless the search budget runs out. */
bool overlaps(const ElementSet &a, const ElementSet &b) {
    if (a.empty || b.empty || a.hi < b.lo || b.hi < a.lo) {
        return false;
    }
    if (!a.exact || !b.exact) {
        return true;
    }
    // a.offset + sum i_t s_t == b.offset + sum j_t s_t  <=>  sum (i_t - j_t) s_t == delta, with
    // the strides of both boxes merged (a stride missing from one box has extent 1 there).
    std::array<OverlapTerm, 2 * kMaxRank> terms;
    int n = 0, i = 0, j = 0;
    while (i < a.rank || j < b.rank) {
        if (j == b.rank || (i < a.rank && a.dims[i].stride < b.dims[j].stride)) {
            terms[n++] = {a.dims[i].stride, 0, a.dims[i].extent - 1};
            ++i;
        } else if (i == a.rank || b.dims[j].stride < a.dims[i].stride) {
            terms[n++] = {b.dims[j].stride, -(b.dims[j].extent - 1), 0};
            ++j;
        } else {
            terms[n++] = {a.dims[i].stride, -(b.dims[j].extent - 1), a.dims[i].extent - 1};
            ++i;
            ++j;
        }
    }
    std::array<int64_t, 2 * kMaxRank> inner_lo, inner_hi;
    int64_t lo = 0, hi = 0;
    for (int t = 0; t < n; ++t) {
        inner_lo[t] = lo;
        inner_hi[t] = hi;
        lo += terms[t].k_min * terms[t].stride;
        hi += terms[t].k_max * terms[t].stride;
    }
    int64_t budget = kOverlapSearchBudget;
    return solve_overlap(terms.data(), inner_lo.data(), inner_hi.data(), n - 1, b.offset - a.offset,
                         budget);
}

/** Does `outer` contain every element of `inner`? May answer false when unsure. */
bool covers(const ElementSet &outer, const ElementSet &inner) {
    if (inner.empty) {
        return true;
    }
    if (outer.empty || !outer.exact || !inner.exact) {
        return false;
    }
    if (inner.lo < outer.lo || inner.hi > outer.hi) {
        return false;
    }
    if (outer.rank == 0 || (outer.rank == 1 && outer.dims[0].stride == 1)) {
        return true; // outer is one interval containing inner's hull
    }
    for (int d = 0; d + 1 < outer.rank; ++d) {
        if (outer.dims[d + 1].stride < outer.dims[d].extent * outer.dims[d].stride) {
            return false; // not nested: the digit decomposition below would not be unique
        }
    }
    std::array<int64_t, kMaxRank> digit{};
    int64_t rest = inner.offset - outer.offset;
    for (int d = outer.rank - 1; d >= 0; --d) {
        digit[d] = rest / outer.dims[d].stride;
        if (digit[d] >= outer.dims[d].extent) {
            return false;
        }
        rest -= digit[d] * outer.dims[d].stride;
    }
    if (rest != 0) {
        return false;
    }
    for (int t = 0; t < inner.rank; ++t) {
        const Dim &dim = inner.dims[t];
        int d = outer.rank - 1;
        while (d >= 0 && (outer.dims[d].stride > dim.stride || dim.stride % outer.dims[d].stride)) {
            --d;
        }
        if (d < 0) {
            return false;
        }
        digit[d] += (dim.extent - 1) * (dim.stride / outer.dims[d].stride);
        if (digit[d] >= outer.dims[d].extent) {
            return false;
        }
    }
    return true;
}

} // namespace detail
} // namespace tandem::sim
