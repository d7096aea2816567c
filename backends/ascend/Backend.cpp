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
            [=] {
                return std::make_unique<Machine>(sim::ascend::AscendParams::from(t.lookup()),
                                                 numerics, trace);
            },
            [](Machine &m, const std::string &n, sim::DType d, int64_t e) {
                return m.add_gm(n, d, e);
            },
            [](const Kernel &k, Machine &m, const std::map<std::string, int> &ids,
               const Shapes &shapes) { execute(k, m, ids, shapes); });
    };
    b.roofline = [](const RooflineWork &w, const Target &t) {
        // (the 910B's cube has no FP8: tile_mma refuses it)
        const double macs = w.macs + w.fp8_macs;
        const sim::ascend::AscendParams a = sim::ascend::AscendParams::from(t.lookup());
        // MACs on the cube cores, vector operations (f32: 4 bytes of lane work each) on the vector
        // cores, and every compulsory byte once through the HBM that all cores share.
        return std::max({macs / (a.cube_cores * 16.0 * 16 * a.cube_bf16_k_per_cycle) +
                             w.int8_macs / (a.cube_cores * 16.0 * 16 * a.cube_int8_k_per_cycle),
                         w.vector_ops * 4 / (double(a.vector_cores) * a.vector_bytes_per_cycle),
                         w.bytes / a.hbm_bytes_per_cycle});
    };
    b.sources = {
        {"code", ".ascend.cpp",
         [](const Kernel &k, const std::string &name, const EmitOptions &o) {
             return emit_ascendc(k, name, o.drop_flag);
         }},
        // The library interface (Halide's calling convention); the .lib.cpp holds the
        // kernel too (as NAME_kernel: the AscendC entry point is extern "C" as well).
        {"h", ".h",
         [](const Kernel &k, const std::string &name, const EmitOptions &) {
             return emit_library_header(k, name);
         }},
        {"library", ".lib.cpp", [](const Kernel &k, const std::string &name, const EmitOptions &) {
             return emit_library(k, name);
         }}};
    return b;
}

} // namespace tandem::ascend_backend
