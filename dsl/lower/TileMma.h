#ifndef TANDEM_LOWER_TILE_MMA_H
#define TANDEM_LOWER_TILE_MMA_H

/** \file
 * Tile-MMA recognition (tensorize). In a Func whose update has tile_mma(), the nest
 *
 *     for (k, 0, K) { for (m, 0, M) { for (n, 0, N) {
 *         acc[n + m*N] = acc[n + m*N] + float32(A_tile[k + m*K]) * float32(B_tile[n + k*N]) } } }
 *
 * (loops in any order) becomes one op:
 *
 *     tandem_mma("acc", 0, 1, N, "A_tile", 0, 1, K, "B_tile", 0, 1, N, N, M, K)
 *
 * The loops are classified by which indices they move: m moves acc and A, n moves acc and B, k
 * moves A and B. Halide removes loops of extent 1 (M = 1, a K tail of one element): a role with
 * no loop has extent 1, and a lone loop moving acc is m or n by the pure var it was split from.
 * Limits (user errors): at most three loops, affine indices, f32 accumulator, bf16, f16 or f32
 * operands held on chip.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt recognize_tile_mma(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
