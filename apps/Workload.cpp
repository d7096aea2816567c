// A generator's workload counted from its algorithm (App.h: algorithm_workload), and its vector
// work in a target's units (vector_work).
#include "App.h"

#include "tandem/Fp8.h"
#include "tandem/VectorWeights.h"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::apps {

using namespace Halide::Internal;

namespace {

/** The extents of a generator buffer: static, or a runtime extent at its estimate (the problem a
 * run takes); empty where one is neither. */
std::vector<int64_t> extents_of(const Parameter &param, int rank) {
    std::vector<int64_t> extents;
    for (int d = 0; d < rank; d++) {
        const Halide::Expr extent = param.extent_constraint(d).defined()
                                        ? param.extent_constraint(d)
                                        : param.extent_constraint_estimate(d);
        const int64_t *e = extent.defined() ? as_const_int(extent) : nullptr;
        if (!e)
            return {};
        extents.push_back(*e);
    }
    return extents;
}

double elements(const std::vector<int64_t> &extents, int rank) {
    if (int(extents.size()) != rank)
        return 0;
    double n = 1;
    for (int64_t e : extents)
        n *= double(e);
    return n;
}

/** The part of a Func the output needs, per dimension. */
using Region = std::vector<Interval>;

/** Each operation of an expression, charged once per point of the domain its value depends on. */
class CountOps : public IRVisitor {
public:
    CountOps(const std::map<std::string, int64_t> &domain, Workload &w) : domain(domain), w(w) {}

private:
    using IRVisitor::visit;
    const std::map<std::string, int64_t> &domain; // each pure and reduction variable's extent
    Workload &w;

    double points(const Halide::Expr &e) const {
        double n = 1;
        for (const auto &[var, extent] : domain) {
            if (expr_uses_var(e, var))
                n *= double(extent);
        }
        return n;
    }
    void charge(const Halide::Expr &e, double *of_class = nullptr) {
        const double n = points(e);
        w.vector_flops += n;
        if (of_class)
            *of_class += n;
    }
    template <class T> void arith(const T *op) {
        charge(op);
        IRVisitor::visit(op);
    }
    void visit(const Add *op) override { arith(op); }
    void visit(const Sub *op) override { arith(op); }
    void visit(const Mul *op) override { arith(op); }
    void visit(const Mod *op) override { arith(op); }
    void visit(const Min *op) override { arith(op); }
    void visit(const Max *op) override { arith(op); }
    void visit(const EQ *op) override { arith(op); }
    void visit(const NE *op) override { arith(op); }
    void visit(const LT *op) override { arith(op); }
    void visit(const LE *op) override { arith(op); }
    void visit(const GT *op) override { arith(op); }
    void visit(const GE *op) override { arith(op); }
    void visit(const And *op) override { arith(op); }
    void visit(const Or *op) override { arith(op); }
    void visit(const Not *op) override { arith(op); }
    void visit(const Select *op) override { arith(op); }
    void visit(const Cast *op) override { arith(op); }
    void visit(const Div *op) override {
        charge(op, op->type.is_float() ? &w.vector_div_sqrt : nullptr);
        IRVisitor::visit(op);
    }
    void visit(const Call *op) override {
        // A Func's or an input's value is a load: its arguments are addresses, not vector work.
        if (op->call_type == Call::Halide || op->call_type == Call::Image)
            return;
        if (op->is_intrinsic(Call::likely) || op->is_intrinsic(Call::likely_if_innermost) ||
            op->is_intrinsic(Call::promise_clamped) ||
            op->is_intrinsic(Call::unsafe_promise_clamped) ||
            op->is_intrinsic(Call::strict_float) || op->is_intrinsic(Call::return_second)) {
            IRVisitor::visit(op);
            return;
        }
        charge(op, VectorWeights::transcendental_call(op->name) ? &w.vector_transcendentals
                   : VectorWeights::div_sqrt_call(op->name)     ? &w.vector_div_sqrt
                                                                : nullptr);
        IRVisitor::visit(op);
    }
};

/** The Funcs and inputs called in `e`, with their arguments. */
class FindCalls : public IRVisitor {
public:
    std::vector<const Call *> calls;
    std::set<std::string> inputs; // the inputs called

private:
    using IRVisitor::visit;
    void visit(const Call *op) override {
        if (op->call_type == Call::Halide)
            calls.push_back(op);
        if (op->call_type == Call::Image)
            inputs.insert(op->name);
        IRVisitor::visit(op);
    }
};

/** The values, argument expressions and reduction variables of each definition of `f`. */
std::vector<Definition> definitions_of(const Function &f) {
    std::vector<Definition> all = {f.definition()};
    for (const Definition &u : f.updates())
        all.push_back(u);
    return all;
}

/** A definition's value with the lets Halide's common-subexpression elimination made (an index
 * two operands share: x(u * S + k, m) * w(u * S + k, n)) substituted back. */
Halide::Expr value_without_lets(const Definition &def) {
    return substitute_in_all_lets(def.values()[0]);
}

/** Whether acc + x * y multiplies int8 values (each a cast of an 8-bit signed value). */
bool int8_product(const Halide::Expr &update) {
    const Mul *mul = update.as<Add>()->b.as<Mul>();
    for (const Halide::Expr &e : {mul->a, mul->b}) {
        const Cast *c = e.as<Cast>();
        if (!c || c->value.type() != Halide::Int(8))
            return false;
    }
    return true;
}

/** Whether acc + x * y multiplies FP8 values (each read through a decode table of tandem/Fp8.h). */
bool fp8_product(const Halide::Expr &update) {
    const Mul *mul = update.as<Add>()->b.as<Mul>();
    for (const Halide::Expr &e : {mul->a, mul->b}) {
        const Call *c = e.as<Call>();
        if (!c || fp8::format_of_table(c->name).bits() == 0)
            return false;
    }
    return true;
}

/** Whether an update is a multiply-accumulate, f(args) = f(args) + a * b over a reduction domain
 * (casts around a and b allowed, a and b not the same value): the tensor core's work, whatever
 * the schedule. */
bool multiply_accumulate(const Function &f, const Definition &def) {
    if (def.is_init() || def.values().size() != 1 || def.schedule().rvars().empty())
        return false;
    const Halide::Expr value = value_without_lets(def);
    const Add *add = value.as<Add>();
    const Call *self = add ? add->a.as<Call>() : nullptr;
    const Mul *mul = add ? add->b.as<Mul>() : nullptr;
    // (a square, rmsnorm's sum of x * x, is the vector cores' work: no tensor core squares)
    if (!self || self->name != f.name() || !mul || equal(mul->a, mul->b) ||
        self->args.size() != def.args().size())
        return false;
    for (size_t d = 0; d < self->args.size(); d++) {
        if (!equal(self->args[d], def.args()[d]))
            return false;
    }
    return true;
}

} // namespace

