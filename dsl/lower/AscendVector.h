#ifndef TANDEM_LOWER_ASCEND_VECTOR_H
#define TANDEM_LOWER_ASCEND_VECTOR_H

/** \file
 * The Ascend vector path's instructions. Each vector op (VectorOps.h) whose element nest is a
 * dense f32 map over UB tiles - every tensor read at the element the store writes, through
 * +, -, *, /, min, max and constants - becomes AscendC's real instructions in count form over
 * the whole tile:
 *
 *     for y, x: out[y*W + x] = a[..] * b[..] + max(c[..], 0) * 0.5
 *  -> Mul(out, a, b, n); Maxs(tmp, c, 0, n); PipeBarrier<V>; Muls(tmp, tmp, 0.5, n);
 *     PipeBarrier<V>; Add(out, out, tmp, n)
 *
 * (the same f32 operations in the same order as the element loops: the same bits). An
 * intermediate result lives in an input tile the op has finished reading and nothing else reads
 * (so UB needs no more room); a PipeBarrier<PIPE_V> stands before each instruction that depends
 * on an earlier one of the op. A nest it cannot map (a reduction, a broadcast along the tile, a
 * select or a cast, an op that reads what it writes, no free tile for an intermediate) keeps its
 * element loops.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

/** After memory planning (the tiles' offsets final): each vector op it can map becomes the
 * instructions. */
Halide::Internal::Stmt select_vector_instructions(const Halide::Internal::Stmt &s);

} // namespace tandem::lower

#endif
