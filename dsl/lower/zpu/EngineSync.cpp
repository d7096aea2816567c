#include "EngineSync.h"

#include "tandem/AsyncIR.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <set>
#include <tuple>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

enum EngineIndex { kTensor, kVector, kEngines, kDma = kEngines };
const char *const kEngineNames[kEngines] = {"tensor", "vector"};

/** What an op touches in one on-chip buffer: an element hull, or the whole buffer. */
struct Touch {
    std::string buffer;
    Expr lo, hi; // inclusive; undefined: the whole buffer
    bool write = false;
    int carried = 0;        // back-edges crossed with lo and hi shifted to the previous iteration
    std::string carried_by; // the loop whose back-edge it crossed
    std::string from_loop;  // the loop that left it running (an op inside it), once it exited
    std::string first_of; // a loop it was running when it started: live in its first iteration only

    bool same(const Touch &o) const {
        auto eq = [](const Expr &a, const Expr &b) {
            return a.defined() == b.defined() && (!a.defined() || equal(a, b));
        };
        return buffer == o.buffer && write == o.write && carried == o.carried &&
               carried_by == o.carried_by && from_loop == o.from_loop && first_of == o.first_of &&
               eq(lo, o.lo) && eq(hi, o.hi);
    }
};

/** Per engine: the touches of ops it may still be running. */
using Running = std::array<std::vector<Touch>, kEngines>;

void add(std::vector<Touch> &into, const Touch &t) {
    for (const Touch &u : into)
        if (u.same(t))
            return;
    into.push_back(t);
}

Running merge(Running a, const Running &b) {
    for (int e = 0; e < kEngines; e++)
        for (const Touch &t : b[e])
            add(a[e], t);
    return a;
}

bool same(const Running &a, const Running &b) {
    for (int e = 0; e < kEngines; e++) {
        if (a[e].size() != b[e].size())
            return false;
        for (const Touch &t : a[e]) {
            bool found = false;
            for (const Touch &u : b[e])
                found = found || u.same(t);
            if (!found)
                return false;
        }
    }
    return true;
}

/** Does `e` depend on a runtime extent ("A.extent.0"): a size the compiler only bounds? */
bool is_runtime_size(const Expr &e) {
    class Finds : public IRVisitor {
        using IRVisitor::visit;
        void visit(const Variable *v) override {
            found = found || v->name.find(".extent.") != std::string::npos;
        }

    public:
        bool found = false;
    } finds;
    e.accept(&finds);
    return finds.found;
}

/** min(size, c) of a runtime size and a side bounded by a positive constant (a tail tile's extent
 * or pitch) as max(min(size, c), 0): an op runs only where its tile's sizes are positive. */
class NonNegativeSizes : public IRMutator {
    using IRMutator::visit;
    Expr visit(const Min *op) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        Expr m = Min::make(a, b);
        if (!is_runtime_size(m))
            return m;
        for (const Expr &side : {a, b}) {
            Expr bound = find_constant_bound(side, Direction::Upper);
            const int64_t *c = bound.defined() ? as_const_int(bound) : nullptr;
            if (c && *c > 0)
                return Max::make(m, 0);
        }
        return m;
    }
};

/** Is every use of a variable in `e` under a Mod by a constant (no division)? Then `e` is periodic
 * in each variable with period lcm(moduli): collects the variables and the period. */
bool periodic(const Expr &e, bool under_mod, std::set<std::string> &vars, int64_t &period) {
    if (as_const_int(e))
        return true;
    if (const Variable *v = e.as<Variable>()) {
        vars.insert(v->name);
        return under_mod;
    }
    if (const Mod *m = e.as<Mod>()) {
        const int64_t *n = as_const_int(m->b);
        if (!n || *n <= 0 || *n > 64)
            return false;
        period = std::lcm(period, *n);
        return period <= 64 && periodic(m->a, true, vars, period);
    }
    if (const Add *a = e.as<Add>())
        return periodic(a->a, under_mod, vars, period) && periodic(a->b, under_mod, vars, period);
    if (const Sub *a = e.as<Sub>())
        return periodic(a->a, under_mod, vars, period) && periodic(a->b, under_mod, vars, period);
    if (const Mul *a = e.as<Mul>())
        return periodic(a->a, under_mod, vars, period) && periodic(a->b, under_mod, vars, period);
    return false;
}

