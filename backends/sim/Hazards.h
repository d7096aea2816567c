#ifndef TANDEM_SIM_HAZARDS_H
#define TANDEM_SIM_HAZARDS_H

/** \file
 * Internal to the machine models (Zpu.cpp, Hopper*.cpp, Ascend*.cpp): the happens-before race
 * check.
 *
 * - ElementSet: the elements of a Box, normalised, with exact overlap (an integer search with a
 *   budget after which it answers "overlap", which is conservative) and covering (exact for
 *   boxes of nested strides, conservative "not covered" otherwise).
 * - VectorClocks: one clock per agent (a control stream, a DMA channel, a warpgroup, a TMA
 *   lane...). An access records its agent and that agent's own epoch; a later access is ordered
 *   after it when the later agent's clock has reached that epoch.
 * - BufferHistory: the accesses of one buffer, reads and writes kept apart, in size classes sorted
 * by hull. check_access reports every earlier conflicting access that is not ordered before a new
 * one, and prunes an earlier access that is ordered before a new access covering its elements (a
 *   write, or a read when both read): a race against it is still found against the new one.
 * - RaceLog: races once per (first op, second op, key), the first kMaxStoredRaces kept.
 * - cross_run_races: conflicting accesses of different runs (ZPU cores, Hopper CTAs) to one
 *   buffer, which never synchronise with each other.
 *
 * Ops are 64-bit names each model packs itself (kind, engine, core or CTA, label).
 */

#include "sim/Common.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tandem::sim::detail {

constexpr int kMaxRank = 8; // dims kept after normalising a box
constexpr size_t kMaxStoredRaces = 100;

/** The set of elements of a box, normalised: strides positive and strictly increasing, extents
 * > 1, progressions that fill an interval of the inner stride merged. Enumeration order is
 * forgotten; only the set matters here. */
struct ElementSet {
    int64_t offset = 0;
    int64_t lo = 0, hi = -1; // hull, inclusive
    int rank = 0;
    bool empty = false;
    bool exact = true; // false: too many dims, only the hull is known
    // Every element is congruent to offset modulo the period: the gcd of the strides, 0 for one
    // element, 1 when unknown (not exact).
    int64_t period = 1;
    std::array<Dim, kMaxRank> dims;
};

ElementSet element_set(const Box &box);
/** Do the element sets share an element? Exact unless the search budget runs out. */
bool overlaps(const ElementSet &a, const ElementSet &b);
/** Does `outer` contain every element of `inner`? May answer false when unsure. */
bool covers(const ElementSet &outer, const ElementSet &inner);

/** One access of one op to one buffer, as kept in a history. */
struct AccessRecord {
    ElementSet elements;
    int agent;     // whose clock orders it
    int64_t epoch; // the agent's own clock entry when it made the access
    uint64_t op;   // the model's packed op name
    bool write;
    uint8_t proxy = 0; // the model's memory proxy (Hopper: generic or async); 0 in the ZPU
};

/** Records of one kind (reads or writes) in groups of one hull bit width and one period, each
 * ordered by (offset modulo the period, hull start). A check visits in each group only the
 * records whose hull can meet the new access (starts in [lo - longest hull of the group, hi]) and
 * whose residue can: two sets of periods p and q meet only if their offsets agree modulo
 * gcd(p, q). One long hull (a whole-row read) does not widen the window of the short ones, and the
 * columns of a matrix (one residue each) are not visited by the accesses of other columns. */
struct RecordList {
    using Key = std::pair<int64_t, int64_t>; // (offset modulo the period, hull start)
    struct Group {
        int width;           // bit width of (hi - lo) of its records
        int64_t period;      // their period
        int64_t longest = 0; // longest hull (hi - lo) ever inserted into it
        std::multimap<Key, AccessRecord> records;
    };
    std::vector<Group> groups; // few in practice

    static int64_t residue(int64_t offset, int64_t period) {
        return period == 0 ? 0 : ((offset % period) + period) % period;
    }

