// Hopper as a target plug-in (common/Backend.h): its machine model, roofline and emitted CUDA.
#include "Backend.h"

#include "Emitter.h"
#include "Executor.h"
#include "common/Library.h"

#include <algorithm>

namespace tandem::hopper_backend {

TargetBackend backend() {
    using sim::hopper::Machine;
    TargetBackend b;
    b.name = "hopper";
    b.model = [](const Target &t, bool numerics, bool trace) -> std::unique_ptr<Model> {
        return std::make_unique<ModelOf<Machine>>(
            [=] {
                return std::make_unique<Machine>(sim::hopper::HopperParams::from(t.lookup()),
                                                 numerics, trace);
            },
            [](Machine &m, const std::string &n, sim::DType d, int64_t e) {
                return m.add_global(n, d, e);
            },
            [](const Kernel &k, Machine &m, const std::map<std::string, int> &ids,
               const Shapes &shapes) { execute(k, m, ids, shapes); });
    };
    b.roofline = [](const RooflineWork &w, const Target &t) {
        const sim::hopper::HopperParams h = sim::hopper::HopperParams::from(t.lookup());
        const double sms = h.sms;
        // Every byte passes the SMs' ports and L2; the output goes on to HBM, and so do the
        // inputs unless a launch before this one left them in L2 (l2_warm, as the model: a
        // problem that fits). The launch comes first (launch_cycles).
        const bool warm = h.l2_warm != 0 && w.bytes <= double(h.l2_bytes);
        const double from_hbm = warm ? w.written_bytes : w.bytes;
        return double(h.launch_cycles) +
               std::max({w.macs / (sms * h.wgmma_macs_per_cycle) +
                             w.int8_macs / (sms * h.wgmma_int8_macs_per_cycle) +
                             w.fp8_macs / (sms * h.wgmma_fp8_macs_per_cycle),
                         w.vector_ops / (sms * h.vector_flops_per_cycle),
                         from_hbm / h.hbm_bytes_per_cycle,
                         w.bytes / std::min(h.l2_bytes_per_cycle, sms * h.tma_bytes_per_cycle)});
    };
    b.sources = {
        {"cuda", ".cu",
         [](const Kernel &k, const std::string &name, const EmitOptions &o) {
             no_drop_flag(o, "hopper");
             return emit_cuda(k, name);
         }},
        // The library interface (Halide's calling convention, device pointers) over the
        // launcher above.
        {"h", ".h",
         [](const Kernel &k, const std::string &name, const EmitOptions &) {
             return library::header(k, name,
                                    "the GPU (device pointers in the buffers' device fields)");
         }},
        {"library", ".lib.cpp", [](const Kernel &k, const std::string &name, const EmitOptions &) {
             return emit_library(k, name);
         }}};
    return b;
}

} // namespace tandem::hopper_backend
