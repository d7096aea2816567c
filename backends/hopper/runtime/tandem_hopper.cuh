#ifndef TANDEM_HOPPER_CUH
#define TANDEM_HOPPER_CUH

/** \file
 * The device and host helpers that Tandem's Hopper emitter (backends/hopper/Emitter.h) targets:
 * one small inline function per PTX instruction the kernels use, so that an emitted kernel reads
 * as its pipeline (wait, expect, TMA, wgmma, arrive) and each instruction is written once.
 *
 * Build: nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I<this folder> kernel.cu
 * (the launcher finds cuTensorMapEncodeTiled through the runtime's driver entry point: no -lcuda).
 *
 * Sources of the facts: the PTX ISA (mbarrier, cp.async.bulk.tensor, wgmma, setmaxnreg, matrix
 * descriptors) and the CUDA driver API (cuTensorMapEncodeTiled); see /work/shared/HOPPER-FACTS.md.
 */

#include <cuda.h> // CUtensorMap and its enums (types only; the driver is reached at run time)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <new> // std::nothrow: the prepared launches
#include <type_traits>

namespace hopper {

constexpr int threads_per_warpgroup = 128;

// ---------------------------------------------------------------------------------------------
// Integer and element helpers (Halide semantics)
// ---------------------------------------------------------------------------------------------

/** Halide's integer division rounds towards negative infinity (for a positive divisor). */
template <class T> __host__ __device__ __forceinline__ T floor_div(T a, T b) {
    T q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

/** Halide's integer modulo is never negative (for a positive divisor). */
template <class T> __host__ __device__ __forceinline__ T floor_mod(T a, T b) {
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/** A runtime divisor d (1 <= d < 2^31) prepared once, at the kernel's start, for divisions by a
 * multiply-high, an add and a shift (Granlund and Montgomery, "Division by invariant integers using
 * multiplication", PLDI 1994, section 4): a TMA box's coordinates from its element offset where the
 * tensor's extents are runtime values. A division by a runtime value is some twenty instructions on
 * the GPU, and a runtime-shape GEMM's producer made several per k-step (0.59-0.65 of cuBLAS on an
 * H200 where the same kernel for fixed shapes made 0.89-0.99; a 64-bit multiply and shift, the
 * first form, still left the producer 168 instructions per k-step against the fixed kernel's 100).
 * With l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1 (below 2^32), n / d is
 * (umulhi(n, m) + n) >> l for every n < 2^32; for n < 2^31 the sum does not overflow. */
struct Divisor {
    int d, l;
    uint32_t m;
    __host__ __device__ explicit Divisor(int divisor) : d(divisor > 1 ? divisor : 1) {
#ifdef __CUDA_ARCH__
        l = 32 - __clz(d - 1);
#else
        l = d == 1 ? 0 : 32 - __builtin_clz(uint32_t(d - 1));
#endif
        m = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << l) - uint64_t(d))) / uint64_t(d) + 1);
    }
};

/** n / d and n % d for n < 2^31 (the emitter passes an unsigned offset where it knows it is
 * >= 0: no sign fix-ups). */
__host__ __device__ __forceinline__ int fast_div(uint32_t n, const Divisor &d) {
#ifdef __CUDA_ARCH__
    const uint32_t high = __umulhi(n, d.m);
#else
    const uint32_t high = uint32_t((uint64_t(n) * d.m) >> 32);
#endif
    return int((high + n) >> d.l);
}
__host__ __device__ __forceinline__ int fast_mod(uint32_t n, const Divisor &d) {
    return int(n) - fast_div(n, d) * d.d;
}

/** x / d with C's truncation, for |x| < 2^31. */
__host__ __device__ __forceinline__ int fast_div(int x, const Divisor &d) {
    const int q = fast_div(x < 0 ? uint32_t(-x) : uint32_t(x), d);
    return x < 0 ? -q : q;
}

/** x % d with C's sign, for |x| < 2^31. */
__host__ __device__ __forceinline__ int fast_mod(int x, const Divisor &d) {
    return x - fast_div(x, d) * d.d;
}

/** std::min / std::max semantics (the first operand when they compare equal). */
template <class T> __host__ __device__ __forceinline__ T min_of(T a, T b) {
    return b < a ? b : a;
}
template <class T> __host__ __device__ __forceinline__ T max_of(T a, T b) {
    return a < b ? b : a;
}

/** A float rounded to bfloat16 precision (round to nearest even), held in a float. */
__device__ __forceinline__ float round_bf16(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

/** A float rounded to IEEE half precision (round to nearest even, overflow to inf), in a float. */
__device__ __forceinline__ float round_f16(float x) {
    return __half2float(__float2half_rn(x));
}

// ---------------------------------------------------------------------------------------------
// Threads of a warpgroup
// ---------------------------------------------------------------------------------------------

/** A named barrier for the 128 threads of one warpgroup (id 0 is __syncthreads). */
__device__ __forceinline__ void warpgroup_sync(int warpgroup) {
    asm volatile("bar.sync %0, %1;" ::"r"(warpgroup + 1), "n"(threads_per_warpgroup) : "memory");
}

/** A named barrier for the cooperative consumer warpgroups (warpgroups 1 and 2: id 4; ids 1-3
 * are the warpgroups' own). */
template <int threads> __device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync 4, %0;" ::"n"(threads) : "memory");
}

/** Register re-balancing between roles (each role one branch; a multiple of 8 in 24..256). */
template <int registers> __device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(registers));
}
template <int registers> __device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(registers));
}

