#ifndef TANDEM_LOWER_ASCEND_CUBE_H
#define TANDEM_LOWER_ASCEND_CUBE_H

/** \file
 * The Ascend cube path. A tile MMA reads its operands from L0A and L0B, which only MTE1 fills
 * from L1 (LoadData); its accumulator lives in L0C and starts each tile with an Mmad that
 * overwrites instead of a zeroing pass (FirstMma.h; the vector unit cannot reach L0C):
 *
 *     acc = 0 (vector op)
 *     for (ko) {                           for (ko) {
 *       copy A -> A_tile (L1), B -> B_tile   copy A -> A_tile (L1), B -> B_tile (L1)
 *       mma(acc, A_tile, B_tile) }    ->     produce A_tile.l0 { LoadData A_tile -> A_tile.l0 }
 *                                            produce B_tile.l0 { LoadData B_tile -> B_tile.l0 }
 *                                            mma(acc, A_tile.l0, B_tile.l0, accumulate = 0 < ko) }
 *
 * The L0 copies are two-version rings (ping-pong: the next LoadData fills one slot while the cube
 * reads the other); with ping_pong() on the output the accumulator alternates two L0C slots by
 * tile (MultiBuffer's result slots), so the Fixpipe store of one tile overlaps the next tile's
 * Mmads. AscendFlags then joins MTE2 -> MTE1 -> M -> FIX with flags.
 *
 * An A operand loaded again and again from an L1 tile that does not change meanwhile
 * (attention's query tile in its key loop) is loaded once: in the region that consumes the L1
 * tile, its LoadDatas that copy the same part and read nothing the region binds become one before
 * the region, in one version (Directives::loaded_once: AscendFlags gives it no ready flag of its
 * own, since each Mmad reading it waits for the flag of its B operand's later LoadData).
 *
 * Limits: operands bf16 (or f32), accumulator f32, stored by Fixpipe straight from L0C.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt stage_cube_operands(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