    bool empty() const {
        return std::all_of(groups.begin(), groups.end(),
                           [](const Group &g) { return g.records.empty(); });
    }
    void insert(const AccessRecord &record) {
        const ElementSet &e = record.elements;
        int64_t length = e.hi - e.lo;
        int width = length <= 0 ? 0 : 64 - __builtin_clzll(uint64_t(length));
        auto it = std::find_if(groups.begin(), groups.end(), [&](const Group &g) {
            return g.width == width && g.period == e.period;
        });
        if (it == groups.end()) {
            it = groups.insert(groups.end(), Group{width, e.period, 0, {}});
        }
        it->longest = std::max(it->longest, length);
        it->records.emplace(Key{residue(e.offset, e.period), e.lo}, record);
    }
    /** Calls visit(group, iterator), which returns the next iterator (it may erase), for every
     * record whose hull and residue can meet `e`. */
    template <class Visit> void for_each_candidate(const ElementSet &e, Visit &&visit) {
        for (Group &g : groups) {
            // Residues of the group that can meet e: congruent to e's offset modulo `step` (a
            // group of single elements keeps them all under residue 0).
            int64_t step = g.period == 0 ? 0 : std::gcd(e.period, g.period);
            int64_t first = step == 0 ? 0 : residue(e.offset, step);
            int64_t r = first;
            while (r < std::max<int64_t>(g.period, 1)) {
                auto it = g.records.lower_bound(Key{r, e.lo - g.longest});
                if (it == g.records.end()) {
                    break;
                }
                if (it->first.first != r) { // no record of residue r: jump to the next present
                    int64_t next = it->first.first;
                    r = next + residue(first - next, step);
                    continue;
                }
                while (it != g.records.end() && it->first.first == r && it->first.second <= e.hi) {
                    it = visit(g, it);
                }
                if (step == 0) {
                    break;
                }
                r += step;
            }
        }
    }
    template <class F> void for_each(F &&f) const {
        for (const Group &g : groups) {
            for (const auto &entry : g.records) {
                f(entry.second);
            }
        }
    }
};

struct BufferHistory {
    RecordList reads, writes;
    bool empty() const { return reads.empty() && writes.empty(); }
};

/** Vector clocks of a fixed set of agents; every agent starts in its own first epoch. */
class VectorClocks {
public:
    void reset(int agents) {
        agents_ = agents;
        clocks_.assign(size_t(agents) * size_t(agents), 0);
        for (int a = 0; a < agents; ++a) {
            clock(a)[a] = 1;
        }
    }
    int agents() const { return agents_; }
    int64_t *clock(int agent) { return clocks_.data() + size_t(agent) * size_t(agents_); }
    const int64_t *clock(int agent) const {
        return clocks_.data() + size_t(agent) * size_t(agents_);
    }
    int64_t epoch(int agent) const { return clock(agent)[agent]; }
    /** The agent's later accesses are no longer ordered by what it released so far. */
    void tick(int agent) { ++clock(agent)[agent]; }
    void join(int into, const int64_t *from) {
        int64_t *c = clock(into);
        for (int a = 0; a < agents_; ++a) {
            c[a] = std::max(c[a], from[a]);
        }
    }
    /** Joins a clock into a free-standing one (a barrier phase, a group), sized on first use. */
    void join_into(std::vector<int64_t> &into, const int64_t *from) const {
        into.resize(size_t(agents_), 0);
        for (int a = 0; a < agents_; ++a) {
            into[size_t(a)] = std::max(into[size_t(a)], from[a]);
        }
    }
    std::vector<int64_t> copy(int agent) const {
        return std::vector<int64_t>(clock(agent), clock(agent) + agents_);
    }

private:
    int agents_ = 0;
    std::vector<int64_t> clocks_; // agents x agents; row a is agent a's clock
};

/** Checks `access` against a buffer's history, then records it. ordered(earlier) says whether an
 * earlier access happens before it (transitively: the pruning relies on it). Conflicts are writes,
 * and reads when the access writes.
 * on_race(earlier): a conflicting earlier access sharing elements and not ordered before it.
 * on_ordered(earlier): a conflicting earlier access ordered before it whose hull meets its own
 * (the model may check more, e.g. a proxy fence; the elements may still be disjoint). */
