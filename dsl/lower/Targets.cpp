#include "Targets.h"
#include "sim/Ascend.h"
#include "sim/Zpu.h"

#include "AscendCube.h"
#include "AscendFlags.h"
#include "AscendMix.h"
#include "AscendRows.h"
#include "AscendVector.h"
#include "Cluster.h"
#include "EngineSync.h"
#include "FirstMma.h"
#include "MmaInFlight.h"
#include "SoftwarePipeline.h"
#include "WarpSpecialize.h"

namespace tandem::lower {

using Halide::Internal::Stmt;

namespace {

Stmt unchanged(const Stmt &s, CompileContext &) {
    return s;
}

std::vector<TargetLowering> all_targets() {
    return {
        {"zpu", nullptr,
         [](const Stmt &s, CompileContext &ctx) { return overwrite_first_mma(s, ctx); },
         // One control stream: the software pipeline issues copies ahead of their use, and syncs
         // keep the asynchronous tensor and vector cores apart.
         [](const Stmt &s, CompileContext &ctx, std::vector<SramBuffer> &buffers) {
             return sync_engines(software_pipeline(s, ctx, /*copies_before_compute=*/true), ctx,
                                 buffers);
         },
         [](const SramBuffer &b) { return std::string(sim::space_name(b.space)); },
         /*accumulator_slots=*/true, /*runtime_shapes=*/true},
        {"hopper", nullptr, unchanged,
         [](const Stmt &s, CompileContext &ctx, std::vector<SramBuffer> &buffers) {
             // A producer warpgroup runs ahead by itself; one warpgroup alone needs the pipeline.
             Stmt r = ctx.of(ctx.output).warp_specialize ? s : software_pipeline(s, ctx);
             return multicast_in_clusters(keep_mmas_in_flight(specialize_warps(r, ctx, buffers)),
                                          ctx);
         },
         [](const SramBuffer &b) { return std::string(b.in_registers ? "registers" : "smem"); },
         /*accumulator_slots=*/false, /*runtime_shapes=*/true},
        {"ascend", pad_ub_rows,
         // An epilogue after a matmul makes a mix kernel: cube and vector cores meet in GM.
         [](const Stmt &s, CompileContext &ctx) {
             return each_side(split_mix_kernel(s, ctx),
                              [&](const Stmt &side) { return stage_cube_operands(side, ctx); });
         },
         // The vector ops as AscendC's instructions; the pipes overlap by themselves, flags join
         // them (each side of a mix kernel by itself).
         [](const Stmt &s, CompileContext &ctx, std::vector<SramBuffer> &buffers) {
             return each_side(s, [&](const Stmt &side) {
                 return insert_flags(select_vector_instructions(side, ctx, buffers), ctx, buffers);
             });
         },
         [](const SramBuffer &b) { return std::string(sim::ascend::mem_name(b.ascend_mem)); },
         /*accumulator_slots=*/false, /*runtime_shapes=*/true},
    };
}

} // namespace

const TargetLowering &lowering_of(const Target &target) {
    static const std::vector<TargetLowering> all = all_targets();
    for (const TargetLowering &t : all) {
        if (t.name == target.name())
            return t;
    }
    throw Error("target " + target.name() + " has no lowering (dsl/lower/Targets.cpp lists them)");
}

} // namespace tandem::lower
