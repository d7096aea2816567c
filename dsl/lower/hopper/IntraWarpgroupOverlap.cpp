#include "IntraWarpgroupOverlap.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** Why a loop stays as it was. */
struct Kept {
    std::string why;
};

/** A statement of the loop body in program order, with the lets around it (Body::lets). */
struct Item {
    Stmt s;
    std::vector<size_t> lets;
};

/** What a statement does to the control stream: syncs, MMAs, copies. */
struct Ops : IRVisitor {
    bool mma = false, sync = false, copy = false;
    ir::MmaOp first;
    using IRVisitor::visit;
    void visit(const Evaluate *op) override {
        const Stmt s(op);
        ir::MmaOp m;
        ir::WaitOp w;
        ir::ArriveOp a;
        ir::CopyOp c;
        Expr bytes;
        std::string name;
        int pending = 0;
        if (ir::as_mma(s, &m)) {
            if (!mma)
                first = m;
            mma = true;
        }
        sync = sync || ir::as_wait(s, &w) || ir::as_arrive(s, &a) || ir::as_advance(s, &name) ||
               ir::as_mma_wait(s, &name, &pending);
        copy = copy || ir::as_copy(s, &c) || ir::as_expect(s, &a, &bytes);
        IRVisitor::visit(op);
    }
};
Ops ops_of(const Stmt &s) {
    Ops o;
    s.accept(&o);
    return o;
}

/** The buffers a statement reads or writes (loads, stores, intrinsics' buffers). */
std::set<std::string> buffers_of(const Stmt &s) {
    struct Names : IRVisitor {
        std::set<std::string> names;
        using IRVisitor::visit;
        void visit(const Load *op) override {
            names.insert(op->name);
            IRVisitor::visit(op);
        }
        void visit(const Store *op) override {
            names.insert(op->name);
            IRVisitor::visit(op);
        }
        void visit(const StringImm *op) override { names.insert(op->value); }
    } n;
    s.accept(&n);
    std::set<std::string> touched;
    for (const std::string &b : n.names) {
        if (ir::touches(s, b))
            touched.insert(b);
    }
    return touched;
}

/** Whether running `a` and `b` in either order gives the same result. */
bool independent(const Stmt &a, const Stmt &b) {
    for (const std::string &name : buffers_of(a)) {
        if ((ir::writes(a, name) && ir::touches(b, name)) || ir::writes(b, name))
            return false;
    }
    return true;
}

class Body {
public:
    std::vector<Item> items;
    std::vector<std::pair<std::string, Expr>> lets;

    explicit Body(const Stmt &s) { walk(s, {}); }

    /** `parts` in order, each inside the lets it uses (bound again where it now stands). */
    Stmt wrap(const std::vector<Item> &parts) const {
        std::vector<Stmt> stmts;
        std::set<size_t> scope;
        for (const Item &i : parts) {
            stmts.push_back(i.s);
            scope.insert(i.lets.begin(), i.lets.end());
        }
        Stmt s = block(stmts);
        for (auto it = scope.rbegin(); it != scope.rend(); ++it) {
            if (stmt_uses_var(s, lets[*it].first))
                s = LetStmt::make(lets[*it].first, lets[*it].second, s);
        }
        return s;
    }

private:
    void walk(const Stmt &s, const std::vector<size_t> &scope) {
        ir::VectorOp v;
        Stmt nest;
        if (const Block *b = s.as<Block>()) {
            walk(b->first, scope);
            walk(b->rest, scope);
        } else if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            walk(pc->body, scope);
        } else if (const LetStmt *l = s.as<LetStmt>(); l && !ir::as_vector_op(s, &v, &nest)) {
            std::vector<size_t> inner = scope;
            inner.push_back(lets.size());
            lets.emplace_back(l->name, l->value);
            walk(l->body, inner);
        } else if (const Evaluate *e = s.as<Evaluate>(); !e || !is_const(e->value)) {
            items.push_back({s, scope});
        }
    }
};

bool is_mma_wait(const Stmt &s, const std::string &acc, int pending) {
    std::string name;
    int n = 0;
    return ir::as_mma_wait(s, &name, &n) && name == acc && n == pending;
}

