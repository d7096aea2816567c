#ifndef TANDEM_LOWER_TARGETS_H
#define TANDEM_LOWER_TARGETS_H

/** \file
 * Each target's lowering choices, one entry per target in Targets.cpp (the compiler's half of a
 * target plug-in; the tools' half is backends/common/Backend.h). compile() runs the passes every
 * target shares and asks the entry for the rest:
 *
 *     prepare(), map_to_cores, tile copies, tile MMA, vector ops, stage(), multi_buffer,
 * plan_memory, finish()
 */

#include "tandem/Kernel.h"

#include <functional>
#include <string>

namespace tandem::lower {

struct TargetLowering {
    std::string name;
    /** On Halide's Stmt, before the shared passes (Ascend: UB rows padded to 32 bytes); may be
     * empty. */
    std::function<Halide::Internal::Stmt(const Halide::Internal::Stmt &, CompileContext &)> prepare;
    /** Before multi-buffering: target-specific staging (Ascend: the cube's L1 -> L0 operands). */
    std::function<Halide::Internal::Stmt(const Halide::Internal::Stmt &, CompileContext &)> stage;
    /** After memory planning: how the engines meet (software pipeline, warp roles, flags); it may
     * add buffers (Ascend: the vector instructions' scratch). */
    std::function<Halide::Internal::Stmt(const Halide::Internal::Stmt &, CompileContext &,
                                         std::vector<SramBuffer> &)>
        finish;
    /** Where a buffer lives, for Kernel::stmt_text. */
    std::function<std::string(const SramBuffer &)> memory_name;
    /** A tile MMA accumulator on chip alternates versions by tile like the store source (result
     * slots), so that the next tile's MMAs overlap this tile's epilogue (ZPU: asynchronous tensor
     * and vector cores). */
    bool accumulator_slots = false;
    /** Takes extents known only at run time (its executor, emitters and libraries read them at
     * the call); otherwise compile() refuses such a kernel. */
    bool runtime_shapes = false;
};

/** The lowering of `target` (Targets.cpp lists them). */
const TargetLowering &lowering_of(const Target &target);

} // namespace tandem::lower

#endif
