#include "RequiredRegions.h"

#include <functional>
#include <set>
#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;
using Halide::Expr;

namespace {

/** The Funcs a definition calls (Halide calls, not images). */
class CalledFuncs : public IRVisitor {
public:
    std::set<std::string> names;

private:
    using IRVisitor::visit;
    void visit(const Call *c) override {
        if (c->call_type == Call::Halide)
            names.insert(c->name);
        IRVisitor::visit(c);
    }
};

Expr extent_of(const KernelArg &a, size_t d) {
    if (d < a.runtime.size() && a.runtime[d])
        return Variable::make(Halide::Int(32), a.extent_name(int(d)));
    return Expr(a.extents[d]);
}

/** The box of each Func and input the output needs, from the pure algorithm. */
std::map<std::string, Box> required_boxes(const CompileContext &ctx) {
    // Consumers before producers: a Func's region is whole before it is read from.
    std::vector<std::string> order;
    std::set<std::string> seen;
    std::function<void(const std::string &)> visit = [&](const std::string &f) {
        auto it = ctx.functions.find(f);
        if (it == ctx.functions.end() || !seen.insert(f).second)
            return;
        CalledFuncs calls;
        it->second.accept(&calls);
        for (const std::string &callee : calls.names)
            visit(callee);
        order.push_back(f);
    };
    visit(ctx.output);
    std::map<std::string, Box> boxes;
    const KernelArg *out = nullptr;
    for (const KernelArg &a : ctx.args) {
        if (a.output)
            out = &a;
    }
    if (!out || !ctx.functions.count(ctx.output))
        return boxes;
    Box &whole = boxes[ctx.output];
    for (size_t d = 0; d < out->extents.size(); d++)
        whole.push_back(Interval(0, extent_of(*out, d) - 1));

    for (auto f = order.rbegin(); f != order.rend(); ++f) {
        const Function &func = ctx.functions.at(*f);
        auto box = boxes.find(*f);
        if (box == boxes.end() || func.has_extern_definition())
            continue;
        Scope<Interval> scope;
        for (size_t d = 0; d < func.args().size() && d < box->second.size(); d++)
            scope.push(func.args()[d], box->second[d]);
        std::vector<Definition> definitions = {func.definition()};
        for (const Definition &u : func.updates())
            definitions.push_back(u);
        for (const Definition &def : definitions) {
            Scope<Interval> inner;
            inner.set_containing_scope(&scope);
            for (const ReductionVariable &r : def.schedule().rvars())
                inner.push(r.var, Interval(r.min, r.min + r.extent - 1));
            std::vector<Expr> exprs = def.values();
            exprs.insert(exprs.end(), def.args().begin(), def.args().end());
            for (const Expr &e : exprs) {
                for (const auto &[callee, b] : boxes_required(e, inner)) {
                    if (callee == *f)
                        continue; // an update reading its own Func
                    auto it = boxes.find(callee);
                    if (it == boxes.end())
                        boxes[callee] = b;
                    else
                        merge_boxes(it->second, b);
                }
            }
        }
    }
    return boxes;
}

/** Static extents as constants: what is left depends on the runtime extents only. */
std::map<std::string, Expr> static_extents(const CompileContext &ctx) {
    std::map<std::string, Expr> statics;
    for (const KernelArg &a : ctx.args) {
        for (size_t d = 0; d < a.extents.size(); d++) {
            if (d >= a.runtime.size() || !a.runtime[d])
                statics[a.extent_name(int(d))] = Expr(a.extents[d]);
        }
    }
    return statics;
}

} // namespace

std::vector<CallCheck> required_regions(const CompileContext &ctx) {
    const std::map<std::string, Box> boxes = required_boxes(ctx);
    const std::map<std::string, Expr> statics = static_extents(ctx);
    std::vector<CallCheck> checks;
    for (const KernelArg &a : ctx.args) {
        auto b = boxes.find(a.name);
        if (a.output || b == boxes.end())
            continue;
        for (size_t d = 0; d < a.extents.size() && d < b->second.size(); d++) {
            const Interval &read = b->second[d];
            if (!read.is_bounded())
                continue;
            const Expr max = simplify(substitute(statics, read.max)),
                       min = simplify(substitute(statics, read.min));
            const Expr holds = simplify(substitute(statics, max < extent_of(a, d) && min >= 0));
            if (is_const_one(holds))
                continue;
            const std::string why = user_text(a.name) + " dimension " + std::to_string(d) +
                                    " is read at [" + user_text(min) + ", " + user_text(max) +
                                    "]; its extent must be at least " +
                                    user_text(simplify(max + 1));
            if (is_const_zero(holds))
                throw Error("Func '" + ctx.output + "': " + why + " (it is " +
                            std::to_string(a.extents[d]) + ")");
            checks.push_back({holds, why});
        }
    }
    return checks;
}

void set_read_extents(const CompileContext &ctx, std::vector<KernelArg> *args) {
    const std::map<std::string, Box> boxes = required_boxes(ctx);
    const std::map<std::string, Expr> statics = static_extents(ctx);
    for (KernelArg &a : *args) {
        auto b = boxes.find(a.name);
        if (a.output || b == boxes.end())
            continue;
        a.read_extents.assign(a.extents.size(), Expr());
        for (size_t d = 0; d < a.extents.size() && d < b->second.size(); d++) {
            const Interval &read = b->second[d];
            if (read.is_bounded() && is_const_zero(simplify(substitute(statics, read.min))))
                a.read_extents[d] = simplify(substitute(statics, read.max) + 1);
        }
    }
}

Halide::Internal::Box required_box(const CompileContext &ctx, const std::string &func) {
    const std::map<std::string, Box> boxes = required_boxes(ctx);
    const std::map<std::string, Expr> statics = static_extents(ctx);
    auto b = boxes.find(func);
    if (b == boxes.end())
        return {};
    Box box = b->second;
    for (Interval &i : box.bounds) {
        if (i.has_lower_bound())
            i.min = simplify(substitute(statics, i.min));
        if (i.has_upper_bound())
            i.max = simplify(substitute(statics, i.max));
    }
    return box;
}

} // namespace tandem::lower
