#ifndef TANDEM_PARAMS_ASCEND_H
#define TANDEM_PARAMS_ASCEND_H

/** \file
 * The Ascend 910B's parameters as the compiler and the machine model read them: the pipes and
 * memories of an AI core by name, the data paths between the memories (which pipe moves what, at
 * which rate), and the machine description's numbers (capacities, alignments, rates, fixed costs)
 * in AscendParams, built with AscendParams::from, with the cost formulas over them. Header only:
 * no Halide, nothing from backends/. The model that runs on them: backends/sim/Ascend.h; the
 * figures' sources: machines/ascend.json and ../../shared/NPU-FACTS.md.
 */

#include "tandem/Memories.h"      // Mem
#include "tandem/params/Params.h" // ParamLookup, params_from, DType, SimError

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace tandem::sim::ascend {

enum class Pipe : uint8_t { S, MTE2, MTE1, M, FIX, V, MTE3, ALL };

inline const char *pipe_name(Pipe p) {
    switch (p) {
    case Pipe::S:
        return "S";
    case Pipe::MTE2:
        return "MTE2";
    case Pipe::MTE1:
        return "MTE1";
    case Pipe::M:
        return "M";
    case Pipe::FIX:
        return "FIX";
    case Pipe::V:
        return "V";
    case Pipe::MTE3:
        return "MTE3";
    case Pipe::ALL:
        return "ALL";
    }
    return "?";
}

inline const char *mem_name(Mem m) {
    switch (m) {
    case Mem::GM:
        return "GM";
    case Mem::L1:
        return "L1";
    case Mem::L0A:
        return "L0A";
    case Mem::L0B:
        return "L0B";
    case Mem::L0C:
        return "L0C";
    case Mem::UB:
        return "UB";
    }
    return "?";
}

struct AscendParams {
    int cube_cores = 24;   // AIC
    int vector_cores = 48; // AIV (two per AIC on the 910B)
    int64_t l1_bytes = 512 << 10, l0a_bytes = 64 << 10, l0b_bytes = 64 << 10, l0c_bytes = 128 << 10,
            ub_bytes = 192 << 10;
    int l1_align = 32, ub_align = 32, l0ab_align = 512, l0c_align = 64;
    // bytes per cycle per core (platform config, NPU-FACTS.md). GM reads that miss L2 come from HBM
    // at gm_to_l1 / gm_to_ub; reads of lines already in L2 at l2_read. Fixpipe writes land in L2
    // (l0c_to_gm = the L2 write rate).
    double gm_to_l1 = 32, gm_to_ub = 32, l1_to_l0a = 256, l1_to_l0b = 128, l0c_to_gm = 86,
           ub_to_gm = 64, l2_read = 110;
    // HBM, shared by every core: reads that miss L2 and the write-back of every GM write.
    double hbm_bytes_per_cycle = 865;
    // L2, shared by every core: every GM read (hit or miss) and write passes through it.
    double l2_bytes_per_cycle = 3784;
    // The L2 shared by the cores: 192 MB on the 910B (Huawei's public figure); allocation per line
    // on the first read, no eviction: once full, new lines are read from HBM every time.
    int64_t l2_bytes = int64_t(192) << 20;
    int l2_line = 512;
    int copy_fixed = 30; // issue/latency cycles per transfer
    int cube_fixed = 10; // per Mmad
    // A 16 x 16 fractal block of an Mmad takes ceil(k / cube_<type>_k_per_cycle) cycles (f32:
    // 2 * ceil(k / 8), 16x16x4 MACs per cycle).
    int cube_bf16_k_per_cycle = 16;
    int cube_f16_k_per_cycle = 16;
    int cube_int8_k_per_cycle = 32;
    int vector_bytes_per_cycle = 256; // one repeat: 64 f32 or 128 f16 lanes
    int vector_fixed = 10;
    int event_ids = 8;
    int scalar_issue_cycles =
        1;               // the scalar stream dispatches one op (any op) per this many cycles
    int flag_cycles = 1; // a SetFlag or WaitFlag occupies its pipe this long
    int pipe_barrier_cycles = 4; // a PipeBarrier occupies its pipe (PIPE_ALL: the scalar stream)

    /** Calls f(name, field) for every field a machine description sets (its parameter name). */
    template <class F> void fields(F &&f) {
        f("cube_cores", cube_cores);
        f("vector_cores", vector_cores);
        f("l1_bytes", l1_bytes);
        f("l0a_bytes", l0a_bytes);
        f("l0b_bytes", l0b_bytes);
        f("l0c_bytes", l0c_bytes);
        f("ub_bytes", ub_bytes);
        f("l1_align", l1_align);
        f("ub_align", ub_align);
        f("l0ab_align", l0ab_align);
        f("l0c_align", l0c_align);
        f("gm_to_l1", gm_to_l1);
        f("gm_to_ub", gm_to_ub);
        f("l1_to_l0a", l1_to_l0a);
        f("l1_to_l0b", l1_to_l0b);
        f("l0c_to_gm", l0c_to_gm);
        f("ub_to_gm", ub_to_gm);
        f("l2_read", l2_read);
        f("hbm_bytes_per_cycle", hbm_bytes_per_cycle);
        f("l2_bytes_per_cycle", l2_bytes_per_cycle);
        f("l2_bytes", l2_bytes);
        f("l2_line", l2_line);
        f("copy_fixed", copy_fixed);
        f("cube_fixed", cube_fixed);
        f("cube_bf16_k_per_cycle", cube_bf16_k_per_cycle);
        f("cube_f16_k_per_cycle", cube_f16_k_per_cycle);
        f("cube_int8_k_per_cycle", cube_int8_k_per_cycle);
        f("vector_bytes_per_cycle", vector_bytes_per_cycle);
        f("vector_fixed", vector_fixed);
        f("event_ids", event_ids);
        f("scalar_issue_cycles", scalar_issue_cycles);
        f("flag_cycles", flag_cycles);
        f("pipe_barrier_cycles", pipe_barrier_cycles);
    }
    static AscendParams from(const ParamLookup &get);
    int64_t capacity(Mem m) const;
    int alignment(Mem m) const;
    /** The pipe that moves data from `src` to `dst` (SimError if none does). */
    Pipe pipe_for(Mem src, Mem dst) const;
    int64_t copy_cycles(Mem src, Mem dst, int64_t bytes) const;
    /** A read from GM into `dst` of `miss` bytes from HBM and `hit` bytes from L2. */
    int64_t gm_read_cycles(Mem dst, int64_t miss, int64_t hit) const;
    /** The cube does 16x16x16 MACs of bf16 per cycle, 16x16x4 of f32 (k in fractals of 8). */
    int64_t mmad_cycles(int64_t m, int64_t n, int64_t k, DType operands = DType::BF16) const;
    /** A vector op doing `work` bytes of lane work (each instruction's elements times their
     * width, summed): one 256-byte repeat per cycle. */
    int64_t vector_cycles(int64_t work) const;
};

/** A data path: which pipe moves src -> dst and at which rate (bytes per cycle). */
struct Path {
    Mem src, dst;
    Pipe pipe;
    double AscendParams::*rate;
};

inline constexpr Path kPaths[] = {
    {Mem::GM, Mem::L1, Pipe::MTE2, &AscendParams::gm_to_l1},
    {Mem::GM, Mem::UB, Pipe::MTE2, &AscendParams::gm_to_ub},
    {Mem::GM, Mem::L0A, Pipe::MTE2, &AscendParams::gm_to_l1},
    {Mem::GM, Mem::L0B, Pipe::MTE2, &AscendParams::gm_to_l1},
    {Mem::L1, Mem::L0A, Pipe::MTE1, &AscendParams::l1_to_l0a},
    {Mem::L1, Mem::L0B, Pipe::MTE1, &AscendParams::l1_to_l0b},
    {Mem::UB, Mem::GM, Pipe::MTE3, &AscendParams::ub_to_gm},
    {Mem::L0C, Mem::GM, Pipe::FIX, &AscendParams::l0c_to_gm},
    {Mem::L0C, Mem::L1, Pipe::FIX, &AscendParams::l0c_to_gm},
};

inline const Path *find_path(Mem src, Mem dst) {
    for (const Path &path : kPaths) {
        if (path.src == src && path.dst == dst) {
            return &path;
        }
    }
    return nullptr;
}

inline std::string paths_text() {
    std::string text;
    for (const Path &path : kPaths) {
        text += std::string(text.empty() ? "" : ", ") + mem_name(path.src) + "->" +
                mem_name(path.dst) + " (" + pipe_name(path.pipe) + ")";
    }
    return text;
}

inline AscendParams AscendParams::from(const ParamLookup &get) {
    return params_from<AscendParams>(get);
}

inline int64_t AscendParams::capacity(Mem m) const {
    switch (m) {
    case Mem::GM:
        return std::numeric_limits<int64_t>::max(); // not modelled
    case Mem::L1:
        return l1_bytes;
    case Mem::L0A:
        return l0a_bytes;
    case Mem::L0B:
        return l0b_bytes;
    case Mem::L0C:
        return l0c_bytes;
    case Mem::UB:
        return ub_bytes;
    }
    return 0;
}

inline int AscendParams::alignment(Mem m) const {
    switch (m) {
    case Mem::GM:
        return 1; // not modelled
    case Mem::L1:
        return l1_align;
    case Mem::L0A:
    case Mem::L0B:
        return l0ab_align;
    case Mem::L0C:
        return l0c_align;
    case Mem::UB:
        return ub_align;
    }
    return 1;
}

inline Pipe AscendParams::pipe_for(Mem src, Mem dst) const {
    const Path *path = find_path(src, dst);
    if (!path) {
        throw SimError(std::string("no pipe copies ") + mem_name(src) + " -> " + mem_name(dst) +
                       "; the data paths are " + paths_text());
    }
    return path->pipe;
}

inline int64_t AscendParams::copy_cycles(Mem src, Mem dst, int64_t bytes) const {
    pipe_for(src, dst); // throws for a path that does not exist
    double rate = this->*(find_path(src, dst)->rate);
    return copy_fixed + int64_t(std::ceil(double(bytes) / rate));
}

inline int64_t AscendParams::gm_read_cycles(Mem dst, int64_t miss, int64_t hit) const {
    double hbm = this->*(find_path(Mem::GM, dst)->rate);
    return copy_fixed + int64_t(std::ceil(double(miss) / hbm + double(hit) / l2_read));
}

inline int64_t AscendParams::mmad_cycles(int64_t m, int64_t n, int64_t k, DType operands) const {
    const int64_t k_cycles = operands == DType::F32   ? 2 * detail::ceil_div(k, 8)
                             : operands == DType::F16 ? detail::ceil_div(k, cube_f16_k_per_cycle)
                             : operands == DType::I8  ? detail::ceil_div(k, cube_int8_k_per_cycle)
                                                      : detail::ceil_div(k, cube_bf16_k_per_cycle);
    return cube_fixed + detail::ceil_div(m, 16) * detail::ceil_div(n, 16) * k_cycles;
}

inline int64_t AscendParams::vector_cycles(int64_t work) const {
    return vector_fixed + detail::ceil_div(work, vector_bytes_per_cycle);
}

} // namespace tandem::sim::ascend

#endif
