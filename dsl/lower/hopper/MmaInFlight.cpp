#include "MmaInFlight.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

bool has_mma(const Stmt &s) {
    class Find : public IRVisitor {
    public:
        bool found = false;
        using IRVisitor::visit;
        void visit(const Evaluate *op) override {
            ir::MmaOp m;
            found = found || ir::as_mma(Stmt(op), &m);
        }
    } find;
    s.accept(&find);
    return find.found;
}

/** One K loop's body rewritten to keep its MMA in flight; ok = false when the body is not the
 * plain wait / MMA / release / advance shape (it is then left as it was). */
class Body {
public:
    Body(const std::string &var) : var(var) {}

    bool ok = true;
    std::string acc;
    std::vector<ir::ArriveOp> releases;     // the releases, slots in the iteration's terms
    std::set<std::string> advanced;         // ring counters the body advances
    Expr previous(const Expr &slot) const { // a slot one iteration back
        return rings_back(substitute(var, int_var(var) - 1, slot));
    }
    Expr rings_back(const Expr &e) const {
        Expr r = e;
        for (const std::string &ring : advanced)
            r = substitute(ring, int_var(ring) - 1, r);
        return r;
    }

    Stmt rewrite(const Stmt &s) {
        if (!ok)
            return s;
        if (const LetStmt *l = s.as<LetStmt>()) {
            lets.emplace_back(l->name, l->value);
            Stmt body = rewrite(l->body);
            lets.pop_back();
            return LetStmt::make(l->name, l->value, body);
        }
        if (const Block *b = s.as<Block>()) {
            Stmt first = rewrite(b->first);
            return Block::make(first, rewrite(b->rest));
        }
        if (has_mma(s))
            return mma(s);
        ir::WaitOp w;
        ir::ArriveOp a;
        std::string counter;
        if (ir::as_wait(s, &w) && acc.empty())
            return s;
        if (ir::as_advance(s, &counter)) {
            ok = ok && advanced.insert(counter).second;
            return s;
        }
        if (ir::as_arrive(s, &a) && !acc.empty() && advanced.empty()) {
            for (auto it = lets.rbegin(); it != lets.rend(); ++it)
                a.slot = substitute(it->first, it->second, a.slot);
            // Holding two versions at once needs a ring of two or more: (ring) % S, S >= 2.
            const Mod *mod = a.slot.as<Mod>();
            ok = ok && mod && is_const(mod->b) && !is_const(mod->b, 1) && is_positive_const(mod->b);
            releases.push_back(a);
            return s; // replaced by finish() once the advanced rings are known
        }
        ok = false;
        return s;
    }

    /** The body's releases moved one iteration back, and the loop's last ones after it. */
    Stmt finish(const Stmt &body, const For *loop) {
        class Defer : public IRMutator {
        public:
            const Body &self;
            const For *loop;
            Defer(const Body &self, const For *loop) : self(self), loop(loop) {}
            using IRMutator::visit;
            Stmt visit(const Evaluate *op) override {
                ir::ArriveOp a;
                if (!ir::as_arrive(Stmt(op), &a))
                    return op;
                const ir::ArriveOp &release = self.releases.at(next++);
                Stmt deferred =
                    ir::make_arrive({release.barrier, simplify(self.previous(release.slot))});
                return IfThenElse::make(int_var(loop->name) > loop->min, deferred);
            }
            size_t next = 0;
        } defer(*this, loop);
        Stmt new_body = defer.mutate(body);
        Stmt after = ir::make_mma_wait(acc, 0);
        const Expr last = loop->min + loop->extent - 1;
        for (const ir::ArriveOp &release : releases) {
            Expr slot = simplify(rings_back(substitute(var, last, release.slot)));
            after = Block::make(after, ir::make_arrive({release.barrier, slot}));
        }
        Stmt result = For::make(loop->name, loop->min, loop->extent, loop->for_type,
                                loop->device_api, new_body);
        if (!is_const(loop->extent) || !is_positive_const(loop->extent))
            after = IfThenElse::make(loop->extent > 0, after);
        return Block::make(result, after);
    }

private:
    const std::string &var;
    std::vector<std::pair<std::string, Expr>> lets;

    Stmt mma(const Stmt &s) {
        // The MMA alone, possibly inside the consume markers of its operands.
        Stmt inner = s;
        while (const ProducerConsumer *pc = inner.as<ProducerConsumer>()) {
            if (pc->is_producer)
                break;
            inner = pc->body;
        }
        ir::MmaOp m;
        if (!acc.empty() || !ir::as_mma(inner, &m)) {
            ok = false;
            return s;
        }
        acc = m.acc;
        return Block::make(s, ir::make_mma_wait(acc, 1));
    }
};

class InFlight : public IRMutator {
    using IRMutator::visit;

    Stmt visit(const For *op) override {
        if (has_mma(op->body)) {
            Body body(op->name);
            Stmt rewritten = body.rewrite(op->body);
            // The slots a release names change with the loop variable and the rings the body
            // advances (once each); lets inside the body are substituted, the rest is invariant.
            if (body.ok && !body.acc.empty() && !body.releases.empty())
                return body.finish(rewritten, op);
        }
        return IRMutator::visit(op);
    }

    Stmt visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (!ir::as_mma(Stmt(op), &m))
            return op;
        return Block::make(op, ir::make_mma_wait(m.acc, 0));
    }
};

} // namespace

Stmt keep_mmas_in_flight(const Stmt &s) {
    return InFlight().mutate(s);
}

} // namespace tandem::lower
