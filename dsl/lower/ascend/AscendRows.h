#ifndef TANDEM_LOWER_ASCEND_ROWS_H
#define TANDEM_LOWER_ASCEND_ROWS_H

/** \file
 * UB rows on 32-byte blocks. Ascend's vector instructions and its DataCopyPad start every UB row
 * on a 32-byte block, but Halide packs each tile by its own extents: a tail tile 88 columns wide
 * has rows 88 elements apart, a row of 77 floats ends inside a block. This pass (on Halide's
 * Stmt, before the shared passes) gives every tile that lives in UB one constant row pitch: its
 * widest row rounded up to 32 bytes, the same for a tail as for a full tile.
 *
 *     allocate x[f32 * w * 16]   x[w * y + i] = ...   ->   allocate x[f32 * 80 * 16]   x[80 * y +
 * i] = ... (w <= 77)
 *
 * A copy then moves rows into padded UB rows (DataCopyPad), and a vector instruction may run
 * over whole padded rows, one count for the tile: what it computes in the padding is never
 * stored. One-dimensional tiles are rounded up to whole blocks. The cube's tiles (an MMA's
 * operands and accumulator) keep Halide's layout: Nd2Nz and Fixpipe take any row length.
 */

#include "tandem/Kernel.h"

#include <set>

namespace tandem::lower {

Halide::Internal::Stmt pad_ub_rows(const Halide::Internal::Stmt &s, CompileContext &ctx);

/** The constant row width of `buffer`, a tile Halide allocated with one extent (its extents
 * folded into their product), from its stores in `body`; 0 when it is one row, -1 when its
 * rows have a width known only at run time. */
int64_t folded_row_width(const Halide::Internal::Stmt &body, const std::string &buffer,
                         const CompileContext &ctx);

/** The loops along which a store into `buffer` in `body` steps 1. */
std::set<std::string> unit_step_loops(const Halide::Internal::Stmt &body, const std::string &buffer,
                                      const CompileContext &ctx);

/** `s` with `buffer`, rows `width` elements wide, laid out `pitch` apart: each index i of its
 * loads and stores becomes (i / width) * pitch + i % width (simplified in the loops' bounds). */
Halide::Internal::Stmt refold(const Halide::Internal::Stmt &s, const std::string &buffer,
                              int64_t width, int64_t pitch);

/** `s` with `buffer`'s rows `pitch` elements apart instead of `width` (its loads and stores:
 * every product by `width` in their indices). */
Halide::Internal::Stmt repitch(const Halide::Internal::Stmt &s, const std::string &buffer,
                               const Halide::Expr &width, const Halide::Expr &pitch);

} // namespace tandem::lower

#endif
