#ifndef TANDEM_LOWER_ENGINE_SYNC_H
#define TANDEM_LOWER_ENGINE_SYNC_H

/** \file
 * ZPU engine syncs. The control stream issues MMAs to the tensor core and vector ops to the vector
 * core without waiting (SUNMMIO/Tilelang: asynchronous launches, `sunmmio_sync(units)` drains
 * whole units), so an op that touches what an op still running on another engine touches must
 * come after a sync of that engine:
 *
 *     vector_op(acc = 0)                     vector_op(acc = 0)
 *     mma(acc += A * B)               ->     tandem_sync("vector")
 *     vector_op(C_stage = acc)               mma(acc += A * B)
 *     copy(C <- C_stage)                     tandem_sync("tensor")
 *                                            vector_op(C_stage = acc)
 *                                            tandem_sync("vector")
 *                                            copy(C <- C_stage)
 *
 * The pass walks the control stream in program order with the accesses each engine may still be
 * running (buffer, element hull, read or write), and syncs an engine before the first op that
 * conflicts with one of them (read after write, write after read or write): a compute op of the
 * other engine, or a copy issue (a copy is ordered after what the control stream did before
 * issuing it). Ops of one engine run in order and need no sync between them; DMA completion keeps
 * its tokens (tandem_wait). Loops are a fixed point: what the previous iteration left running is
 * carried around the back-edge with the loop variable shifted by one, so a version of a
 * multi-buffered buffer that another iteration uses is told apart from this iteration's
 * ((ko + 2) % 3 is not (ko + 1) % 3, nor (ko % 2) * 2 + 1 (ko + 1) % 2 * 2: a proof over one
 * period); what is older than one iteration covers its whole buffer, and what ran before the loop
 * is compared with its first iteration only, unless an iteration leaves it running. An engine a
 * guarded branch syncs before using is synced before the branch, so both paths leave it drained.
 * The kernel ends with a sync of every engine that may still run.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt sync_engines(const Halide::Internal::Stmt &s, CompileContext &ctx,
                                    const std::vector<SramBuffer> &buffers);

} // namespace tandem::lower

#endif
