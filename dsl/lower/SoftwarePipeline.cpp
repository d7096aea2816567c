#include "SoftwarePipeline.h"

#include <functional>

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <map>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

struct Pipelined {
    std::string func;
    int versions = 1;
};

struct Plan {
    const For *root = nullptr;
    const For *loop = nullptr;
    std::vector<Loop> chain; // root ... loop
    std::vector<Pipelined> funcs;
    bool one_trip = false; // a tile loop of a CTA per tile: nothing to run ahead to
};

/** async_copy producers directly in a loop body (not inside a nested loop). */
class DirectProducers : public IRVisitor {
public:
    explicit DirectProducers(const CompileContext &ctx) : ctx(ctx) {}
    std::vector<std::string> funcs;

private:
    using IRVisitor::visit;
    const CompileContext &ctx;
    void visit(const For *op) override {}
    void visit(const ProducerConsumer *op) override {
        if (op->is_producer && ctx.of(op->name).async_copy)
            funcs.push_back(op->name);
        IRVisitor::visit(op);
    }
};

/** Does `s` touch `buffer` outside the subtree `skip`? */
class TouchesOutside : public IRVisitor {
public:
    TouchesOutside(const std::string &b, const For *skip) : buffer(b), skip(skip) {}
    bool found = false;

private:
    using IRVisitor::visit;
    const std::string &buffer;
    const For *skip;
    void visit(const For *op) override {
        if (op != skip)
            IRVisitor::visit(op);
    }
    void visit(const Evaluate *op) override {
        if (ir::touches(op, buffer))
            found = true;
    }
    void visit(const Load *op) override {
        if (op->name == buffer)
            found = true;
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        if (op->name == buffer)
            found = true;
        IRVisitor::visit(op);
    }
};

class ProducedInLoop : public IRVisitor {
public:
    explicit ProducedInLoop(const std::string &f) : func(f) {}
    bool found = false;

private:
    using IRVisitor::visit;
    const std::string &func;
    int depth = 0;
    void visit(const For *op) override {
        depth++;
        IRVisitor::visit(op);
        depth--;
    }
    void visit(const ProducerConsumer *op) override {
        if (op->is_producer && op->name == func && depth > 0)
            found = true;
        IRVisitor::visit(op);
    }
};

bool produced_in_inner_loop(const For *loop, const std::string &func) {
    ProducedInLoop p(func);
    loop->body.accept(&p);
    return p.found;
}

class FindPlans : public IRVisitor {
public:
    FindPlans(bool run_ahead, CompileContext &ctx) : run_ahead(run_ahead), ctx(ctx) {}
    std::vector<Plan> plans;

private:
    using IRVisitor::visit;
    bool run_ahead;
    CompileContext &ctx;
    std::vector<const For *> stack;
    std::vector<size_t> guards; // the depth of `stack` at each enclosing IfThenElse
    std::vector<std::string> synchronous;

    void visit(const IfThenElse *op) override {
        guards.push_back(stack.size());
        IRVisitor::visit(op);
        guards.pop_back();
    }

    void visit(const For *op) override {
        stack.push_back(op);
        DirectProducers p(ctx);
        op->body.accept(&p);
        std::vector<std::string> funcs;
        for (const std::string &f : p.funcs) {
            // A Func also copied in an inner loop (Halide's partitioned tail leaves a straight-line
            // copy next to the pipelined loop), or copied twice in one iteration (a loop of two
            // partitioned iterations), stays synchronous here: one buffer, one pipeline.
            if (std::count(p.funcs.begin(), p.funcs.end(), f) > 1) {
                if (std::count(funcs.begin(), funcs.end(), f) == 0 &&
                    std::find(synchronous.begin(), synchronous.end(), f) == synchronous.end()) {
                    synchronous.push_back(f);
                    ctx.notes.push_back(
                        "software pipeline: " + f + " is copied more than once per iteration of " +
                        op->name + " (partitioned by Halide), so it is copied synchronously there");
                }
            } else if (produced_in_inner_loop(op, f)) {
                ctx.notes.push_back("software pipeline: " + f + " is copied synchronously in " +
                                    op->name + " (it is pipelined in an inner loop)");
            } else {
                funcs.push_back(f);
            }
        }
        synchronous.clear();
        if (!funcs.empty())
            plan(op, funcs);
        IRVisitor::visit(op);
        stack.pop_back();
    }

