#ifndef TANDEM_PARAMS_ZPU_H
#define TANDEM_PARAMS_ZPU_H

/** \file
 * The ZPU's parameters as the compiler and the machine model read them: the machine
 * description's numbers (capacities of the SRAM scopes, the ODMA routes, the public cost model's
 * figures) in ZpuParams, built with ZpuParams::from, and the cost formulas over them. Header only:
 * no Halide, nothing from backends/. The model that runs on them: backends/sim/Zpu.h; the figures'
 * sources: machines/zpu.json and ../../shared/NPU-FACTS.md.
 */

#include "tandem/Memories.h"      // Space
#include "tandem/params/Params.h" // ParamLookup, params_from, DType

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>

namespace tandem::sim {

inline const char *space_name(Space s) {
    switch (s) {
    case Space::DRAM:
        return "DRAM";
    case Space::ASRAM:
        return "ASRAM";
    case Space::WSRAM:
        return "WSRAM";
    case Space::RSRAM:
        return "RSRAM";
    }
    return "?";
}

struct ZpuParams {
    int cores = 16;
    int dma_channels = 2;
    int dma_queue_depth = 8;       // descriptors in flight per core (the in-flight limit)
    int64_t asram_bytes = 1048576; // left matmul operand
    int64_t wsram_bytes = 2097152; // right matmul operand
    int64_t rsram_bytes = 1536000; // results and vector data
    // ODMA copy = dma_fixed + ceil(bytes / dma_bytes_per_cycle)
    int dma_fixed = 100;
    int dma_bytes_per_cycle = 1024;
    // MMA = mma_issue + (mma_fp32_out | mma_bf16_out) + ceil(m/16)*ceil(n/32)*max(ceil(k/32), b)
    // + mma_drain, b = mma_min_blocks_small if m <= 16 and n <= 32, else mma_min_blocks
    int mma_issue = 21;
    int mma_fp32_out = 7;
    int mma_bf16_out = 8;
    int mma_min_blocks = 4;
    int mma_min_blocks_small = 1;
    int mma_drain = 70;
    // A vector op costs ceil(units / vector_flops_per_cycle) + vector_fixed; the units (loads,
    // stores, arithmetic, weighted by the description's vector_* costs) come with the op.
    int vector_flops_per_cycle = 250;
    int vector_fixed = 0;
    // DMA routes: route[src][dst] is the ODMA unit that takes a transfer from src to dst, -1
    // where no single transfer can (DRAM -> ASRAM, anything out of ASRAM or WSRAM), kAnyUnit
    // where the first free unit takes it (a machine without pinned routes: free_routes()).
    static constexpr int kAnyUnit = -2;
    std::array<std::array<int, 4>, 4> route = default_routes();
    // The mesh (issue 36): cores in rows of mesh_columns (core id = row * mesh_columns + column);
    // a broadcast leaf along a row (HLink) or down a column (VLink) costs
    // link_fixed + ceil(bytes / (h|v)link_bytes_per_cycle) once, whatever the number of receivers;
    // a barrier of a set of cores completes barrier_cycles after its last arrival.
    int mesh_columns = 4;
    int link_fixed = 100;
    int hlink_bytes_per_cycle = 1024;
    int vlink_bytes_per_cycle = 2048;
    int barrier_cycles = 100;
    // link_route[link][src][dst]: whether a leaf of the link (0 row, 1 column) goes from src (the
    // sender's) to dst (the receivers').
    std::array<std::array<std::array<bool, 4>, 4>, 2> link_route = default_link_routes();

    /** Calls f(name, field) for every field a machine description sets (its parameter name). */
    template <class F> void fields(F &&f) {
        f("cores", cores);
        f("dma_channels", dma_channels);
        f("dma_queue_depth", dma_queue_depth);
        f("asram_bytes", asram_bytes);
        f("wsram_bytes", wsram_bytes);
        f("rsram_bytes", rsram_bytes);
        f("dma_fixed", dma_fixed);
        f("dma_bytes_per_cycle", dma_bytes_per_cycle);
        f("mma_issue", mma_issue);
        f("mma_fp32_out", mma_fp32_out);
        f("mma_bf16_out", mma_bf16_out);
        f("mma_min_blocks", mma_min_blocks);
        f("mma_min_blocks_small", mma_min_blocks_small);
        f("mma_drain", mma_drain);
        f("vector_flops_per_cycle", vector_flops_per_cycle);
        f("vector_fixed", vector_fixed);
        f("mesh_columns", mesh_columns);
        f("link_fixed", link_fixed);
        f("hlink_bytes_per_cycle", hlink_bytes_per_cycle);
        f("vlink_bytes_per_cycle", vlink_bytes_per_cycle);
        f("barrier_cycles", barrier_cycles);
    }
    static ZpuParams from(const ParamLookup &get);
    static std::array<std::array<int, 4>, 4> default_routes();
    static std::array<std::array<int, 4>, 4> free_routes();
    static std::array<std::array<std::array<bool, 4>, 4>, 2> default_link_routes();
    /** The ODMA unit (channel) of a transfer, -1 when none can make it in one transfer. */
    int route_unit(Space src, Space dst) const;