/** `op` over the 32 lanes of a warp; every lane gets the total. */
template <class T, class Op> __device__ __forceinline__ T warp_reduce(T value, Op op) {
    for (int offset = 16; offset > 0; offset /= 2)
        value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
    return value;
}

/** `op` over the four lanes of a quad (lanes 4q..4q+3: a row of a wgmma accumulator fragment);
 * every lane gets the quad's total. */
template <class T, class Op> __device__ __forceinline__ T quad_reduce(T value, Op op) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, 1));
    return op(value, __shfl_xor_sync(0xffffffffu, value, 2));
}

/** Sum / max / min of one value per thread over the warpgroup; every thread gets the result.
 * `scratch` holds 4 values of shared memory owned by this warpgroup. */
template <class T, class Op>
__device__ __forceinline__ T warpgroup_reduce(T value, T *scratch, int warpgroup, Op op) {
    value = warp_reduce(value, op);
    const int thread = threadIdx.x % threads_per_warpgroup;
    if (thread % 32 == 0)
        scratch[thread / 32] = value;
    warpgroup_sync(warpgroup);
    T total = op(op(scratch[0], scratch[1]), op(scratch[2], scratch[3]));
    warpgroup_sync(warpgroup); // scratch may be reused
    return total;
}

/** Sum / max / min of one value per thread over the cooperative warpgroups (`threads` of them,
 * consumers_sync's barrier); every thread gets the result. `scratch` holds one value per warp. */
template <int threads, class T, class Op>
__device__ __forceinline__ T consumers_reduce(T value, T *scratch, Op op) {
    value = warp_reduce(value, op);
    const int warp = (threadIdx.x % threads) / 32;
    if (threadIdx.x % 32 == 0)
        scratch[warp] = value;
    consumers_sync<threads>();
    T total = scratch[0];
#pragma unroll
    for (int w = 1; w < threads / 32; w++)
        total = op(total, scratch[w]);
    consumers_sync<threads>(); // scratch may be reused
    return total;
}

// ---------------------------------------------------------------------------------------------
// Shared memory and mbarriers
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t shared_address(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/** The dynamic shared memory base rounded up to 1024 bytes (128B-swizzled tiles need it). */
__device__ __forceinline__ unsigned char *align_1024(unsigned char *p) {
    const uint32_t a = shared_address(p);
    return p + ((1024u - (a & 1023u)) & 1023u);
}

__device__ __forceinline__ void mbarrier_init(uint64_t *barrier, uint32_t arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)),
                 "r"(arrivals)
                 : "memory");
}

/** Makes the initialised mbarriers visible to the async proxy (TMA) and the other threads. */
__device__ __forceinline__ void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/** Arrive (one of the barrier's arrivals) and expect `bytes` more transaction bytes. */
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t *barrier, uint32_t bytes) {
    asm volatile(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)),
        "r"(bytes)
        : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t *barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(barrier))
                 : "memory");
}

// ---------------------------------------------------------------------------------------------
// Thread-block clusters (Kernel::cluster CTAs, rank = blockIdx.x % cluster)
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

/** Arrive on the mbarrier at the same shared address in the CTA of cluster rank `rank` (its own
 * included): mapa, then an arrive with PTX's default semantics (release at CTA scope, the form of
 * CUTLASS's ClusterBarrier::arrive). The consumers arrive on an empty barrier after their wgmma
 * reads of the slot completed (wgmma.wait_group), so the peer's multicast into the slot needs no
 * more. A release at cluster scope costs a MEMBAR.ALL.GPU per arrival: it made the cluster GEMMs
 * 0.26-0.76x cuBLAS on an H200 where this form gives 0.79-1.02x (gpu_hopper_notes.md, session 34).
 */
__device__ __forceinline__ void mbarrier_arrive_cluster(uint64_t *barrier, uint32_t rank) {
    asm volatile("{\n"
                 ".reg .b32 remote;\n"
                 "mapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
                 "}\n" ::"r"(shared_address(barrier)),
                 "r"(rank)
                 : "memory");
}

/** Every thread of every CTA of the cluster: the barriers initialised before any peer uses them. */
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;" ::
                     : "memory");
}

/** Blocks until the phase of `barrier` with parity `parity` has completed.
 * A debug build (-DTANDEM_HOPPER_SPIN_LIMIT=cycles) traps after waiting that many SM cycles and
 * prints where: a hang becomes a report naming the block, thread, barrier and parity. */
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t *barrier, uint32_t parity) {
    const uint32_t address = shared_address(barrier);
    uint32_t done = 0;
#ifdef TANDEM_HOPPER_SPIN_LIMIT
    const long long start = clock64();
#endif
    do {
#ifdef TANDEM_HOPPER_SPIN_LIMIT
        if (clock64() - start > (long long)(TANDEM_HOPPER_SPIN_LIMIT)) {
            printf("tandem: mbarrier wait stuck: block %d thread %d (warpgroup %d) barrier at "
                   "shared 0x%x parity %u\n",
                   blockIdx.x, threadIdx.x, threadIdx.x / threads_per_warpgroup, address, parity);
            __trap();
        }
#endif
        asm volatile("{\n"
                     ".reg .pred complete;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, complete;\n"
                     "}\n"
                     : "=r"(done)
                     : "r"(address), "r"(parity)
                     : "memory");
    } while (!done);
}

/** tandem_wait on an mbarrier version: wait for the parity this thread expects next for that
 * version (bit `slot` of `phases`), then flip it (the model's per-version phase bit). */
