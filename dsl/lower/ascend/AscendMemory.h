#ifndef TANDEM_LOWER_ASCEND_MEMORY_H
#define TANDEM_LOWER_ASCEND_MEMORY_H

/** \file
 * Ascend's memory plan: tile MMA operands in L0A / L0B, accumulators in L0C, what LoadData
 * reads in L1, the rest (vector data) in the unified buffer (UB); each memory has its capacity
 * and alignment (the machine description).
 */

#include "lower/MemoryPlanning.h"

namespace tandem::lower {

Halide::Internal::Stmt plan_ascend_memory(const Halide::Internal::Stmt &s, const Allocations &found,
                                          CompileContext &ctx, std::vector<SramBuffer> *buffers);

} // namespace tandem::lower

#endif
