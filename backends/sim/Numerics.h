#ifndef TANDEM_SIM_NUMERICS_H
#define TANDEM_SIM_NUMERICS_H

/** \file
 * Internal to the machine models (Zpu.cpp, Hopper*.cpp, Ascend*.cpp): integer helpers, the strided
 * box copy of DMA and TMA transfers, the f32-accumulating matrix multiply of MMA and wgmma, and the
 * messages both models give for malformed boxes and matmul operands.
 *
 * The multiply adds k in ascending order with one f32 accumulator per output element, so its
 * results equal a naive triple loop bit for bit (what the correctness tests compare against).
 */

#include "sim/Common.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tandem::sim::detail {

inline int64_t floor_div(int64_t a, int64_t b) { // b > 0, any sign of a
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/** Copies src_box to dst_box, pairing elements in enumeration order (dims[0] fastest). The
 * boxes have the same element count; `element_bytes` is 2 or 4. No type conversion. */
void copy_box(std::byte *dst, const Box &dst_box, const std::byte *src, const Box &src_box,
              int element_bytes);

/** acc(n, m) += sum_k a(k, m) * b(n, k), or acc(n, m) = ... when `accumulate` is false. Boxes:
 * acc dims {N, M} (f32; i32 over i8 operands, exact), a dims {K, M}, b dims {N, K} (bf16, f16,
 * f32, e4m3 or e5m2, each product exact in f32, or i8); shapes and types already checked.
 * Keeps its scratch rows between calls. */
class MatrixMultiplier {
public:
    void multiply_add(std::byte *acc, const Box &acc_box, const std::byte *a, DType a_type,
                      const Box &a_box, const std::byte *b, DType b_type, const Box &b_box,
                      bool accumulate = true);

private:
    std::vector<float> scratch_a_, scratch_b_, scratch_acc_;
};

/** Empty when every element of `box` lies in a buffer of `elements` elements, else the reason
 * ("<role> box ... reaches elements [lo, hi] of buffer '<name>', which has ..."). */
std::string box_outside_error(const char *role, const Box &box, const std::string &buffer_name,
                              int64_t elements);

/** Empty when an matmul operand box has the two dims it needs, else the reason. `dims` names
 * them, e.g. "{K, M}". */
std::string mma_rank_error(const char *role, const Box &box, const char *dims);

/** Empty when both operands are bf16, f16 or f32 (or i8, where the unit `takes_int8`; e4m3 or
 * e5m2, where it `takes_fp8`), of one type (or two FP8 formats), and the accumulator f32 (i32
 * over i8 operands), else the reason; `unit` names the instruction ("mma", "wgmma"). */
std::string mma_type_error(const std::string &acc, DType acc_type, const std::string &a,
                           DType a_type, const std::string &b, DType b_type, const char *unit,
                           bool takes_int8, bool takes_fp8 = false);

/** Empty when acc {N, M}, a {K, M} and b {N, K} agree, else "shapes disagree: ...". */
std::string mma_shape_error(const Box &acc_box, const Box &a_box, const Box &b_box);

/** Calls f(first, bytes) for each contiguous run of bytes of `box` (its rows, or its elements
 * when the innermost dim is strided), in the box's order; `first` counts from the buffer's start.
 */
void for_each_run(const Box &box, int element_bytes,
                  const std::function<void(int64_t first, int64_t bytes)> &f);

/** Calls f(key, bytes) for each `line`-byte line a read of `box` (of global buffer `buffer`)
 * touches, in address order within each contiguous run; key = (buffer << 40) | line index. */
void for_each_line(int buffer, const Box &box, int element_bytes, int64_t line,
                   const std::function<void(uint64_t key, int64_t bytes)> &f);

/** A shared L2 of `capacity` bytes that keeps the lines reads touched most recently (least
 * recently used lines leave first): what the Ascend and Hopper models charge GM reads with. (It
 * kept the first lines and never evicted before; on an H100 that made GEMMs whose operands
 * exceed the L2 2-3x slower in the model than measured: benchmarks/results/gpu_hopper_notes.md.) */
class L2Lines {
public:
    L2Lines(int64_t line_bytes, int64_t capacity_bytes)
        : line_(line_bytes), capacity_(size_t(capacity_bytes / line_bytes)) {}
    struct Split {
        int64_t miss = 0, hit = 0; // the read's bytes in lines it missed, in lines L2 had
        int64_t fill = 0;          // HBM bytes the misses bring in: whole lines (a later read of
                                   // the rest of a line hits because this one fetched it)
        double ready = 0;          // when the last of its hit lines arrives (in flight until then)
    };
    /** Splits the bytes of a read of `box` (of a global buffer) and brings its missed lines in. */
    Split read(int buffer, const Box &box, int element_bytes);
    /** The lines the last read missed arrive at `when`: a read before that hits a line in flight
     * (Split::ready). A model that never calls it has every line there at once. */
    void arrived(double when);

private:
    std::unordered_map<uint64_t, double> ready_; // lines in flight or arrived: when they arrive
    std::vector<uint64_t> missed_;               // the lines the last read missed
    int64_t line_;
    size_t capacity_;
    std::list<uint64_t> recent_; // (buffer, line) pairs, most recently used first
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> lines_;
    void touch(uint64_t key); // to the front, brought in if missing (the oldest line leaves)
};

} // namespace tandem::sim::detail

#endif
