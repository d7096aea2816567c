#include "CoreMapping.h"

#include "tandem/AsyncIR.h"

#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

class SpreadLoops : public IRMutator {
public:
    SpreadLoops(const std::string &stage, const std::string &var, int cores) : stage(stage), var(var), cores(cores) {}
    int mapped = 0;

private:
    using IRMutator::visit;
    const std::string stage, var;
    const int cores;

    /** Halide names loops stage.var with the vars a var was split or fused from in front
     * ("C.s0.j.jo.t") and ".rebased" behind a partitioned tail: match the var's component. */
    bool matches(const std::string &name) const {
        if (name.rfind(stage + ".", 0) != 0) return false;
        std::vector<std::string> parts;
        std::stringstream ss(name.substr(stage.size() + 1));
        for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
        while (!parts.empty() && parts.back() == "rebased") parts.pop_back();
        return !parts.empty() && parts.back() == var;
    }

    Stmt visit(const For *op) override {
        if (!matches(op->name)) return IRMutator::visit(op);
        mapped++;
        std::string local = op->name + ".on_core";
        Expr core = ir::core_id();
        Expr trips = (op->extent - core + (cores - 1)) / cores;
        // The clamp promise keeps the original range visible to bounds inference (sizes of
        // buffers that depend on the tile index stay boundable).
        Expr iteration = Call::make(Halide::Int(32), Call::promise_clamped,
                                    {op->min + core + Variable::make(Halide::Int(32), local) * cores, op->min,
                                     op->min + op->extent - 1},
                                    Call::PureIntrinsic);
        Stmt body = substitute(op->name, iteration, op->body);
        return For::make(local, 0, trips, op->for_type, op->device_api, body);
    }
};

} // namespace

Stmt map_to_cores(const Stmt &s, CompileContext &ctx) {
    const Directives d = ctx.of(ctx.output);
    if (d.cores_var.empty()) {
        ctx.notes.push_back("no map_to_cores on " + ctx.output + ": the kernel runs on core 0 only");
        return IfThenElse::make(ir::core_id() == 0, s);
    }
    SpreadLoops spread(ctx.output + ".s0", d.cores_var, ctx.target.zpu.cores);
    Stmt result = spread.mutate(s);
    if (spread.mapped == 0) {
        throw Error("Func '" + ctx.output + "', directive map_to_cores(" + d.cores_var + "): " +
                    ctx.output + " has no loop over " + d.cores_var +
                    " after lowering; name a loop var of its pure stage (after split/tile/fuse)");
    }
    ctx.notes.push_back("map_to_cores: loop " + d.cores_var + " of " + ctx.output + " spread over " +
                        std::to_string(ctx.target.zpu.cores) + " cores (" +
                        std::to_string(spread.mapped) + " loop(s) after Halide's partitioning)");
    return result;
}

} // namespace tandem::lower
