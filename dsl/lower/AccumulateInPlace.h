#ifndef TANDEM_LOWER_ACCUMULATE_IN_PLACE_H
#define TANDEM_LOWER_ACCUMULATE_IN_PLACE_H

/** \file
 * The online softmax's output accumulated in place, as FlashAttention-2 and -3 keep it. The
 * rewrite (Stage::online_softmax) adds each key block's P V sums, a matmul of their own, to the
 * running output, both rescaled to the new running max (after lower/RowStatistics: factors
 * f0 = exp(m - m') and f1 = exp(m_block - m') per row):
 *
 *     for (c, blocks) {                                 for (c, blocks) {
 *       ...                                               ...
 *       P[row, j] = bf16(E)                               f0[row] = ..., f1[row] = ...
 *       B = 0                                      ->     O[row, n] = f0[row] * O[row, n]
 *       B[row, n] += P[row, j] * V[j, n]  (MMA)           P[row, j] = bf16(E * f1[row])
 *       f0[row] = ..., f1[row] = ..., l, m updates        O[row, n] += P[row, j] * V[j, n]  (MMA)
 *       O[row, n] = f0[row] * O[row, n]                   l, m updates
 *                 + f1[row] * B[row, n]               }
 *     }
 *
 * The output O becomes the second matmul's accumulator (on Hopper: registers, rescaled in place
 * by each thread's fragment, no block accumulator and no O tile in shared memory), and f1 moves
 * into P: E f1 is FlashAttention's P, exp(x - m'). The sums are the same up to rounding (P is
 * rounded to bf16 after the product instead of before).
 *
 * After lower/RunningMax the update is O[row, n] = f0[row] * O[row, n] + B[row, n] (f1 = 1) and
 * f0 is made before P already: then only the rescale of O moves before P, and P stays as it is.
 *
 * The block's row sum of the same exponentials (sum[row] += E, zeroed in the block) moves into
 * P's loop, the exponential computed once for both (a let): one exp per score instead of two.
 *
 * Soundness: the factors read only the running max and the block's max (the rows' Funcs), which
 * nothing between their new place (before P) and their old one writes (checked); O is read and
 * written in the block only by its update and the MMA (checked), in that order afterwards; f1's
 * row for P's element is the MMA's row of that element (checked: the MMA's index of B is O's
 * index of the update with the rows and columns renamed, P's row index at step of its rows).
 * The row sum moves only over loops of P's extents, at P's row, past statements that neither
 * touch it nor write what it reads, its zeroing with it. Where a check fails the Stmt stays as
 * it was, with a note (the row sum alone: it stays where it was).
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt accumulate_in_place(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