    void plan(const For *loop, const std::vector<std::string> &funcs) {
        Plan plan;
        plan.loop = loop;
        for (const std::string &f : funcs)
            plan.funcs.push_back({f, std::max(1, ctx.of(f).multi_buffer)});
        size_t root = stack.size() - 1;
        if (run_ahead) {
            for (size_t i = 0; i < stack.size(); i++) {
                if (is_core_loop(stack[i]->name)) {
                    root = i;
                    break;
                }
            }
        }
        if (root + 1 < stack.size() && !can_flatten(root, plan))
            root = stack.size() - 1;
        plan.root = stack[root];
        for (size_t i = root; i < stack.size(); i++) {
            plan.chain.push_back({stack[i]->name, stack[i]->min, stack[i]->extent});
        }
        plan.one_trip = ctx.one_tile_per_unit && plan.chain.size() == 1 && is_core_loop(loop->name);
        std::string what;
        for (const Pipelined &f : plan.funcs)
            what += f.func + " (" + std::to_string(f.versions) + " versions) ";
        ctx.notes.push_back(
            "software pipeline: " + what + "over " +
            (plan.chain.size() > 1 ? "the flattened nest " + plan.root->name + " .. " : "loop ") +
            loop->name);
        plans.push_back(plan);
    }

    bool can_flatten(size_t root, const Plan &plan) {
        for (size_t depth : guards) {
            if (depth > root) {
                // A guarded tile (e.g. the grouped tile order's padding) may not run: a copy run
                // ahead into it would read outside the tensor, and its ring steps would not match.
                ctx.notes.push_back("warp_specialize: a guard inside " + stack[root]->name +
                                    " skips some of its "
                                    "iterations; the producer runs ahead inside " +
                                    stack.back()->name + " only");
                return false;
            }
        }
        for (size_t i = root; i < stack.size(); i++) {
            for (size_t j = root; j < stack.size(); j++) {
                if (expr_uses_var(stack[i]->extent, stack[j]->name) ||
                    expr_uses_var(stack[i]->min, stack[j]->name)) {
                    ctx.notes.push_back("warp_specialize: the extent of " + stack[i]->name +
                                        " depends on " + stack[j]->name +
                                        "; the producer runs ahead inside " + stack.back()->name +
                                        " only");
                    return false;
                }
            }
        }
        for (const Pipelined &f : plan.funcs) {
            TouchesOutside t(f.func, plan.loop);
            stack[root]->body.accept(&t);
            if (t.found) {
                ctx.notes.push_back("warp_specialize: " + f.func + " is also used outside " +
                                    plan.loop->name +
                                    " (a partitioned tail?); the producer runs ahead inside " +
                                    plan.loop->name + " only");
                return false;
            }
        }
        return true;
    }
};

/** Removes `produce F { copy; wait }` of the pipelined Funcs, keeping the copies. */
class TakeCopies : public IRMutator {
public:
    explicit TakeCopies(const Plan &plan) : plan(plan) {}
    std::map<std::string, Stmt> copies;

private:
    using IRMutator::visit;
    const Plan &plan;
    Stmt visit(const For *op) override { return op; }
    Stmt visit(const ProducerConsumer *op) override {
        if (!op->is_producer)
            return IRMutator::visit(op);
        for (const Pipelined &f : plan.funcs) {
            if (f.func != op->name)
                continue;
            const Block *b = op->body.as<Block>();
            ir::CopyOp c;
            internal_assert(b && ir::as_copy(b->first, &c))
                << "producer of " << op->name << " is not a copy\n";
            copies[f.func] = b->first;
            return Evaluate::make(0);
        }
        return IRMutator::visit(op);
    }
};

class Pipeline : public IRMutator {
public:
    Pipeline(const std::vector<Plan> &plans, bool copies_before_compute)
        : plans(plans), copies_before_compute(copies_before_compute) {}

private:
    using IRMutator::visit;
    const std::vector<Plan> &plans;
    bool copies_before_compute;

    static Expr total(const Plan &p) {
        Expr t = 1;
        for (const Loop &l : p.chain)
            t = t * l.extent;
        return simplify(t);
    }

    /** The copy of F for flattened iteration g. */
    static Stmt copy_at(const Plan &p, const Pipelined &f, const Stmt &copy, const Expr &g) {
        Stmt s = copy;
        Expr stride = 1;
        for (auto l = p.chain.rbegin(); l != p.chain.rend(); ++l) {
            Expr v = l->min + (l == p.chain.rend() - 1 ? g / stride : (g / stride) % l->extent);
            s = substitute(l->name, v, s);
            stride = stride * l->extent;
        }
        s = substitute(ir::stage_var(f.func), g % f.versions, s);
        return simplify(s);
    }

    static Expr flat_index(const Plan &p) {
        Expr f = 0, stride = 1;
        for (auto l = p.chain.rbegin(); l != p.chain.rend(); ++l) {
            f = f + (int_var(l->name) - l->min) * stride;
            stride = stride * l->extent;
        }
        return simplify(f);
    }

