#include "tandem/Generator.h"

#include <cmath>
#include <set>

namespace tandem {

namespace {

/** The input images the pipeline of `f` reads. */
std::set<std::string> images_read(const Halide::Func &f) {
    class Find : public Halide::Internal::IRVisitor {
    public:
        std::set<std::string> names;
        using IRVisitor::visit;
        void visit(const Halide::Internal::Call *op) override {
            if (op->call_type == Halide::Internal::Call::Image)
                names.insert(op->name);
            IRVisitor::visit(op);
        }
    } find;
    std::map<std::string, Halide::Internal::Function> all =
        Halide::Internal::find_transitive_calls(f.function());
    all.emplace(f.name(), f.function());
    for (auto &[name, function] : all) {
        function.accept(&find);
    }
    return find.names;
}

} // namespace

namespace detail {

GeneratorBase *&current() {
    static thread_local GeneratorBase *g = nullptr;
    return g;
}

GeneratorBase &generator_under_construction(const char *what) {
    if (!current()) {
        throw Error(std::string(what) +
                    " outside a generator: declare it as a member of a class derived from "
                    "tandem::Generator");
    }
    return *current();
}

void set_generator_under_construction(GeneratorBase *g) {
    current() = g;
}

} // namespace detail

GeneratorBase::GeneratorBase() {
    detail::set_generator_under_construction(this);
}

GeneratorBase::~GeneratorBase() {
    if (detail::current() == this)
        detail::set_generator_under_construction(nullptr);
}

std::vector<GeneratorParamInfo> GeneratorBase::params() const {
    std::vector<GeneratorParamInfo> all;
    for (const detail::ParamSlot &p : params_) {
        GeneratorParamInfo info = p.info;
        info.value = p.get();
        all.push_back(info);
    }
    return all;
}

void GeneratorBase::set_param(const std::string &name, const std::string &value) {
    if (built_)
        throw Error("generator " + name_ + ": parameter " + name + " set after build()");
    for (detail::ParamSlot &p : params_) {
        if (p.info.name != name)
            continue;
        try {
            p.set(value);
        } catch (const Error &e) {
            throw Error("generator " + name_ + ": " + e.what());
        }
        return;
    }
    std::string known;
    for (const detail::ParamSlot &p : params_)
        known += (known.empty() ? "" : ", ") + p.info.name;
    throw Error("generator " + name_ + " has no parameter '" + name + "' (known: " + known + ")");
}

void GeneratorBase::add_param(detail::ParamSlot slot) {
    for (const detail::ParamSlot &p : params_) {
        if (p.info.name == slot.info.name)
            throw Error("generator: two parameters named " + slot.info.name);
    }
    params_.push_back(std::move(slot));
}

void GeneratorBase::add_input(ImageParam *input, const std::string &name, Halide::Type type,
                              int rank) {
    inputs_.push_back({input, name, type, rank});
}

void GeneratorBase::add_output(Func *output, const std::string &name, Halide::Type type, int rank) {
    outputs_.push_back({output, name, type, rank});
}

namespace {

/** Halide's default for a dimension generate() leaves unconstrained (any min, extent and stride
 * at the call), as Tandem takes it: a runtime extent starting at 0, in a dense buffer (the kernel
 * checks the call's buffer). What the generator set stays. */
void default_to_dense(Halide::OutputImageParam tensor) {
    const Halide::Internal::Parameter &p = tensor.parameter();
    for (int d = 0; d < tensor.dimensions(); d++) {
        Halide::Internal::Dimension dim = tensor.dim(d);
        if (!p.min_constraint(d).defined())
            dim.set_min(0);
        if (d > 0 && !p.stride_constraint(d).defined())
            dim.set_stride(tensor.dim(d - 1).stride() * tensor.dim(d - 1).extent());
    }
}

} // namespace

void dense_shape(Halide::OutputImageParam tensor, const std::vector<int> &extents, bool runtime,
                 const std::vector<bool> &fixed) {
    if (int(extents.size()) != tensor.dimensions()) {
        throw Error("dense_shape(" + tensor.name() + "): " + std::to_string(extents.size()) +
                    " extents for " + std::to_string(tensor.dimensions()) + " dimensions");
    }
    for (size_t d = 0; d < extents.size(); d++) {
        Halide::Internal::Dimension dim = tensor.dim(int(d));
        if (!runtime || (d < fixed.size() && fixed[d]))
            dim.set_bounds(0, extents[d]);
        else
            dim.set_min(0).set_estimate(0, extents[d]);
        if (d > 0)
            dim.set_stride(tensor.dim(int(d) - 1).stride() * tensor.dim(int(d) - 1).extent());
    }
}

GeneratorBase::Pipeline GeneratorBase::build_algorithm() {
    if (built_)
        throw Error("generator " + name_ +
                    ": built once already (the registry makes a fresh instance)");
    built_ = true;
    if (outputs_.size() != 1) {
        throw Error("generator " + name_ + ": needs exactly one Output, it declares " +
                    std::to_string(outputs_.size()));
    }
    generate();
    Func &out = *static_cast<Func *>(outputs_[0].object);
    const Halide::Func &f = out.halide();
    if (!f.defined())
        throw Error("generator " + name_ + ": generate() did not define the output " +
                    outputs_[0].name);
    const bool any_type = outputs_[0].type.bits() == 0;
    if ((!any_type && f.output_types()[0] != outputs_[0].type) ||
        f.dimensions() != outputs_[0].rank) {
        std::ostringstream why;
        why << "generator " << name_ << ": the output " << outputs_[0].name
            << " is declared Buffer<" << outputs_[0].type << ", " << outputs_[0].rank
            << "> but generate() defines it as " << f.output_types()[0] << " over "
            << f.dimensions() << " dimensions";
        throw Error(why.str());
    }
    Pipeline p;
    std::set<std::string> read = images_read(f);
    for (const Io &in : inputs_) {
        const ImageParam &image = *static_cast<ImageParam *>(in.object);
        if (read.count(image.name()))
            p.inputs.push_back(image);
    }
    p.output = out;
    for (const ImageParam &in : p.inputs)
        default_to_dense(in);
    default_to_dense(f.output_buffer());
    return p;
}

GeneratorBase::Pipeline GeneratorBase::build(const Target &target) {
    target_ = target;
    Pipeline p = build_algorithm();
    schedule();
    return p;
}

namespace {

/** The reference's infinities as runtime values. Halide 14 lets LLVM assume a float is never
 * infinite (its fast math; StrictFloat did not stop it), so a constant -inf (a max's identity, a
 * causal mask) was folded into garbage: rows of zeros in a textbook attention's reference at
 * L = 10, S = 4, a running max's first step in FlashAttention's. A Param's value LLVM cannot
 * see. */
class OpaqueInfinities : public Halide::Internal::IRMutator {
    using IRMutator::visit;
    Expr visit(const Halide::Internal::FloatImm *op) override {
        static const Halide::Param<float> pos("tandem_infinity", INFINITY),
            neg("tandem_minus_infinity", -INFINITY);
        if (op->type != Halide::Float(32) || !std::isinf(op->value))
            return op;
        return op->value > 0 ? Expr(pos) : Expr(neg);
    }
};

} // namespace

GeneratorBase::Pipeline GeneratorBase::build_reference() {
    Pipeline p = build_algorithm();
    reference_schedule();
    OpaqueInfinities opaque;
    for (auto &[name, function] :
         Halide::Internal::find_transitive_calls(p.output.halide().function()))
        function.mutate(&opaque);
    p.output.halide().function().mutate(&opaque);
    // Halide computes a Func with an update definition that nothing schedules at the innermost
    // loop of its consumer: a row's sum once per element of the row (softmax 4096 x 64: 367 s of
    // JIT'd reference, quadratic in the row). Such a Func the reference schedule left alone is
    // computed at the root instead: the same values in the same order, once.
    // (Lowering locks every LoopLevel anyway; nothing schedules after this.)
    for (auto &[name, function] :
         Halide::Internal::find_transitive_calls(p.output.halide().function())) {
        Halide::LoopLevel level = function.schedule().compute_level();
        if (name != p.output.halide().name() && function.has_update_definition() &&
            level.lock().is_inlined())
            Halide::Func(function).compute_root();
    }
    return p;
}

Kernel GeneratorBase::compile(const Target &target, const std::string &name) {
    Pipeline p = build(target);
    return tandem::compile(p.output, p.inputs, target, name.empty() ? name_ : name);
}

namespace {
std::map<std::string, GeneratorRegistry::Factory> &registry() {
    static std::map<std::string, GeneratorRegistry::Factory> r;
    return r;
}
} // namespace

bool GeneratorRegistry::add(const std::string &name, Factory factory) {
    if (!registry().emplace(name, std::move(factory)).second)
        throw Error("two generators named " + name);
    return true;
}

std::unique_ptr<GeneratorBase> GeneratorRegistry::create(const std::string &name) {
    auto it = registry().find(name);
    if (it == registry().end()) {
        std::string known;
        for (const auto &[n, f] : registry())
            known += (known.empty() ? "" : ", ") + n;
        throw Error("unknown generator '" + name + "' (known: " + known + ")");
    }
    std::unique_ptr<GeneratorBase> g = it->second();
    g->name_ = name;
    detail::set_generator_under_construction(nullptr);
    return g;
}

std::vector<std::string> GeneratorRegistry::names() {
    std::vector<std::string> all;
    for (const auto &[n, f] : registry())
        all.push_back(n);
    return all;
}

} // namespace tandem
