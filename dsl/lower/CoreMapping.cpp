#include "CoreMapping.h"

#include "tandem/AsyncIR.h"

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

class SpreadLoops : public IRMutator {
public:
    SpreadLoops(const std::string &loop_name, int cores) : loop_name(loop_name), cores(cores) {}
    int mapped = 0;

private:
    using IRMutator::visit;
    const std::string &loop_name;
    const int cores;

    bool matches(const std::string &name) const {
        return name == loop_name || name.rfind(loop_name + ".", 0) == 0;
    }

    Stmt visit(const For *op) override {
        if (!matches(op->name)) return IRMutator::visit(op);
        mapped++;
        std::string local = op->name + ".on_core";
        Expr core = ir::core_id();
        Expr trips = (op->extent - core + (cores - 1)) / cores;
        Expr iteration = op->min + core + Variable::make(Halide::Int(32), local) * cores;
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
    SpreadLoops spread(ctx.output + ".s0." + d.cores_var, ctx.target.zpu.cores);
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
