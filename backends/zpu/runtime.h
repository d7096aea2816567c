#ifndef TANDEM_ZPU_RUNTIME_H
#define TANDEM_ZPU_RUNTIME_H

/** \file
 * The ZPU runtime API: what one core's control stream calls. Emitted kernels (backends/zpu
 * Emitter) and the async-Stmt executor both call exactly these functions, which run on the ZPU
 * machine model (backends/sim). No Halide here: emitted kernels compile against this header and
 * the simulator only.
 *
 *     zpu::Token t = zpu::dma_start(ctx, A_tile, dst_offset, A, src_offset, {{64, 1, 1}, {128, 64,
 * K}}, "A -> A_tile"); zpu::dma_wait(ctx, t, "A_tile.full"); zpu::mma(ctx, acc, ..., A_tile, ...,
 * B_tile, ..., n, m, k, "acc += A_tile * B_tile"); zpu::sync(ctx, zpu::Engine::Tensor);   // MMAs
 * and vector ops run asynchronously zpu::vector_op(ctx, "C_stage", flops, {{C_stage, lo, extent,
 * true}, ...}, [&] { ...loops... });
 */

#include "sim/Zpu.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace zpu {

using tandem::sim::Engine;
using tandem::sim::Token;

/** One core's view of the machine while its control stream runs. */
struct Context {
    tandem::sim::Machine &machine;
    tandem::sim::Core &core;
    std::vector<int> arguments;         // DRAM buffers, in the kernel's argument order
    std::map<std::string, int> buffers; // this core's on-chip buffers, by name
    std::vector<std::vector<int64_t>>
        extents; // each argument's extents at this call (runtime shapes)
};

/** A box dimension of a transfer: extent, stride in the destination, stride in the source. */
struct CopyDim {
    int64_t extent, dst_stride, src_stride;
};

/** An on-chip buffer the kernel needs on every core. */
struct BufferDecl {
    const char *name;
    tandem::sim::Space space;
    tandem::sim::DType type;
    int64_t elements;
};

struct Region {
    int buffer;
    int64_t lo, extent;
    bool write;
};

inline int buffer(Context &ctx, const char *name) {
    auto it = ctx.buffers.find(name);
    if (it == ctx.buffers.end())
        throw tandem::sim::SimError(std::string("zpu: no on-chip buffer named ") + name);
    return it->second;
}

/** The DRAM buffer of kernel argument `index` (inputs first, then the output). */
inline int argument(Context &ctx, size_t index) {
    if (index >= ctx.arguments.size()) {
        throw tandem::sim::SimError("zpu: the kernel takes argument " + std::to_string(index) +
                                    " but only " + std::to_string(ctx.arguments.size()) +
                                    " were given");
    }
    return ctx.arguments[index];
}

/** Extent `dim` of argument `index` at this call (a kernel compiled with runtime shapes reads it).
 */
inline int64_t extent(Context &ctx, size_t index, size_t dim) {
    if (index >= ctx.extents.size() || dim >= ctx.extents[index].size()) {
        throw tandem::sim::SimError("zpu: the kernel reads extent " + std::to_string(dim) +
                                    " of argument " + std::to_string(index) +
                                    ", which the call did not give");
    }
    return ctx.extents[index][dim];
}

template <typename T> T *data(Context &ctx, int buffer) {
    return static_cast<T *>(ctx.machine.data(buffer));
}

inline int core_id(Context &ctx) {
    return ctx.core.id();
}

/** A box extent as the kernel's loops have it: Halide gives a loop of a region a mask leaves
 * empty in some tile (a causal mask over fewer keys than queries) a negative extent, and runs no
 * iteration of it; the transfer or MMA it stands for moves nothing. */
inline int64_t box_extent(int64_t extent) {
    return extent < 0 ? 0 : extent;
}

inline Token dma_start(Context &ctx, int dst, int64_t dst_offset, int src, int64_t src_offset,
                       std::initializer_list<CopyDim> dims, const std::string &label) {
    tandem::sim::Box d{dst_offset, {}}, s{src_offset, {}};
    for (const CopyDim &c : dims) {
        d.dims.push_back({box_extent(c.extent), c.dst_stride});
        s.dims.push_back({box_extent(c.extent), c.src_stride});
    }
    return ctx.core.dma_start(dst, d, src, s, label);
}