bool is_release(const Stmt &s) {
    ir::ArriveOp a;
    std::string counter;
    return ir::as_arrive(s, &a) || ir::as_advance(s, &counter);
}

std::vector<Item> range(const std::vector<Item> &items, size_t from, size_t to) {
    return std::vector<Item>(items.begin() + std::ptrdiff_t(from),
                             items.begin() + std::ptrdiff_t(to));
}

Stmt overlapped(const For *loop, std::string *note) {
    Body body(loop->body);
    const std::vector<Item> &items = body.items;
    std::vector<size_t> mmas;
    for (size_t i = 0; i < items.size(); i++) {
        const Ops o = ops_of(items[i].s);
        if (o.copy)
            return Stmt(); // a producer's loop, or one role doing both
        if (o.mma)
            mmas.push_back(i);
    }
    if (mmas.size() != 2)
        return Stmt();
    const std::string kept = "the loop over " + loop->name +
                             " does not overlap its second MMA "
                             "with the next iteration's vector work (";
    try {
        // MMA 1 and its wait and releases.
        const size_t q = mmas[0];
        const std::string q_acc = ops_of(items[q].s).first.acc;
        if (q + 1 >= items.size() || !is_mma_wait(items[q + 1].s, q_acc, 0))
            throw Kept{"the first MMA is not waited for right after it"};
        // (its operands' waits before it)
        size_t q_begin = q;
        ir::WaitOp w;
        while (q_begin > 0 && (ir::as_wait(items[q_begin - 1].s, &w) ||
                               ir::is_fence_proxy_async(items[q_begin - 1].s)))
            q_begin--;
        size_t q_end = q + 2;
        while (q_end < items.size() && is_release(items[q_end].s))
            q_end++;
        // X: its operands' waits (and the fence before it), the MMA, its wait, its releases.
        const size_t x = mmas[1];
        ir::MmaOp m;
        if (!ir::as_mma(items[x].s, &m))
            throw Kept{"the second MMA is inside a loop"};
        size_t x_begin = x;
        while (x_begin > q_end && (ir::as_wait(items[x_begin - 1].s, &w) ||
                                   ir::is_fence_proxy_async(items[x_begin - 1].s)))
            x_begin--;
        if (x + 1 >= items.size() || !is_mma_wait(items[x + 1].s, m.acc, 0))
            throw Kept{"the second MMA is not waited for right after it"};
        size_t x_end = x + 2;
        bool ring = false;
        while (x_end < items.size() && is_release(items[x_end].s)) {
            ir::ArriveOp a;
            if (ir::as_arrive(items[x_end].s, &a)) {
                // Two versions or more: (ring) % S, S >= 2, S a constant.
                Expr slot = a.slot;
                for (auto it = items[x_end].lets.rbegin(); it != items[x_end].lets.rend(); ++it)
                    slot = substitute(body.lets[*it].first, body.lets[*it].second, slot);
                const Mod *mod = simplify(slot).as<Mod>();
                ring = mod && is_const(mod->b) && *as_const_int(mod->b) >= 2;
                if (!ring)
                    throw Kept{"the second MMA's operand " + a.barrier +
                               " has fewer than two versions"};
            }
            x_end++;
        }
        if (!ring)
            throw Kept{"the second MMA reads no ring of versions"};
        const std::set<std::string> x_buffers = {m.acc, m.a, m.b};
        auto touches_x = [&](const Stmt &s) {
            for (const std::string &b : x_buffers) {
                if (b == m.acc ? ir::touches(s, b) : ir::writes(s, b))
                    return true;
            }
            return false;
        };
        // Before MMA 1, MMA 1 itself and after X: neither syncs nor X's buffers.
        for (size_t i = 0; i < items.size(); i++) {
            if ((i >= q_begin && i < q_end && i != q) || (i >= x_begin && i < x_end))
                continue;
            if (i != q && ops_of(items[i].s).sync)
                throw Kept{"it syncs besides its MMAs' operands"};
            if ((i <= q || i >= x_end) && touches_x(items[i].s))
                throw Kept{"a statement before the first MMA or after the second touches " + m.acc +
                           ", " + m.a + " or " + m.b};
        }
        // A let that reads a ring counter is bound again where the statements using it now
        // stand: only statements of one MMA's part use it (each part keeps its order, its
        // counter advanced last, and what comes between advances no counter).
        std::set<std::string> counters;
        for (const Item &i : items) {
            std::string c;
            if (ir::as_advance(i.s, &c))
                counters.insert(c);
        }
        auto part = [&](size_t i) {
            return i >= q_begin && i < q_end ? 1 : i >= x_begin && i < x_end ? 2 : 0;
        };
        std::map<size_t, int> used_in;
        for (size_t i = 0; i < items.size(); i++) {
            for (size_t l : items[i].lets) {
                const auto &[name, value] = body.lets[l];
                const bool counted =
                    std::any_of(counters.begin(), counters.end(),
                                [&](const std::string &c) { return expr_uses_var(value, c); });
                if (!counted || !stmt_uses_var(items[i].s, name))
                    continue;
                if (part(i) == 0 || used_in.emplace(l, part(i)).first->second != part(i))
                    throw Kept{"the let " + name + " reads a ring counter outside an MMA's part"};
            }
        }
        // Early and Late.
        std::vector<Item> early, late;
        for (size_t i = q_end; i < x_begin; i++) {
            bool after = touches_x(items[i].s);
            for (const Item &l : late)
                after = after || !independent(l.s, items[i].s);
            (after ? late : early).push_back(items[i]);
        }
        if (early.empty())
            throw Kept{"no vector work between the MMAs is independent of the second"};

        const Expr c = Variable::make(Halide::Int(32), loop->name);
        auto at = [&](const Stmt &s, const Expr &value) {
            return ir::substitute(loop->name, value, s);
        };
        const std::vector<Item> x_issue = range(items, x_begin, x + 1),
                                x_finish = range(items, x + 1, x_end);
        std::vector<Item> without_x = range(items, 0, x_begin);
        for (size_t i = x_end; i < items.size(); i++)
            without_x.push_back(items[i]);
        std::vector<Item> first = range(items, 0, q + 1);
        std::vector<Item> late_and_after = late;
        for (size_t i = x_end; i < items.size(); i++)
            late_and_after.push_back(items[i]);
        const Stmt steady =
            block({body.wrap(first), at(body.wrap(x_issue), c - 1), ir::make_mma_wait(q_acc, 1),
                   body.wrap(range(items, q + 2, q_end)), body.wrap(early),
                   at(body.wrap(x_finish), c - 1), body.wrap(late_and_after)});
        std::vector<Item> whole_x = x_issue;
        whole_x.insert(whole_x.end(), x_finish.begin(), x_finish.end());
        const Expr last = simplify(loop->min + loop->extent - 1);
        Stmt result =
            block({at(body.wrap(without_x), loop->min),
                   For::make(loop->name, simplify(loop->min + 1), simplify(loop->extent - 1),
                             loop->for_type, loop->device_api, steady),
                   at(body.wrap(whole_x), last)});
        if (!is_positive_const(simplify(loop->extent)))
            result = IfThenElse::make(loop->extent > 0, result);
        *note = "overlap: the loop over " + loop->name + " issues its MMA into " + m.acc +
                " one iteration late, after the next iteration's MMA into " + q_acc +
                ", and waits for it after the " + std::to_string(early.size()) +
                " vector statement(s) that do not touch it (FlashAttention-3's intra-warpgroup "
                "overlap)";
        return result;
    } catch (const Kept &k) {
        *note = kept + k.why + ")";
        return Stmt();
    }
}

class Overlap : public IRMutator {
public:
    std::vector<std::string> notes;

private:
    using IRMutator::visit;
    Stmt visit(const For *op) override {
        std::string note;
        Stmt s = overlapped(op, &note);
        if (!note.empty())
            notes.push_back(note);
        return s.defined() ? s : IRMutator::visit(op);
    }
};

} // namespace

Stmt overlap_within_warpgroup(const Stmt &s, CompileContext &ctx) {
    Overlap overlap;
    Stmt result = overlap.mutate(s);
    // Each consumer role has its copy of the loop: one note for each.
    std::set<std::string> seen;
    for (const std::string &n : overlap.notes) {
        if (seen.insert(n).second)
            ctx.notes.push_back(n);
    }
    return result;
}

} // namespace tandem::lower
