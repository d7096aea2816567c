#ifndef TANDEM_LOWER_TILE_COPY_H
#define TANDEM_LOWER_TILE_COPY_H

/** \file
 * Tile-copy recognition. The copy nest of a staged input becomes one bulk copy of an affine box,
 * followed (for now) by a wait on its full barrier; the output's store nest becomes a vector op
 * into an on-chip staging tile plus one bulk copy out.
 *
 *     produce A_tile { for (y, 0, 128) { for (x, 0, 64) {
 *         A_tile[x + y*64] = A[x + (y + y0)*K + k0] } } }
 * becomes
 *     produce A_tile { tandem_copy("A_tile", 0, "A", y0*K + k0, 2, 64, 1, 1, 128, 64, K,
 *                                  "A_tile.full", 0)
 *                      tandem_wait("A_tile.full", 0) }
 *
 * A store nest `C[...] = f(acc[...])` becomes `C_stage[...] = f(acc[...])` (a vector op runs it
 * later) then tandem_copy C_stage -> C signalling "C_stage.empty"; a plain copy `C[...] = acc[...]`
 * is stored straight out of acc. The store is waited at once unless the output has async_copy.
 *
 * Every box has one dim per dim of its tensor's copy view (KernelArg::copy_view: the dims of
 * extent above 1), whatever loops Halide removed, so that backends can match box dims to tensor
 * dims by position.
 *
 * Limits (user errors): a copy must be an affine box of an input with the same element type (the
 * DMA engine does not convert); an async_copy Func must be a copy computed inside a loop of its
 * consumer.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt recognize_tile_copies(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
