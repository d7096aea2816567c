#include "tandem/Kernel.h"

#include "tandem/AsyncIR.h"
#include "tandem/Fp8.h"

#include "../lower/DefaultStaging.h"
#include "../lower/RequiredRegions.h"
#include "../lower/RowStatistics.h"
#include "../lower/RunningMax.h"
#include "../lower/SkipMaskedBlocks.h"
#include "../lower/Targets.h"
#include "../lower/Validate.h"
#include "tandem/Nest.h"

#include <cstdlib>
#include <functional>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

namespace tandem {

using namespace Halide::Internal;

namespace {

/** Drops what Halide's lowering adds around the pipeline for a host target: buffer argument
 * checks and the lets that unpack halide_buffer_t fields. Static shapes make them constants; the
 * extents of a runtime shape stay free variables ("A.extent.1"), the kernel's scalar arguments
 * (KernelArg::runtime); strides must be constrained (dense), which Halide substitutes. */
class StripHostWrapper : public IRMutator {
public:
    StripHostWrapper(std::set<std::string> runtime, std::map<std::string, Expr> dense_strides)
        : runtime(std::move(runtime)), dense_strides(std::move(dense_strides)) {}

private:
    std::set<std::string> runtime; // the names of the runtime extents
    // The strides the generator constrained, as their dense shape has them ("A.stride.2" -> 7 *
    // A.extent.1): a stride after two runtime extents stays a product of other fields Halide
    // does not fold (the call checks the strides). A stride left free is still an error.
    std::map<std::string, Expr> dense_strides;
    using IRMutator::visit;
    Stmt visit(const AssertStmt *op) override { return Evaluate::make(0); }
    Stmt visit(const LetStmt *op) override {
        const Call *c = op->value.as<Call>();
        if (const Cast *cast = op->value.as<Cast>())
            c = cast->value.as<Call>();
        if (c && c->name.rfind("_halide_buffer_", 0) == 0) {
            Stmt body = mutate(op->body);
            // The host pointer's name is the buffer's name in Load/Store; every other field must be
            // a constant by now, or a runtime extent.
            if (auto stride = dense_strides.find(op->name);
                stride != dense_strides.end() && stmt_uses_var(body, op->name))
                return LetStmt::make(op->name, stride->second, body);
            if (c->name != "_halide_buffer_get_host" && !runtime.count(op->name) &&
                stmt_uses_var(body, op->name)) {
                throw Error(
                    "the kernel's shapes must start at 0 and be dense: " + op->name +
                    " is used after lowering; set_min(0) (or set_bounds) on every dimension of "
                    "every input and of the output, and set_stride to the dense stride");
            }
            return body;
        }
        return IRMutator::visit(op);
    }
    Stmt visit(const Block *op) override {
        Stmt first = mutate(op->first), rest = mutate(op->rest);
        if (is_no_op(first))
            return rest;
        if (is_no_op(rest))
            return first;
        return Block::make(first, rest);
    }
};

/** Inlines every let, so that the passes see each index as one expression of loop variables
 * (the simplifier may leave LetStmts that substitute_in_all_lets does not reach).
 *
 * A Tuple's update computes every value before it stores any (Halide's lets `f.0.value`, ...,
 * then the stores): inlined, each store reads what the stores before it left, so the stores are
 * ordered to keep the old values: a store into a buffer after every store whose value reads that
 * buffer (FlashAttention's state: the running max last). Values that read each other's buffers
 * both ways have no such order: a user error. */
class InlineLets : public IRMutator {
private:
    using IRMutator::visit;
    Stmt visit(const LetStmt *op) override {
        if (Stmt ordered = tuple_stores(op); ordered.defined())
            return mutate(ordered);
        return mutate(substitute(op->name, op->value, op->body));
    }
    Expr visit(const Let *op) override { return mutate(substitute(op->name, op->value, op->body)); }

