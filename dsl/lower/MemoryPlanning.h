#ifndef TANDEM_LOWER_MEMORY_PLANNING_H
#define TANDEM_LOWER_MEMORY_PLANNING_H

/** \file
 * Memory planning: every Allocate is hoisted out of the Stmt into a static carve-out of the chip's
 * memories. The generic part here finds the allocations (those of the same name - Halide's loop
 * partitioning duplicates them - share one buffer of the largest size) and the tile MMAs'
 * operands; the target places them (its MemoryPlan: zpu/ZpuMemory.h, hopper/HopperMemory.h,
 * ascend/AscendMemory.h).
 *
 * Limits (user errors): an allocation without a constant bound; a memory over capacity names the
 * largest buffer in it, its Func and the directive that sized it.
 */

#include "tandem/Kernel.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace tandem::lower {

/** The allocations of a kernel, in order of first appearance, each split into its versions
 * (slots x slot_elements; memory and offset not yet set), and the tile MMAs' operands. */
struct Allocations {
    std::vector<SramBuffer> buffers;
    std::set<std::string> mma_a, mma_b, accumulators;
};

/** A target's placement: sets each buffer's memory and offset and appends it to `buffers`; may
 * rewrite the Stmt (the ZPU's A operands hop through RSRAM). */
using MemoryPlan =
    std::function<Halide::Internal::Stmt(const Halide::Internal::Stmt &, const Allocations &,
                                         CompileContext &, std::vector<SramBuffer> *)>;

Halide::Internal::Stmt plan_memory(const Halide::Internal::Stmt &s, CompileContext &ctx,
                                   std::vector<SramBuffer> *buffers, const MemoryPlan &place);

/** The directive that sized an on-chip buffer of `slots` versions, for overflow errors. */
std::string directive_that_sized(const std::string &name, int slots);

} // namespace tandem::lower

#endif
