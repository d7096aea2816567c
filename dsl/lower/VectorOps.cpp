#include "VectorOps.h"

#include "Nest.h"
#include "tandem/AsyncIR.h"

#include <algorithm>
#include <map>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** True for statements made only of loops, lets, ifs and stores: element code. */
class IsElementCode : public IRVisitor {
public:
    bool element = true;
    bool has_store = false;

private:
    using IRVisitor::visit;
    void visit(const Store *op) override {
        has_store = true;
        IRVisitor::visit(op);
    }
    void visit(const Call *op) override {
        if (op->call_type == Call::Extern && op->name.rfind("tandem_", 0) == 0) element = false;
        IRVisitor::visit(op);
    }
    void visit(const ProducerConsumer *op) override { element = false; }
    void visit(const Allocate *op) override { element = false; }
    void visit(const Free *op) override { element = false; }
};

bool is_element_code(const Stmt &s) {
    IsElementCode v;
    s.accept(&v);
    return v.element && v.has_store;
}

/** Arithmetic nodes of one evaluation (what the vector core spends flops on). */
class CountFlops : public IRVisitor {
public:
    int flops = 0;

private:
    using IRVisitor::visit;
    void arith() { flops++; }
    void visit(const Add *op) override { arith(), IRVisitor::visit(op); }
    void visit(const Sub *op) override { arith(), IRVisitor::visit(op); }
    void visit(const Mul *op) override { arith(), IRVisitor::visit(op); }
    void visit(const Div *op) override { arith(), IRVisitor::visit(op); }
    void visit(const Min *op) override { arith(), IRVisitor::visit(op); }
    void visit(const Max *op) override { arith(), IRVisitor::visit(op); }
    void visit(const Select *op) override { arith(), IRVisitor::visit(op); }
    void visit(const Cast *op) override { arith(), IRVisitor::visit(op); }
    void visit(const Call *op) override { arith(), IRVisitor::visit(op); }
    void visit(const Load *op) override {} // index math is the address generator's
};

/** Work and regions of an element nest, with loop bounds in scope. */
class Summarize : public IRVisitor {
public:
    explicit Summarize(const CompileContext &ctx) : ctx(ctx) {}
    Expr flops = 0;
    struct Touch {
        Interval range;
        bool write = false;
    };
    std::map<std::string, Touch> touched;
    std::vector<std::string> order;

private:
    using IRVisitor::visit;
    const CompileContext &ctx;
    Scope<Interval> scope;
    std::vector<Expr> trips;

    void visit(const For *op) override {
        Interval r(op->min, simplify(op->min + op->extent - 1));
        // Extents may depend on outer loops: bound them in the enclosing scope.
        Interval bounded = bounds_of_expr_in_scope(op->min, scope);
        Interval last = bounds_of_expr_in_scope(op->min + op->extent - 1, scope);
        scope.push(op->name, Interval(bounded.min, last.max));
        trips.push_back(op->extent);
        op->body.accept(this);
        trips.pop_back();
        scope.pop(op->name);
    }
    void visit(const LetStmt *op) override {
        scope.push(op->name, bounds_of_expr_in_scope(op->value, scope));
        op->body.accept(this);
        scope.pop(op->name);
    }
    void record(const std::string &name, const Expr &index, bool write) {
        if (name == ctx.output || std::find(ctx.inputs.begin(), ctx.inputs.end(), name) != ctx.inputs.end()) {
            throw Error("Func '" + current + "': it " + (write ? "writes " : "reads ") + name +
                        " in DRAM from vector code; on the zpu the vector core works on chip only - "
                        "stage " + name + " with " + name + ".in(" + current + ") computed inside a loop");
        }
        Interval r = bounds_of_expr_in_scope(index, scope);
        if (!r.is_bounded()) {
            throw Error("Func '" + current + "': the region of " + name + " it touches is unbounded");
        }
        auto it = touched.find(name);
        if (it == touched.end()) {
            order.push_back(name);
            touched[name] = {r, write};
        } else {
            it->second.range = Interval::make_union(it->second.range, r);
            it->second.write |= write;
        }
    }
    std::string current;
    void visit(const Store *op) override {
        current = op->name;
        CountFlops c;
        op->value.accept(&c);
        Expr n = 1;
        for (const Expr &t : trips) n = n * t;
        flops = flops + std::max(c.flops, 1) * n;
        record(op->name, op->index, true);
        IRVisitor::visit(op);
    }
    void visit(const Load *op) override {
        record(op->name, op->index, false);
        IRVisitor::visit(op);
    }
};

class FormVectorOps : public IRMutator {
public:
    explicit FormVectorOps(const CompileContext &ctx) : ctx(ctx) {}

private:
    using IRMutator::visit;
    const CompileContext &ctx;

    Stmt wrap(const Stmt &s) {
        Summarize sum(ctx);
        s.accept(&sum);
        ir::VectorOp op;
        for (const std::string &b : sum.order) {
            const auto &t = sum.touched[b];
            if (t.write) op.label += (op.label.empty() ? "" : ", ") + b;
            op.regions.push_back({b, simplify(t.range.min), simplify(t.range.max - t.range.min + 1), t.write});
        }
        op.flops = simplify(sum.flops);
        return ir::make_vector_op(op, s);
    }

    Stmt visit(const For *op) override {
        if (is_element_code(op)) return wrap(op);
        return IRMutator::visit(op);
    }
    Stmt visit(const Store *op) override { return wrap(op); }
    Stmt visit(const IfThenElse *op) override {
        if (is_element_code(op)) return wrap(op);
        return IRMutator::visit(op);
    }
};

} // namespace

Stmt form_vector_ops(const Stmt &s, CompileContext &ctx) { return FormVectorOps(ctx).mutate(s); }

} // namespace tandem::lower