__device__ __forceinline__ void mbarrier_wait(uint64_t *barriers, int slot, uint32_t &phases) {
    mbarrier_wait_parity(&barriers[slot], (phases >> slot) & 1u);
    phases ^= 1u << slot;
}

// ---------------------------------------------------------------------------------------------
// TMA (cp.async.bulk.tensor); coordinates innermost first
// ---------------------------------------------------------------------------------------------

/** A global -> shared box copy that completes `bytes` of transactions on `barrier`. */
__device__ __forceinline__ void tma_load(uint32_t destination, const CUtensorMap *map,
                                         uint64_t *barrier, int c0) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%3}], [%2];" ::"r"(destination),
                 "l"(map), "r"(shared_address(barrier)), "r"(c0)
                 : "memory");
}
__device__ __forceinline__ void tma_load(uint32_t destination, const CUtensorMap *map,
                                         uint64_t *barrier, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%3, %4}], [%2];" ::"r"(destination),
                 "l"(map), "r"(shared_address(barrier)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_load(uint32_t destination, const CUtensorMap *map,
                                         uint64_t *barrier, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%3, %4, %5}], [%2];" ::"r"(destination),
                 "l"(map), "r"(shared_address(barrier)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void tma_load(uint32_t destination, const CUtensorMap *map,
                                         uint64_t *barrier, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(destination),
                 "l"(map), "r"(shared_address(barrier)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
__device__ __forceinline__ void tma_load(uint32_t destination, const CUtensorMap *map,
                                         uint64_t *barrier, int c0, int c1, int c2, int c3,
                                         int c4) {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%3, %4, %5, %6, %7}], [%2];" ::"r"(destination),
                 "l"(map), "r"(shared_address(barrier)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
                 : "memory");
}

/** A box multicast into the CTAs of the cluster in `mask` (bit r: rank r), at the same shared
 * address in each, completing its bytes on each one's `barrier`. */
#define TANDEM_TMA_MULTICAST(DIMS, COORDS, ...)                                                    \
    asm volatile("cp.async.bulk.tensor." DIMS                                                      \
                 ".shared::cluster.global.mbarrier::complete_tx::bytes"                            \
                 ".multicast::cluster [%0], [%1, {" COORDS "}], [%2], %3;" ::"r"(destination),     \
                 "l"(map), "r"(shared_address(barrier)), "h"(mask), __VA_ARGS__                    \
                 : "memory")
__device__ __forceinline__ void tma_load_multicast(uint32_t destination, const CUtensorMap *map,
                                                   uint64_t *barrier, uint16_t mask, int c0) {
    TANDEM_TMA_MULTICAST("1d", "%4", "r"(c0));
}
__device__ __forceinline__ void tma_load_multicast(uint32_t destination, const CUtensorMap *map,
                                                   uint64_t *barrier, uint16_t mask, int c0,
                                                   int c1) {
    TANDEM_TMA_MULTICAST("2d", "%4, %5", "r"(c0), "r"(c1));
}
__device__ __forceinline__ void tma_load_multicast(uint32_t destination, const CUtensorMap *map,
                                                   uint64_t *barrier, uint16_t mask, int c0, int c1,
                                                   int c2) {
    TANDEM_TMA_MULTICAST("3d", "%4, %5, %6", "r"(c0), "r"(c1), "r"(c2));
}
__device__ __forceinline__ void tma_load_multicast(uint32_t destination, const CUtensorMap *map,
                                                   uint64_t *barrier, uint16_t mask, int c0, int c1,
                                                   int c2, int c3) {
    TANDEM_TMA_MULTICAST("4d", "%4, %5, %6, %7", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
}
__device__ __forceinline__ void tma_load_multicast(uint32_t destination, const CUtensorMap *map,
                                                   uint64_t *barrier, uint16_t mask, int c0, int c1,
                                                   int c2, int c3, int c4) {
    TANDEM_TMA_MULTICAST("5d", "%4, %5, %6, %7, %8", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4));
}
#undef TANDEM_TMA_MULTICAST

/** The element (row, col) of a tile of `Rows` rows held as column blocks of 128 bytes with the
 * 128B swizzle (each block a {128 bytes, Rows} TMA box, SWIZZLE_128B): the 16-byte chunk of a row
 * is XORed with the row's index mod 8. Two elements of one 4- or 8-byte aligned pair stay next to
 * each other. */
template <class T, int Rows> __device__ __forceinline__ int swizzled_128B(int row, int col) {
    constexpr int row_elements = 128 / int(sizeof(T)), chunk = 16 / int(sizeof(T));
    static_assert(Rows % 8 == 0, "whole swizzle atoms of 8 rows");
    const int block = col / row_elements, in_row = col % row_elements;
    return block * row_elements * Rows + row * row_elements +
           (((in_row / chunk) ^ (row % 8)) * chunk) + in_row % chunk;
}

/** A shared -> global box copy in this thread's bulk async-group (elements outside the tensor
 * are dropped). */
__device__ __forceinline__ void tma_store(const CUtensorMap *map, uint32_t source, int c0) {
    asm volatile(
        "cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%2}], [%1];" ::"l"(map),
        "r"(source), "r"(c0)
        : "memory");
}
__device__ __forceinline__ void tma_store(const CUtensorMap *map, uint32_t source, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
        "r"(source), "r"(c0), "r"(c1)
        : "memory");
}
__device__ __forceinline__ void tma_store(const CUtensorMap *map, uint32_t source, int c0, int c1,
                                          int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
            map),
        "r"(source), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}
