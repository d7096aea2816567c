#ifndef TANDEM_LOWER_SOFTWARE_PIPELINE_H
#define TANDEM_LOWER_SOFTWARE_PIPELINE_H

/** \file
 * Software pipelining for a single control stream. A loop L that computes async_copy Funcs
 * (F with n versions) is split into a prologue, a steady state and an epilogue folded into guards:
 *
 *     for (ko, 0, E) { produce F { copy(ko); wait } ; use F }
 * becomes
 *     for (p, 0, min(n - 1, E)) { copy(p) into version p % n }                 // prologue
 *     for (ko, 0, E) {
 *         if (ko + n - 1 < E) { copy(ko + n - 1) into version (ko + n - 1) % n }  // run ahead
 *         wait(F.full, ko % n); use version ko % n }                           // steady state
 *
 * Copies issued are always waited inside the loop, so the pipeline is correct for any trip
 * count, including 1 and counts below n. The copy for iteration ko + n - 1 reuses the version
 * consumed at ko - 1, which the synchronous compute of ko - 1 has released. A tile loop that runs
 * once per unit (Hopper's CTA per tile) keeps the prologue, which copies its one iteration ahead
 * of the waits, and has no run-ahead copies.
 *
 * With warp_specialize() on the output, the producer runs ahead across the tile loop: the
 * iteration space is the flattened (tile, ..., ko) nest, so the next tile's first copies overlap
 * the current tile's last MMAs. It falls back to L alone (and says so in the notes) when an extent
 * of the nest depends on another loop of it, a guard inside the nest skips some of its iterations
 * (the grouped tile order's padding tiles), or F is used in the nest outside L (what Halide's loop
 * partitioning leaves where RejoinTails cannot prove the tail general).
 *
 * With copies_before_compute (the ZPU, whose tensor and vector cores run asynchronously), the
 * run-ahead copies go right before the iteration's first compute op instead of at its start: the
 * copy into the version the previous iteration's op read needs that engine drained (EngineSync),
 * and there the drain ends just as the engine's next op is issued, after this iteration's waits
 * and the hops that were free to run under the previous op.
 *
 * Limits: pipelined loops are serial loops; copies may depend only on the loops of the nest, on
 * loops outside it and on the core id.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt software_pipeline(const Halide::Internal::Stmt &s, CompileContext &ctx,
                                         bool copies_before_compute = false);

} // namespace tandem::lower

#endif
