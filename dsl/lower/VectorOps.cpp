#include "VectorOps.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"
#include "tandem/VectorWeights.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

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
        if (op->call_type == Call::Extern && op->name.rfind("tandem_", 0) == 0)
            element = false;
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

/** What a vector core spends on one evaluation of a Store, in the units of the target's vector
 * throughput (tandem/VectorWeights.h). */
class CountWork : public IRVisitor {
public:
    explicit CountWork(const VectorWeights &w) : w(w) {}
    double per_element = 0;          // charged for every element
    std::set<std::string> constants; // distinct constants: materialised once per op

private:
    using IRVisitor::visit;
    const VectorWeights &w;
    int loads = 0;
    /** One operation producing (or, for a comparison, comparing) elements of type t. */
    void arith(const Type &t) { per_element += w.of(w.arith, t); }
    void visit(const Add *op) override { arith(op->type), IRVisitor::visit(op); }
    void visit(const Sub *op) override { arith(op->type), IRVisitor::visit(op); }
    void visit(const Mul *op) override { arith(op->type), IRVisitor::visit(op); }
    void visit(const Div *op) override {
        per_element += w.of(op->type.is_float() ? w.div_sqrt : w.arith, op->type);
        IRVisitor::visit(op);
    }
    void visit(const Mod *op) override { arith(op->type), IRVisitor::visit(op); }
    void visit(const Min *op) override { arith(op->type), IRVisitor::visit(op); }
    void visit(const Max *op) override { arith(op->type), IRVisitor::visit(op); }
    void visit(const EQ *op) override { arith(op->a.type()), IRVisitor::visit(op); }
    void visit(const NE *op) override { arith(op->a.type()), IRVisitor::visit(op); }
    void visit(const LT *op) override { arith(op->a.type()), IRVisitor::visit(op); }
    void visit(const LE *op) override { arith(op->a.type()), IRVisitor::visit(op); }
    void visit(const GT *op) override { arith(op->a.type()), IRVisitor::visit(op); }
    void visit(const GE *op) override { arith(op->a.type()), IRVisitor::visit(op); }
    void visit(const Select *op) override { arith(op->type), IRVisitor::visit(op); }
    void visit(const Cast *op) override {
        arith(op->type.bytes() > op->value.type().bytes() ? op->type : op->value.type());
        IRVisitor::visit(op);
    }
    void visit(const Call *op) override {
        per_element += w.of(VectorWeights::transcendental_call(op->name) ? w.transcendental
                            : VectorWeights::div_sqrt_call(op->name)     ? w.div_sqrt
                                                                         : w.arith,
                            op->type);
        IRVisitor::visit(op);
    }
    void visit(const IntImm *op) override { constants.insert("i" + std::to_string(op->value)); }
    void visit(const FloatImm *op) override { constants.insert("f" + std::to_string(op->value)); }
    void visit(const Load *op) override { // its index is the address generator's
        per_element += loads++ == 0 ? w.first_load : w.load;
    }
};

/** Work and regions of an element nest, with loop bounds in scope. */
class Summarize : public IRVisitor {
public:
    explicit Summarize(const CompileContext &ctx) : weights(ctx.target), ctx(ctx) {}
    const VectorWeights weights;
    Expr flops = 0;
    std::set<std::string> constants;
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
        // An extent that depends on an outer loop of the nest (a triangular nest: a reduction
        // over the rows above each row) counts at its largest, an upper bound of the work.
        Interval extent = bounds_of_expr_in_scope(op->extent, scope);
        trips.push_back(extent.has_upper_bound() ? simplify(max(extent.max, 0)) : op->extent);
        scope.push(op->name, Interval(bounded.min, last.max));
        op->body.accept(this);
        trips.pop_back();
        scope.pop(op->name);
    }
    void visit(const LetStmt *op) override {
        // A value the element code shares (a let): computed once per element, its loads read.
        charge(op->value, 0, false);
        op->value.accept(this);
        scope.push(op->name, bounds_of_expr_in_scope(op->value, scope));
        op->body.accept(this);
        scope.pop(op->name);
    }
    /** The work of computing `value` (and `store`, the store's own cost) for every element;
     * a store costs at least 1. */
    void charge(const Expr &value, double store, bool stored) {
        CountWork c(weights);
        value.accept(&c);
        Expr n = 1;
        for (const Expr &t : trips)
            n = n * t;
        const double per_element = c.per_element + store;
        if (stored || per_element > 0)
            flops = flops + int(std::ceil(std::max(per_element, 1.0))) * n;
        constants.insert(c.constants.begin(), c.constants.end());
    }
    void record(const std::string &name, const Expr &index, bool write) {
        if (name == ctx.output ||
            std::find(ctx.inputs.begin(), ctx.inputs.end(), name) != ctx.inputs.end()) {
            throw Error("Func '" + current + "': it " + (write ? "writes " : "reads ") + name +
                        " in DRAM from vector code, where Tandem could not stage it (" + current +
                        " is inlined or computed at the root); on " + ctx.target.name() +
                        " vector code works on chip only - stage " + name + " with " +
                        "Func::staged(" + name + ", consumer).compute_at(consumer, tile loop)");
        }
        Interval r = bounds_of_expr_in_scope(index, scope);
        if (!r.is_bounded()) {
            throw Error("Func '" + current + "': the region of " + name +
                        " it touches is unbounded");
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
        charge(op->value, weights.store, true);
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
    std::map<std::string, Expr> allocated; // elements of the on-chip buffers in scope

    Stmt visit(const Allocate *op) override {
        Expr elements = 1;
        for (const Expr &e : op->extents)
            elements = elements * e;
        allocated[op->name] = simplify(elements);
        Stmt s = IRMutator::visit(op);
        allocated.erase(op->name);
        return s;
    }

    Stmt wrap(const Stmt &s) {
        Summarize sum(ctx);
        s.accept(&sum);
        ir::VectorOp op;
        for (const std::string &b : sum.order) {
            const auto &t = sum.touched[b];
            if (t.write)
                op.label += (op.label.empty() ? "" : ", ") + b;
            // Bounds over every tile the nest may run in include tiles it never runs in (a
            // guarded tile past the edge has a negative width, which is also its row pitch; a
            // triangular nest's rows at their longest in every row); no run touches an on-chip
            // buffer outside its elements (none of a buffer a mask leaves empty in this tile).
            Expr lo = simplify(max(t.range.min, 0));
            Expr hi = t.range.max;
            if (auto a = allocated.find(b); a != allocated.end())
                hi = simplify(min(hi, a->second - 1));
            op.regions.push_back({b, lo, simplify(max(hi - lo + 1, 0)), t.write});
        }
        // Each distinct constant is materialised once per op (the ZPU's public cost model).
        op.flops = simplify(sum.flops +
                            int(std::ceil(double(sum.constants.size()) * sum.weights.constant)));
        return ir::make_vector_op(op, s);
    }

    Stmt visit(const For *op) override {
        if (is_element_code(op))
            return wrap(op);
        return IRMutator::visit(op);
    }
    Stmt visit(const Store *op) override { return wrap(op); }
    Stmt visit(const IfThenElse *op) override {
        if (is_element_code(op))
            return wrap(op);
        return IRMutator::visit(op);
    }
};

} // namespace

Stmt form_vector_ops(const Stmt &s, CompileContext &ctx) {
    return FormVectorOps(ctx).mutate(s);
}

} // namespace tandem::lower
