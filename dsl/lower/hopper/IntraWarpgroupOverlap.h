#ifndef TANDEM_LOWER_INTRA_WARPGROUP_OVERLAP_H
#define TANDEM_LOWER_INTRA_WARPGROUP_OVERLAP_H

/** \file
 * Hopper: a consumer's loop whose body runs two MMAs with vector work between them overlaps the
 * second MMA of an iteration with the vector work of the next (FlashAttention-3's intra-warpgroup
 * overlap of the softmax with the GEMMs). In the online softmax's key loop (after
 * lower/AccumulateInPlace) the first MMA makes the scores S of block c, the vector work the
 * block's max, the factors, the exponentials and P, the second O += P V:
 *
 *     for (c, 0, n) {                            iteration 0 without X (its MMA 1 waited for at
 * once) Pre(c)                                   for (c, 1, n) { MMA 1 (c); mma_wait(S, 0) Pre(c)
 *       Mid(c)                          ->         MMA 1 (c)
 *       X(c): wait(V full), O += P V,              X(c - 1) issued: wait(V full), O += P V
 *             mma_wait(O, 0), release V            mma_wait(S, 1)        (MMA 1 only)
 *       Post(c)                                    Early(c)              (runs under X(c - 1))
 *     }                                            mma_wait(O, 0), release V(c - 1)
 *                                                  Late(c)
 *                                                  Post(c)
 *                                                }
 *                                                X(n - 1)
 *
 * Early are the statements of Mid that touch none of X's buffers (its accumulator, its operands)
 * and depend on no statement of Mid that does (Late, kept in order after the wait). wgmma groups
 * retire in order, so waiting for all but one group after X's issue waits for MMA 1 alone.
 *
 * Soundness: X(c) now runs after Post(c), Pre(c + 1), MMA 1 (c + 1) and Early(c + 1), none of
 * which touches X's buffers (checked, else the loop stays as it was, with a note); Early moves
 * only past Late statements it does not depend on, nor they on it (checked). X's ring keeps two
 * versions or more, so its producer can load version c + 1 while the consumer holds c - 1's (no
 * deadlock whatever order the producer loads the rings in). The only syncs in the body are the two
 * MMAs' own (their operands' waits and releases). The machine model checks the result: a
 * version released early, or P written while X reads it, is a race there.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt overlap_within_warpgroup(const Halide::Internal::Stmt &s,
                                                CompileContext &ctx);

} // namespace tandem::lower

#endif
