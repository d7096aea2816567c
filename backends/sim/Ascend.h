#ifndef TANDEM_SIM_ASCEND_H
#define TANDEM_SIM_ASCEND_H

/** \file
 * The Ascend 910B (A2) AI-core machine model: per core, one scalar instruction stream that
 * dispatches ops in program order to in-order pipes (MTE2, MTE1, M, FIX, V, MTE3, S), joined only
 * by flags: SetFlag<SRC_DST>(id) is queued on the SRC pipe and fires when the ops queued before it
 * on SRC are done; WaitFlag<SRC_DST>(id) is queued on the DST pipe and holds every later op of DST
 * until the matching set has fired. PipeBarrier<P> orders pipe P with itself (the V pipe's ops
 * overlap otherwise: dependent vector instructions need one between them); PIPE_ALL drains all.
 *
 * The scalar stream never waits on data, so a core's program is recorded first (the calls below
 * append to it); the cores that ended are simulated together at finish(): discrete events over
 * every core's pipe queues in one time order. That gives exact timing and the happens-before
 * relation of every access (flags are the only edges between pipes; a pipe is ordered with
 * itself). A race names both ops; a deadlock (every pipe with work left is waiting on a flag no
 * queued op will set) names each pipe and its wait.
 *
 * The 910B is a separated architecture: cube cores (AIC: L1, L0A, L0B, L0C; pipes MTE2, MTE1, M,
 * FIX) and vector cores (AIV: UB; pipes MTE2, V, MTE3), each with its own scalar stream. They share
 * only GM: cube results reach a vector core through GM. A mix kernel (launch_mix) pairs AIC i with
 * AIV 2i and 2i + 1; their cross-core flags order them, so each group is one clock domain whose GM
 * accesses are checked as they happen (other cores' only after the run: they never synchronise).
 * The machine holds both kinds, numbered AIC 0 .. cube_cores - 1, then AIV cube_cores .. cube_cores
 * + vector_cores - 1 (aic(i), aiv(i)). GM is cached in a shared L2: the first read of a line (by
 * any core, in time order) comes from HBM, later reads from L2; HBM's bandwidth is shared by every
 * core, reads and write-backs together. Rates and capacities: ../../shared/NPU-FACTS.md.
 *
 * Errors (SimError with the op, pipe and core): a buffer over a scope's capacity or misaligned; a
 * memory or pipe the core's kind does not have (UB on an AIC, L1 on an AIV); a copy between
 * memories no pipe connects; setting a flag (src, dst, id) twice without a wait
 * between; an event id outside 0..7; mismatched shapes.
 */

