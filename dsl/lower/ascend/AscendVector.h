#ifndef TANDEM_LOWER_ASCEND_VECTOR_H
#define TANDEM_LOWER_ASCEND_VECTOR_H

/** \file
 * The Ascend vector path's instructions. Each vector op (VectorOps.h) whose element nest it can
 * map becomes AscendC's real vector instructions (sim/Ascend.h VectorCall), the same f32
 * operations in the same order as the element loops (the same bits, but for ReduceSum's order):
 *
 *   a dense map (every tensor read where the store writes; +, -, *, /, min, max, abs, sqrt,
 *   constants, and select on <, <=, ==, != over whole 64-element repeats): count form over the tile
 *     out = a * b + max(c, 0) * 0.5  ->  Mul(out, a, b, n); Maxs(t, c, 0, n); PipeBarrier<V>; ...
 *     select(a < b, a, b * 0.5)      ->  Compare(mask, a, b, LT, n); Muls(t, b, 0.5, n);
 * Select(...)
 *
 *   a row-wise nest (rows x columns) with a row vector read by every row (w[x]) and per-row values
 *   (s[r]): the per-row arithmetic in count form over the rows, each per-row value broadcast to a
 *   32-byte block per row (Brcb), then the repeat form over rows and 64-column chunks with the
 *   row vector at repeat stride 0 and the blocks at block stride 0
 *     out[r, x] = in[r, x] * w[x] / sqrt(ss[r] * k + e)
 *       ->  Muls(s, ss, k, R); Adds(s, s, e, R); Sqrt(s, s, R); Brcb(b, s, ...);
 *           Mul(out, in, w, 64, R, {1, 1, 1, X/8, X/8, 0}); Div(out, out, b, 64, R, {1, 1, 0, X/8,
 * X/8, 1})
 *
 *   a sum over the columns into one value per row (self[r] = self[r] + f[r, x]), or a maximum or
 *   minimum (self[r] = max(self[r], f[r, x])): f as a tile, one value per row into scratch, then
 *   Add (Max, Min) into self. Rows of 64k whole lanes: their 64-lane chunks folded into the first
 *   (Add / Max by repeat, a repeat a row), a BlockReduce to eight values per row and one to a value
 *   per row; rows of at most 64: one WholeReduce, a repeat a row; else (a width known at run time)
 *   ReduceSum per row, or ReduceMax per row into its own sharedTmpBuffer gathered by a
 *   WholeReduceMax of one lane per row
 *     softmax's mx(r) = max(mx(r), in(k, r)), X = 64 -> BlockReduceMax(b, in, R, 64, 1, 1, 8);
 *           BlockReduceMax(v, b, R / 8, 64, 1, 1, 8); Max(mx, mx, v, R)
 *
 *   a reduction down the columns into one row (self[x] = self[x] op f[r, x], op +, max, min): f
 *   as a tile, then a loop over the rows (a count known at run time in a tail), one Add / Max /
 *   Min of row r into self each, behind a barrier: the element loops' order and bits (with the
 *   columns' loop outside the rows', as Halide orders an update not reordered, the loops
 *   interchange: no column's order changes).
 *
 *   exp and log are Exp and Ln; tanh (AscendC's basic API has none) is 2 / (1 + exp(-2v)) - 1.
 *
 *   a read no instruction's operand can start (a transposed read out(x, y) = in(y, x), a window
 *   starting inside a 32-byte block such as in(x + 1, y)) whose index is affine in the element
 *   loops with steps >= 0: Gather of its elements into a dense tile, by byte offsets from the
 *   block it starts in (srcBaseAddr: the rest); one offset table per distinct (row step, column
 *   step, rows, pitch, width), int32_t in `gather_offsets`, computed once at the kernel's start
 *   (a transposed tile one column wide, its padded rows read into a dense row, out[x] =
 *   in[8 x], is such a read too: a flat run, not one value per row)
 *     out(x, y) = in(y, x) -> Gather(out, in, gather_offsets.ReinterpretCast<uint32_t>(), 0, n)
 *     in(x + 1, y + 2)     -> Gather(t, in[2 * P], gather_offsets, 4, n); ...
 *
 * An intermediate result lives in an input tile the op has finished reading and nothing else
 * reads, else in the kernel's UB scratch (`vector_scratch`, f32; Compare's masks: `vector_mask`,
 * uint8) - added to the kernel's buffers where UB has room. A PipeBarrier<PIPE_V> stands before
 * each instruction that depends on an earlier one of the op.
 *
 * Limits, each a user error naming the Func and saying "not supported on ascend: <operation>": a
 * read that is neither an operand nor gathered (an index not affine in the element loops, a
 * negative step, a flat nest of several loops, a start at an unknown place within its block),
 * another function than abs, sqrt, exp, log, tanh, another reduction, a cast but to bfloat16, a
 * compare over a partial repeat. Temporaries (and Gather offset tables) that do not fit in UB are
 * the one error that advises smaller tiles.
 *
 * This file is the pass: which ops, which input tiles an op may use for temporaries, rows in
 * chunks where scratch does not fit, the kernel's scratch buffers and Gather offset tables. The
 * instructions of one nest are chosen by AscendVectorSelection.h.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

/** After memory planning (the tiles' offsets final): each vector op it can map becomes the
 * instructions; the scratch they use joins `buffers`. */
Halide::Internal::Stmt select_vector_instructions(const Halide::Internal::Stmt &s,
                                                  CompileContext &ctx,
                                                  std::vector<SramBuffer> &buffers);

} // namespace tandem::lower

#endif
