#ifndef TANDEM_HOPPER_EMITTER_H
#define TANDEM_HOPPER_EMITTER_H

/** \file
 * The Hopper emitter: one readable CUDA C++ source per kernel, for sm_90a, that means what the
 * Hopper executor (Executor.h) runs on the machine model. It compiles with
 *
 *     nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I backends/hopper/runtime kernel.cu
 *
 * and defines
 *
 *     __global__ void <function>(const __grid_constant__ CUtensorMap ...,    // one per TMA view
 *                                const T *__restrict__ <arg>_global ...);   // thread copies' args
 *     extern "C" cudaError_t launch_<function>(void *const *args, cudaStream_t stream);
 *
 * where `args` are device pointers in Kernel::args order. The launcher encodes the tensor maps,
 * raises the dynamic shared memory limit and launches Kernel::grid CTAs of 128 x
 * Kernel::warpgroups threads; it returns an error (never crashes) for a null or a misaligned
 * (not 16-byte) pointer.
 *
 * How the async Stmt maps to CUDA (every warpgroup's 128 threads run its role's control flow):
 *
 *     tandem_warpgroup()            threadIdx.x / 128; roles are branches on it
 *     tandem_core_id()              blockIdx.x
 *     tandem_copy into smem         one elected thread: cp.async.bulk.tensor ... complete_tx
 *     tandem_copy to the output     barrier, elected thread: TMA store + commit_group
 *     tandem_copy TMA cannot make   every thread of the warpgroup: ld / st (8 loads in flight
 *                                   per thread); into smem then fence.proxy.async, barrier,
 *                                   elected thread: mbarrier.complete_tx (the bytes expect_tx
 *                                   counted for the tile); a wgmma tile is written swizzled and
 *                                   zero-filled past the copy
 *     tandem_expect                 elected thread: mbarrier.arrive.expect_tx (full-box bytes)
 *     tandem_wait on an mbarrier    every thread: try_wait.parity with the Stmt's parity, or
 *                                   with its own per-version phase bit (initial value
 *                                   BarrierDecl::initial_phase), flipped after each wait
 *     tandem_wait on a store's      elected thread: cp.async.bulk.wait_group.read 0, then the
 *       empty barrier               warpgroup barrier before the tile is rewritten
 *     tandem_arrive                 warpgroup barrier, elected thread: mbarrier.arrive
 *     tandem_arrive(b, slot, n)     the same on each of the n CTAs of the cluster: mapa, then
 *                                   mbarrier.arrive.shared::cluster (release at CTA scope)
 *     tandem_copy(..., n)           a cluster's shared box: each CTA's elected thread issues the
 *                                   TMA boxes i with i % n == %cluster_ctarank, each
 *                                   cp.async.bulk.tensor ... .multicast::cluster to all n CTAs
 *     Kernel::cluster = n > 1       __cluster_dims__(n, 1, 1); barrier.cluster (arrive.release,
 *                                   wait.acquire) after mbarrier init instead of __syncthreads;
 *                                   a persistent grid of whole clusters, at most as many as the
 *                                   GPU holds at once (cudaOccupancyMaxActiveClusters)
 *     tandem_cluster_tile(o, t, f)  o ? t : f
 *     tandem_mma                    wgmma.fence, m64nNk16 wgmmas, commit_group, wait_group 0
 *     tandem_fence_proxy_async      fence.proxy.async.shared::cta (every thread)
 *     tandem_advance                an int counter += 1
 *     tandem_setmaxnreg             setmaxnreg.inc / .dec
 *     vector op on smem             the element nest strided over the warpgroup's 128 threads
 *                                   (a reduction: per-thread partials and a shuffle reduction),
 *                                   then a warpgroup barrier before its results are read
 *     vector op on an accumulator   zeroing the thread's wgmma fragment registers, or the
 *                                   epilogue re-expressed over the fragment's (row, col), two
 *                                   adjacent columns per store where the element code allows
 *
 * A warpgroup barrier (bar.sync 1 + warpgroup, 128) also precedes a TMA load in a role that
 * computes (its threads are done reading the version being overwritten) and an arrive.
 *
 * Tiles are always full size on the GPU, padded to the hardware's granularity (Plan.h): a TMA box
 * is the largest extent the Stmt's copies take, its row rounded up to 16 bytes; a wgmma tile has
 * K and N rounded up to 64 bf16 and M to 64 rows. What a box moves past a copy's own extent lies
 * past the tensor's edge (loads read zeros, stores are dropped) wherever it matters: in a store,
 * and along K of an MMA operand; elsewhere (loads into a plain tile, the M / N rows of an
 * operand) it only brings elements nobody reads. The planner proves the edge from the loop bounds,
 * else a runtime check traps (a tail tile), else (a padded tile in the middle of the tensor) the
 * tile is copied by threads. expect_tx counts full boxes and MMAs run on the full tile. The emitter
 * lays out shared memory itself: each version holds the full tile, 128-byte aligned (1024 for wgmma
 * tiles); smem offsets of the Stmt (version * its slot + within) are rebased to that version
 * stride, and element nests over a tile whose Stmt rows differ from the GPU's (a tail's pitch, a
 * row padded to 16 bytes) are rewritten to the full-tile layout. A tensor whose rows have a
 * stride TMA cannot take is viewed as one dim when the tiles are whole rows, else copied by
 * threads (so are MMA operands with such a stride); a dim of extent 1
 * takes any legal stride (an MMA operand of M = 1 keeps a 2-D view with its unit dim). Boxes
 * wider than 256 elements are split: side by side along one row (the last one through its own
 * tensor map), as chunks of the tensor's dim 0, or a row of boxes per tile row.
 *
 * MMA operand layout: A (K-major, a(k, m)) and B (N-major, b(n, k), or K-major: attention's K)
 * tiles are loaded in column blocks of 64 bf16 (128 bytes, the 128B swizzle span): a {64, rows}
 * box per block, blocks rows x 128 bytes apart. A's descriptor (and a K-major B's, tnspB 0) steps
 * 32 bytes per k16 inside a block (K-major, SBO = 1024 = 8 rows); an N-major B uses wgmma's
 * transpose flag (tnspB 1, LBO = distance between its 64-column blocks, SBO = 1024 = 8 k-rows)
 * and steps 16 rows = 2048 bytes per k16.
 *
 * Limits (tandem::Error naming the Func, the directive or the buffer, and the rule): MMAs are
 * bf16 x bf16 -> f32 with A K-major and B N-major or K-major, from 2-D tensors; N <= 256 and at
 * most 128 f32 accumulators per thread after padding; MMA operand tiles are only written by copies;
 * copies do not convert types; an element nest over an accumulator is a zeroing or a per-element
 * epilogue of one or two loops; dynamic-layout tiles are at most 2-D; mbarriers have at most 32
 * versions; shared memory at most 227 KB per CTA.
 *
 * The emitter's files: Plan.h decides where tiles live, the tensor maps and the wgmma tiles;
 * ElementLoops.h how element nests map onto threads and fragment registers; CodeGen.h prints the
 * kernel (Emitter.cpp the control stream, ElementCode.cpp the element nests) through CudaExpr.h,
 * the CUDA dialect of the shared expression printer (common/CExpr.h); Host.h prints the launcher,
 * the dispatcher and the library's call.
 */

#include "tandem/Kernel.h"

#include <string>

namespace tandem::hopper_backend {

/** The CUDA source of `kernel`; `function` names the kernel (default: the Kernel's name). */
std::string emit_cuda(const Kernel &kernel, const std::string &function = "");

/** The library interface (common/Library.h, device memory) over emit_cuda's launcher: plain C++
 * (link the .cu's object and CUDA's runtime); the call launches on the default stream and
 * synchronises, and a CUDA error is halide_error_code_generic_error with CUDA's message. */
std::string emit_library(const Kernel &kernel, const std::string &function = "");

} // namespace tandem::hopper_backend

#endif
