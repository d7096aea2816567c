#ifndef TANDEM_LOWER_ASCEND_FLAGS_H
#define TANDEM_LOWER_ASCEND_FLAGS_H

/** \file
 * Ascend pipes and flags. Every op goes to its hardware pipe (GM -> UB copies on MTE2, vector ops
 * on V, UB -> GM stores on MTE3) and the scalar stream only dispatches, so the overlap of DMA and
 * compute comes from the flags alone. Each group of copies (the copies next to each other in one
 * loop body) is a ring of `n` versions (n = multi_buffer, else 1) with a forward flag per version
 * (producer pipe -> consumer pipe, "data landed") and a reverse one ("version free"), pre-armed at
 * kernel start and drained at its end, in the idiom AscendC programmers write by hand:
 *
 *     SetFlag<V_MTE2>(0..n-1)                                   // pre-arm: every version is free
 *     for (...) {
 *         let s = ring % n
 *         WaitFlag<V_MTE2>(s); DataCopy(tile[s] <- GM); SetFlag<MTE2_V>(s)
 *         WaitFlag<MTE2_V>(s); ...vector ops on tile[s]...; SetFlag<V_MTE2>(s)
 *         ring += 1 }
 *     WaitFlag<V_MTE2>(0..n-1)                                  // drain
 *
 * A copy made once per kernel (outside every loop, once in the text) has no reverse flag: nothing
 * ever waits for its version to be free. An L0A operand loaded once for a region of Mmads
 * (AscendCube, Directives::loaded_once) has no forward flag: each Mmad that reads it waits for
 * the forward flag of its B operand, which MTE1 loads after it. The store of the output's staging
 * tile gets the same pair of flags between V and MTE3 (its reverse flag replaces the wait on the
 * tile's empty barrier). Event ids are allocated per pipe pair; no flag is set twice without a wait
 * between, and no PIPE_ALL is emitted.
 *
 * Limits (user errors): at most 8 live events per pipe pair; the cube path (L1, L0A/L0B, Mmad,
 * Fixpipe) is not lowered yet.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt insert_flags(const Halide::Internal::Stmt &s, CompileContext &ctx,
                                    const std::vector<SramBuffer> &buffers);

} // namespace tandem::lower

#endif
