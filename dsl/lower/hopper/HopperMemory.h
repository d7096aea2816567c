#ifndef TANDEM_LOWER_HOPPER_MEMORY_H
#define TANDEM_LOWER_HOPPER_MEMORY_H

/** \file
 * Hopper's memory plan: MMA accumulators live in each consumer warpgroup's registers (a user
 * error past the registers a thread has), everything else in the CTA's shared memory, 1024-byte
 * aligned as 128B-swizzled TMA tiles need. An output staging tile an accumulator epilogue writes,
 * with rows of more than two 128-byte column blocks, takes two column blocks per version on the
 * GPU (SramBuffer::chip_slot_bytes).
 */

#include "lower/MemoryPlanning.h"

namespace tandem::lower {

Halide::Internal::Stmt plan_hopper_memory(const Halide::Internal::Stmt &s, const Allocations &found,
                                          CompileContext &ctx, std::vector<SramBuffer> *buffers);

} // namespace tandem::lower

#endif