__device__ __forceinline__ void tma_store(const CUtensorMap *map, uint32_t source, int c0, int c1,
                                          int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
            map),
        "r"(source), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
        : "memory");
}
__device__ __forceinline__ void tma_store(const CUtensorMap *map, uint32_t source, int c0, int c1,
                                          int c2, int c3, int c4) {
    asm volatile(
        "cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::
            "l"(map),
        "r"(source), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
        : "memory");
}

__device__ __forceinline__ void bulk_commit_group() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/** Waits until this thread's bulk stores have finished reading shared memory. */
__device__ __forceinline__ void bulk_wait_group_read_0() {
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

/** Waits until at most `Pending` of this thread's latest bulk store groups are still reading
 * shared memory. */
template <int Pending> __device__ __forceinline__ void bulk_wait_group_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(Pending) : "memory");
}

/** Orders this thread's generic shared-memory writes before later async-proxy (TMA, wgmma) reads.
 */
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// Thread copies: what TMA cannot move (a global stride that is not a multiple of 16 bytes, ...)
// ---------------------------------------------------------------------------------------------

/** Elements each thread loads before it stores them: the loads of a batch are in flight at once.
 * Into shared memory, 8 (the fastest of 4, 8, 16 and 32 on an H200; the machine description's
 * thread_copy_batch, which must match; results/gpu_hopper_session37_threadcopy_h200); out of it,
 * 4: a store runs in the consumers beside their accumulators, where 8 spills. */
#ifndef TANDEM_HOPPER_THREAD_COPY_BATCH
#define TANDEM_HOPPER_THREAD_COPY_BATCH 8
#endif
constexpr int thread_copy_batch = TANDEM_HOPPER_THREAD_COPY_BATCH;
constexpr int thread_store_batch = 4;

template <int Bytes> struct bits_of;
template <> struct bits_of<1> { using type = uint8_t; };
template <> struct bits_of<2> { using type = uint16_t; };
template <> struct bits_of<4> { using type = uint32_t; };

/** A copy made by the 128 threads of a warpgroup (`thread`: the thread's index in it): element
 * (i_0, .., i_Rank-1) of the box `extent` (innermost first) moves from src[sum i_d src_stride[d]]
 * to dst[sum i_d dst_stride[d]] (strides in elements), `Batch` loads in flight per thread. Either
 * side may be global or shared. */
template <int Batch = thread_copy_batch, class T, int Rank>
__device__ __forceinline__ void thread_copy(T *dst, const T *src, const int (&extent)[Rank],
                                            const int (&dst_stride)[Rank],
                                            const int (&src_stride)[Rank], int thread) {
    constexpr int thread_copy_batch = Batch;
    using Bits = typename bits_of<sizeof(T)>::type;
    Bits *const to = reinterpret_cast<Bits *>(dst);
    const Bits *const from = reinterpret_cast<const Bits *>(src);
    int total = 1;
    for (int d = 0; d < Rank; d++)
        total *= extent[d];
#pragma unroll 1
    for (int base = 0; base < total; base += threads_per_warpgroup * thread_copy_batch) {
        Bits value[thread_copy_batch];
        int at[thread_copy_batch];
#pragma unroll
        for (int u = 0; u < thread_copy_batch; u++) {
            int i = base + u * threads_per_warpgroup + thread, source = 0;
            at[u] = -1;
            if (i < total) {
                at[u] = 0;
                for (int d = 0; d < Rank; d++) {
                    const int c = i % extent[d];
                    i /= extent[d];
                    source += c * src_stride[d];
                    at[u] += c * dst_stride[d];
                }
                value[u] = from[source];
            }
        }
#pragma unroll
        for (int u = 0; u < thread_copy_batch; u++) {
            if (at[u] >= 0)
                to[at[u]] = value[u];
        }
    }
}

/** A wgmma operand tile written by a warpgroup's threads as a 128B-swizzled TMA load would land
 * it: `columns` (a multiple of a 128-byte row's elements: 64 bf16 or f16, 128 int8) x `rows` at
 * shared address `tile` (1024-byte aligned), in column blocks of 128 bytes, each `rows` rows, the
 * 16-byte chunk c of row r stored at chunk c ^ (r % 8). Element (x, y) is src[x * x_stride + y *
 * y_stride] for x < x_extent and y < y_extent, else zero (the padding a wgmma multiplies must be
 * zero). */
template <class Element>
__device__ __forceinline__ void thread_copy_swizzled(uint32_t tile, int columns, int rows,
                                                     const Element *src, int x_extent, int y_extent,
                                                     int x_stride, int y_stride, int thread) {
    static_assert(sizeof(Element) == 1 || sizeof(Element) == 2,
                  "wgmma tiles hold 16-bit (bf16, f16) or 8-bit (int8) elements");
    using Bits = std::conditional_t<sizeof(Element) == 2, uint16_t, uint8_t>;
    constexpr int per_row = 128 / int(sizeof(Element));
    const Bits *const from = reinterpret_cast<const Bits *>(src);
    const int total = columns * rows;
#pragma unroll 1
    for (int base = 0; base < total; base += threads_per_warpgroup * thread_copy_batch) {
        Bits value[thread_copy_batch];
#pragma unroll
        for (int u = 0; u < thread_copy_batch; u++) {
            const int i = base + u * threads_per_warpgroup + thread, x = i % columns,
                      y = i / columns;
            value[u] = i < total && x < x_extent && y < y_extent ? from[x * x_stride + y * y_stride]
                                                                 : Bits(0);
        }
#pragma unroll
        for (int u = 0; u < thread_copy_batch; u++) {
            const int i = base + u * threads_per_warpgroup + thread, x = i % columns,
                      y = i / columns;
            const int byte = (x % per_row) * int(sizeof(Element));
            const uint32_t address = tile + uint32_t((x / per_row) * rows * 128 + y * 128 +
                                                     (((byte / 16) ^ (y % 8)) * 16) + byte % 16);
            if (i >= total)
                continue;
            if constexpr (sizeof(Element) == 2)
                asm volatile("st.shared.u16 [%0], %1;" ::"r"(address), "h"(value[u]) : "memory");
            else
                asm volatile("st.shared.u8 [%0], %1;" ::"r"(address), "r"(uint32_t(value[u]))
                             : "memory");
        }
    }
}

