// The ZPU as a target plug-in (common/Backend.h): its machine model, roofline and emitted C++.
#include "Backend.h"

#include "Emitter.h"
#include "Executor.h"

#include <algorithm>

namespace tandem::zpu_backend {

TargetBackend backend() {
    TargetBackend b;
    b.name = "zpu";
    b.model = [](const Target &t, bool numerics, bool trace) -> std::unique_ptr<Model> {
        return std::make_unique<ModelOf<sim::Machine>>(
            [=] {
                return std::make_unique<sim::Machine>(sim::ZpuParams::from(t.lookup()), numerics,
                                                      trace);
            },
            [](sim::Machine &m, const std::string &n, sim::DType d, int64_t e) {
                return m.add_dram(n, d, e);
            },
            [](const Kernel &k, sim::Machine &m, const std::map<std::string, int> &ids,
               const Shapes &shapes) { execute(k, m, ids, shapes); });
    };
    b.roofline = [](const RooflineWork &w, const Target &t) {
        // (the ZPU's tensor core has no int8 or FP8: tile_mma refuses them)
        const double macs = w.macs + w.int8_macs + w.fp8_macs;
        const sim::ZpuParams z = sim::ZpuParams::from(t.lookup());
        const double cores = z.cores;
        return std::max({macs / (cores * z.peak_macs_per_cycle()),
                         w.vector_ops / (cores * z.vector_flops_per_cycle),
                         w.bytes / (cores * z.dram_bytes_per_cycle_per_core())});
    };
    b.sources = {
        {"code", ".zpu.cpp",
         [](const Kernel &k, const std::string &name, const EmitOptions &o) {
             no_drop_flag(o, "zpu");
             return emit_cpp(k, name);
         }},
        // The library interface (Halide's calling convention) over the code above.
        {"h", ".h",
         [](const Kernel &k, const std::string &name, const EmitOptions &) {
             return emit_library_header(k, name);
         }},
        {"library", ".lib.cpp", [](const Kernel &k, const std::string &name, const EmitOptions &) {
             return emit_library(k, name);
         }}};
    return b;
}

} // namespace tandem::zpu_backend
