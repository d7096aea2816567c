#ifndef TANDEM_LOWER_MESH_BROADCAST_H
#define TANDEM_LOWER_MESH_BROADCAST_H

/** \file
 * ZPU mesh clusters: the copies the cores of a mesh column share are loaded once and broadcast
 * down the column (VLink), as Hopper's clusters multicast them (Cluster.h).
 *
 * With cluster(n) on the output Func, CoreMapping gives n consecutive iterations of the tile loop
 * to the n cores of a cluster, a run of n rows of one mesh column: the core id the kernel reads
 * is the core's mesh position column * rows + row (Kernel::cluster), so rank = id % n as on
 * Hopper, and a core without a tile of its own runs its cluster's rank 0 tile. This pass, after
 * the software pipeline and the engine syncs, on the control stream every core runs:
 *
 *  - finds the copies from a DRAM argument into an on-chip memory a column leaf reaches
 *    (machine description: vlink_route.DRAM.<memory>) whose box, version and every enclosing
 *    loop bound, condition and let (the pipeline's prologue outside the tile loop too) Cluster.h's
 *    proof shows the same for the n ranks, and whose waits run under control the same for the
 *    ranks. A buffer version's copies are shared all or none (per completion barrier).
 *  - makes each such copy a broadcast (tandem_copy(..., n, sender)): one rank loads its own
 *    version and broadcasts the same box from DRAM into the others' buffer of the same name; the
 *    others issue nothing, and their wait on the version is free. The ranks take the copies in
 *    turn (the copy into version g % versions is rank g % n's), so that no rank's ODMA carries
 *    every shared load.
 *  - orders it with two mesh barriers of the cluster: "free" before the copy (every rank has
 *    done with what the version held: the engine syncs before the copy run on every rank; none
 *    before the pipeline's prologue copies ahead of every loop, whose versions nothing used yet),
 *    and "landed" after each wait on the version (the sender waited on its load and on the
 *    leaf, so the others read the version after the leaf's writes).
 *  - issues each broadcast after the MMAs that follow it and read other versions of its buffer
 *    (proven apart for each residue of the version modulo the versions). On a core alone the
 *    pipeline puts the copy right before the iteration's first MMA, after the engine sync that
 *    frees the version; a barrier there would hold the MMA back by a barrier's time, while after
 *    the MMAs it runs under them.
 *  - stores only the tiles a core owns: an output copy naming a tandem_cluster_tile (the
 *    deferred store of the previous tile too) runs where that tile is the core's own, one the
 *    same for every rank (a straight-line tail, which the first cluster runs) on rank 0.
 *
 * Where nothing is shared the cluster is only a tile order (a note says so), still correct.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt broadcast_in_mesh_columns(const Halide::Internal::Stmt &s,
                                                 CompileContext &ctx,
                                                 const std::vector<SramBuffer> &buffers);

} // namespace tandem::lower

#endif