/** After a thread copy into shared memory: every thread's writes are made visible to the async
 * proxy (wgmma, TMA stores) and the warpgroup meets; then one thread completes the copy's bytes
 * on the full barrier, as a TMA load would (a release fence, then the relaxed complete_tx). */
__device__ __forceinline__ void thread_copy_complete(uint64_t *barrier, uint32_t bytes,
                                                     int warpgroup, bool elected) {
    fence_proxy_async_shared();
    warpgroup_sync(warpgroup);
    if (elected) {
        asm volatile("fence.acq_rel.cta;\n"
                     "mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(
                         shared_address(barrier)),
                     "r"(bytes)
                     : "memory");
    }
}

/** A full-size box stands for a tail tile only where the part past the tile lies past the
 * tensor's edge (TMA zero-fills loads and drops stores there). A failed check clears `tails_ok`,
 * which the kernel's last statement traps on (trap_unless): the check stays off the producer's
 * critical path. A check that branched to a trap at once, with its shuffle, cost a runtime-shape
 * GEMM's producer 0.70 of cuBLAS at 4096^3 on an H200 against 0.86 without it
 * (gpu_hopper_session35_h200). A debug build (TANDEM_HOPPER_SPIN_LIMIT) prints the figures and
 * traps at once. */
__device__ __forceinline__ void check_tail(int &tails_ok, int extent, int box, int coordinate,
                                           int tensor_extent) {
#ifndef TANDEM_HOPPER_UNCHECKED
    // The extent passes through a shuffle of the thread's own lane, which ptxas cannot see
    // through: with extent = max(min(x, box), 0) inlined, ptxas 13.0 fused the clamp and the
    // comparison into one VIMNMX.RELU whose predicate does not say extent == box, and the check
    // trapped on an H200 where it holds (a box of 256 for 256 elements at 0 of 808: a micro kernel
    // reproduces it; gpu_hopper_v15_h200_diagnosis.log).
    extent = __shfl_sync(__activemask(), extent, int(threadIdx.x % 32));
    // An empty region (a mask or window leaves the tile nothing to read) lands where nothing
    // reads it.
    const bool ok =
        extent <= 0 || (extent <= box && (extent == box || coordinate + extent >= tensor_extent));
#ifdef TANDEM_HOPPER_SPIN_LIMIT
    if (!ok) {
        printf("tandem: tail check failed: block %d thread %d: a box of %d for %d elements at %d "
               "of a tensor extent %d\n",
               blockIdx.x, threadIdx.x, box, extent, coordinate, tensor_extent);
        __trap();
    }
#endif
    tails_ok &= int(ok);
#endif
}

/** The kernel's last statement where it checks tails: traps if a check failed. */
__device__ __forceinline__ void trap_unless(int tails_ok) {
    if (!tails_ok)
        __trap();
}

// ---------------------------------------------------------------------------------------------
// wgmma
// ---------------------------------------------------------------------------------------------

/** The 64-bit shared-memory matrix descriptor of a 128B-swizzled operand: start address, leading
 * and stride byte offsets (each >> 4, 14 bits), base offset 0 (tiles are 1024-byte aligned),
 * swizzle mode 1 = 128B in bits 62-63. */
__device__ __forceinline__ uint64_t matrix_descriptor_128B(uint32_t address, uint32_t leading_bytes,
                                                           uint32_t stride_bytes) {
    return uint64_t((address & 0x3FFFFu) >> 4) | (uint64_t((leading_bytes & 0x3FFFFu) >> 4) << 16) |
           (uint64_t((stride_bytes & 0x3FFFFu) >> 4) << 32) | (uint64_t(1) << 62);
}

/** Pins the accumulator registers at this point of the program: the compiler may not move their
 * definitions (zeroing) past a wgmma.fence nor their uses (the epilogue) above a wait_group. */
template <int M, int N> __device__ __forceinline__ void fence_fragment(float (&d)[M][N]) {
#pragma unroll
    for (int m = 0; m < M; m++) {
#pragma unroll
        for (int i = 0; i < N; i++)
            asm volatile("" : "+f"(d[m][i])::"memory");
    }
}
/** The same for an int32 accumulator (int8 operands). */
template <int M, int N> __device__ __forceinline__ void fence_fragment(int (&d)[M][N]) {
#pragma unroll
    for (int m = 0; m < M; m++) {
#pragma unroll
        for (int i = 0; i < N; i++)
            asm volatile("" : "+r"(d[m][i])::"memory");
    }
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit_group() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int pending> __device__ __forceinline__ void wgmma_wait_group() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(pending) : "memory");
}