inline void dma_wait(Context &ctx, Token t, const std::string &label) {
    ctx.core.dma_wait(t, label);
}

inline void mma(Context &ctx, int acc, int64_t acc_offset, int64_t acc_stride_n,
                int64_t acc_stride_m, int a, int64_t a_offset, int64_t a_stride_k,
                int64_t a_stride_m, int b, int64_t b_offset, int64_t b_stride_n, int64_t b_stride_k,
                int64_t n, int64_t m, int64_t k, const std::string &label, bool accumulate = true) {
    using tandem::sim::Box;
    if (n <= 0 || m <= 0 || k <= 0)
        return; // an empty region (box_extent): nothing to multiply
    ctx.core.mma(acc, Box{acc_offset, {{n, acc_stride_n}, {m, acc_stride_m}}}, a,
                 Box{a_offset, {{k, a_stride_k}, {m, a_stride_m}}}, b,
                 Box{b_offset, {{n, b_stride_n}, {k, b_stride_k}}}, label, accumulate);
}

/** Block until every op issued to the engine is complete (the fork's sunmmio_sync of one unit). */
inline void sync(Context &ctx, Engine engine) {
    ctx.core.sync(engine, std::string("sync ") + tandem::sim::engine_name(engine));
}

template <typename F>
void vector_op(Context &ctx, const std::string &label, int64_t flops,
               std::initializer_list<Region> regions, F &&compute) {
    std::vector<tandem::sim::Access> accesses;
    for (const Region &r : regions)
        accesses.push_back({r.buffer, tandem::sim::Box{r.lo, {{r.extent, 1}}}, r.write});
    ctx.core.vector_op(label, flops, accesses, compute);
}

/** A broadcast leaf over the core's row or column link: the box of `src` into the same box of
 * each receiver's on-chip buffer `dst` (by name). Returns its token (the sender waits on it). */
inline Token broadcast(Context &ctx, tandem::sim::Link link, const std::vector<int> &receivers,
                       const char *dst, int64_t dst_offset, int src, int64_t src_offset,
                       std::initializer_list<CopyDim> dims, const std::string &label) {
    tandem::sim::Box d{dst_offset, {}}, s{src_offset, {}};
    for (const CopyDim &c : dims) {
        d.dims.push_back({box_extent(c.extent), c.dst_stride});
        s.dims.push_back({box_extent(c.extent), c.src_stride});
    }
    return ctx.core.broadcast(link, receivers, dst, d, src, s, label);
}

/** Blocks until every core of `cores` (in increasing order, this one among them) arrives. */
inline void barrier(Context &ctx, const std::vector<int> &cores, const std::string &label) {
    ctx.core.barrier(cores, label);
}

// ---- mesh clusters: runs of `cluster` rows of one mesh column (Kernel::cluster) ----

/** The core's mesh position, column by column: column * rows + row. A clustered kernel reads it
 * as its core id, so that a cluster's cores have consecutive ids (rank = position % cluster). */
inline int mesh_position(Context &ctx) {
    const tandem::sim::ZpuParams &p = ctx.machine.params();
    const int rows = p.cores / p.mesh_columns, id = ctx.core.id();
    return p.mesh_column(id) * rows + p.mesh_row(id);
}

/** The cores of this core's cluster, rank 0 first (increasing ids). */
inline std::vector<int> cluster_cores(Context &ctx, int cluster) {
    const tandem::sim::ZpuParams &p = ctx.machine.params();
    const int id = ctx.core.id(), first_row = p.mesh_row(id) - p.mesh_row(id) % cluster;
    std::vector<int> cores;
    for (int r = 0; r < cluster; r++)
        cores.push_back((first_row + r) * p.mesh_columns + p.mesh_column(id));
    return cores;
}

