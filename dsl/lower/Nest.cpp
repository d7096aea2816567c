#include "tandem/Nest.h"

#include <algorithm>
#include <cmath>

#include "tandem/AsyncIR.h"

namespace tandem::lower {

using namespace Halide::Internal;

bool as_perfect_nest(const Stmt &s, Nest *nest) {
    nest->loops.clear();
    Stmt cur = s;
    while (const For *f = cur.as<For>()) {
        nest->loops.push_back({f->name, f->min, f->extent});
        cur = f->body;
    }
    nest->store = cur.as<Store>();
    return nest->store != nullptr;
}

Expr affine_step(const Expr &e, const std::string &var) {
    Expr v = Variable::make(Halide::Int(32), var);
    Expr step = simplify(substitute(var, v + 1, e) - e);
    if (expr_uses_var(step, var))
        return Expr();
    Expr step2 = simplify(substitute(var, v + 2, e) - substitute(var, v + 1, e));
    if (!can_prove(step2 == step))
        return Expr();
    return step;
}

Expr at_loop_mins(const Expr &e, const std::vector<Loop> &loops) {
    Expr r = e;
    for (const Loop &l : loops)
        r = substitute(l.name, l.min, r);
    return simplify(r);
}

Expr trip_count(const std::vector<Loop> &loops) {
    Expr n = 1;
    for (const Loop &l : loops)
        n = n * l.extent;
    return simplify(n);
}

namespace {

const char *const core_var = "tandem.core_id.bounded";
const char *const grid_var = "tandem.grid_size.bounded";

class CoreIdAsVar : public IRMutator {
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        if (ir::is_core_id(op))
            return Variable::make(Halide::Int(32), core_var);
        if (ir::is_grid_size(op))
            return Variable::make(Halide::Int(32), grid_var);
        return IRMutator::visit(op);
    }
};

} // namespace

Expr core_id_as_variable(const Expr &e) {
    return CoreIdAsVar().mutate(e);
}

void push_loop(LoopScope &scope, const For *loop) {
    Expr min = CoreIdAsVar().mutate(loop->min),
         last = CoreIdAsVar().mutate(loop->min + loop->extent - 1);
    LoopScope with_core;
    with_core.set_containing_scope(&scope);
    with_core.push(core_var, Interval(0, (1 << 16) - 1));
    with_core.push(grid_var, Interval(1, 1 << 16));
    Interval lo = bounds_of_expr_in_scope(min, with_core),
             hi = bounds_of_expr_in_scope(last, with_core);
    scope.push(loop->name, Interval(simplify(lo.min), simplify(hi.max)));
}

void LoopScopedVisitor::visit(const For *op) {
    push_loop(loops, op);
    IRVisitor::visit(op);
    loops.pop(op->name);
}

Stmt LoopScopedMutator::visit(const For *op) {
    push_loop(loops, op);
    Stmt s = IRMutator::visit(op);
    loops.pop(op->name);
    return s;
}

namespace {

const IntImm *constant_bound(const Expr &e, Direction direction, const LoopScope &scope) {
    LoopScope with_core;
    with_core.set_containing_scope(&scope);
    with_core.push(core_var, Interval(0, (1 << 16) - 1));
    with_core.push(grid_var, Interval(1, 1 << 16));
    Expr b = find_constant_bound(simplify(CoreIdAsVar().mutate(e)), direction, with_core);
    return b.defined() ? b.as<IntImm>() : nullptr;
}

} // namespace

int64_t constant_upper_bound(const Expr &e, const LoopScope &scope) {
    const IntImm *i = constant_bound(e, Direction::Upper, scope);
    return i ? i->value : -1;
}

std::optional<int64_t> constant_lower_bound(const Expr &e, const LoopScope &scope) {
    const IntImm *i = constant_bound(e, Direction::Lower, scope);
    return i ? std::optional<int64_t>(i->value) : std::nullopt;
}

int64_t allocation_bound(const Allocate *op, const LoopScope &scope) {
    Expr product = 1;
    for (const Expr &e : op->extents)
        product = product * e;
    if (int64_t b = constant_upper_bound(product, scope); b >= 0)
        return b;
    int64_t elements = 1;
    for (const Expr &e : op->extents) {
        const int64_t b = constant_upper_bound(e, scope);
        if (b < 0)
            return -1;
        elements *= b;
    }
    return elements;
}

bool provably_zero(const Expr &e) {
    return is_const_zero(simplify(e));
}

namespace {

class InsertBeforeFirst : public IRMutator {
public:
    InsertBeforeFirst(const std::string &b, bool writes_only, const Stmt &before,
                      bool into_branches)
        : buffer(b), writes_only(writes_only), into_branches(into_branches), before(before) {}
    bool done = false;

    Stmt mutate(const Stmt &s) override {
        if (done || !s.defined())
            return s;
        if (s.as<Block>() || s.as<ProducerConsumer>() || s.as<Allocate>())
            return IRMutator::mutate(s);
        const IfThenElse *branch = s.as<IfThenElse>();
        if (into_branches && branch &&
            !(branch->else_case.defined() && ir::touches(branch->else_case, buffer)) &&
            (writes_only ? ir::writes(s, buffer) : ir::touches(s, buffer))) {
            // Only the branch touches the buffer: wait inside it, where the access is.
            return IfThenElse::make(branch->condition, mutate(branch->then_case),
                                    branch->else_case);
        }
        ir::VectorOp v;
        Stmt body;
        if (s.as<LetStmt>() && !ir::as_vector_op(s, &v, &body))
            return IRMutator::mutate(s);
        if (!(writes_only ? ir::writes(s, buffer) : ir::touches(s, buffer)))
            return s;
        done = true;
        return Block::make(before, s);
    }

private:
    const std::string &buffer;
    bool writes_only, into_branches;
    Stmt before;
};

class RemoveNoOps : public IRMutator {
    using IRMutator::visit;
    Stmt visit(const Block *op) override {
        Stmt first = mutate(op->first), rest = mutate(op->rest);
        if (is_no_op(first))
            return rest;
        if (is_no_op(rest))
            return first;
        return Block::make(first, rest);
    }
};

} // namespace