/** Accumulator fragment of m64nNk16 with f32 results: thread t of the warpgroup holds, in
 * register i, row 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2) and column 8 * (i / 4) +
 * 2 * (t % 4) + i % 2 of its 64-row block. */
__device__ __forceinline__ int fragment_row(int i, int thread) {
    return 16 * (thread / 32) + (thread % 32) / 4 + 8 * ((i / 2) % 2);
}
__device__ __forceinline__ int fragment_col(int i, int thread) {
    return 8 * (i / 4) + 2 * (thread % 4) + i % 2;
}

/** B's layout in shared memory, wgmma's tnspB: N-major (a GEMM's K x N rows) or K-major (k
 * innermost, like A: attention's K rows). */
constexpr int NMajorB = 1, KMajorB = 0;
/** A's, wgmma's tnspA: K-major (a GEMM's M x K rows) or M-major (A transposed: K x M rows). */
constexpr int KMajorA = 0, MMajorA = 1;

/** The m64nNk16 instruction for one N (its register list), B and A layouts and operand type
 * (__nv_bfloat16: .bf16, __half: .f16). */
template <int N, int tnsp_b, int tnsp_a, class Operand> struct Wgmma;

/** D(64 x N, f32) += A(64 x 16, bf16, K-major: tnspA 0 or M-major: tnspA 1) * B(16 x N, bf16,
 * N-major: tnspB 1 or K-major: tnspB 0), with scale-d = 1 (the accumulator is zeroed by the
 * kernel's own vector op). */
template <int N, int tnsp_b = NMajorB, int tnsp_a = KMajorA>
__device__ __forceinline__ void wgmma_bf16(float (&d)[N / 2], uint64_t a_descriptor,
                                           uint64_t b_descriptor) {
    Wgmma<N, tnsp_b, tnsp_a, __nv_bfloat16>::run(d, a_descriptor, b_descriptor);
}

/** The same with f16 operands (wgmma .f32.f16.f16: the same shapes, layouts and rate). */
template <int N, int tnsp_b = NMajorB, int tnsp_a = KMajorA>
__device__ __forceinline__ void wgmma_f16(float (&d)[N / 2], uint64_t a_descriptor,
                                          uint64_t b_descriptor) {
    Wgmma<N, tnsp_b, tnsp_a, __half>::run(d, a_descriptor, b_descriptor);
}

/** The f32 accumulator fragments of wgmma m64nN (N / 2 registers) as asm operands (TANDEM_F32_D<n>)
 * and their names in the instruction (TANDEM_F32_NAMES<n>), for the instruction families below. */
#define TANDEM_F32_D32                                                                             \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),            \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TANDEM_F32_NAMES32                                                                         \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"                         \
    ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TANDEM_F32_D64                                                                             \
    TANDEM_F32_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),  \
        "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), \
        "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), \
        "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), \
        "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define TANDEM_F32_NAMES64                                                                         \
    TANDEM_F32_NAMES32                                                                             \
    ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"             \
    ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TANDEM_F32_D96                                                                             \
    TANDEM_F32_D64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),  \
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), \
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), \
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), \
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define TANDEM_F32_NAMES96                                                                         \
    TANDEM_F32_NAMES64                                                                             \
    ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"             \
    ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define TANDEM_F32_D128                                                                            \
    TANDEM_F32_D96, "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]),              \
        "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),        \
        "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]),        \
        "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),        \
        "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]),        \
        "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define TANDEM_F32_NAMES128                                                                        \
    TANDEM_F32_NAMES96                                                                             \
    ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
    ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, " \
    "%127"

/** The four m64nNk16 instructions (N = 64, 128, 192, 256) for one operand type and its PTX name. */
#define TANDEM_WGMMA(Operand, ptx)                                                                 \
    template <int tnsp_b, int tnsp_a> struct Wgmma<64, tnsp_b, tnsp_a, Operand> {                  \
        static __device__ __forceinline__ void run(float (&d)[32], uint64_t a_descriptor,          \
                                                   uint64_t b_descriptor) {                        \
            asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %34, 0;\n"            \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." ptx "." ptx                 \
                         " {" TANDEM_F32_NAMES32 "}, %32, %33, accumulate, 1, 1, %36, %35;\n}\n"   \
                         : TANDEM_F32_D32                                                          \
                         : "l"(a_descriptor), "l"(b_descriptor), "r"(1), "n"(tnsp_b), "n"(tnsp_a)  \
                         : "memory");                                                              \
        }                                                                                          \
    };                                                                                             \
                                                                                                   \
    template <int tnsp_b, int tnsp_a> struct Wgmma<128, tnsp_b, tnsp_a, Operand> {                 \
        static __device__ __forceinline__ void run(float (&d)[64], uint64_t a_descriptor,          \
                                                   uint64_t b_descriptor) {                        \
            asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %66, 0;\n"            \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." ptx "." ptx                \
                         " {" TANDEM_F32_NAMES64 "}, %64, %65, accumulate, 1, 1, %68, %67;\n}\n"   \
                         : TANDEM_F32_D64                                                          \
                         : "l"(a_descriptor), "l"(b_descriptor), "r"(1), "n"(tnsp_b), "n"(tnsp_a)  \
                         : "memory");                                                              \
        }                                                                                          \
    };                                                                                             \
                                                                                                   \
    template <int tnsp_b, int tnsp_a> struct Wgmma<192, tnsp_b, tnsp_a, Operand> {                 \
        static __device__ __forceinline__ void run(float (&d)[96], uint64_t a_descriptor,          \
                                                   uint64_t b_descriptor) {                        \
            asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %98, 0;\n"            \
                         "wgmma.mma_async.sync.aligned.m64n192k16.f32." ptx "." ptx                \
                         " {" TANDEM_F32_NAMES96 "}, %96, %97, accumulate, 1, 1, %100, %99;\n}\n"  \
                         : TANDEM_F32_D96                                                          \
                         : "l"(a_descriptor), "l"(b_descriptor), "r"(1), "n"(tnsp_b), "n"(tnsp_a)  \
                         : "memory");                                                              \
        }                                                                                          \
    };                                                                                             \
                                                                                                   \
    template <int tnsp_b, int tnsp_a> struct Wgmma<256, tnsp_b, tnsp_a, Operand> {                 \
        static __device__ __forceinline__ void run(float (&d)[128], uint64_t a_descriptor,         \
                                                   uint64_t b_descriptor) {                        \
            asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %130, 0;\n"           \
                         "wgmma.mma_async.sync.aligned.m64n256k16.f32." ptx "." ptx                \
                         " {" TANDEM_F32_NAMES128                                                  \
                         "}, %128, %129, accumulate, 1, 1, %132, %131;\n}\n"                       \
                         : TANDEM_F32_D128                                                         \
                         : "l"(a_descriptor), "l"(b_descriptor), "r"(1), "n"(tnsp_b), "n"(tnsp_a)  \
                         : "memory");                                                              \
        }                                                                                          \
    };