template <class Ordered, class OnRace, class OnOrdered>
void check_access_ordered(BufferHistory &history, const AccessRecord &access, Ordered &&ordered,
                          OnRace &&on_race, OnOrdered &&on_ordered) {
    const ElementSet &elements = access.elements;
    auto check = [&](RecordList &list, bool prune) {
        list.for_each_candidate(elements, [&](RecordList::Group &group, auto it) {
            const AccessRecord &earlier = it->second;
            if (earlier.elements.hi >= elements.lo) {
                bool before = ordered(earlier);
                bool conflict = access.write || earlier.write;
                if (conflict && !before && overlaps(earlier.elements, elements)) {
                    on_race(earlier);
                }
                if (conflict && before) {
                    on_ordered(earlier);
                }
                if (prune && before && covers(elements, earlier.elements)) {
                    return group.records.erase(it);
                }
            }
            return std::next(it);
        });
    };
    check(history.writes, access.write);
    check(history.reads, true);
    (access.write ? history.writes : history.reads).insert(access);
}

/** check_access_ordered with vector clocks: `clock` is the clock of the agent making the access. */
template <class OnRace, class OnOrdered>
void check_access(BufferHistory &history, const AccessRecord &access, const int64_t *clock,
                  OnRace &&on_race, OnOrdered &&on_ordered) {
    check_access_ordered(
        history, access,
        [clock](const AccessRecord &earlier) { return earlier.epoch <= clock[earlier.agent]; },
        on_race, on_ordered);
}

/** Races found so far, each once per (first op, second op, key). */
class RaceLog {
public:
    /** `make()` builds the Race; called only when the race is new and there is room for it. */
    template <class Make> void add(uint64_t first, uint64_t second, int64_t key, Make &&make) {
        if (!keys_.emplace(first, second, key).second) {
            return;
        }
        if (races_.size() < kMaxStoredRaces) {
            races_.push_back(make());
        }
    }
    const std::vector<Race> &races() const { return races_; }
    int64_t count() const { return int64_t(keys_.size()); }
    /** Puts the races and the deadlock (if any) of a run into its report. */
    void report(Report &r, bool deadlock, const std::string &deadlock_message) const {
        r.races = races_;
        r.race_count = count();
        r.deadlock = deadlock;
        r.deadlock_message = deadlock_message;
    }

private:
    std::set<std::tuple<uint64_t, uint64_t, int64_t>> keys_;
    std::vector<Race> races_;
};

/** One run's history of a buffer shared by several runs. */
struct RunHistory {
    int run; // core or CTA
    const BufferHistory *history;
};

/** Conflicting accesses of different runs to one buffer that share elements: on_race(first,
 * second), first from the lower run. Nothing is reported when fewer than two runs touched it. */
template <class OnRace>
void cross_run_races(const std::vector<RunHistory> &runs, OnRace &&on_race) {
    struct Item {
        const AccessRecord *record;
        int run;
    };
    std::vector<Item> items;
    int runs_touching = 0;
    for (const RunHistory &run : runs) {
        const BufferHistory &h = *run.history;
        runs_touching += !h.reads.empty() || !h.writes.empty();
        for (const RecordList *list : {&h.reads, &h.writes}) {
            list->for_each([&](const AccessRecord &record) {
                items.push_back({&record, run.run});
            });
        }
    }
    if (runs_touching < 2) {
        return;
    }
    std::sort(items.begin(), items.end(), [](const Item &x, const Item &y) {
        return std::tie(x.record->elements.lo, x.run) < std::tie(y.record->elements.lo, y.run);
    });
    std::vector<Item> active; // hulls reaching the current lo
    for (const Item &item : items) {
        const ElementSet &elements = item.record->elements;
        for (size_t i = 0; i < active.size();) {
            if (active[i].record->elements.hi < elements.lo) {
                active[i] = active.back();
                active.pop_back();
            } else {
                ++i;
            }
        }
        for (const Item &other : active) {
            if (other.run == item.run || !(other.record->write || item.record->write) ||
                !overlaps(other.record->elements, elements)) {
                continue;
            }
            const Item &first = other.run < item.run ? other : item;
            const Item &second = other.run < item.run ? item : other;
            on_race(*first.record, *second.record);
        }
        active.push_back(item);
    }
}

} // namespace tandem::sim::detail

#endif
