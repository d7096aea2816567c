#include "HopperTarget.h"

#include "HopperMemory.h"
#include "IntraWarpgroupOverlap.h"
#include "MmaInFlight.h"
#include "WarpSpecialize.h"
#include "lower/AccumulateInPlace.h"
#include "lower/Cluster.h"
#include "lower/MultiBuffer.h"
#include "lower/SoftwarePipeline.h"
#include "lower/TileCopy.h"
#include "lower/TileMma.h"
#include "lower/VectorOps.h"

#include <algorithm>

namespace tandem::lower {

using Halide::Internal::Stmt;

namespace {

/** The operand ring and the output staging (two 128-byte column blocks of it where rows are
 * longer) share the CTA's shared memory, tiles rounded up to wgmma's 64. At most 4. */
int hopper_fitting_stages(const MmaTiles &t, const Target &target) {
    auto up = [](int64_t v) { return (v + 63) / 64 * 64; };
    const int64_t per_stage = (up(t.TM) * up(t.TK) + up(t.TK) * up(t.TN)) * 2;
    // Rows of more than two 128-byte column blocks are staged through a ring of two of them
    // where TMA stores C (rows of C a multiple of 16 bytes, whole 8-row swizzle atoms).
    const int64_t row = up(t.TN) * t.out_bytes;
    // With runtime shapes the kernel's thread-copy variant (for rows TMA cannot step) stages
    // the whole tile: the stages fit both variants.
    const bool ring = !t.runtime_shapes && t.TN * t.out_bytes > 256 &&
                      (t.TN * t.out_bytes) % 128 == 0 && t.TM % 8 == 0 &&
                      (int64_t(t.N) * t.out_bytes) % 16 == 0;
    const int64_t staged_row = ring ? 256 : row;
    const int64_t staging = t.result_versions * up(t.TM) * staged_row;
    const int64_t free =
        target.machine.integer("smem_bytes") - staging - t.bias_bytes - 2048; // barriers, alignment
    return int(std::clamp<int64_t>(free / per_stage, 1, 4));
}

} // namespace

TargetLowering hopper_target() {
    TargetLowering t;
    t.name = "hopper";
    t.passes = {
        // FlashAttention's output in the P V matmul's registers, rescaled in place.
        pass("accumulate_in_place", accumulate_in_place),
        rejoin_tails_step(),
        map_to_cores_step(),
        pass("recognize_tile_copies", recognize_tile_copies),
        pass("recognize_tile_mma", recognize_tile_mma),
        pass("form_vector_ops", form_vector_ops),
        pass("multi_buffer", multi_buffer),
        plan_memory_step(plan_hopper_memory),
        // One warpgroup alone needs the pipeline; a producer warpgroup runs ahead by itself.
        {"software_pipeline (without warp_specialize)",
         [](const Stmt &s, CompileContext &ctx, Kernel &) {
             return ctx.of(ctx.output).warp_specialize ? s : software_pipeline(s, ctx);
         }},
        {"specialize_warps", [](const Stmt &s, CompileContext &ctx,
                                Kernel &k) { return specialize_warps(s, ctx, k.buffers); }},
        {"keep_mmas_in_flight",
         [](const Stmt &s, CompileContext &, Kernel &) { return keep_mmas_in_flight(s); }},
        pass("overlap_within_warpgroup", overlap_within_warpgroup),
        pass("multicast_in_clusters", multicast_in_clusters),
        drop_guards_step(),
    };
    t.memory_name = [](const SramBuffer &b) {
        return std::string(b.in_registers ? "registers" : "smem");
    };
    t.fitting_stages = hopper_fitting_stages;
    t.runtime_shapes = true;
    t.grid_of_tiles = true;
    t.unit_noun = "CTAs";
    t.always_stage_store = true;
    t.one_drain_for_all_stores = true;
    t.versions_by_consumer = true;
    t.clusters = true;
    t.cooperative = true;
    t.mma_int8 = true;
    t.mma_fp8 = true;
    return t;
}

} // namespace tandem::lower