/** Every core of this core's cluster meets here (a mesh barrier). */
inline void mesh_barrier(Context &ctx, int cluster, const std::string &label) {
    ctx.core.barrier(cluster_cores(ctx, cluster), label);
}

/** A copy the cores of a cluster share: rank `sender` loads the box into its own buffer `dst`
 * (the returned token) and broadcasts the same box from `src` down its column into the buffer
 * named `dst_name` of the others (*leaf: that leaf's token); the others issue nothing (both
 * tokens null: their waits are free, and a mesh barrier after the sender's wait tells them it
 * landed). */
inline Token column_copy(Context &ctx, int cluster, int sender, Token *leaf, int dst,
                         const char *dst_name, const tandem::sim::Box &dst_box, int src,
                         const tandem::sim::Box &src_box, const std::string &label) {
    const std::vector<int> cores = cluster_cores(ctx, cluster);
    *leaf = Token{0};
    if (sender < 0 || sender >= cluster) {
        throw tandem::sim::SimError("zpu: column copy '" + label + "': sender rank " +
                                    std::to_string(sender) + " is not a rank of a cluster of " +
                                    std::to_string(cluster));
    }
    if (ctx.core.id() != cores[size_t(sender)])
        return Token{0};
    std::vector<int> receivers;
    for (int c : cores) {
        if (c != ctx.core.id())
            receivers.push_back(c);
    }
    Token own = ctx.core.dma_start(dst, dst_box, src, src_box, label);
    *leaf = ctx.core.broadcast(tandem::sim::Link::Column, receivers, dst_name, dst_box, src,
                               src_box, label + " (column leaf)");
    return own;
}

inline Token column_copy(Context &ctx, int cluster, int sender, Token *leaf, int dst,
                         const char *dst_name, int64_t dst_offset, int src, int64_t src_offset,
                         std::initializer_list<CopyDim> dims, const std::string &label) {
    tandem::sim::Box d{dst_offset, {}}, s{src_offset, {}};
    for (const CopyDim &c : dims) {
        d.dims.push_back({box_extent(c.extent), c.dst_stride});
        s.dims.push_back({box_extent(c.extent), c.src_stride});
    }
    return column_copy(ctx, cluster, sender, leaf, dst, dst_name, d, src, s, label);
}

/** The null token: waiting on it is free (a version nothing was stored from yet). */
inline Token no_token() {
    return Token{0};
}
/** A token no transfer completes: waiting on it is a deadlock (a barrier nothing signals). */
inline Token never_signalled() {
    return Token{-1};
}

// ---- element helpers used by emitted vector code ----
inline float from_bf16(uint16_t b) {
    return tandem::sim::bf16_to_float(b);
}
inline uint16_t to_bf16(double f) {
    return tandem::sim::float_to_bf16(float(f));
}
inline float from_f16(uint16_t h) {
    return tandem::sim::f16_to_float(h);
}
inline uint16_t to_f16(double f) {
    return tandem::sim::float_to_f16(float(f));
}
/** Halide's integer division and modulo round towards negative infinity. */
inline int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floor_mod(int64_t a, int64_t b) {
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/** Creates the kernel's on-chip buffers on every core and runs `kernel` once per core
 * (Machine::run: one after another, interleaved at barriers), with the arguments' extents at this
 * call (a runtime-shape kernel reads them). A core whose control stream deadlocks stops; the
 * machine records it. */
template <typename Kernel>
void run_on_all_cores(tandem::sim::Machine &machine, const std::vector<int> &arguments,
                      const std::vector<BufferDecl> &buffers, Kernel &&kernel,
                      const std::vector<std::vector<int64_t>> &extents = {}) {
    std::vector<std::map<std::string, int>> on_chip(size_t(machine.num_cores()));
    for (int c = 0; c < machine.num_cores(); c++) {
        for (const BufferDecl &b : buffers)
            on_chip[size_t(c)][b.name] = machine.add_sram(c, b.name, b.space, b.type, b.elements);
    }
    machine.run([&](tandem::sim::Core &core) {
        Context ctx{machine, core, arguments, on_chip[size_t(core.id())], extents};
        kernel(ctx);
    });
}

} // namespace zpu

#endif
