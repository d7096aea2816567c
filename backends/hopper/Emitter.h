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
 *     __global__ void <function>(const __grid_constant__ CUtensorMap ...);   // one per TMA view
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
 *     tandem_expect                 elected thread: mbarrier.arrive.expect_tx (full-box bytes)
 *     tandem_wait on an mbarrier    every thread: try_wait.parity with the Stmt's parity, or
 *                                   with its own per-version phase bit (initial value
 *                                   BarrierDecl::initial_phase), flipped after each wait
 *     tandem_wait on a store's      elected thread: cp.async.bulk.wait_group.read 0, then the
 *       empty barrier               warpgroup barrier before the tile is rewritten
 *     tandem_arrive                 warpgroup barrier, elected thread: mbarrier.arrive
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
 * Tiles are always full size on the GPU: TMA boxes are the largest extents the Stmt's copies
 * take (a tail tile's box reaches past the tensor's edge, where loads read zeros and stores are
 * dropped; a runtime check traps otherwise), expect_tx counts full boxes, and MMAs run on the
 * full tile. Shared buffers keep the Kernel's offsets; smem indices of element nests over a tile
 * whose Stmt layout depends on the tail size (a row pitch equal to a tail's extent) are rewritten
 * to the full-tile layout. Boxes wider than 256 elements view the tensor's dim 0 as chunks.
 *
 * MMA operand layout: A (K-major, a(k, m)) and B (N-major, b(n, k)) tiles are loaded in column
 * blocks of 64 bf16 (128 bytes, the 128B swizzle span): a {64, rows} box per block, blocks
 * rows x 128 bytes apart. A's descriptor steps 32 bytes per k16 inside a block (K-major, SBO =
 * 1024 = 8 rows); B uses wgmma's transpose flag (MN-major, LBO = distance between its 64-column
 * blocks, SBO = 1024 = 8 k-rows) and steps 16 rows = 2048 bytes per k16.
 *
 * Limits (tandem::Error naming the buffer and the rule): MMAs are bf16 x bf16 -> f32 with A
 * K-major and B N-major; MMA tiles have K and N multiples of 64 (N <= 256) and M a multiple of 64,
 * at most 128 f32 accumulators per thread; MMA operand tiles are only written by TMA; TMA boxes
 * obey the tensor-map rules (inner box a multiple of 16 bytes, box dims <= 256 after splitting a
 * wide inner dimension into chunks, global strides multiples of 16 bytes, rank <= 5); an element
 * nest over an accumulator is a zeroing or a 2-D per-element epilogue; dynamic-layout tiles are at
 * most 2-D; TMA tiles start 128-byte aligned in shared memory (wgmma tiles 1024-byte aligned) at
 * the offsets memory planning gave them; mbarriers have at most 32 versions.
 */

#include "tandem/Kernel.h"

#include <string>

namespace tandem::hopper_backend {

/** The CUDA source of `kernel`; `function` names the kernel (default: the Kernel's name). */
std::string emit_cuda(const Kernel &kernel, const std::string &function = "");

} // namespace tandem::hopper_backend

#endif
