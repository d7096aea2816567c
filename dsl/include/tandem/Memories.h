#ifndef TANDEM_MEMORIES_H
#define TANDEM_MEMORIES_H

/** \file
 * Where a buffer can live on each target: the vocabulary the compiler (Kernel.h) and the machine
 * models (backends/sim) share. Only names here; capacities, alignments and rates are data
 * (Machine.h). */

#include <cstdint>

namespace tandem::sim {

/** ZPU memories: each core's DRAM shard and its three SRAM scopes. */
enum class Space : uint8_t { DRAM, ASRAM, WSRAM, RSRAM };

namespace ascend {
/** Ascend memories: global memory and an AI core's buffers. */
enum class Mem : uint8_t { GM, L1, L0A, L0B, L0C, UB };
} // namespace ascend

} // namespace tandem::sim

#endif