/** Versions a and b of a ring of n are provably different: constants; (x + i) % n vs (x + j) % n
 * with i - j not a multiple of n; or expressions periodic in their variables (every use under a
 * constant modulus) that differ at every point of one period, e.g. (ko % 2) * 2 vs
 * ((ko + 1) % 2) * 2. */
bool different_versions(const Expr &a, const Expr &b, int64_t n) {
    const int64_t *ca = as_const_int(a), *cb = as_const_int(b);
    if (ca && cb)
        return *ca != *cb;
    const Mod *ma = a.as<Mod>(), *mb = b.as<Mod>();
    if (ma && mb) {
        const int64_t *na = as_const_int(ma->b), *nb = as_const_int(mb->b);
        Expr difference = simplify(ma->a - mb->a);
        const int64_t *d = as_const_int(difference);
        if (na && nb && *na == n && *nb == n && d && *d % n != 0)
            return true;
    }
    std::set<std::string> vars;
    int64_t period = 1;
    if (!periodic(a, false, vars, period) || !periodic(b, false, vars, period) || vars.size() > 2)
        return false;
    std::vector<std::string> names(vars.begin(), vars.end());
    int64_t points = 1;
    for (size_t i = 0; i < names.size(); i++)
        points *= period;
    for (int64_t at = 0; at < points; at++) {
        std::map<std::string, Expr> values;
        int64_t rest = at;
        for (const std::string &v : names) {
            values[v] = Expr(int(rest % period));
            rest /= period;
        }
        Expr ea = simplify(substitute(values, a)), eb = simplify(substitute(values, b));
        const int64_t *x = as_const_int(ea), *y = as_const_int(eb);
        if (!x || !y || *x == *y)
            return false;
    }
    return true;
}

class Sync {
public:
    Sync(const std::vector<SramBuffer> &buffers) {
        for (const SramBuffer &b : buffers)
            sram[b.name] = &b;
    }

