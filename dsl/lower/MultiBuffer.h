#ifndef TANDEM_LOWER_MULTI_BUFFER_H
#define TANDEM_LOWER_MULTI_BUFFER_H

/** \file
 * multi_buffer(n) and result slots. A copy stage F with multi_buffer(n) gets n versions of its
 * storage; every access is offset by `F.stage * slot`, and its copy signals version F.stage of
 * F.full. F.stage is left free: software pipelining defines it per phase (and 0 elsewhere).
 *
 *     allocate A_tile[bfloat16 * 8192]            allocate A_tile[bfloat16 * 24576]
 *     tandem_copy("A_tile", 0, ...)         ->    tandem_copy("A_tile", A_tile.stage*8192, ...,
 *                                                             "A_tile.full", A_tile.stage)
 *
 * The source S of an asynchronous store of the output gets `slots` versions (2 with ping_pong,
 * else the output's multi_buffer count, else 1) chosen by the parity of the tile loop that
 * allocates S, so that the store of one tile overlaps the work of the next. Before the first write
 * of S in each tile the control stream waits for the store that last read that version
 * (S.empty), and the kernel drains every version at its end (Hopper: one wait_group.read 0 drains
 * them all). A tile loop that runs once per unit (Hopper's CTA per tile) is straight-line code:
 * one version, waited before a write only when a store of it came earlier in the kernel.
 *
 * Limits (user errors): multi_buffer needs async_copy on the same Func; ping_pong needs async_copy
 * on the output and a tile loop around the output's store.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt multi_buffer(const Halide::Internal::Stmt &s, CompileContext &ctx);

/** `s` with every access of `buffer` (loads, stores, copies, MMAs, vector op regions) offset by
 * `offset`, and its barriers pointed at version `slot` (undefined: left as they are): one version
 * of a multi-buffered buffer. */
Halide::Internal::Stmt rebase_buffer(const Halide::Internal::Stmt &s, const std::string &buffer,
                                     const Halide::Expr &offset, const Halide::Expr &slot);

} // namespace tandem::lower

#endif
