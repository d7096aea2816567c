#ifndef TANDEM_LOWER_ZPU_MEMORY_H
#define TANDEM_LOWER_ZPU_MEMORY_H

/** \file
 * The ZPU's memory plan against its SRAM scopes: the left operand of a tile MMA goes to ASRAM,
 * the right operand to WSRAM, everything else (accumulators, staging tiles, vector data) to
 * RSRAM, each 64-byte aligned. Where the machine has no DRAM -> ASRAM route, an A operand's tile
 * is loaded into RSRAM and each MMA's box hops to ASRAM before the MMA (a bf16 MMA of more than
 * the north bank's rows in two passes).
 */

#include "lower/MemoryPlanning.h"

namespace tandem::lower {

Halide::Internal::Stmt plan_zpu_memory(const Halide::Internal::Stmt &s, const Allocations &found,
                                       CompileContext &ctx, std::vector<SramBuffer> *buffers);

} // namespace tandem::lower

#endif