    /** Rewrites `s` (when emit) and advances `running` past it. */
    Stmt run(const Stmt &s, Running &running, bool emit) {
        if (const Block *b = s.as<Block>()) {
            Stmt first = run(b->first, running, emit);
            Stmt rest = run(b->rest, running, emit);
            return emit ? Block::make(first, rest) : s;
        }
        if (const For *f = s.as<For>())
            return loop(f, running, emit);
        if (const IfThenElse *i = s.as<IfThenElse>()) {
            // An engine a branch syncs before issuing to it is synced before the branch instead,
            // so that both paths leave it drained (a guarded run-ahead copy in a K loop).
            Stmt hoisted;
            for (int e = 0; e < kEngines; e++) {
                if (running[e].empty() || !syncs_first(i->then_case, running, e) ||
                    (i->else_case.defined() && !syncs_first(i->else_case, running, e)))
                    continue;
                Stmt sync = ir::make_sync(kEngineNames[e]);
                hoisted = hoisted.defined() ? Block::make(hoisted, sync) : sync;
                running[e].clear();
                if (log)
                    log->push_back({true, e});
            }
            Stmt branch = run_if(i, running, emit);
            return emit && hoisted.defined() ? Block::make(hoisted, branch) : branch;
        }
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            Stmt body = run(pc->body, running, emit);
            return emit ? ProducerConsumer::make(pc->name, pc->is_producer, body) : s;
        }
        if (const Allocate *a = s.as<Allocate>()) {
            Stmt body = run(a->body, running, emit);
            return emit ? Allocate::make(a->name, a->type, a->memory_type, a->extents, a->condition,
                                         body, a->new_expr, a->free_function)
                        : s;
        }
        ir::VectorOp v;
        Stmt nest;
        if (ir::as_vector_op(s, &v, &nest)) {
            std::vector<Touch> touches;
            for (const ir::Region &r : v.regions)
                touch(touches, r.buffer, r.lo, {{r.extent, Expr(1)}}, r.write);
            return issue(kVector, touches, s, running);
        }
        if (const LetStmt *l = s.as<LetStmt>()) {
            lets[l->name] = simplify(substitute(lets, l->value));
            Stmt body = run(l->body, running, emit);
            lets.erase(l->name);
            return emit ? LetStmt::make(l->name, l->value, body) : s;
        }
        ir::CopyOp c;
        ir::MmaOp m;
        if (ir::as_copy(s, &c)) {
            std::vector<std::pair<Expr, Expr>> dst, src;
            for (const ir::CopyDim &d : c.dims) {
                dst.push_back({d.extent, d.dst_stride});
                src.push_back({d.extent, d.src_stride});
            }
            std::vector<Touch> touches;
            touch(touches, c.dst, c.dst_offset, dst, true);
            touch(touches, c.src, c.src_offset, src, false);
            return issue(kDma, touches, s, running);
        }
        if (ir::as_mma(s, &m)) {
            std::vector<Touch> touches;
            touch(touches, m.acc, m.acc_offset, {{m.n, m.acc_stride_n}, {m.m, m.acc_stride_m}},
                  true);
            touch(touches, m.a, m.a_offset, {{m.k, m.a_stride_k}, {m.m, m.a_stride_m}}, false);
            touch(touches, m.b, m.b_offset, {{m.n, m.b_stride_n}, {m.k, m.b_stride_k}}, false);
            return issue(kTensor, touches, s, running);
        }
        return s; // waits (DMA tokens), no-ops
    }

    /** A guarded statement: each branch from the state before it, then both states merged. */
    Stmt run_if(const IfThenElse *i, Running &running, bool emit) {
        Running other = running;
        std::string loop;
        if (!i->else_case.defined() && later_iterations(i->condition, &loop)) {
            // Skipped only in the first iteration of `loop`: nothing a previous one left.
            drop(other, [&](const Touch &t) { return t.carried > 0 && t.carried_by == loop; });
        }
        if (!i->else_case.defined() && ran_once(i->condition, &loop)) {
            // Skipped only when `loop` ran no iteration: nothing its ops left.
            drop(other, [&](const Touch &t) { return t.from_loop == loop; });
        }
        Stmt then_case = run(i->then_case, running, emit);
        Stmt else_case = i->else_case.defined() ? run(i->else_case, other, emit) : Stmt();
        running = merge(running, other);
        return emit ? IfThenElse::make(i->condition, then_case, else_case) : Stmt(i);
    }

    /** Does `s`, run from `running`, sync engine `e` before it issues anything to it? */
    bool syncs_first(const Stmt &s, const Running &running, int e) {
        std::vector<std::pair<bool, int>> events, *saved = log;
        log = &events;
        Running probe = running;
        run(s, probe, false);
        log = saved;
        for (const auto &[sync, engine] : events)
            if (engine == e)
                return sync;
        return false;
    }

    /** The syncs the end of the kernel needs. */
    static Stmt drain(const Running &running) {
        Stmt syncs;
        for (int e = 0; e < kEngines; e++) {
            if (running[e].empty())
                continue;
            Stmt sync = ir::make_sync(kEngineNames[e]);
            syncs = syncs.defined() ? Block::make(syncs, sync) : sync;
        }
        return syncs;
    }

