#ifndef TANDEM_LOWER_FIRST_MMA_H
#define TANDEM_LOWER_FIRST_MMA_H

/** \file
 * The first MMA of a tile overwrites its accumulator instead of a zeroing pass. Cube units take a
 * flag for it (Ascend Mmad's cmatrixInitVal; SUNMMIO/Tilelang mma_sunmmio's clear_accum, same
 * cost): the zeroing vector op goes away, and with it the vector core's work between one tile's
 * epilogue and the next tile's MMAs (Ascend: the vector unit cannot even reach L0C).
 *
 *     acc = 0 (vector op)
 *     for (ko, 0, n) {                   for (ko, 0, n) {
 *       mma(acc, A_tile, B_tile) }  ->     mma(acc, A_tile, B_tile, accumulate = 0 < ko) }
 *     mma(acc, A_tail, B_tail)           mma(acc, A_tail, B_tail, accumulate = 0 < n)
 *
 * The flag says "an MMA of this accumulator ran since the zeroing", derived from the loops and
 * guards between them (a K loop Halide split into a main loop and a tail overwrites exactly once);
 * it reads no counter, so nothing at run time can get it wrong. An accumulator whose MMAs the rule
 * cannot place (an MMA in a branch whose effect on later ones is not a plain condition) keeps its
 * zeroing pass. An MMA that later passes split into several boxes (ZPU north-bank passes) keeps
 * one flag: each box is written once per step.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt overwrite_first_mma(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
