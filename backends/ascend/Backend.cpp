// Ascend as a target plug-in (common/Backend.h): its machine model, roofline and emitted AscendC.
#include "Backend.h"

#include "Emitter.h"
#include "Executor.h"

#include <algorithm>

namespace tandem::ascend_backend {

TargetBackend backend() {
    using sim::ascend::Machine;
    TargetBackend b;
    b.name = "ascend";
    b.model = [](const Target &t, bool numerics, bool trace) -> std::unique_ptr<Model> {
        return std::make_unique<ModelOf<Machine>>(
            std::make_unique<Machine>(sim::ascend::AscendParams::from(t.lookup()), numerics, trace),
            [](Machine &m, const std::string &n, sim::DType d, int64_t e) { return m.add_gm(n, d, e); },
            [](const Kernel &k, Machine &m, const std::map<std::string, int> &ids) { execute(k, m, ids); });
    };
    b.roofline = [](double macs, double vector_ops, double bytes, const Target &t) {
        const sim::ascend::AscendParams a = sim::ascend::AscendParams::from(t.lookup());
        const double cores = a.cores;
        // Inputs come in on MTE2 (GM -> L1/UB), the output goes out on MTE3 or FIX: count them all
        // at the slower inbound rate, a bound no schedule beats.
        return std::max({macs / (cores * 16.0 * 16 * 16), vector_ops / (cores * a.vector_flops_per_cycle),
                         bytes / (cores * (a.gm_to_ub + a.ub_to_gm))});
    };
    b.sources = {{"code", ".ascend.cpp", [](const Kernel &k, const std::string &name, const EmitOptions &o) {
                      return emit_ascendc(k, name, o.drop_flag);
                  }},
                 // The library interface (Halide's calling convention); the .lib.cpp holds the
                 // kernel too (as NAME_kernel: the AscendC entry point is extern "C" as well).
                 {"h", ".h", [](const Kernel &k, const std::string &name, const EmitOptions &) {
                      return emit_library_header(k, name);
                  }},
                 {"library", ".lib.cpp", [](const Kernel &k, const std::string &name, const EmitOptions &) {
                      return emit_library(k, name);
                  }}};
    return b;
}

} // namespace tandem::ascend_backend