private:
    std::map<std::string, const SramBuffer *> sram;
    std::map<std::string, Expr> lets;                 // values in loop variables
    std::map<std::string, Expr> loop_mins;            // loops around the op
    std::map<std::string, Expr> extents;              // loops that exited
    std::vector<std::pair<bool, int>> *log = nullptr; // (sync?, engine) in order, while probing

    template <class P> static void drop(Running &running, P &&p) {
        for (auto &touches : running)
            touches.erase(std::remove_if(touches.begin(), touches.end(), p), touches.end());
    }

    /** Is `condition` "extent > 0" of a loop that exited before it? */
    bool ran_once(const Expr &condition, std::string *loop) const {
        Expr extent;
        if (const GT *g = condition.as<GT>(); g && is_const_zero(g->b))
            extent = g->a;
        if (const LT *l = condition.as<LT>(); l && is_const_zero(l->a))
            extent = l->b;
        if (!extent.defined())
            return false;
        extent = simplify(substitute(lets, extent));
        for (const auto &[name, e] : extents) {
            if (equal(e, extent)) {
                *loop = name;
                return true;
            }
        }
        return false;
    }

    /** Is `condition` "loop > its min" for a loop around it? */
    bool later_iterations(const Expr &condition, std::string *loop) const {
        Expr var, bound;
        if (const GT *g = condition.as<GT>())
            var = g->a, bound = g->b;
        if (const LT *l = condition.as<LT>())
            var = l->b, bound = l->a;
        const Variable *v = var.defined() ? var.as<Variable>() : nullptr;
        if (!v || !loop_mins.count(v->name) || !can_prove(bound == loop_mins.at(v->name)))
            return false;
        *loop = v->name;
        return true;
    }

    /** The hull of offset + sum_d i_d * stride_d, 0 <= i_d < extent_d, if `buffer` is on chip. */
    void touch(std::vector<Touch> &touches, const std::string &buffer, const Expr &offset,
               const std::vector<std::pair<Expr, Expr>> &dims /* extent, stride */, bool write) {
        if (!sram.count(buffer))
            return; // DRAM: compute engines never touch it
        Touch t{buffer, simplify(substitute(lets, offset)), Expr(), write, 0, "", "", ""};
        Expr hi = t.lo;
        for (const auto &[extent, stride] : dims) {
            Expr s = simplify(substitute(lets, stride)), e = simplify(substitute(lets, extent));
            if (!can_prove(s >= 0)) {
                // A pitch known only at run time (min(rest, tile)): an op runs only where its
                // tile's extents and pitches are positive, so the hull takes them as at least 0.
                if (!is_runtime_size(s)) {
                    t.lo = Expr();
                    break;
                }
                s = Max::make(s, 0);
            }
            hi = hi + Max::make(e - 1, 0) * s;
        }
        if (t.lo.defined())
            t.hi = simplify(hi);
        touches.push_back(t);
    }

    bool disjoint(const Touch &a, const Touch &b) const {
        if (!a.lo.defined() || !b.lo.defined())
            return false;
        // Different versions first: remembered per touch, where the hulls' proofs are not.
        const SramBuffer *buffer = sram.at(a.buffer);
        if (buffer->slots > 1) {
            const int64_t size = buffer->slot_elements;
            Expr va = version(a, size), vb = version(b, size);
            if (va.defined() && vb.defined() && different_versions(va, vb, buffer->slots))
                return true;
        }
        return can_prove(a.hi < b.lo) || can_prove(b.hi < a.lo);
    }

    /** The version a touch lies in: lo / size where hi / size is the same, else the terms of lo
     * that are multiples of the version size, v, where the rest of lo provably lies in one version
     * (a runtime tail's hull, min(rest, tile) extents and pitches, is beyond the simplifier's
     * bounds: memory planning sizes each version for the largest tile, so a touch starting in
     * version v stays in it; the models' race detection checks what this assumes). */
    Expr version(const Touch &t, int64_t size) const {
        // The proofs below are costly on a runtime tail's hull, and the same touches are compared
        // many times: remembered per (lo, hi), which the entry keeps alive.
        const auto key = std::make_tuple(t.lo.get(), t.hi.get(), size);
        auto known = versions.find(key);
        if (known != versions.end())
            return known->second.v;
        Expr v = prove_version(t, size);
        versions[key] = {t.lo, t.hi, v};
        return v;
    }

    struct KnownVersion {
        Expr lo, hi, v;
    };
    mutable std::map<std::tuple<const IRNode *, const IRNode *, int64_t>, KnownVersion> versions;

    static Expr prove_version(const Touch &t, int64_t size) {
        Expr v = simplify(t.lo / Expr(int(size)));
        if (equal(v, simplify(t.hi / Expr(int(size)))))
            return v;
        std::vector<Expr> terms = {t.lo};
        Expr versions = 0;
        for (size_t i = 0; i < terms.size(); i++) {
            if (const Add *a = terms[i].as<Add>()) {
                terms.push_back(a->a);
                terms.push_back(a->b);
                continue;
            }
            const Mul *m = terms[i].as<Mul>();
            const int64_t *c = m ? as_const_int(m->b) : nullptr, *k = as_const_int(terms[i]);
            if (c && *c % size == 0)
                versions = versions + m->a * Expr(int(*c / size));
            if (k && *k >= size)
                versions = versions + Expr(int(*k / size)); // whole versions of a constant
        }
        v = simplify(versions);
        const Expr rest = simplify(NonNegativeSizes().mutate(simplify(t.lo - v * Expr(int(size)))));
        if (!can_prove(rest < Expr(int(size))))
            return Expr(); // at or after the version's start by the same argument
        return v;
    }

    bool conflict(const std::vector<Touch> &running, const std::vector<Touch> &touches) const {
        for (const Touch &r : running) {
            for (Touch t : touches) {
                if (r.buffer != t.buffer || !(r.write || t.write))
                    continue;
                auto first = loop_mins.find(r.first_of);
                if (!r.first_of.empty() && first != loop_mins.end() && t.lo.defined()) {
                    // r runs only into the first iteration of that loop: compare there.
                    t.lo = simplify(substitute(r.first_of, first->second, t.lo));
                    t.hi = simplify(substitute(r.first_of, first->second, t.hi));
                }
                if (!disjoint(r, t))
                    return true;
            }
        }
        return false;
    }

    /** An op of `engine` (or a copy issue): syncs of the other engines it conflicts with, then it.
     */
    Stmt issue(int engine, const std::vector<Touch> &touches, const Stmt &s, Running &running) {
        Stmt result = s;
        for (int e = kEngines - 1; e >= 0; e--) {
            if (e == engine || !conflict(running[e], touches))
                continue;
            result = Block::make(ir::make_sync(kEngineNames[e]), result);
            running[e].clear();
            if (log)
                log->push_back({true, e});
        }
        if (engine != kDma) {
            for (const Touch &t : touches)
                add(running[engine], t);
            if (log)
                log->push_back({false, engine});
        }
        return result;
    }

    /** Touches carried around the back-edge of loop `var`: shifted to the previous iteration, or
     * the whole buffer once they were carried before. */
    static Running carry(const Running &running, const std::string &var) {
        Running carried;
        for (int e = 0; e < kEngines; e++) {
            for (Touch t : running[e]) {
                if (t.first_of == var)
                    t.first_of.clear(); // survived an iteration: live in any
                bool uses =
                    t.lo.defined() && (expr_uses_var(t.lo, var) || expr_uses_var(t.hi, var));
                if (uses && t.carried > 0) {
                    t.lo = t.hi = Expr();
                } else if (uses) {
                    Expr previous = Variable::make(Halide::Int(32), var) - 1;
                    t.lo = simplify(substitute(var, previous, t.lo));
                    t.hi = simplify(substitute(var, previous, t.hi));
                    t.carried = 1;
                    t.carried_by = var;
                }
                add(carried[e], t);
            }
        }
        return carried;
    }

    /** Touches left after loop `var`, its last iteration being `last`. */
    static Running leave(const Running &running, const std::string &var, const Expr &last) {
        Running left;
        for (int e = 0; e < kEngines; e++) {
            for (Touch t : running[e]) {
                if (t.first_of == var)
                    t.first_of.clear();
                if (t.lo.defined()) {
                    t.lo = simplify(substitute(var, last, t.lo));
                    t.hi = simplify(substitute(var, last, t.hi));
                }
                add(left[e], t);
            }
        }
        return left;
    }

    Stmt loop(const For *f, Running &running, bool emit) {
        loop_mins[f->name] = simplify(substitute(lets, f->min));
        // The state at the loop head: what ran before it (live into the first iteration only,
        // unless an iteration leaves it running), and what any iteration leaves running.
        Running entry = running;
        for (auto &touches : entry)
            for (Touch &t : touches)
                if (t.first_of.empty())
                    t.first_of = f->name;
        Running head = entry;
        for (;;) {
            Running end = head;
            run(f->body, end, false);
            Running next = merge(head, carry(end, f->name));
            if (same(next, head))
                break;
            head = next;
        }
        Running end = head;
        Stmt body = run(f->body, end, emit);
        loop_mins.erase(f->name);
        Expr last = simplify(substitute(lets, f->min + f->extent - 1));
        Running before = running;
        // A loop that surely runs ends in the state of its last iteration; else it may be skipped.
        bool runs = can_prove(simplify(substitute(lets, f->extent)) > 0);
        running = leave(runs ? end : merge(head, end), f->name, last);
        for (auto &touches : running) {
            for (Touch &t : touches) {
                bool new_here = true;
                for (const Touch &u : before[&touches - &running[0]])
                    new_here = new_here && !u.same(t);
                if (new_here)
                    t.from_loop = f->name;
            }
        }
        extents[f->name] = simplify(substitute(lets, f->extent));
        return emit ? For::make(f->name, f->min, f->extent, f->for_type, f->device_api, body)
                    : Stmt(f);
    }
};

