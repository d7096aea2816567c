#include "DefaultStaging.h"

#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** Whether a definition of `f` (pure or update, values and indices, simplified: x - y - x reads
 * no y) calls `callee`. */
bool calls(const Function &f, const std::string &callee) {
    class Find : public IRGraphVisitor {
    public:
        explicit Find(const std::string &callee) : callee(callee) {}
        const std::string &callee;
        bool found = false;
        using IRGraphVisitor::visit;
        void visit(const Call *op) override {
            found |= op->name == callee;
            IRGraphVisitor::visit(op);
        }
    } find(callee);
    std::vector<Definition> definitions = {f.definition()};
    for (const Definition &u : f.updates())
        definitions.push_back(u);
    for (const Definition &d : definitions) {
        for (const Expr &e : d.values())
            simplify(e).accept(&find);
        for (const Expr &e : d.args())
            simplify(e).accept(&find);
    }
    return find.found;
}

/** The wrappers of `image` (Func::staged, in()) by the name of their consumer ("": all). */
bool is_wrapper_of(const Function &f, const Function &image) {
    for (const auto &[consumer, wrapper] : image.wrappers()) {
        if (Function(wrapper).name() == f.name())
            return true;
    }
    return false;
}

/** The copy directives of the user's staged copies computed at `at`: async_copy and the most
 * versions among them (none: a synchronous copy). A copy added there works as they do (on Ascend
 * the copies of one loop share their flags, so they must). */
Directives copies_at(const std::vector<ImageParam> &inputs, const Halide::LoopLevel &at) {
    Directives d;
    for (const ImageParam &input : inputs) {
        for (const auto &[consumer, wrapper] : Halide::Func(input).function().wrappers()) {
            Function copy(wrapper);
            Halide::LoopLevel level = copy.schedule().compute_level();
            level.lock();
            const Directives given = directives_of(copy);
            if (level.is_inlined() || level.is_root() || level.func() != at.func() ||
                level.var().name() != at.var().name() || !given.async_copy) {
                continue;
            }
            d.async_copy = true;
            d.multi_buffer = std::max(d.multi_buffer, given.multi_buffer);
        }
    }
    return d;
}

} // namespace

void stage_inputs_read_by_vector_code(const Func &output, const std::vector<ImageParam> &inputs,
                                      CompileContext &ctx) {
    const Function out = output.halide().function();
    const std::string cores_var = directives_of(out).cores_var;
    std::map<std::string, Function> env = find_transitive_calls(out);
    env.emplace(out.name(), out);
    for (const ImageParam &input : inputs) {
        const Function image = Halide::Func(input).function();
        if (image.wrappers().count(""))
            continue; // staged for every consumer
        for (const auto &[name, f] : env) {
            if (name == image.name() || is_wrapper_of(f, image) || image.wrappers().count(name) ||
                !calls(f, image.name()) || directives_of(f).tile_mma) {
                continue;
            }
            // Where f is computed: the output at its tile loop, any other Func at its compute_at.
            Halide::LoopLevel at = f.schedule().compute_level();
            at.lock();
            std::string where;
            if (name == out.name()) {
                if (cores_var.empty())
                    continue;
                at = Halide::LoopLevel(output.halide(), Var(cores_var));
                at.lock();
                where = output.name() + ", " + cores_var;
            } else {
                if (at.is_inlined() || at.is_root())
                    continue;
                where = at.func() + ", " + at.var().name();
            }
            const Directives like = copies_at(inputs, at);
            Func copy(Halide::Func(image).in(Halide::Func(f)));
            copy.halide().compute_at(at);
            if (like.async_copy)
                copy.async_copy();
            if (like.multi_buffer)
                copy.multi_buffer(like.multi_buffer);
            ctx.notes.push_back(input.name() + " is read from DRAM by " + name +
                                "'s vector code, which works on chip: staged for it, as "
                                "Func::staged(" +
                                input.name() + ", " + name + ").compute_at(" + where + ")" +
                                (like.async_copy ? ".async_copy()" : "") +
                                (like.multi_buffer
                                     ? ".multi_buffer(" + std::to_string(like.multi_buffer) + ")"
                                     : "") +
                                " like the copies beside it (stage it yourself to place it "
                                "elsewhere)");
        }
    }
}

void guard_output_tails(const Func &output, CompileContext &ctx) {
    Function out = output.halide().function();
    std::string guarded;
    for (Split &split : out.definition().schedule().splits()) {
        // Halide resolves Auto to ShiftInwards as the schedule is written.
        if (split.is_split() &&
            (split.tail == TailStrategy::Auto || split.tail == TailStrategy::ShiftInwards)) {
            split.tail = TailStrategy::GuardWithIf;
            guarded += (guarded.empty() ? "" : ", ") + split.old_var;
        }
    }
    if (!guarded.empty()) {
        ctx.notes.push_back(output.name() + ": the tiles of " + guarded +
                            " are guarded at the edges (GuardWithIf), not shifted inwards: a "
                            "shifted tile overlaps its neighbour on another core, and one larger "
                            "than the tensor starts before it");
    }
}

namespace {

/** The dimensions along which the update definitions of `f` with a where clause call `callee`
 * with an index of their reduction variables. */
std::set<int> windowed_dims(const Function &f, const std::string &callee) {
    class Find : public IRGraphVisitor {
    public:
        Find(const std::string &callee, const std::set<std::string> &rvars)
            : callee(callee), rvars(rvars) {}
        const std::string &callee;
        const std::set<std::string> &rvars;
        std::set<int> dims;
        using IRGraphVisitor::visit;
        void visit(const Call *op) override {
            if (op->name == callee) {
                for (size_t d = 0; d < op->args.size(); d++) {
                    for (const std::string &r : rvars) {
                        if (expr_uses_var(op->args[d], r))
                            dims.insert(int(d));
                    }
                }
            }
            IRGraphVisitor::visit(op);
        }
    };
    std::set<int> dims;
    for (const Definition &u : f.updates()) {
        if (!u.predicate().defined() || is_const_one(u.predicate()))
            continue;
        std::set<std::string> rvars;
        for (const ReductionVariable &r : u.schedule().rvars())
            rvars.insert(r.var);
        Find find(callee, rvars);
        for (const Expr &e : u.values())
            e.accept(&find);
        for (const Expr &e : u.args())
            e.accept(&find);
        dims.insert(find.dims.begin(), find.dims.end());
    }
    return dims;
}

} // namespace

void bound_windowed_copies(const Func &output, const std::vector<ImageParam> &inputs) {
    const Function out = output.halide().function();
    std::map<std::string, Function> env = find_transitive_calls(out);
    env.emplace(out.name(), out);
    for (const ImageParam &input : inputs) {
        const Function image = Halide::Func(input).function();
        for (const auto &[consumer, wrapper] : image.wrappers()) {
            std::set<int> dims;
            for (const auto &[name, f] : env) {
                if (consumer.empty() || consumer == name) {
                    const std::set<int> d = windowed_dims(f, image.name());
                    dims.insert(d.begin(), d.end());
                }
            }
            Halide::Func copy{Function(wrapper)};
            for (int d : dims) {
                Expr extent = input.parameter().extent_constraint(d);
                if (!extent.defined())
                    extent = input.dim(d).extent();
                copy.bound_storage(Var(copy.args()[d].name()), extent);
            }
        }
    }
}

} // namespace tandem::lower