    /** The lets and stores of a Tuple's values as stores in an order that reads old values;
     * undefined where `op` does not start them. */
    static Stmt tuple_stores(const LetStmt *op) {
        std::map<std::string, Expr> values;
        Stmt body = op;
        while (const LetStmt *l = body.as<LetStmt>()) {
            if (l->name.size() < 6 || l->name.compare(l->name.size() - 6, 6, ".value") != 0)
                return Stmt();
            values[l->name] = l->value;
            body = l->body;
        }
        std::vector<const Store *> stores;
        std::function<bool(const Stmt &)> collect = [&](const Stmt &s) {
            if (const Block *b = s.as<Block>())
                return collect(b->first) && collect(b->rest);
            const Store *st = s.as<Store>();
            const Variable *v = st ? st->value.as<Variable>() : nullptr;
            if (!v || !values.count(v->name))
                return false;
            stores.push_back(st);
            return true;
        };
        if (values.size() < 2 || !collect(body) || stores.size() != values.size())
            return Stmt();
        struct Reads : IRVisitor {
            std::string buffer;
            bool found = false;
            using IRVisitor::visit;
            void visit(const Load *l) override {
                found = found || l->name == buffer;
                IRVisitor::visit(l);
            }
        };
        auto reads = [&](const Store *st, const std::string &buffer) {
            Reads r;
            r.buffer = buffer;
            values.at(st->value.as<Variable>()->name).accept(&r);
            return r.found;
        };
        std::vector<Stmt> order;
        std::vector<bool> done(stores.size(), false);
        for (size_t round = 0; round < stores.size(); round++) {
            size_t next = stores.size();
            for (size_t i = 0; i < stores.size() && next == stores.size(); i++) {
                bool ready = !done[i];
                for (size_t j = 0; j < stores.size() && ready; j++)
                    ready = j == i || done[j] || !reads(stores[j], stores[i]->name);
                if (ready)
                    next = i;
            }
            if (next == stores.size()) {
                throw Error("a Tuple's update whose values read each other's elements (" +
                            stores[0]->name +
                            ", ...) cannot be stored one value after another; "
                            "let one value read only the old values of the others");
            }
            done[next] = true;
            const Store *st = stores[next];
            order.push_back(Store::make(st->name, values.at(st->value.as<Variable>()->name),
                                        st->index, st->param, st->predicate, st->alignment));
        }
        return Block::make(order);
    }
};

/** The argument's shape: every dim starts at 0; an extent without a constraint is a runtime
 * extent (its estimate, if any, is kept as the extent). */
KernelArg shape_of(const Halide::Internal::Parameter &p, const std::string &name, Halide::Type type,
                   bool output) {
    KernelArg a{name, type, {}, output, {}, {}};
    for (int d = 0; d < p.dimensions(); d++) {
        const IntImm *min =
            p.min_constraint(d).defined() ? p.min_constraint(d).as<IntImm>() : nullptr;
        const IntImm *ext =
            p.extent_constraint(d).defined() ? p.extent_constraint(d).as<IntImm>() : nullptr;
        if (!min || min->value != 0 || (p.extent_constraint(d).defined() && !ext)) {
            throw Error("buffer '" + name + "': dimension " + std::to_string(d) +
                        " must start at 0 (dim(d).set_min(0), or set_bounds(0, extent) for a "
                        "static extent)");
        }
        const IntImm *estimate = p.extent_constraint_estimate(d).defined()
                                     ? p.extent_constraint_estimate(d).as<IntImm>()
                                     : nullptr;
        a.extents.push_back(ext ? int(ext->value) : estimate ? int(estimate->value) : 0);
        a.runtime.push_back(ext == nullptr);
    }
    return a;
}

/** The caller's arguments: the inputs, then the output. */
std::vector<KernelArg> caller_args(const Func &output, const std::vector<ImageParam> &inputs) {
    std::vector<KernelArg> args;
    for (const ImageParam &p : inputs)
        args.push_back(shape_of(p.parameter(), p.name(), p.type(), false));
    args.push_back(shape_of(output.output_buffer().parameter(), output.name(),
                            output.halide().output_types()[0], true));
    return args;
}

} // namespace

const Directives &CompileContext::of(const std::string &func) const {
    static const Directives none;
    auto it = directives.find(func);
    return it == directives.end() ? none : it->second;
}

const Halide::Internal::Function *CompileContext::function_of(const std::string &buffer) const {
    if (auto f = functions.find(buffer); f != functions.end())
        return &f->second;
    const size_t dot = buffer.rfind('.');
    if (dot == std::string::npos || dot + 1 == buffer.size() ||
        buffer.find_first_not_of("0123456789", dot + 1) != std::string::npos)
        return nullptr;
    auto f = functions.find(buffer.substr(0, dot));
    if (f == functions.end() || f->second.outputs() < 2)
        return nullptr;
    return std::stoul(buffer.substr(dot + 1)) < size_t(f->second.outputs()) ? &f->second : nullptr;
}

int64_t KernelArg::elements() const {
    int64_t n = 1;
    for (int e : extents)
        n *= e;
    return n;
}

int64_t KernelArg::elements(const Shapes &shapes) const {
    int64_t n = 1;
    for (size_t d = 0; d < extents.size(); d++)
        n *= d < runtime.size() && runtime[d] ? shapes.at(extent_name(int(d))) : extents[d];
    return n;
}

Shapes Kernel::with_intermediates(const Shapes &shapes) const {
    std::map<std::string, Expr> values;
    for (const auto &[n, v] : shapes)
        values[n] = Expr(int(v));
    Shapes all = shapes;
    for (const auto &[n, e] : intermediate_extents) {
        const Expr v = simplify(substitute(values, e));
        internal_assert(is_const(v)) << "extent " << n << " of an intermediate: " << v << "\n";
        all[n] = *as_const_int(v);
    }
    return all;
}

bool KernelArg::has_runtime_shape() const {
    return std::count(runtime.begin(), runtime.end(), true) > 0;
}

std::string KernelArg::extent_name(int d) const {
    return name + ".extent." + std::to_string(d);
}

std::vector<KernelArg::Dim> KernelArg::copy_view() const {
    std::vector<Dim> view;
    Expr stride = 1;
    for (size_t d = 0; d < extents.size(); d++) {
        const bool symbolic = d < runtime.size() && runtime[d];
        Expr e = symbolic ? Variable::make(Halide::Int(32), extent_name(int(d))) : Expr(extents[d]);
        if (symbolic || extents[d] > 1)
            view.push_back({e, stride});
        stride = simplify(stride * e);
    }
    if (view.empty())
        view.push_back({1, 1});
    return view;
}

std::vector<Expr> KernelArg::view_read_extents() const {
    std::vector<Expr> reads;
    const std::vector<Dim> view = copy_view();
    for (size_t d = 0; d < extents.size(); d++) {
        const bool symbolic = d < runtime.size() && runtime[d];
        if (!symbolic && extents[d] <= 1)
            continue;
        const bool known = d < read_extents.size() && read_extents[d].defined();
        reads.push_back(known ? read_extents[d] : view[reads.size()].extent);
    }
    if (reads.empty())
        reads.push_back(view[0].extent);
    return reads;
}

std::vector<KernelArg::Dim> KernelArg::copy_view(const Shapes &shapes) const {
    std::map<std::string, Expr> values;
    for (const auto &[name, value] : shapes)
        values[name] = Expr(int(value));
    std::vector<Dim> view = copy_view();
    for (Dim &d : view) {
        d.extent = simplify(substitute(values, d.extent));
        d.stride = simplify(substitute(values, d.stride));
        internal_assert(is_const(d.extent) && is_const(d.stride))
            << "copy view of " << name << " without its extents\n";
    }
    return view;
}

const SramBuffer *Kernel::buffer(const std::string &name) const {
    for (const SramBuffer &b : buffers) {
        if (b.name == name)
            return &b;
    }
    return nullptr;
}

const KernelArg *Kernel::arg(const std::string &name) const {
    for (const KernelArg &a : args) {
        if (a.name == name)
            return &a;
    }
    return nullptr;
}

std::string Kernel::halide_text() const {
    if (!is_pipeline())
        return ir::to_string(halide_stmt);
    std::string text;
    for (const Kernel &k : stages)
        text += "// kernel " + k.name + "\n" + k.halide_text() + "\n";
    return text;
}

std::string Kernel::stmt_text() const {
    if (is_pipeline()) {
        std::string text = "// pipeline " + name + " for " + target.name() + ": " +
                           std::to_string(stages.size()) + " kernels, run in turn\n";
        for (const std::string &n : notes)
            text += "// " + n + "\n";
        for (const Kernel &k : stages)
            text += k.stmt_text() + "\n";
        return text;
    }
    std::ostringstream os;
    os << "// kernel " << name << " for " << target.name() << "\n";
    for (const KernelArg &a : args) {
        os << "// " << (a.output ? "output " : "input  ") << a.name << ": "
           << element_type_name(a.type) << " [";
        for (size_t d = 0; d < a.extents.size(); d++)
            os << (d ? " x " : "") << a.extents[d];
        os << "] in DRAM\n";
    }
    for (const KernelArg &w : workspaces) {
        os << "// workspace " << w.name << ": " << w.type << " [" << w.elements() << "] in DRAM\n";
    }
    for (const SramBuffer &b : buffers) {
        os << "// " << lower::lowering_of(target).memory_name(b) << " " << b.name << ": "
           << element_type_name(b.type) << " " << b.slots << " x " << b.slot_elements << " at byte "
           << b.offset_bytes << "\n";
    }
    for (const std::string &n : notes)
        os << "// " << n << "\n";
    os << body;
    return os.str();
}

std::vector<std::string> Kernel::runtime_extent_names() const {
    std::vector<std::string> names;
    for (const KernelArg &a : args) {
        for (size_t d = 0; d < a.runtime.size(); d++)
            if (a.runtime[d])
                names.push_back(a.extent_name(int(d)));
    }
    return names;
}

bool Kernel::has_runtime_shapes() const {
    return std::any_of(args.begin(), args.end(),
                       [](const KernelArg &a) { return a.has_runtime_shape(); });
}

Shapes Kernel::bind_shapes(const std::vector<std::vector<int>> &extents) const {
    if (extents.size() != args.size()) {
        throw Error("kernel " + name + " takes " + std::to_string(args.size()) +
                    " arguments, given " + std::to_string(extents.size()) + " shapes");
    }
    Shapes values;
    for (size_t i = 0; i < args.size(); i++) {
        const KernelArg &a = args[i];
        if (extents[i].size() != a.extents.size()) {
            throw Error("kernel " + name + ": argument " + a.name + " has " +
                        std::to_string(a.extents.size()) + " dimensions, given " +
                        std::to_string(extents[i].size()));
        }
        for (size_t d = 0; d < a.extents.size(); d++) {
            const int e = extents[i][d];
            const bool runtime = d < a.runtime.size() && a.runtime[d];
            if (e < 1 || (!runtime && e != a.extents[d])) {
                throw Error("kernel " + name + ": argument " + a.name + " dimension " +
                            std::to_string(d) + " has extent " + std::to_string(e) +
                            "; the kernel takes " +
                            (runtime ? std::string("an extent of at least 1")
                                     : std::to_string(a.extents[d])));
            }
            if (runtime)
                values[a.extent_name(int(d))] = e;
        }
    }
    check_call(call_checks, values, name);
    return values;
}

std::string user_text(const std::string &text) {
    return std::regex_replace(text, std::regex("\\$[0-9]+"), "");
}

std::string user_text(const Expr &e) {
    std::ostringstream os;
    os << e;
    return user_text(os.str());
}

void check_call(const std::vector<CallCheck> &checks, const Shapes &shapes,
                const std::string &kernel) {
    std::map<std::string, Expr> values;
    for (const auto &[n, v] : shapes)
        values[n] = Expr(int(v));
    for (const CallCheck &check : checks) {
        if (is_const_one(simplify(substitute(values, check.holds))))
            continue;
        std::string at;
        for (const auto &[n, v] : shapes) {
            if (expr_uses_var(check.holds, n))
                at += (at.empty() ? "" : ", ") + user_text(n) + " = " + std::to_string(v);
        }
        throw ShapeError("kernel " + kernel + " cannot run at these extents: " + check.why +
                             " (here " + at + ")",
                         check.target_limit);
    }
}

bool takes_runtime_shapes(const Target &target) {
    return lower::lowering_of(target).runtime_shapes;
}

int fitting_stages(const MmaTiles &tiles, const Target &target) {
    const lower::TargetLowering &t = lower::lowering_of(target);
    return t.fitting_stages ? t.fitting_stages(tiles, target) : 3;
}

namespace {

Kernel compile_kernel(const Func &output, const std::vector<ImageParam> &inputs,
                      const Target &target, const std::string &name) {
    CompileContext ctx;
    ctx.target = target;
    ctx.output = output.name();
    ctx.output_func = &output;
    for (const ImageParam &p : inputs)
        ctx.inputs.push_back(p.name());
    lower::guard_output_tails(output, ctx);
    lower::stage_inputs_read_by_vector_code(output, inputs, ctx);
    lower::bound_windowed_copies(output, inputs);
    lower::validate_schedule(output, ctx);

    Kernel k;
    k.name = name;
    k.target = target;
    k.args = caller_args(output, inputs);
    ctx.args = k.args;
    if (k.has_runtime_shapes() && !takes_runtime_shapes(target)) {
        throw Error("Func '" + ctx.output +
                    "': runtime shapes (an input or output without set_bounds) are not "
                    "supported on " +
                    target.name() + "; set_bounds on every dimension");
    }
    k.call_checks = lower::required_regions(ctx);
    lower::set_read_extents(ctx, &k.args);
    ctx.args = k.args;
    std::set<std::string> runtime;
    std::map<std::string, Expr> dense_strides; // of the strides the generator constrained
    std::map<std::string, Halide::Internal::Parameter> params;
    for (const ImageParam &p : inputs)
        params[p.name()] = p.parameter();
    params[ctx.output] = output.output_buffer().parameter();
    for (const KernelArg &a : k.args) {
        Expr stride = 1;
        for (size_t d = 0; d < a.extents.size(); d++) {
            if (a.runtime[d])
                runtime.insert(a.extent_name(int(d)));
            auto p = params.find(a.name);
            if (p != params.end() && p->second.stride_constraint(int(d)).defined())
                dense_strides[a.name + ".stride." + std::to_string(d)] = stride;
            stride = simplify(stride * (a.runtime[d]
                                            ? Variable::make(Halide::Int(32), a.extent_name(int(d)))
                                            : Expr(int(a.extents[d]))));
        }
    }

    std::vector<Halide::Argument> args(inputs.begin(), inputs.end());
    Halide::Target host = Halide::get_host_target()
                              .with_feature(Halide::Target::NoAsserts)
                              .with_feature(Halide::Target::NoBoundsQuery)
                              .with_feature(Halide::Target::NoRuntime);
    Halide::Module module = [&] {
        try {
            Halide::Func f = output.halide();
            return f.compile_to_module(args, name, host);
        } catch (const Halide::CompileError &e) {
            throw Error(std::string("Halide rejected the schedule: ") + e.what());
        }
    }();
    Stmt s;
    for (const auto &f : module.functions()) {
        if (f.name == name)
            s = f.body;
    }
    internal_assert(s.defined()) << "Halide produced no function " << name << "\n";
    s = StripHostWrapper(runtime, dense_strides).mutate(s);
    s = simplify(InlineLets().mutate(simplify(s)));
    s = InlineLets().mutate(s);
    k.halide_stmt = s;
    lower::log_lowering("Halide's lowering", s);
    s = lower::row_statistics(s, ctx);
    lower::log_lowering("row_statistics", s);
    s = lower::skip_masked_blocks(s, ctx);
    lower::log_lowering("skip_masked_blocks", s);
    s = lower::carry_running_max(s, ctx);
    lower::log_lowering("carry_running_max", s);
    s = lower::run_passes(lower::lowering_of(target).passes, s, ctx, k);
    k.body = s;
    for (size_t i = 0; i < k.args.size(); i++)
        k.args[i].type = ctx.args[i].type; // tile_mma reads inputs of uint8 bits as FP8
    for (const std::string &note : ctx.notes)
        k.notes.push_back(in_user_words(note));
    for (const std::string &warning : ctx.warnings)
        k.warnings.push_back(in_user_words(warning));
    k.grid = ctx.grid;
    k.tiles = ctx.tiles;
    k.ctas_per_sm = ctx.ctas_per_sm;
    k.cluster = ctx.cluster;
    k.vector_units_only = ctx.vector_units_only;
    k.mix = ctx.mix;
    k.workspaces = ctx.workspaces;
    k.warpgroups = ctx.warpgroups;
    k.consumer_warpgroups = ctx.consumer_warpgroups;
    k.barriers = ctx.barriers;
    lower::validate_kernel(k);
    return k;
}

/** A Func's name as part of a kernel's (a C identifier). */
std::string identifier(const std::string &name) {
    std::string s = user_text(name);
    for (char &c : s)
        if (!isalnum(static_cast<unsigned char>(c)))
            c = '_';
    return s;
}

/** A copy of the pipeline of `output` with Halide's wrappers (in()) in its call graph, in which
 * each Func of `written` is read from the tensor its kernel wrote (the ImageParam of its name)
 * instead of computed. */
std::map<std::string, Function> pipeline_copy(const Function &output,
                                              const std::vector<ImageParam> &inputs,
                                              const std::map<std::string, ImageParam> &written) {
    std::map<std::string, Function> copies =
        wrap_func_calls(deep_copy({output}, lower::pipeline_functions(output)).second);
    // The inputs and their staged copies (wrappers) stay the caller's: the passes stage inputs
    // through their Functions' wrappers, which a copy would not see.
    auto keep = [&](const Function &original) {
        auto copy = copies.find(original.name());
        if (copy == copies.end())
            return;
        const Function copied = copy->second;
        for (auto &[n, g] : copies)
            g.substitute_calls(copied, original);
        copies.at(original.name()) = original;
    };
    for (const ImageParam &p : inputs) {
        const Function image = Halide::Func(p).function();
        keep(image);
        for (const auto &[consumer, wrapper] : image.schedule().wrappers())
            keep(Function(wrapper));
    }
    for (const auto &[name, tensor] : written) {
        auto original = copies.find(name);
        if (original == copies.end())
            continue;
        Function read = Halide::Func(tensor).function(); // as a caller's ImageParam
        for (auto &[n, g] : copies) {
            if (n != name)
                g.substitute_calls(original->second, read);
        }
        // Its staged copies (in()) become copies of the tensor, as an input's are.
        read.schedule().wrappers() = original->second.schedule().wrappers();
    }
    return copies;
}

/** The Funcs of `output`'s pipeline that are kernels of their own (computed at the root, with a
 * map_to_cores of their own), producers first. */
std::vector<std::string> kernel_funcs(const Function &output,
                                      const std::vector<ImageParam> &inputs) {
    auto own_kernel = [&](const Function &f) {
        Halide::LoopLevel level = f.schedule().compute_level();
        return f.name() != output.name() && !directives_of(f).cores_var.empty() &&
               level.lock().is_root();
    };
    const std::map<std::string, Function> originals = lower::pipeline_functions(output);
    if (std::none_of(originals.begin(), originals.end(),
                     [&](const auto &f) { return own_kernel(f.second); }))
        return {}; // one kernel: no copy of the pipeline needed
    const std::map<std::string, Function> env = pipeline_copy(output, inputs, {});
    std::vector<std::string> order;
    std::set<std::string> seen;
    std::function<void(const Function &)> visit = [&](const Function &f) {
        if (!seen.insert(f.name()).second)
            return;
        for (const auto &[name, callee] : find_direct_calls(f)) {
            if (name != f.name())
                visit(env.at(name));
        }
        if (own_kernel(f))
            order.push_back(f.name());
    };
    visit(env.at(output.name()));
    return order;
}

/** The input tensors (ImageParams) the pipeline of `f` reads. */
std::set<std::string> images_read(const Function &f) {
    struct Images : IRVisitor {
        std::set<std::string> names;
        using IRVisitor::visit;
        void visit(const Call *c) override {
            if (c->call_type == Call::Image && c->param.defined())
                names.insert(c->param.name());
            IRVisitor::visit(c);
        }
    } images;
    for (auto &[name, g] : find_transitive_calls(f))
        g.accept(&images);
    return images.names;
}

/** A pipeline of kernels (Kernel::stages): each of `funcs` (producers first), then the output. */
Kernel compile_pipeline(const Func &output, const std::vector<ImageParam> &inputs,
                        const Target &target, const std::string &name,
                        const std::vector<std::string> &funcs) {
    CompileContext ctx;
    ctx.target = target;
    ctx.output = output.name();
    Kernel pipeline;
    pipeline.name = name;
    pipeline.target = target;
    pipeline.args = caller_args(output, inputs);
    const std::string kernels = "Func '" + user_text(funcs.front()) +
                                "' is a kernel of its own (compute_root with its own "
                                "map_to_cores)";
    if (pipeline.has_runtime_shapes() && !takes_runtime_shapes(target)) {
        throw Error(kernels +
                    ": runtime shapes (an input or output without set_bounds) are not "
                    "supported on " +
                    target.name() + "; set_bounds on every dimension");
    }
    std::map<std::string, Expr> estimates; // of the runtime extents (an intermediate's estimate)
    for (const KernelArg &a : pipeline.args) {
        for (size_t d = 0; d < a.runtime.size(); d++)
            if (a.runtime[d])
                estimates[a.extent_name(int(d))] = Expr(a.extents[d]);
    }
    ctx.args = pipeline.args;
    ctx.functions = pipeline_copy(output.halide().function(), inputs, {});
    pipeline.call_checks = lower::required_regions(ctx);

    std::map<std::string, ImageParam> written; // the intermediates, by Func
    auto arguments = [&](const Function &f) {
        std::vector<ImageParam> args;
        const std::set<std::string> read = images_read(f);
        for (const ImageParam &p : inputs) {
            if (read.count(p.name()))
                args.push_back(p);
        }
        for (const auto &[n, tensor] : written) {
            if (read.count(tensor.name()))
                args.push_back(tensor);
        }
        return args;
    };
    for (const std::string &func : funcs) {
        Function f = pipeline_copy(output.halide().function(), inputs, written).at(func);
        f.schedule().wrappers().clear(); // its consumers' copies of it are the later kernels'
        const Halide::Internal::Box box = lower::required_box(ctx, f.name());
        if (f.outputs() != 1) {
            throw Error("Func '" + f.name() +
                        "' is a kernel of its own (compute_root with its own map_to_cores) and "
                        "has " +
                        std::to_string(f.outputs()) +
                        " values; such a Func has one value (a Tuple stays inside a kernel)");
        }
        if (box.size() != size_t(f.dimensions())) {
            throw Error("Func '" + f.name() +
                        "' is a kernel of its own (compute_root with its own map_to_cores) but "
                        "the output does not read it");
        }
        Halide::Func copy(f);
        ImageParam tensor(f.output_types()[0], f.dimensions(), f.name());
        Halide::OutputImageParam written_by = copy.output_buffer();
        for (int d = 0; d < f.dimensions(); d++) {
            const Interval &i = box[d];
            if (!i.is_bounded() || !is_const_zero(simplify(i.min))) {
                throw Error("Func '" + f.name() +
                            "' is a kernel of its own (compute_root with its own map_to_cores): "
                            "the region of it the output reads must start at 0 in every "
                            "dimension, and its dimension " +
                            std::to_string(d) + " (" + f.args()[d] + ") is read over [" +
                            user_text(i.min) + ", " + user_text(i.max) + "]");
            }
            const Expr extent = simplify(i.max + 1);
            for (Halide::OutputImageParam p : {Halide::OutputImageParam(tensor), written_by}) {
                p.dim(d).set_min(0);
                if (d > 0)
                    p.dim(d).set_stride(p.dim(d - 1).extent() * p.dim(d - 1).stride());
                else
                    p.dim(d).set_stride(1);
                if (is_const(extent)) {
                    p.dim(d).set_extent(extent);
                } else {
                    const Expr estimate = simplify(substitute(estimates, extent));
                    p.dim(d).set_estimate(0, is_const(estimate) ? estimate : Expr(0));
                }
            }
            if (!is_const(extent))
                pipeline.intermediate_extents[f.name() + ".extent." + std::to_string(d)] = extent;
        }
        Kernel stage = compile_kernel(Func(copy), arguments(copy.function()), target,
                                      name + "_" + identifier(f.name()));
        pipeline.intermediates.push_back(stage.args.back());
        pipeline.stages.push_back(std::move(stage));
        written.emplace(f.name(), tensor);
    }
    Halide::Func last(pipeline_copy(output.halide().function(), inputs, written).at(ctx.output));
    pipeline.stages.push_back(compile_kernel(Func(last), arguments(last.function()), target, name));
    for (const Kernel &k : pipeline.stages) {
        for (KernelArg &a : pipeline.args) {
            if (const KernelArg *read = k.arg(a.name))
                a.type = read->type; // tile_mma reads inputs of uint8 bits as FP8
        }
        for (const std::string &w : k.warnings)
            pipeline.warnings.push_back(w);
        pipeline.notes.push_back("kernel " + k.name + ": " + std::to_string(k.grid) + " units");
    }
    return pipeline;
}

} // namespace

Kernel compile(const Func &output, const std::vector<ImageParam> &inputs, const Target &target,
               const std::string &name) {
    const std::vector<std::string> funcs = kernel_funcs(output.halide().function(), inputs);
    if (funcs.empty())
        return compile_kernel(output, inputs, target, name);
    return compile_pipeline(output, inputs, target, name, funcs);
}

} // namespace tandem