Workload algorithm_workload(const GeneratorBase::Pipeline &algorithm) {
    Workload w;
    const Halide::Func out = algorithm.output.halide();
    const Parameter out_param = algorithm.output.output_buffer().parameter();
    const std::vector<int64_t> out_extents = extents_of(out_param, out.dimensions());

    // Bytes: every input once, the output once.
    std::map<std::string, double> input_elements;
    for (const ImageParam &in : algorithm.inputs) {
        const double n = elements(extents_of(in.parameter(), in.dimensions()), in.dimensions());
        w.bytes += n * in.type().bytes();
        input_elements[in.name()] = n;
    }
    const double out_elements = elements(out_extents, out.dimensions());
    w.written_bytes = out_elements * out.output_types()[0].bytes();
    w.bytes += w.written_bytes;
    if (out_extents.empty())
        return w; // a runtime extent without an estimate: no problem size to count

    // The inputs' and the output's extents as the algorithm names them (in.extent.0), so that
    // reduction domains over an input's extent have a size.
    std::map<std::string, Halide::Expr> sizes;
    auto add_sizes = [&](const std::string &name, const std::vector<int64_t> &extents) {
        for (size_t d = 0; d < extents.size(); d++) {
            sizes[name + ".extent." + std::to_string(d)] = Halide::Expr(int(extents[d]));
            sizes[name + ".min." + std::to_string(d)] = Halide::Expr(0);
        }
    };
    for (const ImageParam &in : algorithm.inputs)
        add_sizes(in.name(), extents_of(in.parameter(), in.dimensions()));
    add_sizes(out_param.name(), out_extents);
    auto constant = [&](const Halide::Expr &e, int64_t *value) {
        const int64_t *v = as_const_int(simplify(substitute(sizes, e)));
        if (v)
            *value = *v;
        return v != nullptr;
    };

    // The region of each Func the output needs: Halide's bounds of each call's arguments over
    // its caller's region, from the output's extents down (a fixed point over the call graph).
    std::map<std::string, Function> funcs = find_transitive_calls(out.function());
    funcs.emplace(out.name(), out.function());
    std::map<std::string, Region> regions;
    Region &out_region = regions[out.name()];
    for (int64_t e : out_extents)
        out_region.push_back(Interval(0, int(e - 1)));
    // The pure and reduction variables of a definition of f over f's region.
    auto scope_of = [&](const Function &f, const Definition &def, Scope<Interval> *scope,
                        std::map<std::string, int64_t> *domain) {
        const Region &region = regions[f.name()];
        for (size_t d = 0; d < f.args().size() && d < region.size(); d++) {
            scope->push(f.args()[d], region[d]);
            int64_t lo = 0, hi = 0;
            if (constant(region[d].min, &lo) && constant(region[d].max, &hi))
                (*domain)[f.args()[d]] = hi - lo + 1;
        }
        for (const ReductionVariable &rv : def.schedule().rvars()) {
            int64_t lo = 0, extent = 0;
            if (!constant(rv.min, &lo) || !constant(rv.extent, &extent))
                return false;
            scope->push(rv.var, Interval(int(lo), int(lo + extent - 1)));
            (*domain)[rv.var] = extent;
        }
        return true;
    };
    // Calls `visit(def, scope, domain)` on every definition of a Func whose region is known.
    auto each_definition = [&](const auto &visit) {
        for (auto &[name, f] : funcs) {
            if (!regions.count(name))
                continue;
            for (const Definition &def : definitions_of(f)) {
                Scope<Interval> scope;
                std::map<std::string, int64_t> domain;
                if (scope_of(f, def, &scope, &domain))
                    visit(f, def, scope, domain);
            }
        }
    };
    for (size_t pass = 0; pass <= funcs.size(); pass++) {
        bool changed = false;
        each_definition([&](const Function &, const Definition &def, const Scope<Interval> &scope,
                            const std::map<std::string, int64_t> &) {
            FindCalls find;
            for (const Halide::Expr &v : def.values())
                v.accept(&find);
            for (const Halide::Expr &a : def.args())
                a.accept(&find);
            for (const Call *call : find.calls) {
                if (!funcs.count(call->name))
                    continue;
                Region &r = regions[call->name];
                for (size_t d = 0; d < call->args.size(); d++) {
                    Interval b = bounds_of_expr_in_scope(call->args[d], scope);
                    b.min = simplify(substitute(sizes, b.min));
                    b.max = simplify(substitute(sizes, b.max));
                    if (d >= r.size()) {
                        r.push_back(b);
                        changed = true;
                        continue;
                    }
                    Interval u = Interval::make_union(r[d], b);
                    u.min = simplify(u.min), u.max = simplify(u.max);
                    if (!equal(u.min, r[d].min) || !equal(u.max, r[d].max)) {
                        r[d] = u;
                        changed = true;
                    }
                }
            }
        });
        if (!changed)
            break;
    }

    std::set<std::string> vector_reads; // the inputs definitions other than MACs read
    // The operations of every definition over its domain; a multiply-accumulate update is one
    // MAC per point of its domain (the reduction's and its Func's region).
    each_definition([&](const Function &f, const Definition &def, const Scope<Interval> &,
                        const std::map<std::string, int64_t> &domain) {
        if (multiply_accumulate(f, def)) {
            double points = 1;
            for (const auto &[var, extent] : domain)
                points *= double(extent);
            w.macs += points;
            const Halide::Expr value = value_without_lets(def);
            if (f.output_types()[0] == Halide::Int(32) && int8_product(value))
                w.int8_macs += points;
            if (fp8_product(value))
                w.fp8_macs += points;
            return;
        }
        CountOps count(domain, w);
        FindCalls find;
        for (const Halide::Expr &v : def.values()) { // a let's value counts where it is used
            substitute_in_all_lets(v).accept(&count);
            v.accept(&find);
        }
        // An input's own Func (a generator's Input, a copy) passes it on: what reads that Func
        // reads the input.
        const bool passes_on = f.updates().empty() && def.values().size() == 1 &&
                               def.values()[0].as<Call>() &&
                               def.values()[0].as<Call>()->call_type == Call::Image;
        if (passes_on)
            return;
        vector_reads.insert(find.inputs.begin(), find.inputs.end());
        for (const Call *c : find.calls) {
            if (!funcs.count(c->name))
                continue;
            const Function &callee = funcs.at(c->name);
            const Call *input = callee.updates().empty() && callee.definition().values().size() == 1
                                    ? callee.definition().values()[0].as<Call>()
                                    : nullptr;
            if (input && input->call_type == Call::Image)
                vector_reads.insert(input->name);
        }
    });

    // Every element of an input the vector code reads (not only the MACs) passes through a vector
    // op once, every element out leaves one once (an epilogue reads each accumulator element
    // once); an algorithm without arithmetic (a transpose) moves data only, which the DMA may do
    // alone.
    if (w.vector_flops > 0) {
        double largest = 0, others = 0;
        for (const auto &[name, n] : input_elements) {
            if (!vector_reads.count(name))
                continue;
            others += n;
            largest = std::max(largest, n);
        }
        if (w.macs > 0) { // the accumulator, read by the epilogue
            others += out_elements;
            largest = std::max(largest, out_elements);
        }
        w.vector_first_loads = largest;
        w.vector_loads = others - largest;
        w.vector_stores = out_elements;
    }
    return w;
}

std::function<Workload(const Params &)> generator_workload(const std::string &name) {
    return [name](const Params &p) {
        std::unique_ptr<GeneratorBase> instance = GeneratorRegistry::create(name);
        for (const auto &[k, v] : p.values())
            instance->set_param(k, v);
        return algorithm_workload(instance->build_algorithm());
    };
}

double vector_work(const Workload &w, const Target &target) {
    const VectorWeights weights(target);
    const double arith = w.vector_flops - w.vector_transcendentals - w.vector_div_sqrt;
    return arith * weights.arith + w.vector_transcendentals * weights.transcendental +
           w.vector_div_sqrt * weights.div_sqrt + w.vector_first_loads * weights.first_load +
           w.vector_loads * weights.load + w.vector_stores * weights.store;
}

} // namespace tandem::apps
