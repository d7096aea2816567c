#include "Validate.h"
#include "Targets.h"

#include "tandem/AsyncIR.h"

#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

std::string where(const std::string &func, const std::string &directive) {
    return "Func '" + func + "', directive " + directive + ": ";
}

class CheckNames : public IRVisitor {
public:
    explicit CheckNames(const Kernel &k) : kernel(k) {}

private:
    using IRVisitor::visit;
    const Kernel &kernel;
    void check(const std::string &name) {
        if (!kernel.buffer(name) && !kernel.arg(name)) {
            internal_error << "async Stmt of " << kernel.name << " names unknown buffer " << name
                           << "\n";
        }
    }
    void visit(const Load *op) override {
        check(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        check(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Variable *op) override {
        if (op->name.size() > 6 && op->name.compare(op->name.size() - 6, 6, ".stage") == 0) {
            internal_error << "version variable " << op->name << " left free in " << kernel.name
                           << "\n";
        }
    }
};

} // namespace

std::map<std::string, Function> pipeline_functions(const Function &output) {
    std::map<std::string, Function> all;
    std::vector<Function> todo = {output};
    while (!todo.empty()) {
        Function f = todo.back();
        todo.pop_back();
        for (const auto &[name, callee] : find_transitive_calls(f)) {
            if (all.emplace(name, callee).second)
                todo.push_back(callee);
            for (const auto &[consumer, wrapper] : callee.schedule().wrappers()) {
                Function w(wrapper);
                if (all.emplace(w.name(), w).second)
                    todo.push_back(w);
            }
        }
    }
    return all;
}

void validate_schedule(const Func &output, CompileContext &ctx) {
    auto env = pipeline_functions(output.halide().function());
    ctx.funcs.clear();
    for (const auto &[name, f] : env) {
        ctx.funcs.push_back(name);
        ctx.directives[name] = directives_of(f);
        ctx.functions.emplace(name, f);
    }
    for (const auto &[name, f] : env) {
        const Directives d = ctx.of(name);
        bool is_output = name == ctx.output;
        if (!is_output) {
            if (d.warp_specialize) {
                throw Error(where(name, "warp_specialize()") +
                            "it applies to the kernel as a whole; set it on the "
                            "output Func " +
                            ctx.output);
            }
            if (d.cooperative) {
                throw Error(where(name, "cooperative()") +
                            "it shares the kernel's tiles between consumer "
                            "warpgroups; set it on the output Func " +
                            ctx.output);
            }
            if (d.ping_pong) {
                throw Error(where(name, "ping_pong()") +
                            "it alternates the result slots of the kernel; set it "
                            "on the output Func " +
                            ctx.output);
            }
            if (!d.cores_var.empty()) {
                throw Error(where(name, "map_to_cores(" + d.cores_var + ")") +
                            "only the output Func's tile loop "
                            "can be spread over the cores; set it on " +
                            ctx.output + ", or compute_root() " + name +
                            " to make it a kernel of its own");
            }
        }
        if (d.cluster > 1 && !is_output) {
            throw Error(where(name, "cluster(" + std::to_string(d.cluster) + ")") +
                        "it groups the tiles of the "
                        "kernel's tile loop; set it on the output Func " +
                        ctx.output);
        }
        if (d.cluster > 1 && !lowering_of(ctx.target).clusters) {
            throw Error(where(name, "cluster(" + std::to_string(d.cluster) + ")") +
                        "clusters are Hopper's thread-block clusters and the ZPU's mesh "
                        "columns; " +
                        ctx.target.name() + " has neither");
        }
        if (d.cluster > 1 && lowering_of(ctx.target).mesh_clusters) {
            const int64_t cores = ctx.target.machine.integer("cores"),
                          columns = ctx.target.machine.integer("mesh_columns");
            const int64_t rows = columns > 0 && cores % columns == 0 ? cores / columns : 0;
            if (rows % d.cluster != 0) {
                throw Error(where(name, "cluster(" + std::to_string(d.cluster) + ")") +
                            "a cluster is " + std::to_string(d.cluster) + " cores of a column of " +
                            ctx.target.name() + "'s mesh, which has " + std::to_string(rows) +
                            " rows (" + std::to_string(cores) + " cores in rows of " +
                            std::to_string(columns) + "); use a cluster size that divides " +
                            std::to_string(rows));
            }
        } else if (d.cluster > 1 && !d.warp_specialize) {
            throw Error(where(name, "cluster(" + std::to_string(d.cluster) + ")") +
                        "the CTAs of a cluster write "
                        "each other's shared memory, which only the producer / consumer rings' "
                        "empty barriers "
                        "make safe; add warp_specialize() on " +
                        name);
        }
        if (d.cooperative && !lowering_of(ctx.target).cooperative) {
            throw Error(where(name, "cooperative()") + "not supported on " + ctx.target.name() +
                        ": consumer warpgroups that share a tile are Hopper's, and " +
                        ctx.target.name() + " has none (use warp_specialize() alone)");
        }
        if (d.cooperative && d.ping_pong) {
            throw Error(where(name, "cooperative()") +
                        "the two consumer warpgroups that share each tile "
                        "exclude ping_pong() (consumers on alternate tiles)");
        }
        if (d.cooperative && !d.warp_specialize) {
            for (const auto &[f, other] : ctx.directives) {
                if (other.tile_mma) {
                    throw Error(
                        where(name, "cooperative()") +
                        "without warp_specialize() it runs a vector kernel's "
                        "software pipeline on two warpgroups; the tile MMA of " +
                        f +
                        " needs warp_specialize() (a producer and the two consumer warpgroups)");
                }
            }
        }
        if (d.multi_buffer > 1 && !d.async_copy) {
            throw Error(where(name, "multi_buffer(" + std::to_string(d.multi_buffer) + ")") +
                        "versions only help when the copy is asynchronous; add async_copy() on " +
                        name);
        }
        if (d.vectorized) {
            throw Error(where(name, "vectorize") +
                        "the zpu's vector core works on whole tiles; drop vectorize "
                        "from zpu schedules");
        }
    }
}

void validate_kernel(const Kernel &kernel) {
    CheckNames c(kernel);
    kernel.body.accept(&c);
}

} // namespace tandem::lower