/** Issues the output store of tile t after the next tile's compute: a tile loop whose body ends
 * its steps with the store copy S(t) becomes
 *     for (t) { ...step before S's...; if (t > min) S(t - 1); ...S's step without S... }
 *     if (extent > 0) S(last)
 * so the sync before S(t - 1) finds the vector core done with tile t - 1's epilogue while tile
 * t's MMAs were already issued. The store keeps its barrier version: the wait before the next
 * write of that version still orders it. */
class DeferStores : public IRMutator {
public:
    explicit DeferStores(const std::string &output) : output(output) {}
    int deferred = 0;

private:
    using IRMutator::visit;
    const std::string &output;

    bool is_store(const Stmt &s) const {
        ir::CopyOp c;
        return ir::as_copy(s, &c) && c.dst == output;
    }

    /** The store reachable from `s` through blocks and producer-consumers, removed; or undefined.
     */
    Stmt take_store(const Stmt &s, Stmt *store) const {
        if (is_store(s)) {
            *store = s;
            return Evaluate::make(0);
        }
        if (const Block *b = s.as<Block>()) {
            Stmt first = take_store(b->first, store);
            if (store->defined())
                return Block::make(first, b->rest);
            Stmt rest = take_store(b->rest, store);
            return store->defined() ? Block::make(b->first, rest) : Stmt();
        }
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            Stmt body = take_store(pc->body, store);
            return store->defined() ? ProducerConsumer::make(pc->name, pc->is_producer, body)
                                    : Stmt();
        }
        return Stmt();
    }

    /** Does `store` use only `loop` and variables bound outside `body`? */
    static bool movable(const Stmt &store, const Stmt &body) {
        class Binders : public IRVisitor {
        public:
            std::set<std::string> names;
            using IRVisitor::visit;
            void visit(const LetStmt *op) override {
                names.insert(op->name);
                IRVisitor::visit(op);
            }
            void visit(const For *op) override {
                names.insert(op->name);
                IRVisitor::visit(op);
            }
        } binders;
        body.accept(&binders);
        class Uses : public IRVisitor {
        public:
            const std::set<std::string> &bound;
            bool inner = false;
            explicit Uses(const std::set<std::string> &b) : bound(b) {}
            using IRVisitor::visit;
            void visit(const Variable *op) override { inner = inner || bound.count(op->name); }
        } uses(binders.names);
        store.accept(&uses);
        return !uses.inner;
    }

    /** Does `s` touch `buffer` or wait for one of its versions to be free? */
    static bool uses(const Stmt &s, const std::string &buffer) {
        class Waits : public IRVisitor {
        public:
            const std::string barrier;
            bool found = false;
            explicit Waits(const std::string &b) : barrier(b) {}
            using IRVisitor::visit;
            void visit(const Evaluate *op) override {
                ir::WaitOp w;
                found = found || (ir::as_wait(Stmt(op), &w) && w.barrier == barrier);
            }
        } waits(ir::empty_barrier(buffer));
        s.accept(&waits);
        return waits.found || ir::touches(s, buffer);
    }

    static int stores_in(const Stmt &s, const std::string &output) {
        class Count : public IRVisitor {
        public:
            const std::string &output;
            int n = 0;
            explicit Count(const std::string &o) : output(o) {}
            using IRVisitor::visit;
            void visit(const Evaluate *op) override {
                ir::CopyOp c;
                if (ir::as_copy(Stmt(op), &c) && c.dst == output)
                    n++;
            }
        } count(output);
        s.accept(&count);
        return count.n;
    }

    Stmt visit(const For *op) override {
        Stmt body = mutate(op->body);
        if (stores_in(body, output) != 1)
            return For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
        // The body's steps (its top-level blocks); the step holding the store.
        std::vector<Stmt> steps;
        for (Stmt s = body;;) {
            const Block *b = s.as<Block>();
            if (!b) {
                steps.push_back(s);
                break;
            }
            steps.push_back(b->first);
            s = b->rest;
        }
        for (size_t i = 0; i < steps.size(); i++) {
            Stmt store;
            Stmt without = take_store(steps[i], &store);
            if (!store.defined())
                continue;
            if (!movable(store, body))
                break;
            Expr var = Variable::make(Halide::Int(32), op->name);
            Stmt previous =
                IfThenElse::make(var > op->min, ir::substitute(op->name, var - 1, store));
            // Before the first step that waits for a version of the store's source or writes it:
            // the wait must see the store of the tile before.
            ir::CopyOp c;
            ir::as_copy(store, &c);
            size_t first = 0;
            while (first < i && !uses(steps[first], c.src))
                first++;
            steps[i] = without;
            steps[first] = Block::make(previous, steps[first]);
            Stmt last = ir::substitute(op->name, op->min + op->extent - 1, store);
            if (!is_const(op->extent) || !is_positive_const(op->extent))
                last = IfThenElse::make(op->extent > 0, last);
            deferred++;
            return Block::make(For::make(op->name, op->min, op->extent, op->for_type,
                                         op->device_api, Block::make(steps)),
                               last);
        }
        return For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
    }
};

} // namespace

Stmt sync_engines(const Stmt &s, CompileContext &ctx, const std::vector<SramBuffer> &buffers) {
    Stmt result = s;
    if (ctx.of(ctx.output).async_copy) {
        DeferStores defer(ctx.output);
        result = defer.mutate(result);
        if (defer.deferred) {
            ctx.notes.push_back(
                "engine sync: the store of each tile is issued after the next tile's MMAs, so the "
                "vector core's epilogue runs under them");
        }
    }
    Sync sync(buffers);
    Running running;
    result = sync.run(result, running, true);
    Stmt drain = Sync::drain(running);
    return drain.defined() ? Block::make(result, drain) : result;
}

} // namespace tandem::lower