    Stmt prologue(const Plan &p, const std::map<std::string, Stmt> &copies) {
        int most = 1;
        for (const Pipelined &f : p.funcs)
            most = std::max(most, f.versions);
        if (most == 1)
            return Stmt();
        std::string name = p.loop->name + ".prologue";
        Stmt body;
        for (const Pipelined &f : p.funcs) {
            if (f.versions == 1)
                continue;
            Stmt c = copy_at(p, f, copies.at(f.func), int_var(name));
            if (f.versions < most)
                c = IfThenElse::make(int_var(name) < f.versions - 1, c);
            body = body.defined() ? Block::make(body, c) : c;
        }
        Expr count = simplify(Halide::min(most - 1, total(p)));
        return For::make(name, 0, count, ForType::Serial, Halide::DeviceAPI::None, body);
    }

    Stmt steady_state(const Plan &p, const Stmt &body_in,
                      const std::map<std::string, Stmt> &copies) {
        std::string f_name = p.loop->name + ".iteration";
        Expr f = int_var(f_name);
        Stmt body = body_in;
        Stmt ahead, current; // copies for a later iteration; for this one (a single version)
        for (const Pipelined &pf : p.funcs) {
            body = insert_before_first_access(
                body, pf.func, false,
                ir::make_wait({ir::full_barrier(pf.func), int_var(ir::stage_var(pf.func))}));
            body = substitute(ir::stage_var(pf.func), f % pf.versions, body);
            if (p.one_trip && pf.versions > 1)
                continue; // the prologue copied the only iteration's
            Expr g = f + (pf.versions - 1);
            Stmt c = copy_at(p, pf, copies.at(pf.func), g);
            if (pf.versions > 1)
                c = IfThenElse::make(g < total(p), c);
            Stmt &into = pf.versions > 1 ? ahead : current;
            into = into.defined() ? Block::make(into, c) : c;
        }
        if (ahead.defined())
            body = copies_before_compute ? before_first_compute(body, ahead)
                                         : Block::make(ahead, body);
        if (current.defined())
            body = Block::make(current, body);
        return LetStmt::make(f_name, flat_index(p), body);
    }

    static bool is_compute(const Stmt &s) {
        ir::MmaOp m;
        ir::VectorOp v;
        Stmt nest;
        return ir::as_mma(s, &m) || ir::as_vector_op(s, &v, &nest);
    }

    static bool holds_compute(const Stmt &s) {
        class Find : public IRVisitor {
        public:
            bool found = false;
            using IRVisitor::visit;
            void visit(const Evaluate *op) override { found = found || is_compute(Stmt(op)); }
            void visit(const LetStmt *op) override {
                if (is_compute(Stmt(op)))
                    found = true;
                else
                    IRVisitor::visit(op);
            }
        } find;
        s.accept(&find);
        return find.found;
    }

    /** `ahead` right before the first compute op of `body` (or the statement holding it), after
     * the iteration's waits and hops; at the start when the body computes nothing. */
    static Stmt before_first_compute(const Stmt &body, const Stmt &ahead) {
        bool placed = false;
        std::function<Stmt(const Stmt &)> place = [&](const Stmt &s) -> Stmt {
            if (placed)
                return s;
            if (const Block *b = s.as<Block>()) {
                Stmt first = place(b->first);
                return Block::make(first, place(b->rest));
            }
            if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
                return ProducerConsumer::make(pc->name, pc->is_producer, place(pc->body));
            }
            if (const LetStmt *l = s.as<LetStmt>(); l && !is_compute(s)) {
                return LetStmt::make(l->name, l->value, place(l->body));
            }
            if (!holds_compute(s))
                return s;
            placed = true;
            return Block::make(ahead, s);
        };
        Stmt result = place(body);
        return placed ? result : Block::make(ahead, body);
    }

    Stmt visit(const For *op) override {
        Stmt body = mutate(op->body);
        Stmt before;
        for (const Plan &p : plans) {
            if (p.loop != op)
                continue;
            TakeCopies take(p);
            body = take.mutate(body);
            for (const Pipelined &f : p.funcs) {
                internal_assert(take.copies.count(f.func))
                    << "no copy of " << f.func << " in " << op->name << "\n";
            }
            body = steady_state(p, body, take.copies);
            // The prologue goes before the root of the chain: remember it there.
            prologues[p.root].push_back(prologue(p, take.copies));
        }
        Stmt s = For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
        auto it = prologues.find(op);
        if (it != prologues.end()) {
            for (auto pr = it->second.rbegin(); pr != it->second.rend(); ++pr) {
                if (pr->defined())
                    s = Block::make(*pr, s);
            }
        }
        return s;
    }

    std::map<const For *, std::vector<Stmt>> prologues;
};

} // namespace

Stmt software_pipeline(const Stmt &s, CompileContext &ctx, bool copies_before_compute) {
    FindPlans find(ctx.of(ctx.output).warp_specialize, ctx);
    s.accept(&find);
    Stmt result = remove_no_ops(Pipeline(find.plans, copies_before_compute).mutate(s));
    // Versions used outside every pipeline (straight-line tails) are version 0.
    for (const auto &[buffer, slots] : ctx.slots)
        result = substitute(ir::stage_var(buffer), 0, result);
    return result;
}

} // namespace tandem::lower
