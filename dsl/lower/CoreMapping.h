#ifndef TANDEM_LOWER_CORE_MAPPING_H
#define TANDEM_LOWER_CORE_MAPPING_H

/** \file
 * Block-to-core mapping. The loop named by map_to_cores(t) on the output Func is spread over the
 * cores round-robin: core c runs iterations c, c + cores, c + 2 * cores, ...
 *
 *     for (C.s0.t, 0, 64) { body(C.s0.t) }
 * becomes
 *     for (C.s0.t.on_core, 0, (64 - tandem_core_id() + 15) / 16) {
 *         body(tandem_core_id() + C.s0.t.on_core * 16) }
 *
 * Halide's loop partitioning may split the tile loop into a steady-state loop and a tail loop;
 * each is mapped on its own. Without map_to_cores the kernel runs on core 0 only.
 *
 * Hopper without ping_pong launches a CTA per tile: each mapped loop then runs at most once per
 * CTA (ctx.one_tile_per_unit), and the later passes emit no cross-tile pipeline in it.
 *
 * With cluster(n) (Hopper) the grid is whole clusters and the n CTAs of one run n consecutive
 * iterations together: each runs as many as its rank 0 (trips from core - core % n), its tile
 * tandem_cluster_tile(owns, raw, first). A CTA owns its iteration when it lies below the extent
 * and passes a guard around the whole tile body that holds for rank 0 wherever it holds for
 * another rank (a short last group of tile rows): the body then runs under the guard evaluated
 * on rank 0's tile, and a CTA that does not own its iteration runs rank 0's (storing nothing:
 * ctx.cluster_owns_tile, for Cluster.h). Halide's straight-line tail becomes a mapped loop of
 * one iteration run by the first cluster.
 *
 * Limits (user errors): the var must name a loop of the output Func's pure stage.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt map_to_cores(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
