#include "ZpuTarget.h"
#include "tandem/params/Zpu.h"

#include "EngineSync.h"
#include "MeshBroadcast.h"
#include "ZpuMemory.h"
#include "lower/FirstMma.h"
#include "lower/MultiBuffer.h"
#include "lower/SoftwarePipeline.h"
#include "lower/TileCopy.h"
#include "lower/TileMma.h"
#include "lower/VectorOps.h"

#include <algorithm>

namespace tandem::lower {

using Halide::Internal::Stmt;

namespace {

/** A's versions, the accumulator and the output staging share RSRAM (A goes through RSRAM on its
 * way to ASRAM); B's versions fill WSRAM. At most 3. */
int zpu_fitting_stages(const MmaTiles &t, const Target &target) {
    const int64_t tile = int64_t(t.TM) * t.TN;
    const int64_t rsram = target.machine.integer("rsram_bytes") -
                          t.result_versions * tile * (4 + t.out_bytes) - t.bias_bytes;
    const int64_t by_a = rsram / (int64_t(t.TM) * t.TK * 2);
    const int64_t by_b = target.machine.integer("wsram_bytes") / (int64_t(t.TK) * t.TN * 2);
    return int(std::clamp<int64_t>(std::min(by_a, by_b), 1, 3));
}

} // namespace

TargetLowering zpu_target() {
    TargetLowering t;
    t.name = "zpu";
    t.passes = {
        rejoin_tails_step(),
        map_to_cores_step(),
        pass("recognize_tile_copies", recognize_tile_copies),
        pass("recognize_tile_mma", recognize_tile_mma),
        pass("form_vector_ops", form_vector_ops),
        pass("overwrite_first_mma", overwrite_first_mma),
        pass("multi_buffer", multi_buffer),
        plan_memory_step(plan_zpu_memory),
        // One control stream: the software pipeline issues copies ahead of their use.
        {"software_pipeline",
         [](const Stmt &s, CompileContext &ctx, Kernel &) {
             return software_pipeline(s, ctx, /*copies_before_compute=*/true);
         }},
        // The asynchronous tensor and vector cores synced where they conflict.
        {"sync_engines", [](const Stmt &s, CompileContext &ctx,
                            Kernel &k) { return sync_engines(s, ctx, k.buffers); }},
        // cluster(n): what the cores of a mesh column share is broadcast down it.
        {"broadcast_in_mesh_columns",
         [](const Stmt &s, CompileContext &ctx, Kernel &k) {
             return broadcast_in_mesh_columns(s, ctx, k.buffers);
         }},
        drop_guards_step(),
    };
    t.memory_name = [](const SramBuffer &b) { return std::string(sim::space_name(b.space)); };
    t.fitting_stages = zpu_fitting_stages;
    t.runtime_shapes = true;
    t.accumulator_slots = true;
    t.clusters = true;
    t.mesh_clusters = true;
    return t;
}

} // namespace tandem::lower
