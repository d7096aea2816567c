#ifndef TANDEM_LOWER_CLUSTER_H
#define TANDEM_LOWER_CLUSTER_H

/** \file
 * Hopper thread-block clusters: TMA multicast of what the CTAs of a cluster share.
 *
 * With cluster(n) on the output Func, CoreMapping gives n consecutive iterations of the tile
 * loop to the n CTAs of a cluster (rank = tandem_core_id() % n, the tile
 * tandem_cluster_tile(owns, raw, first): a CTA without a tile of its own runs its cluster's first
 * CTA's; a guard around the whole tile (a group of tile rows the shape leaves short) that holds
 * for a rank only where it holds for rank 0 becomes part of `owns`). This pass, on the
 * warp-specialised Stmt:
 *
 *  - proves, for each copy into shared memory inside a tile loop, that every argument (the box's
 *    offset, extents, strides, its version) is the same for the n ranks: with the core id
 *    written n * w + r for each r < n and the grid size n * g, the simplifier shows each argument
 *    equal to rank 0's. Such a copy becomes a multicast (tandem_copy(..., n)): on the GPU its TMA
 *    boxes are dealt over the ranks, each multicast into all n CTAs. (A tile-less CTA of the last
 *    cluster runs tile `last`, which lies in its cluster's group of n tiles, so it shares the same
 *    boxes.) Division and modulus of the tile order by multiples of n (constants, or runtime
 *    tile counts, >= 1 at every call) are taken apart first: (n x + r) / (n m) = x / m and
 *    (n x + r) % (n m) = n (x % m) + r.
 *  - makes the consumers release a version of a ring that receives multicasts on every CTA of the
 *    cluster (tandem_arrive(empty, slot, n); the barrier counts n times the arrivals), so that no
 *    producer refills a version any CTA still reads;
 *  - appends a tail to the producer: it waits for the empty barrier of each version once more, so
 *    that the peers' last arrivals on this CTA's barriers happen before it exits;
 *  - stores only the tiles a CTA owns: a tile-less CTA's output copies are skipped.
 *
 * Loops where no copy is shared keep local copies (a note says so): the cluster is then only a
 * launch shape, still correct.
 */

#include "tandem/AsyncIR.h"
#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt multicast_in_clusters(const Halide::Internal::Stmt &s, CompileContext &ctx);

// The cluster proof, shared with the ZPU's mesh clusters (zpu/MeshBroadcast.h). A rank is
// proven alike by writing the core id as cluster * w + rank and the tile a cluster runs as
// cluster * q + rank (AsRank) for every rank.

/** The arguments of a copy that a shared copy must agree on: offsets, version, box. */
std::vector<Halide::Expr> copy_arguments(const ir::CopyOp &c);

/** Whether each of `exprs` is the same for every rank of a cluster of ctx.cluster units. */
bool same_for_cluster(const std::vector<Halide::Expr> &exprs, const CompileContext &ctx);

/** `c`, a condition on the unit's tile, as rank 0's tile gives it where that gives the same
 * runs on every rank (a unit that owns its tile passes c there, and c holds for rank 0's tile
 * wherever it holds for another rank's); `c` itself otherwise. */
Halide::Expr on_first_rank(const Halide::Expr &c, const CompileContext &ctx);

/** Whether the unit owns every tile `exprs` name (their tandem_cluster_tile calls' `owns`,
 * joined); undefined when they name none. */
Halide::Expr owns_tiles(const std::vector<Halide::Expr> &exprs);

/** Whether `cond`, a condition on the tile `var` (iterations from `min`), holds for rank 0 of a
 * cluster of `ctas` wherever it holds for another rank of the same cluster. */
bool holds_for_first_rank(const Halide::Expr &cond, const std::string &var, const Halide::Expr &min,
                          int ctas, const CompileContext &ctx);

} // namespace tandem::lower

#endif