#include "sim/Common.h"           // DType, Box, Access, Race, Report, errors
#include "tandem/params/Ascend.h" // AscendParams, Pipe, Mem, pipe_name, mem_name

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tandem::sim::ascend {

/** AscendC's TPipe reserves and sets M_MTE1 events 0 .. 2 on a cube core (its Destroy() waits for
 * them): the runtime's TPipe and the executor's kernel prologue both do so. */
constexpr int kTPipeReservedEvents = 3;

/** AIC: a cube core (AscendC's AIC); AIV: a vector core. */
enum class CoreKind : uint8_t { AIC, AIV };
const char *core_kind_name(CoreKind k);
/** Whether a core of kind `k` has pipe `p` (S and ALL: both kinds) or memory `m` (GM: both). */
bool has_pipe(CoreKind k, Pipe p);
bool has_memory(CoreKind k, Mem m);

class Machine;

/** AscendC's real cube instructions keep L1, L0A, L0B and L0C data in fractal layouts (C0 = 32
 * bytes of elements: 16 bf16, 8 f32; a fractal is 16 rows of C0, 512 bytes; L0C fractals are
 * 16 x 16 f32). The element maps (the AscendC docs' "Nz", "Zz", "Zn"; catlass zN, zZ, nZ):
 *   L1 (Nd2Nz of a rows x cols matrix):  (c / C0) * c0_stride * C0 + r * n_stride * C0 + c % C0
 *   L0A (Zz, A is M x K, Kp = K up to C0): (m / 16) * Kp * 16 + (k / C0) * 16 * C0 + (m % 16) * C0
 * + k % C0 L0B (Zn, B is K x N, Np = N up to 16): (k / C0) * Np * C0 + (n / 16) * 16 * C0 + (n %
 * 16) * C0 + k % C0 L0C (Nz, C is M x N, Mp = M up to 16): (n / 16) * Mp * 16 + m * 16 + n % 16
 * Source: docs/ascendc_api_facts.md sections 6 and 9 (the AscendC headers and docs, catlass). */

/** DataCopy(L1, GM, Nd2NzParams) with ndNum 1: n_value rows of d_value elements, src_d_value
 * apart in GM, to L1 in Nz; the columns of the last C0 block past d_value are zeros. Strides in
 * 32-byte units as AscendC has them (dst_nz_c0_stride: normally the rows rounded up to 16). */
struct Nd2Nz {
    int64_t n_value = 0, d_value = 0, src_d_value = 0, dst_nz_c0_stride = 0, dst_nz_n_stride = 1;
};
/** LoadData(L0A/L0B, L1, LoadData2DParams): repeat_times fractals (512 B each); source fractal
 * start_index + i * src_stride, destination fractal i * (1 + dst_gap); transpose: each 16 x 16
 * fractal transposed (16-bit types only). */
struct LoadData2D {
    int64_t start_index = 0, repeat_times = 0, src_stride = 0, dst_gap = 0;
    bool transpose = false;
};
/** LoadDataWithTranspose(L0A/L0B, L1, LoadData2dTransposeParams) for 8-bit data: each repeat
 * transposes a 32 x 32 block, two 16 x 32 fractals (1024 B, contiguous in L1's Nz), into two
 * 16 x 32 fractals, the second dst_frac_gap fractals after the end of the first; source block
 * start_index + i * src_stride (in 1024-byte blocks); repeat i + 1's first fractal dst_gap
 * fractals after the end of repeat i's first (the AscendC docs, asc_copy_l12l0b_trans). */
struct LoadDataTranspose8 {
    int64_t start_index = 0, repeat_times = 0, src_stride = 0, dst_gap = 0, dst_frac_gap = 0;
};
/** Fixpipe<T, float, CFG_ROW_MAJOR>(GM, L0C, FixpipeParamsV220): m_size x n_size of the Nz
 * accumulator (column blocks src_stride rows apart, normally Mp) to row-major GM rows dst_stride
 * elements apart, converted to the destination's type (F322BF16, F322F16 or NoQuant), ReLU on the
 * way with reluEn. */
struct FixpipeNz2Nd {
    int64_t n_size = 0, m_size = 0, src_stride = 0, dst_stride = 0;
    bool relu = false; // reluEn: max(0, x) on the way out
};

/** An operand of a vector instruction: a UB buffer and the element it starts at (its address must
 * be 32-byte aligned); in the repeat form, the strides between its 32-byte blocks and between
 * repeats, in blocks (AscendC's BinaryRepeatParams / UnaryRepeatParams / BrcbRepeatParams). */
struct VectorOperand {
    int buffer = -1;
    int64_t offset = 0;
    int block_stride = 1, repeat_stride = 8;
};

/** One of AscendC's vector instructions on f32 UB tensors (Compare's and Select's masks: uint8,
 * one bit per element, element i at bit i % 8 of byte i / 8).
 *   count form (count >= 0): the first `count` elements of each operand;
 *   repeat form (count < 0, AscendC's high-dimensional slicing): `repeats` (at most 255) repeats of
 *     eight 32-byte blocks per operand, of which the first `mask` elements (1..64) take part.
 * Elementwise: Add, Sub, Mul, Div, Max, Min (two sources), Adds, Muls, Maxs, Mins (a source and
 * `scalar`), Exp, Ln, Sqrt, Abs, Relu (a source), Duplicate (`scalar`), in either form.
 * Brcb (repeat form, no mask): repeat r reads src[8r, 8r + 8) and fills its block j with src[8r +
 * j]. ReduceSum (count form; srcs: src, sharedTmpBuffer): dst[0] = the sum of src[0, count) - a
 * binary tree within each 64-element repeat, the repeats' sums added in order (dst needs 4-byte
 * alignment). Compare (count form, count a multiple of 64; mode CMPMODE LT GT EQ LE GE NE = 0..5):
 * the mask dst. Select (count form, mode 2 = VSEL_TENSOR_TENSOR_MODE; srcs: mask, src0, src1): src0
 * where the bit is 1. ReduceMax, ReduceMin (count form, mode 0 = calIndex false; srcs: src,
 * sharedTmpBuffer): dst[0] = the extreme of src[0, count) (dst 8-byte aligned, and may lie in
 * sharedTmpBuffer, which gets the first round's (value, index) per repeat). WholeReduceMax,
 * WholeReduceMin (repeat form, mode 2 = ReduceOrder::ORDER_ONLY_VALUE): dst[r * dst.repeat_stride]
 * (in values, 4-byte aligned) = the extreme of repeat r's masked lanes. Cast (count form, mode 1 =
 * RoundMode::CAST_RINT): a bfloat16_t dst from a float src, rounded to nearest, ties to even (docs:
 * Cast, Atlas A2 float -> bfloat16_t). Gather (count form; srcs: src, srcOffset): dst[i] = the
 * f32 at byte src + gather_base + srcOffset[i] (AscendC's srcBaseAddr and uint32_t byte offsets,
 * kept in an int32_t tensor: the model's type), every lane inside the src tensor's first
 * `gather_window` elements (AscendC's CPU debug checks a Gather against its src tensor's size);
 * the src tensor's start is 32-byte aligned, gather_base a multiple of 4. CreateVecIndex (count
 * form, int32_t): dst[i] = scalar + i. Duplicate, Adds and Muls also on int32_t tensors (every
 * operand int32_t; the scalar is exact below 2^24). Costs the lane bytes (vector_cycles) - a
 * repeat costs all
 * 256 bytes of it - Div, Exp, Ln and Sqrt twice (32 f32 per cycle), ReduceSum, ReduceMax and
 * ReduceMin two passes (the last two a Tandem assumption), WholeReduceMax / WholeReduceMin seven
 * times (the docs' ReduceRepeat rate, 64/7 f32 per cycle), Gather eight times (8 elements per
 * cycle, a 32-byte block: a Tandem assumption, the docs give no rate). */
struct VectorCall {
    std::string op;
    VectorOperand dst;
    std::vector<VectorOperand> srcs;
    float scalar = 0;
    int64_t count = -1;
    int64_t repeats = 0;
    int mask = 0;
    int mode = 0;
    int64_t gather_base = 0;   // Gather: srcBaseAddr, bytes
    int64_t gather_window = 0; // Gather: the src tensor's size, elements
};

/** One AI core's scalar stream. Calls append to the program; the core runs when it is ended. */
class Core {
public:
    int id() const { return id_; }

    /** DataCopy between memories (GM->L1/UB on MTE2, L1->L0A/L0B on MTE1 (LoadData), UB->GM on
     * MTE3, L1<->UB); boxes of equal element counts and types. */
    void data_copy(int dst, const Box &dst_box, int src, const Box &src_box,
                   const std::string &label);
    /** The real cube instructions on fractal data (the layouts above). Offsets in elements. */
    void nd2nz(int dst, int64_t dst_offset, int src, int64_t src_offset, const Nd2Nz &p,
               const std::string &label);
    void load_data_2d(int dst, int64_t dst_offset, int src, int64_t src_offset, const LoadData2D &p,
                      const std::string &label);
    void load_data_transpose_8(int dst, int64_t dst_offset, int src, int64_t src_offset,
                               const LoadDataTranspose8 &p, const std::string &label);
    /** Mmad(L0C, L0A, L0B, MmadParams{m, n, k, cmatrixInitVal = !accumulate}) on Zz x Zn -> Nz. */
    void mmad_fractal(int c, int64_t c_offset, int a, int64_t a_offset, int b, int64_t b_offset,
                      int64_t m, int64_t n, int64_t k, bool accumulate, const std::string &label);
    void fixpipe_nz2nd(int dst, int64_t dst_offset, int src, int64_t src_offset,
                       const FixpipeNz2Nd &p, const std::string &label);
    /** One of AscendC's vector instructions (VectorCall). */
    void vector_instruction(const VectorCall &call);
    /** A vector op on V over UB regions doing `work` bytes of lane work (vector_cycles);
     * `compute` applies the numerics when the op executes, during run_core: it must capture what
     * it needs by value. */
    void vector_op(const std::string &label, int64_t work, const std::vector<Access> &accesses,
                   const std::function<void()> &compute);
    void set_flag(Pipe src, Pipe dst, int event, const std::string &label = "");
    void wait_flag(Pipe src, Pipe dst, int event, const std::string &label = "");
    void pipe_barrier(Pipe pipe);
    /** Cross-core flags of a mix kernel (Machine::launch_mix), AscendC's mode 2 between an AIC and
     * its two AIVs. CrossCoreSetFlag<2, pipe>(flag) is queued on `pipe` (not S) and fires when
     * its earlier ops are done: an AIC's set counts up the flag's counter on both its AIVs; an
     * AIV's counts up its AIC's once both AIVs have set it. CrossCoreWaitFlag(flag) stalls the
     * issue of every later op until the counter is above 0, then counts it down. 16 flag ids
     * (the low 4 bits of `flag`); a counter holds at most 15 (more: the hardware hangs, reported
     * as a deadlock). Source: docs/ascendc_api_facts.md section 3. */
    void cross_core_set_flag(Pipe pipe, int flag, const std::string &label = "");
    void cross_core_wait_flag(int flag, const std::string &label = "");

private:
    friend class Machine;
    struct State;
    Core(Machine *m, int id);
    Machine *machine_;
    int id_;
    std::shared_ptr<State> state_;
};

class Machine {
public:
    explicit Machine(const AscendParams &params, bool numerics = true, bool trace = false);
    ~Machine();
    Machine(const Machine &) = delete;
    Machine &operator=(const Machine &) = delete;

    const AscendParams &params() const { return params_; }
    bool numerics() const { return numerics_; }

    int add_gm(const std::string &name, DType type, int64_t elements);
    /** A buffer of `core` in `mem` (not GM); SimError over capacity, naming buffer and scope. */
    int add_local(int core, const std::string &name, Mem mem, DType type, int64_t elements);
    void *data(int buffer);
    DType type(int buffer) const;
    int64_t elements(int buffer) const;
    const std::string &name(int buffer) const;

    /** Core `c` of the machine: AIC 0 .. cube_cores - 1, then the AIV. */
    Core &core(int c);
    int num_cores() const { return params_.cube_cores + params_.vector_cores; }
    /** The index of the i-th core of kind `k` (its GetBlockIdx() in a kernel of that kind). */
    int core_of(CoreKind k, int i) const;
    /** How many cores of kind `k` the machine has. */
    int cores_of(CoreKind k) const {
        return k == CoreKind::AIC ? params_.cube_cores : params_.vector_cores;
    }
    CoreKind kind(int c) const { return c < params_.cube_cores ? CoreKind::AIC : CoreKind::AIV; }
    /** The launch is a mix kernel (KERNEL_TYPE_MIX_AIC_1_2): AIC i and AIV 2i, 2i + 1 form a group
     * joined by cross-core flags, their accesses ordered through them (one clock domain per
     * group); without it a cross-core flag is a SimError. Needs two AIV per AIC. */
    void launch_mix();
    bool mix() const;
    /** Ends core `c`'s program: nothing more may be recorded into it. Call once per core, after
     * its program is recorded; finish() simulates every ended core (numerics, timing, hazards).
     * Deadlocks are recorded in the report, not thrown. */
    void run_core(int c);

    /** Simulates the ended cores (once) and reports. GM data is final only after it. */
    Report finish();
    void write_trace(const std::string &path) const;

private:
    friend class Core;
    struct Impl;
    AscendParams params_;
    bool numerics_;
    std::unique_ptr<Impl> impl_;
};

} // namespace tandem::sim::ascend

#endif