    int64_t capacity(Space s) const;
    int64_t dma_cycles(int64_t bytes) const;
    /** A broadcast leaf of `bytes` along a row (`column` false) or down a column. */
    int64_t link_cycles(bool column, int64_t bytes) const;
    int mesh_row(int core) const { return core / mesh_columns; }
    int mesh_column(int core) const { return core % mesh_columns; }
    int64_t mma_cycles(int64_t m, int64_t n, int64_t k, DType out) const;
    int64_t vector_cycles(int64_t flops) const;
    /** Asymptotic rates of one core, for rooflines. */
    double peak_macs_per_cycle() const { return 16.0 * 32 * 32; }
    /** The DRAM rate: one unit's per ODMA unit a route to or from DRAM is pinned to (every unit
     * where a route takes the first free one). */
    double dram_bytes_per_cycle_per_core() const {
        std::array<bool, 64> used{};
        int units = 0;
        for (int s = 0; s < 4; ++s) {
            for (int d = 0; d < 4; ++d) {
                const int u = route[s][d];
                if ((Space(s) != Space::DRAM && Space(d) != Space::DRAM) || u == -1)
                    continue;
                if (u == kAnyUnit || u < 0 || u >= int(used.size()))
                    return double(dma_channels) * dma_bytes_per_cycle;
                units += used[u] ? 0 : 1;
                used[u] = true;
            }
        }
        return double(std::max(units, 1)) * dma_bytes_per_cycle;
    }
};

inline ZpuParams ZpuParams::from(const ParamLookup &get) {
    ZpuParams p = params_from<ZpuParams>(get);
    for (int s = 0; s < 4; ++s) {
        for (int d = 0; d < 4; ++d) {
            const std::string key =
                std::string("odma_route.") + space_name(Space(s)) + "." + space_name(Space(d));
            try {
                p.route[size_t(s)][size_t(d)] = int(get(key));
            } catch (const std::exception &) {
                p.route[size_t(s)][size_t(d)] = -1; // the description has no such route
            }
            for (int link = 0; link < 2; ++link) {
                const std::string link_key = std::string(link ? "vlink_route." : "hlink_route.") +
                                             space_name(Space(s)) + "." + space_name(Space(d));
                try {
                    p.link_route[size_t(link)][size_t(s)][size_t(d)] = get(link_key) != 0;
                } catch (const std::exception &) {
                    p.link_route[size_t(link)][size_t(s)][size_t(d)] = false;
                }
            }
        }
    }
    return p;
}

inline std::array<std::array<int, 4>, 4> ZpuParams::default_routes() {
    std::array<std::array<int, 4>, 4> r;
    for (auto &row : r)
        row.fill(-1);
    auto set = [&](Space s, Space d, int unit) { r[size_t(s)][size_t(d)] = unit; };
    set(Space::DRAM, Space::RSRAM, 0);
    set(Space::DRAM, Space::WSRAM, 0);
    set(Space::RSRAM, Space::DRAM, 0);
    set(Space::RSRAM, Space::WSRAM, 0);
    set(Space::RSRAM, Space::ASRAM, 1);
    set(Space::RSRAM, Space::RSRAM, 1);
    return r;
}

inline std::array<std::array<int, 4>, 4> ZpuParams::free_routes() {
    std::array<std::array<int, 4>, 4> r;
    for (auto &row : r)
        row.fill(kAnyUnit);
    return r;
}

/** SUNMMIO/Tilelang-Mesh src/target/sunmmio_utils.cc kSunmmioA4EDirectTransferRules: HLink
 * RSRAM -> ASRAM or RSRAM; VLink DRAM -> WSRAM or RSRAM, RSRAM -> WSRAM or RSRAM. */
inline std::array<std::array<std::array<bool, 4>, 4>, 2> ZpuParams::default_link_routes() {
    std::array<std::array<std::array<bool, 4>, 4>, 2> r{};
    auto set = [&](int link, Space s, Space d) { r[size_t(link)][size_t(s)][size_t(d)] = true; };
    set(0, Space::RSRAM, Space::ASRAM);
    set(0, Space::RSRAM, Space::RSRAM);
    set(1, Space::DRAM, Space::WSRAM);
    set(1, Space::DRAM, Space::RSRAM);
    set(1, Space::RSRAM, Space::WSRAM);
    set(1, Space::RSRAM, Space::RSRAM);
    return r;
}

inline int ZpuParams::route_unit(Space src, Space dst) const {
    return route[size_t(src)][size_t(dst)];
}

inline int64_t ZpuParams::capacity(Space s) const {
    switch (s) {
    case Space::DRAM:
        return std::numeric_limits<int64_t>::max(); // not modelled
    case Space::ASRAM:
        return asram_bytes;
    case Space::WSRAM:
        return wsram_bytes;
    case Space::RSRAM:
        return rsram_bytes;
    }
    return 0;
}

inline int64_t ZpuParams::dma_cycles(int64_t bytes) const {
    return dma_fixed + detail::ceil_div(bytes, dma_bytes_per_cycle);
}

inline int64_t ZpuParams::link_cycles(bool column, int64_t bytes) const {
    return link_fixed +
           detail::ceil_div(bytes, column ? vlink_bytes_per_cycle : hlink_bytes_per_cycle);
}

inline int64_t ZpuParams::mma_cycles(int64_t m, int64_t n, int64_t k, DType out) const {
    int64_t min_blocks = m <= 16 && n <= 32 ? mma_min_blocks_small : mma_min_blocks;
    int64_t k_blocks = std::max<int64_t>(detail::ceil_div(k, 32), min_blocks);
    int64_t output = out == DType::F32 ? mma_fp32_out : mma_bf16_out;
    return mma_issue + output + detail::ceil_div(m, 16) * detail::ceil_div(n, 32) * k_blocks +
           mma_drain;
}

inline int64_t ZpuParams::vector_cycles(int64_t flops) const {
    return detail::ceil_div(flops, vector_flops_per_cycle) + vector_fixed;
}

} // namespace tandem::sim

#endif
