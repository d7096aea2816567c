#ifndef TANDEM_LOWER_TARGETS_H
#define TANDEM_LOWER_TARGETS_H

/** \file
 * The compiler's half of a target plug-in (the tools' half is backends/common/Backend.h): a
 * target registers its name, its machine description, its pass list and what the generic passes
 * may ask of it. compile() (dsl/src/Compile.cpp) lowers with Halide, then walks the target's
 * pass list top to bottom, like Halide's Lower.cpp:
 *
 *     Halide lowering -> passes[0] -> passes[1] -> ... -> validate_kernel
 *
 * TANDEM_DEBUG_LOWERING=1 logs the Stmt after every step by name (=<pass name>: after that one
 * only); `tandem emit --what passes --target T` prints T's list. The built-in targets register in
 * Targets.cpp (zpu/, hopper/, ascend/ hold their passes and their registration); any other
 * program registers one with register_target (a static RegisterTarget), and from then on
 * Target::parse, the tools and the generator main know it.
 *
 * A generic pass never asks which target it is in: it asks the capabilities below.
 */

#include "MemoryPlanning.h"
#include "tandem/Kernel.h"

#include <functional>
#include <string>
#include <vector>

namespace tandem::lower {

/** One step of a target's lowering: its name in the log and in `--what passes`, and the step.
 * A step may add on-chip buffers to the kernel (memory planning, scratch). */
struct Pass {
    std::string name;
    std::function<Halide::Internal::Stmt(const Halide::Internal::Stmt &, CompileContext &,
                                         Kernel &)>
        run;
};

struct TargetLowering {
    std::string name;
    /** The machine description (the JSON of Machine.h); empty: machines/<name>.json, compiled
     * into the library. */
    std::string machine_json;
    /** After Halide's lowering, in order. */
    std::vector<Pass> passes;
    /** Where a buffer lives, for Kernel::stmt_text. */
    std::function<std::string(const SramBuffer &)> memory_name;
    /** The most operand stages of a tiled MMA that fit on chip beside the rest of the tile (an
     * app's stages = 0); empty: 3. */
    std::function<int(const MmaTiles &, const Target &)> fitting_stages;

    // What the generic passes ask of the target.
    /** Takes extents known only at run time (its executor, emitters and libraries read them at
     * the call); otherwise compile() refuses such a kernel. */
    bool runtime_shapes = false;
    /** A unit is launched per tile (Hopper: a CTA per tile, or a persistent grid sized by the
     * tile count), rather than a fixed number of cores looping over the tiles. */
    bool grid_of_tiles = false;
    /** What a unit is called in messages: "cores", "CTAs". */
    std::string unit_noun = "cores";
    /** On-chip tiles' rows and slots start on blocks of this many bytes (Ascend UB: 32). */
    int block_bytes = 1;
    /** The output's store always goes through a staging tile (Hopper: the accumulator is in
     * registers and TMA stores from shared memory). */
    bool always_stage_store = false;
    /** The output's store converts an f32 MMA accumulator to a float type itself (Ascend's
     * Fixpipe), so such a cast of the accumulator is stored straight from it. */
    bool store_casts_accumulator = false;
    /** A store's flags are pre-armed, each consumed by one store: a write waits for its slot
     * before any store, the first too (Ascend). */
    bool store_waits_before_first = false;
    /** One wait drains every outstanding store (Hopper's cp.async.bulk.wait_group.read 0), not
     * one wait per version. */
    bool one_drain_for_all_stores = false;
    /** Ping-pong consumers each keep their own version of the result and of the buffers they
     * copy themselves (Hopper's consumer warpgroups); otherwise versions alternate by tile. */
    bool versions_by_consumer = false;
    /** A tile MMA accumulator on chip alternates versions by tile like the store source (result
     * slots), so that the next tile's MMAs overlap this tile's epilogue (ZPU: asynchronous
     * tensor and vector cores). */
    bool accumulator_slots = false;
    /** The tensor core multiplies int8 operands into int32 accumulators (tile_mma over int8). */
    bool mma_int8 = false;
    /** The tensor core multiplies FP8 operands (e4m3, e5m2: tandem/Fp8.h) into f32. */
    bool mma_fp8 = false;
    /** Directives the target takes beyond the common ones. */
    bool clusters = false; // cluster(n)
    /** cluster(n) groups n cores of a column of a core mesh (machine parameters `cores` in rows
     * of `mesh_columns`; n divides the mesh's rows) rather than CTAs of a thread-block cluster:
     * copies the same for the cluster are broadcast down the column and ordered by mesh barriers
     * (MeshBroadcast.h), so no producer / consumer rings are needed (ZPU). */
    bool mesh_clusters = false;
    bool cooperative = false; // cooperative()
};

/** Registers a target; Error if its name is taken. */
void register_target(TargetLowering lowering);

/** `RegisterTarget r(...)` at namespace scope registers a target when the program starts. */
struct RegisterTarget {
    explicit RegisterTarget(TargetLowering lowering) { register_target(std::move(lowering)); }
};

/** The lowering of `target`; Error for an unknown one. */
const TargetLowering &lowering_of(const Target &target);
/** The target registered as `name`, or nullptr. */
const TargetLowering *find_target(const std::string &name);
/** The registered targets' names: the built-in ones first, then in registration order. */
std::vector<std::string> target_names();

// Steps every target's list uses (Targets.cpp), and `pass` for a step of the form f(s, ctx).

/** A step that runs f(s, ctx). */
Pass pass(const std::string &name,
          Halide::Internal::Stmt (*f)(const Halide::Internal::Stmt &, CompileContext &));
/** RejoinTails.h at the kernel's runtime extents. */
Pass rejoin_tails_step();
/** CoreMapping.h, then Halide's simplifier. */
Pass map_to_cores_step();
/** MemoryPlanning.h with the target's placement; the kernel's buffers. */
Pass plan_memory_step(const MemoryPlan &place);
/** Nest.h's drop_guards_every_call_passes at the kernel's runtime extents. */
Pass drop_guards_step();

/** Runs `passes` on `s` in order, logging each as TANDEM_DEBUG_LOWERING asks. */
Halide::Internal::Stmt run_passes(const std::vector<Pass> &passes, const Halide::Internal::Stmt &s,
                                  CompileContext &ctx, Kernel &k);
/** Logs `s` as the Stmt after `step` if TANDEM_DEBUG_LOWERING asks for it. */
void log_lowering(const std::string &step, const Halide::Internal::Stmt &s);

} // namespace tandem::lower

#endif