TANDEM_WGMMA(__nv_bfloat16, "bf16")
TANDEM_WGMMA(__half, "f16")
#undef TANDEM_WGMMA

/** D(64 x N, s32) += A(64 x 32, s8, K-major) * B(32 x N, s8, K-major), scale-d = 1: the
 * m64nNk32 integer instructions (wgmma takes 8-bit operands K-major only; no transposes, no
 * operand scales). */
template <int N> struct WgmmaS8;

template <> struct WgmmaS8<64> {
    static __device__ __forceinline__ void run(int (&d)[32], uint64_t a_descriptor,
                                               uint64_t b_descriptor) {
        asm volatile(
            "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %34, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
            "}, %32, %33, accumulate;\n}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]),
              "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]),
              "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]),
              "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]),
              "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]),
              "+r"(d[31])
            : "l"(a_descriptor), "l"(b_descriptor), "r"(1)
            : "memory");
    }
};

template <> struct WgmmaS8<128> {
    static __device__ __forceinline__ void run(int (&d)[64], uint64_t a_descriptor,
                                               uint64_t b_descriptor) {
        asm volatile(
            "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %66, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
            "}, %64, %65, accumulate;\n}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]),
              "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]),
              "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]),
              "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]),
              "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]),
              "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]),
              "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]),
              "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]),
              "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]),
              "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]),
              "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
            : "l"(a_descriptor), "l"(b_descriptor), "r"(1)
            : "memory");
    }
};

template <> struct WgmmaS8<192> {
    static __device__ __forceinline__ void run(int (&d)[96], uint64_t a_descriptor,
                                               uint64_t b_descriptor) {
        asm volatile(
            "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %98, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n192k32.s32.s8.s8 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
            "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
            "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
            "}, %96, %97, accumulate;\n}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]),
              "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]),
              "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]),
              "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]),
              "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]),
              "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]),
              "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]),
              "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]),
              "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]),
              "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]),
              "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]),
              "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]),
              "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]),
              "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]),
              "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]),
              "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95])
            : "l"(a_descriptor), "l"(b_descriptor), "r"(1)
            : "memory");
    }
};

template <> struct WgmmaS8<256> {
    static __device__ __forceinline__ void run(int (&d)[128], uint64_t a_descriptor,
                                               uint64_t b_descriptor) {
        asm volatile(
            "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
            "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
            "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
            "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
            "%111, "
            "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, "
            "%126, %127"
            "}, %128, %129, accumulate;\n}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]),
              "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]),
              "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]),
              "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]),
              "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]),
              "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]),
              "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]),
              "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]),
              "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]),
              "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]),
              "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]),
              "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]),
              "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]),
              "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]),
              "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]),
              "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]),
              "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]),
              "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]),
              "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]),
              "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]),
              "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]),
              "+r"(d[127])
            : "l"(a_descriptor), "l"(b_descriptor), "r"(1)
            : "memory");
    }
};

template <int N>
__device__ __forceinline__ void wgmma_s8(int (&d)[N / 2], uint64_t a_descriptor,
                                         uint64_t b_descriptor) {
    WgmmaS8<N>::run(d, a_descriptor, b_descriptor);
}

/** D(64 x N, f32) += A(64 x 32, FP8, K-major) * B(32 x N, FP8, K-major), scale-d = 1: the
 * m64nNk32 FP8 instructions for each pair of formats (E4m3, E5m2 below; wgmma takes 8-bit
 * operands K-major only, and reduces its FP8 products in a precision below f32's: results may
 * differ from an f32 sum in the last bits). */
struct E4m3 {};
struct E5m2 {};
template <int N, class A, class B> struct WgmmaFp8;

