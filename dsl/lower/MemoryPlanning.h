#ifndef TANDEM_LOWER_MEMORY_PLANNING_H
#define TANDEM_LOWER_MEMORY_PLANNING_H

/** \file
 * Memory planning against the ZPU's SRAM scopes. Every Allocate is hoisted out of the Stmt into a
 * static carve-out: the left operand of a tile MMA goes to ASRAM, the right operand to WSRAM,
 * everything else (accumulators, staging tiles, vector data) to RSRAM. Allocations of the same
 * name (Halide's loop partitioning duplicates them) share one buffer of the largest size.
 *
 * Limits (user errors): a scope over capacity names the largest buffer in it, its Func and the
 * directive that sized it.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt plan_memory(const Halide::Internal::Stmt &s, CompileContext &ctx,
                                   std::vector<SramBuffer> *buffers);

} // namespace tandem::lower

#endif
