#ifndef TANDEM_LOWER_WARP_SPECIALIZE_H
#define TANDEM_LOWER_WARP_SPECIALIZE_H

/** \file
 * Hopper roles and mbarrier protocol.
 *
 * With warp_specialize() the kernel becomes one branch per warpgroup, joined only by mbarriers:
 *
 *     if (tandem_warpgroup() == 0) {            // producer: one elected thread issues TMA
 *         setmaxnreg.dec 40
 *         for tiles { for ko {
 *             let A_tile.slot = A_tile.ring % n
 *             tandem_wait(A_tile.empty, slot)     // pre-armed: the first lap passes
 *             tandem_expect(A_tile.full, slot, bytes of A and B)
 *             tandem_copy(A -> A_tile[slot]); tandem_copy(B -> B_tile[slot])
 *             tandem_advance(A_tile.ring) } }
 *     } else {                                   // consumer(s): wgmma, epilogue, TMA store
 *         setmaxnreg.inc 232
 *         for tiles { init; for ko {
 *             let A_tile.slot = A_tile.ring % n
 *             tandem_wait(A_tile.full, slot); mma; tandem_arrive(A_tile.empty, slot)
 *             tandem_advance(A_tile.ring) }
 *           epilogue; tandem_fence_proxy_async(); store } }
 *
 * Copies of async_copy Funcs next to each other in one loop body form one group sharing a ring
 * (one full and one empty barrier per version). Both roles walk the same loop nest, so the ring
 * position is a counter each role advances per group: right for any trip count, for partitioned
 * tails and across the persistent tile loop. Waits use a per-version phase bit the waiter flips,
 * so parity never depends on the trip count.
 *
 * With ping_pong() there are two consumers: consumer c computes the tiles of parity c of the
 * persistent loop and only advances the ring over the others; code outside the tile loop (a
 * partitioned tail) belongs to consumer 0. Their result slots are the tile-parity versions that
 * MultiBuffer made.
 *
 * Without warp_specialize() one warpgroup runs the software-pipelined stream; this pass only adds
 * an expect before each TMA load and the proxy fence before each TMA store.
 *
 * Limits (user errors): Funcs copied together must have the same multi_buffer count; ping_pong
 * needs warp_specialize.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt specialize_warps(const Halide::Internal::Stmt &s, CompileContext &ctx,
                                        const std::vector<SramBuffer> &buffers);

} // namespace tandem::lower

#endif