std::string core_loop_name(const std::string &tile_loop) {
    return tile_loop + ".on_core";
}

bool has_division(const Expr &e) {
    class Divides : public IRVisitor {
    public:
        bool found = false;

    private:
        using IRVisitor::visit;
        void visit(const Div *) override { found = true; }
        void visit(const Mod *) override { found = true; }
    } d;
    e.accept(&d);
    return d.found;
}

bool is_core_loop(const std::string &n) {
    return n.size() > 8 && n.compare(n.size() - 8, 8, ".on_core") == 0;
}

namespace {

class Loads : public IRVisitor {
public:
    std::set<std::string> names;

private:
    using IRVisitor::visit;
    void visit(const Load *op) override {
        names.insert(op->name);
        IRVisitor::visit(op);
    }
};

} // namespace

std::set<std::string> loaded(const Stmt &s) {
    Loads l;
    if (s.defined())
        s.accept(&l);
    return l.names;
}

std::set<std::string> loaded(const Expr &e) {
    Loads l;
    if (e.defined())
        e.accept(&l);
    return l.names;
}

bool is_minus_infinity(const Expr &e) {
    const double *f = as_const_float(e);
    return f && std::isinf(*f) && *f < 0;
}

std::set<std::string> stored(const Stmt &s) {
    struct Stores : IRVisitor {
        std::set<std::string> names;
        using IRVisitor::visit;
        void visit(const Store *op) override {
            names.insert(op->name);
            IRVisitor::visit(op);
        }
    } st;
    if (s.defined())
        s.accept(&st);
    return st.names;
}

std::set<std::string> variables(const Expr &e) {
    struct Variables : IRVisitor {
        std::set<std::string> names;
        using IRVisitor::visit;
        void visit(const Variable *op) override { names.insert(op->name); }
    } v;
    if (e.defined())
        e.accept(&v);
    return v.names;
}

bool meets(const std::set<std::string> &a, const std::set<std::string> &b) {
    return std::any_of(a.begin(), a.end(), [&](const std::string &x) { return b.count(x) > 0; });
}

Stmt remove_no_ops(const Stmt &s) {
    return RemoveNoOps().mutate(s);
}

Stmt drop_guards_every_call_passes(const Stmt &s, const std::vector<std::string> &at_least_one) {
    if (at_least_one.empty())
        return s;
    class Drop : public IRMutator {
    public:
        explicit Drop(const std::vector<std::string> &names) {
            for (const std::string &n : names)
                scope.push(n, Interval(1, Interval::pos_inf()));
        }

    private:
        using IRMutator::visit;
        Scope<Interval> scope;
        Stmt visit(const IfThenElse *op) override {
            const Expr condition = simplify(op->condition, true, scope);
            if (is_const_one(condition))
                return mutate(op->then_case);
            if (is_const_zero(condition))
                return op->else_case.defined() ? mutate(op->else_case) : Evaluate::make(0);
            return IRMutator::visit(op);
        }
    };
    return Drop(at_least_one).mutate(s);
}

Expr int_var(const std::string &name) {
    return Variable::make(Halide::Int(32), name);
}

std::vector<Stmt> flatten(const Stmt &s) {
    std::vector<Stmt> out;
    if (const Block *b = s.as<Block>()) {
        for (const Stmt &part : {b->first, b->rest}) {
            std::vector<Stmt> sub = flatten(part);
            out.insert(out.end(), sub.begin(), sub.end());
        }
    } else if (s.defined() && !is_no_op(s)) {
        out.push_back(s);
    }
    return out;
}

Stmt block(const std::vector<Stmt> &parts) {
    Stmt s;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->defined() && !is_no_op(*it))
            s = s.defined() ? Block::make(*it, s) : *it;
    }
    return s.defined() ? s : Evaluate::make(0);
}

Stmt insert_before_first_access(const Stmt &s, const std::string &buffer, bool writes_only,
                                const Stmt &before, bool into_branches) {
    InsertBeforeFirst i(buffer, writes_only, before, into_branches);
    return i.mutate(s);
}

bool is_store_target(const CompileContext &ctx, const std::string &name) {
    if (name == ctx.output)
        return true;
    for (const KernelArg &w : ctx.workspaces)
        if (w.name == name)
            return true;
    return false;
}

Stmt each_side(const Stmt &s, const std::function<Stmt(const Stmt &)> &f) {
    Stmt cube, vector;
    if (ir::as_mix(s, &cube, &vector))
        return ir::make_mix(f(cube), f(vector));
    return f(s);
}

Stmt append_where_used(const Stmt &s, const Stmt &tail, const std::string &buffer) {
    Stmt cube, vector;
    if (!ir::as_mix(s, &cube, &vector))
        return Block::make(s, tail);
    if (ir::touches(cube, buffer))
        return ir::make_mix(Block::make(cube, tail), vector);
    return ir::make_mix(cube, Block::make(vector, tail));
}

} // namespace tandem::lower