/** The four m64nNk32 instructions (N = 64, 128, 192, 256) for one pair of FP8 formats. */
#define TANDEM_WGMMA_FP8(A, B, a_ptx, b_ptx)                                                       \
    template <> struct WgmmaFp8<64, A, B> {                                                        \
        static __device__ __forceinline__ void run(float (&d)[32], uint64_t a_descriptor,          \
                                                   uint64_t b_descriptor) {                        \
            asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %34, 0;\n"            \
                         "wgmma.mma_async.sync.aligned.m64n64k32.f32." a_ptx "." b_ptx             \
                         " {" TANDEM_F32_NAMES32 "}, %32, %33, accumulate, 1, 1;\n}\n"             \
                         : TANDEM_F32_D32                                                          \
                         : "l"(a_descriptor), "l"(b_descriptor), "r"(1)                            \
                         : "memory");                                                              \
        }                                                                                          \
    };                                                                                             \
                                                                                                   \
    template <> struct WgmmaFp8<128, A, B> {                                                       \
        static __device__ __forceinline__ void run(float (&d)[64], uint64_t a_descriptor,          \
                                                   uint64_t b_descriptor) {                        \
            asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %66, 0;\n"            \
                         "wgmma.mma_async.sync.aligned.m64n128k32.f32." a_ptx "." b_ptx            \
                         " {" TANDEM_F32_NAMES64 "}, %64, %65, accumulate, 1, 1;\n}\n"             \
                         : TANDEM_F32_D64                                                          \
                         : "l"(a_descriptor), "l"(b_descriptor), "r"(1)                            \
                         : "memory");                                                              \
        }                                                                                          \
    };                                                                                             \
                                                                                                   \
    template <> struct WgmmaFp8<192, A, B> {                                                       \
        static __device__ __forceinline__ void run(float (&d)[96], uint64_t a_descriptor,          \
                                                   uint64_t b_descriptor) {                        \
            asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %98, 0;\n"            \
                         "wgmma.mma_async.sync.aligned.m64n192k32.f32." a_ptx "." b_ptx            \
                         " {" TANDEM_F32_NAMES96 "}, %96, %97, accumulate, 1, 1;\n}\n"             \
                         : TANDEM_F32_D96                                                          \
                         : "l"(a_descriptor), "l"(b_descriptor), "r"(1)                            \
                         : "memory");                                                              \
        }                                                                                          \
    };                                                                                             \
                                                                                                   \
    template <> struct WgmmaFp8<256, A, B> {                                                       \
        static __device__ __forceinline__ void run(float (&d)[128], uint64_t a_descriptor,         \
                                                   uint64_t b_descriptor) {                        \
            asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %130, 0;\n"           \
                         "wgmma.mma_async.sync.aligned.m64n256k32.f32." a_ptx "." b_ptx            \
                         " {" TANDEM_F32_NAMES128 "}, %128, %129, accumulate, 1, 1;\n}\n"          \
                         : TANDEM_F32_D128                                                         \
                         : "l"(a_descriptor), "l"(b_descriptor), "r"(1)                            \
                         : "memory");                                                              \
        }                                                                                          \
    };

TANDEM_WGMMA_FP8(E4m3, E4m3, "e4m3", "e4m3")
TANDEM_WGMMA_FP8(E4m3, E5m2, "e4m3", "e5m2")
TANDEM_WGMMA_FP8(E5m2, E4m3, "e5m2", "e4m3")
TANDEM_WGMMA_FP8(E5m2, E5m2, "e5m2", "e5m2")
#undef TANDEM_WGMMA_FP8
#undef TANDEM_F32_D32
#undef TANDEM_F32_D64
#undef TANDEM_F32_D96
#undef TANDEM_F32_D128
#undef TANDEM_F32_NAMES32
#undef TANDEM_F32_NAMES64
#undef TANDEM_F32_NAMES96
#undef TANDEM_F32_NAMES128

template <int N, class A, class B>
__device__ __forceinline__ void wgmma_fp8(float (&d)[N / 2], uint64_t a_descriptor,
                                          uint64_t b_descriptor) {
    WgmmaFp8<N, A, B>::run(d, a_descriptor, b_descriptor);
}

// ---------------------------------------------------------------------------------------------
// Host: tensor maps
// ---------------------------------------------------------------------------------------------

using EncodeTiled = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                 const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                 const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/** cuTensorMapEncodeTiled from the driver through the runtime (no -lcuda), or null. */
inline EncodeTiled encode_tiled_entry_point() {
    static EncodeTiled entry = [] {
        void *function = nullptr;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        cudaError_t status = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function,
                                                              12000, cudaEnableDefault, &found);
#else
        cudaError_t status =
            cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &function, cudaEnableDefault, &found);
#endif
        return status == cudaSuccess && found == cudaDriverEntryPointSuccess
                   ? reinterpret_cast<EncodeTiled>(function)
                   : nullptr;
    }();
    return entry;
}

/** A tiled tensor map (element strides 1, no interleave, out-of-bounds elements read as zero). */
inline cudaError_t encode_tensor_map(CUtensorMap *map, CUtensorMapDataType type, int rank,
                                     void *address, const cuuint64_t *extents,
                                     const cuuint64_t *strides_bytes, const cuuint32_t *box,
                                     CUtensorMapSwizzle swizzle) {
    EncodeTiled encode = encode_tiled_entry_point();
    if (encode == nullptr)
        return cudaErrorNotSupported;
    const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
    CUresult result = encode(map, type, cuuint32_t(rank), address, extents, strides_bytes, box,
                             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/** A kernel argument must be a device pointer aligned to 16 bytes (TMA's global address rule). */
inline cudaError_t check_argument(const void *pointer) {
    if (pointer == nullptr)
        return cudaErrorInvalidValue;
    if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0)
        return cudaErrorMisalignedAddress;
    return cudaSuccess;
}

} // namespace hopper

#endif
