#ifndef TANDEM_ASCEND_KERNEL_OPERATOR_H
#define TANDEM_ASCEND_KERNEL_OPERATOR_H

/** \file
 * Tandem's CPU implementation of the AscendC subset that emitted kernels
 * (backends/ascend/Emitter.h) use, on the Ascend machine model (backends/sim/Ascend.h): the same
 * kernel source that AscendC compiles for the AI core compiles for the host against this header, as
 * in AscendC's own CPU debug mode. Each call records one op on the current core's scalar stream,
 * exactly the op the Ascend executor records for the same Stmt; the core is simulated when its
 * kernel returns.
 *
 *     tandem::sim::ascend::Machine machine(params);
 *     int a = machine.add_gm("a", DType::F32, n), out = machine.add_gm("out", DType::F32, n);
 *     tandem_ascend::run(machine, my_kernel, {a, out}, AscendC::KernelMode::AIV_MODE);
 *     tandem::sim::Report report = machine.finish();
 *
 * run() calls the kernel once per core with that core current (GetBlockIdx() is its index) and
 * GM_ADDR arguments pointing at the machine's GM buffers, then machine.run_core(core), which ends
 * the core's program; machine.finish() simulates all cores together (GM data is final then). Like
 * AscendC's CPU debug mode it also checks what the model does not: a core that returns with a
 * SetFlag nobody waited for (unbalanced flags) is a SimError naming the core and the flag.
 *
 * The AscendC subset (names and meanings as AscendC has them):
 *     GM_ADDR, __global__, __aicore__, __gm__, bfloat16_t, pipe_t (PIPE_S ... PIPE_ALL)
 *     KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY | KERNEL_TYPE_AIC_ONLY |
 * KERNEL_TYPE_MIX_AIC_1_2) AscendC::GetBlockIdx(), GetBlockNum()  (among the cores of the kernel's
 * kind; in a mix kernel GetBlockNum() counts the AICs and an AIV's GetBlockIdx() is 2 * its AIC +
 * sub) AscendC::GetSubBlockIdx(), GetSubBlockNum(), GetTaskRatio()  (an AIV's place in its AIC)
 *     ASCEND_IS_AIC, ASCEND_IS_AIV (`if ASCEND_IS_AIV { ... }`), AscendC::MIX / AIC / AIV
 *     AscendC::KernelMode (AIC_MODE, AIV_MODE, MIX_MODE: the host's choice, as SetKernelMode in
 *         CPU debug; MIX_MODE runs every AIC, then every AIV, of a KERNEL_TYPE_MIX_AIC_1_2 kernel)
 *     AscendC::CrossCoreSetFlag<2, PIPE_X>(flag), CrossCoreWaitFlag(flag)  (mode 2: an AIC and
 *         its two AIVs), AscendC::GetUserWorkspace(workspace) (the kernel's last GM_ADDR: the
 *         runtime reserves no system workspace, so the user part starts at its first byte)
 *     AscendC::GlobalTensor<T>: SetGlobalBuffer(__gm__ T *, size), operator[](offset), GetSize(),
 *         GetValue(i) (tiling data)
 *     AscendC::TPipe (on an AIC it sets M_MTE1 0..2), TPipe::Destroy() (waits them, PIPE_ALL),
 *     TPipe::InitBuffer(TBuf<pos> &, bytes); TBuf<pos>::Get<T>() -> LocalTensor<T>
 *     AscendC::LocalTensor<T>: operator[](offset), GetValue(i), SetValue(i, v), GetSize(),
 *         SetSize(n), ReinterpretCast<U>() (same-width types)
 *     AscendC::DataCopy(dst, src, count | DataCopyParams)
 *     AscendC::DataCopyPad(UB, GM, DataCopyExtParams, DataCopyPadExtParams<T>), DataCopyPad(GM, UB,
 *         DataCopyExtParams): rows of any byte length, padded to 32 bytes in UB
 *         GM -> UB/L1 (MTE2), UB -> GM/L1 (MTE3), L1 -> UB (MTE1); DataCopyParams(blockCount,
 *         blockLen, srcStride, dstStride) in 32-byte blocks (strides are the gaps between rows)
 *     The real cube instructions on fractal data (layouts: sim/Ascend.h):
 *     AscendC::DataCopy(L1, GM, Nd2NzParams)             GM (ND) -> L1 (Nz) on MTE2
 *     AscendC::LoadData(L0A/L0B, L1, LoadData2DParams)   512-byte fractals, ifTranspose
 *     AscendC::Mmad(L0C, L0A, L0B, MmadParams)           fields by name; cmatrixInitVal
 *     AscendC::Fixpipe<T, float, CFG_ROW_MAJOR>(GM, L0C, FixpipeParamsV220)  Nz -> ND, quantPre
 *         F322BF16 (bf16), F322F16 (half) or NoQuant (f32), reluEn
 *     The real vector instructions, f32 (V): Add, Sub, Mul, Div, Max, Min (tensor, tensor), Adds,
 *     Muls, Maxs, Mins (tensor, scalar), Exp, Ln, Sqrt, Abs, Relu in the count form and the repeat
 *     form (mask, repeatTime, BinaryRepeatParams / UnaryRepeatParams); Duplicate; Brcb
 *     (BrcbRepeatParams); ReduceSum (dst[0] = the sum); ReduceMax, ReduceMin (count form,
 *     calIndex false); WholeReduceMax, WholeReduceMin (ReduceOrder::ORDER_ONLY_VALUE),
 *     WholeReduceSum; BlockReduceSum, BlockReduceMax, BlockReduceMin (whole blocks); Compare
 * (CMPMODE, count) into a uint8_t mask and Select (SELMODE::VSEL_TENSOR_TENSOR_MODE, count); Cast
 * (RoundMode::CAST_RINT, count) from float to bfloat16_t or half; Gather (count form, uint32_t byte
 * offsets, srcBaseAddr), CreateVecIndex (count form) and, on int32_t, Duplicate, Adds, Muls
 * (count form; the offsets a Gather reads) AscendC::SetFlag<HardEvent::SRC_DST>(id),
 * WaitFlag<HardEvent::SRC_DST>(id) AscendC::PipeBarrier<PIPE_X>() AscendC::ToFloat(bfloat16_t),
 * ToBfloat16(float)
 *
 * Limits (SimError naming the call): element types float, bfloat16_t, half, int32_t (the model's);
 * one element type per TBuf; Get<T>() in InitBuffer order (the carve-out then sits where
 * TPipe::InitBuffer placed it: each buffer at the next multiple of its scope's alignment, which
 * is also where the machine model puts it); a kernel's calls must come from inside run(). With
 * numerics off the model has no data: GM_ADDR arguments are then distinct placeholder addresses
 * that only SetGlobalBuffer may look at.
 */

#include "sim/Ascend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __aicore__
#define KERNEL_TASK_TYPE_DEFAULT(type) tandem_ascend::kernel_type(AscendC::type)
// CPU debug's form of the core-type tests: `if ASCEND_IS_AIV { ... }`.
#define ASCEND_IS_AIC (AscendC::core_type() == AscendC::AIC)
#define ASCEND_IS_AIV (AscendC::core_type() == AscendC::AIV)
#define __gm__
using GM_ADDR = uint8_t *;

/** bf16 as AscendC names it: the upper 16 bits of an f32 (storage only; arithmetic in float). */
struct bfloat16_t {
    uint16_t bits;
};

/** half (IEEE binary16) as AscendC names it: storage, converted to and from float by static_cast
 * (round to nearest even, overflow to inf); arithmetic in float. */
struct half {
    uint16_t bits;
    half() = default;
    explicit half(float f) : bits(tandem::sim::float_to_f16(f)) {}
    explicit operator float() const { return tandem::sim::f16_to_float(bits); }
};

enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_FIX };

namespace tandem_ascend {

using tandem::sim::DType;
using tandem::sim::SimError;
using tandem::sim::ascend::Machine;
using tandem::sim::ascend::Mem;
using tandem::sim::ascend::Pipe;

template <typename T> DType dtype() {
    if constexpr (std::is_same_v<T, float>)
        return DType::F32;
    else if constexpr (std::is_same_v<T, bfloat16_t>)
        return DType::BF16;
    else if constexpr (std::is_same_v<T, half>)
        return DType::F16;
    else if constexpr (std::is_same_v<T, int32_t>)
        return DType::I32;
    else if constexpr (std::is_same_v<T, uint8_t>)
        return DType::U8; // compare / select masks
    else if constexpr (std::is_same_v<T, int8_t>)
        return DType::I8; // int8 Mmad operands
    else
        static_assert(
            sizeof(T) == 0,
            "the Ascend model holds float, bfloat16_t, half, int32_t, int8_t and uint8_t");
}

/** A GM buffer of the machine as the kernel sees it: the address its GM_ADDR argument holds. */
struct GmBinding {
    uintptr_t base;
    int64_t bytes;
    int buffer;
};

/** The core whose kernel is running. */
struct CoreContext {
    CoreContext(Machine &m, int c, int b) : machine(m), core(c), block(b) {}
    Machine &machine;
    int core;  // the machine's core
    int block; // GetBlockIdx(): its index among the cores of its kind
    std::vector<GmBinding> gm;
    std::array<int64_t, 6> initialized{}; // per memory: bytes TPipe::InitBuffer has placed
    std::array<int64_t, 6> created{};     // per memory: bytes the machine has placed (Get<T>())
    std::map<std::array<int, 3>, int64_t> unconsumed; // (src, dst, event): SetFlags - WaitFlags

    void flag(bool set, Pipe src, Pipe dst, int event) {
        unconsumed[{int(src), int(dst), event}] += set ? 1 : -1;
        if (set)
            machine.core(core).set_flag(src, dst, event);
        else
            machine.core(core).wait_flag(src, dst, event);
    }

    /** AscendC requires every SetFlag to be waited for before the kernel ends. */
    void check_flags_consumed() const {
        for (const auto &[key, count] : unconsumed) {
            if (count <= 0)
                continue; // more waits than sets: the model reports the deadlock
            throw SimError(std::string("core ") + std::to_string(core) +
                           " ends its kernel with SetFlag<" +
                           tandem::sim::ascend::pipe_name(Pipe(key[0])) + "_" +
                           tandem::sim::ascend::pipe_name(Pipe(key[1])) + ">(" +
                           std::to_string(key[2]) + ") set " + std::to_string(count) +
                           " more time(s) than waited for; every SetFlag needs its "
                           "WaitFlag before the kernel returns (unbalanced flags)");
        }
    }

    int64_t aligned(Mem m, int64_t bytes) const {
        int64_t a = machine.params().alignment(m);
        return (bytes + a - 1) / a * a;
    }
};

inline CoreContext *&current_slot() {
    thread_local CoreContext *context = nullptr;
    return context;
}

inline CoreContext &current(const char *call) {
    CoreContext *c = current_slot();
    if (!c)
        throw SimError(std::string("AscendC::") + call + " called outside tandem_ascend::run");
    return *c;
}

/** One dimension of a copy: extent, stride in the destination, stride in the source (elements). */
struct BoxDim {
    int64_t extent, dst_stride, src_stride;
};

inline void copy(const char *call, int dst, int64_t dst_offset, int src, int64_t src_offset,
                 const std::vector<BoxDim> &dims) {
    CoreContext &c = current(call);
    tandem::sim::Box d{dst_offset, {}}, s{src_offset, {}};
    for (const BoxDim &x : dims) {
        d.dims.push_back({x.extent, x.dst_stride});
        s.dims.push_back({x.extent, x.src_stride});
    }
    c.machine.core(c.core).data_copy(dst, d, src, s,
                                     c.machine.name(src) + " -> " + c.machine.name(dst));
}

} // namespace tandem_ascend

namespace AscendC {

enum class TPosition {
    GM,
    A1,
    A2,
    B1,
    B2,
    C1,
    C2,
    CO1,
    CO2,
    VECIN,
    VECOUT,
    VECCALC,
    LCM,
    SPM,
    SHM,
    TSCM,
    MAX
};

namespace detail {
using tandem_ascend::Pipe;
constexpr int event_code(Pipe src, Pipe dst) {
    return int(src) * 8 + int(dst);
}
} // namespace detail

/** SRC_DST: set on SRC, waited on DST. Exactly the names of AscendC's HardEvent (its public
 * kernel_event.h; FIX_V and V_FIX exist only on later architectures); the values here encode the
 * two pipes. */
enum class HardEvent : uint8_t {
    MTE2_MTE1 = detail::event_code(detail::Pipe::MTE2, detail::Pipe::MTE1),
    MTE1_MTE2 = detail::event_code(detail::Pipe::MTE1, detail::Pipe::MTE2),
    MTE1_M = detail::event_code(detail::Pipe::MTE1, detail::Pipe::M),
    M_MTE1 = detail::event_code(detail::Pipe::M, detail::Pipe::MTE1),
    MTE2_V = detail::event_code(detail::Pipe::MTE2, detail::Pipe::V),
    V_MTE2 = detail::event_code(detail::Pipe::V, detail::Pipe::MTE2),
    MTE3_V = detail::event_code(detail::Pipe::MTE3, detail::Pipe::V),
    V_MTE3 = detail::event_code(detail::Pipe::V, detail::Pipe::MTE3),
    M_V = detail::event_code(detail::Pipe::M, detail::Pipe::V),
    V_M = detail::event_code(detail::Pipe::V, detail::Pipe::M),
    V_V = detail::event_code(detail::Pipe::V, detail::Pipe::V),
    MTE3_MTE1 = detail::event_code(detail::Pipe::MTE3, detail::Pipe::MTE1),
    MTE1_MTE3 = detail::event_code(detail::Pipe::MTE1, detail::Pipe::MTE3),
    MTE1_V = detail::event_code(detail::Pipe::MTE1, detail::Pipe::V),
    MTE2_M = detail::event_code(detail::Pipe::MTE2, detail::Pipe::M),
    M_MTE2 = detail::event_code(detail::Pipe::M, detail::Pipe::MTE2),
    V_MTE1 = detail::event_code(detail::Pipe::V, detail::Pipe::MTE1),
    M_FIX = detail::event_code(detail::Pipe::M, detail::Pipe::FIX),
    FIX_M = detail::event_code(detail::Pipe::FIX, detail::Pipe::M),
    MTE3_MTE2 = detail::event_code(detail::Pipe::MTE3, detail::Pipe::MTE2),
    MTE2_MTE3 = detail::event_code(detail::Pipe::MTE2, detail::Pipe::MTE3),
    S_V = detail::event_code(detail::Pipe::S, detail::Pipe::V),
    V_S = detail::event_code(detail::Pipe::V, detail::Pipe::S),
    S_MTE2 = detail::event_code(detail::Pipe::S, detail::Pipe::MTE2),
    MTE2_S = detail::event_code(detail::Pipe::MTE2, detail::Pipe::S),
    S_MTE3 = detail::event_code(detail::Pipe::S, detail::Pipe::MTE3),
    MTE3_S = detail::event_code(detail::Pipe::MTE3, detail::Pipe::S),
    MTE2_FIX = detail::event_code(detail::Pipe::MTE2, detail::Pipe::FIX),
    FIX_MTE2 = detail::event_code(detail::Pipe::FIX, detail::Pipe::MTE2),
    FIX_S = detail::event_code(detail::Pipe::FIX, detail::Pipe::S),
    M_S = detail::event_code(detail::Pipe::M, detail::Pipe::S),
    FIX_MTE3 = detail::event_code(detail::Pipe::FIX, detail::Pipe::MTE3),
    MTE1_FIX = detail::event_code(detail::Pipe::MTE1, detail::Pipe::FIX),
    FIX_MTE1 = detail::event_code(detail::Pipe::FIX, detail::Pipe::MTE1),
    FIX_FIX = detail::event_code(detail::Pipe::FIX, detail::Pipe::FIX),
};

namespace detail {

using tandem_ascend::Mem;
using tandem_ascend::Pipe;

inline std::pair<Pipe, Pipe> pipes_of(HardEvent e) {
    return {Pipe(int(e) / 8), Pipe(int(e) % 8)};
}

inline Pipe pipe_of(pipe_t p) {
    switch (p) {
    case PIPE_S:
        return Pipe::S;
    case PIPE_V:
        return Pipe::V;
    case PIPE_M:
        return Pipe::M;
    case PIPE_MTE1:
        return Pipe::MTE1;
    case PIPE_MTE2:
        return Pipe::MTE2;
    case PIPE_MTE3:
        return Pipe::MTE3;
    case PIPE_ALL:
        return Pipe::ALL;
    case PIPE_FIX:
        return Pipe::FIX;
    }
    return Pipe::ALL;
}

constexpr Mem mem_of(TPosition p) {
    switch (p) {
    case TPosition::A1:
    case TPosition::B1:
    case TPosition::C1:
        return Mem::L1;
    case TPosition::A2:
        return Mem::L0A;
    case TPosition::B2:
        return Mem::L0B;
    case TPosition::CO1:
        return Mem::L0C;
    default:
        return Mem::UB; // VECIN, VECOUT, VECCALC (and the rest, which the model has no scope for)
    }
}

} // namespace detail

inline int64_t GetBlockIdx() {
    return tandem_ascend::current("GetBlockIdx").block;
}
inline int64_t GetBlockNum() {
    tandem_ascend::CoreContext &c = tandem_ascend::current("GetBlockNum");
    if (c.machine.mix())
        return c.machine.cores_of(tandem::sim::ascend::CoreKind::AIC); // the launch's numBlocks
    return c.machine.cores_of(c.machine.kind(c.core));
}
/** An AIV's index within its AIC in a mix kernel (0 or 1); 0 elsewhere. */
inline int64_t GetSubBlockIdx() {
    tandem_ascend::CoreContext &c = tandem_ascend::current("GetSubBlockIdx");
    bool aiv = c.machine.kind(c.core) == tandem::sim::ascend::CoreKind::AIV;
    return c.machine.mix() && aiv ? c.block % 2 : 0;
}
inline int64_t GetSubBlockNum() {
    tandem_ascend::CoreContext &c = tandem_ascend::current("GetSubBlockNum");
    bool aiv = c.machine.kind(c.core) == tandem::sim::ascend::CoreKind::AIV;
    return c.machine.mix() && aiv ? 2 : 1;
}
inline int64_t GetTaskRatio() {
    return GetSubBlockNum();
}

/** The kind of the running core (AscendC's g_coreType, a run-time value in CPU debug). */
constexpr int32_t MIX = 0, AIC = 1, AIV = 2;
inline int32_t core_type() {
    tandem_ascend::CoreContext &c = tandem_ascend::current("ASCEND_IS_AIC / ASCEND_IS_AIV");
    return c.machine.kind(c.core) == tandem::sim::ascend::CoreKind::AIV ? AIV : AIC;
}

/** The user's part of the launch's workspace (no system workspace here). */
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) {
    return workspace;
}

/** Cross-core synchronisation, mode 2 only (an AIC and its AIVs; sim/Ascend.h Core). */
template <uint8_t modeId, pipe_t pipe> void CrossCoreSetFlag(uint16_t flagId) {
    static_assert(modeId == 2,
                  "Tandem's runtime has mode 2 of the cross-core flags (AIC <-> its AIVs)");
    static_assert(pipe != PIPE_S && pipe != PIPE_ALL,
                  "CrossCoreSetFlag takes PIPE_V, M, MTE1, MTE2, MTE3 or FIX");
    tandem_ascend::CoreContext &c = tandem_ascend::current("CrossCoreSetFlag");
    c.machine.core(c.core).cross_core_set_flag(detail::pipe_of(pipe), flagId);
}
template <uint8_t modeId = 0, pipe_t pipe = PIPE_S> void CrossCoreWaitFlag(uint16_t flagId) {
    // On the A2 the wait's template arguments are ignored: it stalls the issue of everything after
    // it.
    tandem_ascend::CoreContext &c = tandem_ascend::current("CrossCoreWaitFlag");
    c.machine.core(c.core).cross_core_wait_flag(flagId);
}

/** How the host runs a kernel (AscendC's CPU debug mode sets it with SetKernelMode): on the cube
 * cores, on the vector cores, or both. */
enum class KernelMode { MIX_MODE, AIC_MODE, AIV_MODE };

/** The kernel types KERNEL_TASK_TYPE_DEFAULT takes (the ones Tandem emits). */
enum KernelMetaType { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIC_1_2 };

inline float ToFloat(bfloat16_t b) {
    return tandem::sim::bf16_to_float(b.bits);
}
inline bfloat16_t ToBfloat16(float f) {
    return bfloat16_t{tandem::sim::float_to_bf16(f)};
}

template <typename T> class GlobalTensor {
public:
    void SetGlobalBuffer(__gm__ T *buffer, uint64_t size = 0) {
        tandem_ascend::CoreContext &c = tandem_ascend::current("GlobalTensor::SetGlobalBuffer");
        uintptr_t address = reinterpret_cast<uintptr_t>(buffer);
        for (const tandem_ascend::GmBinding &b : c.gm) {
            if (address < b.base || address - b.base >= uintptr_t(std::max<int64_t>(b.bytes, 1)))
                continue;
            if ((address - b.base) % sizeof(T) != 0 ||
                c.machine.type(b.buffer) != tandem_ascend::dtype<T>()) {
                throw tandem::sim::SimError(
                    "GlobalTensor::SetGlobalBuffer: GM buffer '" + c.machine.name(b.buffer) +
                    "' does not hold elements of this type at this address");
            }
            buffer_ = b.buffer;
            offset_ = int64_t((address - b.base) / sizeof(T));
            size_ = size ? int64_t(size) : c.machine.elements(b.buffer) - offset_;
            data_ = static_cast<T *>(c.machine.data(b.buffer));
            return;
        }
        throw tandem::sim::SimError(
            "GlobalTensor::SetGlobalBuffer: the address is in no GM argument of the kernel");
    }
    GlobalTensor operator[](int64_t offset) const {
        GlobalTensor t = *this;
        t.offset_ += offset;
        t.size_ -= offset;
        return t;
    }
    uint64_t GetSize() const { return uint64_t(size_); }
    /** A scalar read of GM (a kernel's tiling data); the model must run with numerics. */
    T GetValue(int64_t i) const {
        if (!data_)
            throw tandem::sim::SimError(
                "GlobalTensor::GetValue: the machine runs without numerics, "
                "so GM holds no data to read");
        return data_[offset_ + i];
    }

    int buffer_ = -1;    // the machine's buffer id
    int64_t offset_ = 0; // elements
    int64_t size_ = 0;
    T *data_ = nullptr;
};

template <typename T> class LocalTensor {
public:
    LocalTensor operator[](int64_t offset) const {
        LocalTensor t = *this;
        t.offset_ += offset;
        t.size_ -= offset;
        return t;
    }
    T GetValue(int64_t i) const { return data_[offset_ + i]; }
    void SetValue(int64_t i, T v) const { data_[offset_ + i] = v; }
    uint64_t GetSize() const { return uint64_t(size_); }
    void SetSize(const uint32_t size) { size_ = size; }
    /** The same bytes as another element type (the offset and size in its elements). */
    template <typename U> LocalTensor<U> ReinterpretCast() const {
        static_assert(sizeof(U) == sizeof(T), "Tandem's runtime reinterprets same-width types");
        LocalTensor<U> t;
        t.buffer_ = buffer_;
        t.offset_ = offset_;
        t.size_ = size_;
        t.data_ = reinterpret_cast<U *>(data_);
        return t;
    }

    int buffer_ = -1;
    int64_t offset_ = 0;
    int64_t size_ = 0;
    T *data_ = nullptr; // null when the machine runs without numerics
};

template <TPosition Pos> class TBuf {
public:
    template <typename T> LocalTensor<T> Get() {
        tandem_ascend::CoreContext &c = tandem_ascend::current("TBuf::Get");
        if (bytes_ < 0)
            throw tandem::sim::SimError(
                "TBuf::Get: the TBuf was not given memory by TPipe::InitBuffer");
        constexpr tandem_ascend::Mem mem = detail::mem_of(Pos);
        if (buffer_ < 0) {
            int64_t start = c.aligned(mem, c.created[size_t(mem)]);
            if (start != start_) {
                throw tandem::sim::SimError(
                    "TBuf::Get: call Get<T>() on the TBufs in the order TPipe::InitBuffer "
                    "placed them (this one starts at byte " +
                    std::to_string(start_) + " of " + tandem::sim::ascend::mem_name(mem) + ")");
            }
            if (bytes_ % int64_t(sizeof(T)) != 0) {
                throw tandem::sim::SimError("TBuf::Get: " + std::to_string(bytes_) +
                                            " bytes are not whole elements");
            }
            std::string name = std::string(tandem::sim::ascend::mem_name(mem)) + "[" +
                               std::to_string(start_) + ", " + std::to_string(start_ + bytes_) +
                               ")";
            buffer_ = c.machine.add_local(c.core, name, mem, tandem_ascend::dtype<T>(),
                                          bytes_ / int64_t(sizeof(T)));
            type_ = tandem_ascend::dtype<T>();
            c.created[size_t(mem)] = start_ + bytes_;
        } else if (type_ != tandem_ascend::dtype<T>()) {
            throw tandem::sim::SimError("TBuf::Get: this runtime keeps one element type per TBuf");
        }
        LocalTensor<T> t;
        t.buffer_ = buffer_;
        t.size_ = bytes_ / int64_t(sizeof(T));
        t.data_ = static_cast<T *>(c.machine.data(buffer_));
        return t;
    }

    int64_t start_ = 0, bytes_ = -1;
    int buffer_ = -1;
    tandem_ascend::DType type_ = tandem_ascend::DType::F32;
};

/** The buffer manager. As AscendC's does on the 910B, the constructor reserves and sets the
 * M_MTE1 events 0, 1 and 2 on a cube core (AIC), and Destroy() (or the destructor) waits for them
 * and then drains every pipe (PipeBarrier<PIPE_ALL>): a kernel that sets those events itself
 * calls Destroy() first, as catlass and tilelang-ascend do after placing their buffers. */
class TPipe {
public:
    TPipe() {
        tandem_ascend::CoreContext &c = tandem_ascend::current("TPipe");
        if (c.machine.kind(c.core) == tandem::sim::ascend::CoreKind::AIC)
            for (int event = 0; event < kReservedEvents; event++)
                c.flag(true, tandem_ascend::Pipe::M, tandem_ascend::Pipe::MTE1, event);
    }
    ~TPipe() {
        if (!destroyed_ && std::uncaught_exceptions() == 0)
            Destroy();
    }
    TPipe(const TPipe &) = delete;
    TPipe &operator=(const TPipe &) = delete;

    void Destroy() {
        tandem_ascend::CoreContext &c = tandem_ascend::current("TPipe::Destroy");
        destroyed_ = true;
        if (c.machine.kind(c.core) == tandem::sim::ascend::CoreKind::AIC)
            for (int event = 0; event < kReservedEvents; event++)
                c.flag(false, tandem_ascend::Pipe::M, tandem_ascend::Pipe::MTE1, event);
        c.machine.core(c.core).pipe_barrier(tandem_ascend::Pipe::ALL);
    }

    template <TPosition Pos> void InitBuffer(TBuf<Pos> &buffer, uint32_t bytes) {
        tandem_ascend::CoreContext &c = tandem_ascend::current("TPipe::InitBuffer");
        constexpr tandem_ascend::Mem mem = detail::mem_of(Pos);
        buffer.start_ = c.aligned(mem, c.initialized[size_t(mem)]);
        buffer.bytes_ = bytes;
        c.initialized[size_t(mem)] = buffer.start_ + bytes;
    }

private:
    static constexpr int kReservedEvents = tandem::sim::ascend::kTPipeReservedEvents; // M_MTE1 0..2
    bool destroyed_ = false;
};

template <HardEvent E> void SetFlag(int32_t event) {
    auto [src, dst] = detail::pipes_of(E);
    tandem_ascend::current("SetFlag").flag(true, src, dst, event);
}

template <HardEvent E> void WaitFlag(int32_t event) {
    auto [src, dst] = detail::pipes_of(E);
    tandem_ascend::current("WaitFlag").flag(false, src, dst, event);
}

template <pipe_t P> void PipeBarrier() {
    tandem_ascend::CoreContext &c = tandem_ascend::current("PipeBarrier");
    c.machine.core(c.core).pipe_barrier(detail::pipe_of(P));
}

/** Rows of 32-byte blocks; the strides are the gaps between rows, in blocks. */
struct DataCopyParams {
    DataCopyParams() = default;
    DataCopyParams(uint16_t count, uint16_t len, uint16_t src_stride, uint16_t dst_stride)
        : blockCount(count), blockLen(len), srcStride(src_stride), dstStride(dst_stride) {}
    uint16_t blockCount = 1, blockLen = 0, srcStride = 0, dstStride = 0;
};

namespace detail {
template <typename T> std::vector<tandem_ascend::BoxDim> rows(const DataCopyParams &p) {
    int64_t per_block = 32 / int64_t(sizeof(T));
    int64_t row = p.blockLen * per_block;
    return {{row, 1, 1},
            {p.blockCount, row + p.dstStride * per_block, row + p.srcStride * per_block}};
}
} // namespace detail

// DataCopy: GM -> local (MTE2), local -> GM (MTE3), local -> local (the model's paths).
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, uint32_t count) {
    tandem_ascend::copy("DataCopy", dst.buffer_, dst.offset_, src.buffer_, src.offset_,
                        {{int64_t(count), 1, 1}});
}
template <typename T>
void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src, uint32_t count) {
    tandem_ascend::copy("DataCopy", dst.buffer_, dst.offset_, src.buffer_, src.offset_,
                        {{int64_t(count), 1, 1}});
}
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const LocalTensor<T> &src, uint32_t count) {
    tandem_ascend::copy("DataCopy", dst.buffer_, dst.offset_, src.buffer_, src.offset_,
                        {{int64_t(count), 1, 1}});
}
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyParams &p) {
    tandem_ascend::copy("DataCopy", dst.buffer_, dst.offset_, src.buffer_, src.offset_,
                        detail::rows<T>(p));
}
template <typename T>
void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyParams &p) {
    tandem_ascend::copy("DataCopy", dst.buffer_, dst.offset_, src.buffer_, src.offset_,
                        detail::rows<T>(p));
}
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyParams &p) {
    tandem_ascend::copy("DataCopy", dst.buffer_, dst.offset_, src.buffer_, src.offset_,
                        detail::rows<T>(p));
}

/** DataCopyPad's rows (docs: GMToUB/UBToGM non-aligned copies, DataCopyPad): blockCount rows of
 * blockLen bytes; on the GM side rows srcStride (GM -> UB) or dstStride (UB -> GM) bytes apart
 * end to start, on the UB side each row padded up to 32 bytes, then dstStride / srcStride more
 * 32-byte blocks. */
struct DataCopyExtParams {
    DataCopyExtParams() = default;
    DataCopyExtParams(const uint16_t count, const uint32_t len, const uint32_t srcStrideIn,
                      const uint32_t dstStrideIn, const uint32_t rsvIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn),
          rsv(rsvIn) {}
    uint16_t blockCount = 1;
    uint32_t blockLen = 0, srcStride = 0, dstStride = 0, rsv = 0;
};

/** GM -> UB padding (docs: DataCopyPadExtParams): the pad's contents are not modelled (the UB
 * bytes past a row keep what they held); Tandem's kernels never store them. */
template <typename T> struct DataCopyPadExtParams {
    DataCopyPadExtParams() = default;
    DataCopyPadExtParams(const bool isPadValue, const uint8_t leftPadValue,
                         const uint8_t rightPadValue, T padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue),
          paddingValue(padValue) {}
    bool isPad = false;
    uint8_t leftPadding = 0, rightPadding = 0;
    T paddingValue{};
};

namespace detail {
/** The rows of a DataCopyPad in elements: (extent, dst stride, src stride). `to_ub`: GM -> UB. */
template <typename T>
std::vector<tandem_ascend::BoxDim> padded_rows(const DataCopyExtParams &p, bool to_ub) {
    const int64_t size = int64_t(sizeof(T)), per_block = 32 / size;
    const int64_t gm_gap = to_ub ? p.srcStride : p.dstStride,
                  ub_gap = to_ub ? p.dstStride : p.srcStride;
    if (p.blockLen % size != 0 || gm_gap % size != 0 || p.blockLen > 2097151 || p.blockCount > 4095)
        throw tandem::sim::SimError("DataCopyPad: blockLen " + std::to_string(p.blockLen) +
                                    " and the GM stride " + std::to_string(gm_gap) +
                                    " must be whole elements (blockLen at most 2097151 bytes, "
                                    "blockCount at most 4095)");
    const int64_t row = p.blockLen / size;
    const int64_t gm = row + gm_gap / size,
                  ub = (row + per_block - 1) / per_block * per_block + ub_gap * per_block;
    if (p.blockCount <= 1)
        return {{row, 1, 1}};
    return {{row, 1, 1}, {p.blockCount, to_ub ? ub : gm, to_ub ? gm : ub}};
}
template <typename T> void check_ub_start(const LocalTensor<T> &t) {
    if (int64_t(t.offset_) * int64_t(sizeof(T)) % 32 != 0)
        throw tandem::sim::SimError("DataCopyPad: the UB tensor starts at element " +
                                    std::to_string(t.offset_) + ", not on a 32-byte block");
}
} // namespace detail

template <typename T>
void DataCopyPad(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyExtParams &p,
                 const DataCopyPadExtParams<T> &) {
    detail::check_ub_start(dst);
    tandem_ascend::copy("DataCopyPad", dst.buffer_, dst.offset_, src.buffer_, src.offset_,
                        detail::padded_rows<T>(p, true));
}
template <typename T>
void DataCopyPad(const GlobalTensor<T> &dst, const LocalTensor<T> &src,
                 const DataCopyExtParams &p) {
    detail::check_ub_start(src);
    tandem_ascend::copy("DataCopyPad", dst.buffer_, dst.offset_, src.buffer_, src.offset_,
                        detail::padded_rows<T>(p, false));
}

// --- The real vector instructions (on V; sim/Ascend.h VectorCall gives their semantics) ------
// Count form: the first `count` elements. Repeat form (AscendC's high-dimensional slicing): the
// first `mask` lanes of each of `repeatTime` repeats of eight 32-byte blocks, strided by the
// repeat parameters. f32 (the element type Tandem's vector kernels compute in); masks uint8.

struct BinaryRepeatParams {
    BinaryRepeatParams() = default;
    BinaryRepeatParams(const uint8_t dstBlkStrideIn, const uint8_t src0BlkStrideIn,
                       const uint8_t src1BlkStrideIn, const uint8_t dstRepStrideIn,
                       const uint8_t src0RepStrideIn, const uint8_t src1RepStrideIn)
        : dstBlkStride(dstBlkStrideIn), src0BlkStride(src0BlkStrideIn),
          src1BlkStride(src1BlkStrideIn), dstRepStride(dstRepStrideIn),
          src0RepStride(src0RepStrideIn), src1RepStride(src1RepStrideIn) {}
    uint32_t blockNumber = 8;
    uint8_t dstBlkStride = 1, src0BlkStride = 1, src1BlkStride = 1;
    uint8_t dstRepStride = 8, src0RepStride = 8, src1RepStride = 8;
    bool repeatStrideMode = false, strideSizeMode = false;
};

struct UnaryRepeatParams {
    UnaryRepeatParams() = default;
    UnaryRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t srcBlkStrideIn,
                      const uint8_t dstRepStrideIn, const uint8_t srcRepStrideIn)
        : dstBlkStride(dstBlkStrideIn), srcBlkStride(srcBlkStrideIn), dstRepStride(dstRepStrideIn),
          srcRepStride(srcRepStrideIn) {}
    uint32_t blockNumber = 8;
    uint16_t dstBlkStride = 1, srcBlkStride = 1;
    uint8_t dstRepStride = 8, srcRepStride = 8;
    bool repeatStrideMode = false, strideSizeMode = false, halfBlock = false;
};

struct BrcbRepeatParams {
    BrcbRepeatParams() = default;
    BrcbRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t dstRepStrideIn)
        : dstRepStride(dstRepStrideIn), dstBlkStride(dstBlkStrideIn) {}
    uint32_t blockNumber = 8;
    uint16_t dstRepStride = 8, dstBlkStride = 1;
    uint8_t src0BlkStride = 1, src1BlkStride = 1, src0RepStride = 8, src1RepStride = 8;
    bool repeatStrideMode = false, strideSizeMode = false;
};

enum class CMPMODE : uint8_t { LT = 0, GT, EQ, LE, GE, NE };
enum class SELMODE : uint8_t {
    VSEL_CMPMASK_SPR = 0,
    VSEL_TENSOR_SCALAR_MODE,
    VSEL_TENSOR_TENSOR_MODE
};

namespace detail {

template <typename T> struct Lanes {
    // (int32_t: Duplicate, Adds, Muls and CreateVecIndex, for a Gather's offsets; the model
    // refuses the others on int32_t)
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t>,
                  "Tandem's runtime has the f32 vector instructions and some int32_t ones");
};

template <typename T>
tandem::sim::ascend::VectorOperand operand(const LocalTensor<T> &t, int block = 1, int repeat = 8) {
    return {t.buffer_, t.offset_, block, repeat};
}

inline void call(const char *name, tandem::sim::ascend::VectorCall v) {
    tandem_ascend::CoreContext &c = tandem_ascend::current(name);
    v.op = name;
    c.machine.core(c.core).vector_instruction(v);
}

/** Count form. */
template <typename T>
void vector_instruction(const char *name, const LocalTensor<T> &dst,
                        std::initializer_list<const LocalTensor<T> *> srcs, float scalar,
                        int32_t count) {
    Lanes<T>{};
    tandem::sim::ascend::VectorCall v;
    v.dst = operand(dst);
    for (const LocalTensor<T> *s : srcs)
        v.srcs.push_back(operand(*s));
    v.scalar = scalar;
    v.count = count;
    call(name, v);
}

/** Repeat form. */
inline void repeated(const char *name, tandem::sim::ascend::VectorCall v, uint64_t mask,
                     uint8_t repeatTime) {
    v.count = -1;
    v.mask = int(mask);
    v.repeats = repeatTime;
    call(name, v);
}

} // namespace detail

#define TANDEM_ASCEND_BINARY(NAME)                                                                 \
    template <typename T>                                                                          \
    void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1,   \
              const int32_t &count) {                                                              \
        detail::vector_instruction(#NAME, dst, {&src0, &src1}, 0.0f, count);                       \
    }                                                                                              \
    template <typename T, bool isSetMask = true>                                                   \
    void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1,   \
              uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams &p) {              \
        detail::Lanes<T>{};                                                                        \
        tandem::sim::ascend::VectorCall v;                                                         \
        v.dst = detail::operand(dst, p.dstBlkStride, p.dstRepStride);                              \
        v.srcs = {detail::operand(src0, p.src0BlkStride, p.src0RepStride),                         \
                  detail::operand(src1, p.src1BlkStride, p.src1RepStride)};                        \
        detail::repeated(#NAME, v, mask, repeatTime);                                              \
    }
TANDEM_ASCEND_BINARY(Add)
TANDEM_ASCEND_BINARY(Sub)
TANDEM_ASCEND_BINARY(Mul)
TANDEM_ASCEND_BINARY(Div)
TANDEM_ASCEND_BINARY(Max)
TANDEM_ASCEND_BINARY(Min)
#undef TANDEM_ASCEND_BINARY

#define TANDEM_ASCEND_SCALAR(NAME)                                                                 \
    template <typename T, bool isSetMask = true>                                                   \
    void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue,          \
              const int32_t &count) {                                                              \
        detail::vector_instruction(#NAME, dst, {&src}, scalarValue, count);                        \
    }                                                                                              \
    template <typename T, bool isSetMask = true>                                                   \
    void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue,          \
              uint64_t mask, const uint8_t repeatTime, const UnaryRepeatParams &p) {               \
        detail::Lanes<T>{};                                                                        \
        tandem::sim::ascend::VectorCall v;                                                         \
        v.dst = detail::operand(dst, p.dstBlkStride, p.dstRepStride);                              \
        v.srcs.push_back(detail::operand(src, p.srcBlkStride, p.srcRepStride));                    \
        v.scalar = scalarValue;                                                                    \
        detail::repeated(#NAME, v, mask, repeatTime);                                              \
    }
TANDEM_ASCEND_SCALAR(Adds)
TANDEM_ASCEND_SCALAR(Muls)
TANDEM_ASCEND_SCALAR(Maxs)
TANDEM_ASCEND_SCALAR(Mins)
#undef TANDEM_ASCEND_SCALAR

#define TANDEM_ASCEND_UNARY(NAME)                                                                  \
    template <typename T>                                                                          \
    void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t &count) {        \
        detail::vector_instruction(#NAME, dst, {&src}, 0.0f, count);                               \
    }                                                                                              \
    template <typename T, bool isSetMask = true>                                                   \
    void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src, uint64_t mask,                 \
              const uint8_t repeatTime, const UnaryRepeatParams &p) {                              \
        detail::Lanes<T>{};                                                                        \
        tandem::sim::ascend::VectorCall v;                                                         \
        v.dst = detail::operand(dst, p.dstBlkStride, p.dstRepStride);                              \
        v.srcs.push_back(detail::operand(src, p.srcBlkStride, p.srcRepStride));                    \
        detail::repeated(#NAME, v, mask, repeatTime);                                              \
    }
TANDEM_ASCEND_UNARY(Exp)
TANDEM_ASCEND_UNARY(Ln)
TANDEM_ASCEND_UNARY(Sqrt)
TANDEM_ASCEND_UNARY(Abs)
TANDEM_ASCEND_UNARY(Relu)
#undef TANDEM_ASCEND_UNARY

template <typename T>
void Duplicate(const LocalTensor<T> &dst, const T &scalarValue, const int32_t &count) {
    detail::vector_instruction("Duplicate", dst, {}, scalarValue, count);
}

/** dst[i] = firstValue + i (count form; int32_t or float in the model). */
template <typename T> void CreateVecIndex(LocalTensor<T> dst, const T &firstValue, uint32_t count) {
    detail::vector_instruction("CreateVecIndex", dst, {}, float(firstValue), int32_t(count));
}

/** dst[i] = the element at byte srcBaseAddr + srcOffset[i] of src, which holds every lane (its
 * GetSize(): as AscendC's CPU debug checks a Gather against its src tensor). */
template <typename T>
void Gather(const LocalTensor<T> &dst, const LocalTensor<T> &src,
            const LocalTensor<uint32_t> &srcOffset, const uint32_t srcBaseAddr,
            const uint32_t count) {
    detail::Lanes<T>{};
    tandem::sim::ascend::VectorCall v;
    v.dst = detail::operand(dst);
    v.srcs.push_back(detail::operand(src));
    v.srcs.push_back(detail::operand(srcOffset));
    v.count = count;
    v.gather_base = srcBaseAddr;
    v.gather_window = int64_t(src.GetSize());
    detail::call("Gather", v);
}

/** Repeat r reads src[8r, 8r + 8) and fills its eight 32-byte blocks with one of them each. */
template <typename T>
void Brcb(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const uint8_t repeatTime,
          const BrcbRepeatParams &p) {
    detail::Lanes<T>{};
    tandem::sim::ascend::VectorCall v;
    v.dst = detail::operand(dst, p.dstBlkStride, p.dstRepStride);
    v.srcs.push_back(detail::operand(src0));
    detail::repeated("Brcb", v, 0, repeatTime);
}

/** dst[0] = the sum of src[0, count) (the count form does not use sharedTmpBuffer on the 910B). */
template <typename T, bool isSetMask = true>
void ReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src,
               const LocalTensor<T> &sharedTmpBuffer, const int32_t count) {
    detail::vector_instruction("ReduceSum", dst, {&src, &sharedTmpBuffer}, 0.0f, count);
}

/** dst[0] = the maximum (minimum) of src[0, count); sharedTmpBuffer holds the first round's
 * (value, index) per repeat (dst may lie inside it). calIndex true is not in the model. */
template <typename T>
void ReduceMax(const LocalTensor<T> &dst, const LocalTensor<T> &src,
               const LocalTensor<T> &sharedTmpBuffer, const int32_t count, bool calIndex = false) {
    (void)calIndex;
    detail::vector_instruction("ReduceMax", dst, {&src, &sharedTmpBuffer}, 0.0f, count);
}
template <typename T>
void ReduceMin(const LocalTensor<T> &dst, const LocalTensor<T> &src,
               const LocalTensor<T> &sharedTmpBuffer, const int32_t count, bool calIndex = false) {
    (void)calIndex;
    detail::vector_instruction("ReduceMin", dst, {&src, &sharedTmpBuffer}, 0.0f, count);
}

/** ReduceOrder (impl/basic_api/utils/kernel_utils_mode.h). */
enum class ReduceOrder : uint8_t {
    ORDER_VALUE_INDEX = 0,
    ORDER_INDEX_VALUE,
    ORDER_ONLY_VALUE,
    ORDER_ONLY_INDEX
};

/** Per repeat, the maximum (minimum) of its masked lanes at dst[r * dstRepStride] (value only:
 * the model has ORDER_ONLY_VALUE). */
#define TANDEM_ASCEND_WHOLE_REDUCE(NAME)                                                           \
    template <typename T, bool isSetMask = true>                                                   \
    void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t mask,            \
              const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,    \
              const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {    \
        detail::Lanes<T>{};                                                                        \
        tandem::sim::ascend::VectorCall v;                                                         \
        v.dst = detail::operand(dst, 1, dstRepStride);                                             \
        v.srcs.push_back(detail::operand(src, srcBlkStride, srcRepStride));                        \
        v.mode = int(order);                                                                       \
        detail::repeated(#NAME, v, uint64_t(mask), uint8_t(repeatTime));                           \
    }
TANDEM_ASCEND_WHOLE_REDUCE(WholeReduceMax)
TANDEM_ASCEND_WHOLE_REDUCE(WholeReduceMin)
#undef TANDEM_ASCEND_WHOLE_REDUCE

/** Per repeat, the sum of its masked lanes at dst[r * dstRepStride]. */
template <typename T, bool isSetMask = true>
void WholeReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t mask,
                    const int32_t repeatTime, const int32_t dstRepStride,
                    const int32_t srcBlkStride, const int32_t srcRepStride) {
    detail::Lanes<T>{};
    tandem::sim::ascend::VectorCall v;
    v.dst = detail::operand(dst, 1, dstRepStride);
    v.srcs.push_back(detail::operand(src, srcBlkStride, srcRepStride));
    detail::repeated("WholeReduceSum", v, uint64_t(mask), uint8_t(repeatTime));
}

/** Per repeat, the sum (maximum, minimum) of each 32-byte block's masked lanes: eight values, the
 * repeat's block dstRepStride blocks after the last's (the model's form: whole blocks masked). */
#define TANDEM_ASCEND_BLOCK_REDUCE(NAME)                                                           \
    template <typename T, bool isSetMask = true>                                                   \
    void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t repeatTime,      \
              const int32_t mask, const int32_t dstRepStride, const int32_t srcBlkStride,          \
              const int32_t srcRepStride) {                                                        \
        detail::Lanes<T>{};                                                                        \
        tandem::sim::ascend::VectorCall v;                                                         \
        v.dst = detail::operand(dst, 1, dstRepStride);                                             \
        v.srcs.push_back(detail::operand(src, srcBlkStride, srcRepStride));                        \
        detail::repeated(#NAME, v, uint64_t(mask), uint8_t(repeatTime));                           \
    }
TANDEM_ASCEND_BLOCK_REDUCE(BlockReduceSum)
TANDEM_ASCEND_BLOCK_REDUCE(BlockReduceMax)
TANDEM_ASCEND_BLOCK_REDUCE(BlockReduceMin)
#undef TANDEM_ASCEND_BLOCK_REDUCE

/** One bit per element of dst (element i: bit i % 8 of byte i / 8): src0 <cmpMode> src1. */
template <typename T, typename U>
void Compare(const LocalTensor<U> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1,
             CMPMODE cmpMode, uint32_t count) {
    detail::Lanes<T>{};
    static_assert(std::is_same_v<U, uint8_t>, "Tandem's runtime keeps compare masks as uint8_t");
    tandem::sim::ascend::VectorCall v;
    v.dst = detail::operand(dst);
    v.srcs = {detail::operand(src0), detail::operand(src1)};
    v.count = count;
    v.mode = int(cmpMode);
    detail::call("Compare", v);
}

/** dst[i] = src0[i] where bit i of selMask is 1, else src1[i]. */
template <typename T, typename U>
void Select(const LocalTensor<T> &dst, const LocalTensor<U> &selMask, const LocalTensor<T> &src0,
            const LocalTensor<T> &src1, SELMODE selMode, uint32_t count) {
    detail::Lanes<T>{};
    static_assert(std::is_same_v<U, uint8_t>, "Tandem's runtime keeps select masks as uint8_t");
    tandem::sim::ascend::VectorCall v;
    v.dst = detail::operand(dst);
    v.srcs = {detail::operand(selMask), detail::operand(src0), detail::operand(src1)};
    v.count = count;
    v.mode = int(selMode);
    detail::call("Select", v);
}

/** RoundMode (docs: Cast): the model has CAST_RINT from float to bfloat16_t or half. */
enum class RoundMode {
    CAST_NONE = 0,
    CAST_RINT,
    CAST_FLOOR,
    CAST_CEIL,
    CAST_ROUND,
    CAST_TRUNC,
    CAST_ODD
};

/** dst[i] = src[i] converted (count form; basic_api/kernel_operator_vec_vconv_intf.h). */
template <typename T, typename U>
void Cast(const LocalTensor<T> &dst, const LocalTensor<U> &src, const RoundMode &roundMode,
          const uint32_t count) {
    static_assert(
        ((std::is_same_v<T, bfloat16_t> || std::is_same_v<T, half>)&&std::is_same_v<U, float>) ||
            (std::is_same_v<T, float> && std::is_same_v<U, int32_t>),
        "Tandem's runtime casts float to bfloat16_t or half, int32_t to float");
    tandem::sim::ascend::VectorCall v;
    v.dst = detail::operand(dst);
    v.srcs.push_back(detail::operand(src));
    v.count = count;
    v.mode = int(roundMode);
    detail::call("Cast", v);
}

// --- The real cube instructions, on fractal data (sim/Ascend.h gives the layouts) ------------

/** ND (row-major) GM -> Nz L1 (MTE2). Fields and order as AscendC's; ndNum 1 (0: no copy). */
struct Nd2NzParams {
    Nd2NzParams() = default;
    Nd2NzParams(uint16_t ndNum_, uint16_t nValue_, uint16_t dValue_, uint16_t srcNdMatrixStride_,
                uint16_t srcDValue_, uint16_t dstNzC0Stride_, uint16_t dstNzNStride_,
                uint16_t dstNzMatrixStride_)
        : ndNum(ndNum_), nValue(nValue_), dValue(dValue_), srcNdMatrixStride(srcNdMatrixStride_),
          srcDValue(srcDValue_), dstNzC0Stride(dstNzC0Stride_), dstNzNStride(dstNzNStride_),
          dstNzMatrixStride(dstNzMatrixStride_) {}
    uint16_t ndNum = 0, nValue = 0, dValue = 0, srcNdMatrixStride = 0, srcDValue = 0,
             dstNzC0Stride = 0, dstNzNStride = 0, dstNzMatrixStride = 0;
};

template <typename T>
void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const Nd2NzParams &p) {
    tandem_ascend::CoreContext &c = tandem_ascend::current("DataCopy(Nd2NzParams)");
    if (p.ndNum == 0 || p.nValue == 0 || p.dValue == 0)
        return; // AscendC: a copy of nothing
    if (p.ndNum != 1)
        throw tandem::sim::SimError("DataCopy(Nd2NzParams): ndNum " + std::to_string(p.ndNum) +
                                    " > 1 is not in Tandem's runtime (one matrix per call)");
    tandem::sim::ascend::Nd2Nz n;
    n.n_value = p.nValue;
    n.d_value = p.dValue;
    n.src_d_value = p.srcDValue;
    n.dst_nz_c0_stride = p.dstNzC0Stride;
    n.dst_nz_n_stride = p.dstNzNStride;
    c.machine.core(c.core).nd2nz(dst.buffer_, dst.offset_, src.buffer_, src.offset_, n,
                                 "Nd2Nz " + c.machine.name(src.buffer_) + " -> " +
                                     c.machine.name(dst.buffer_));
}

/** L1 -> L0A/L0B (MTE1), one 512-byte fractal per repeat. Fields in AscendC's declaration
 * order; its constructor takes (startIndex, repeatTimes, srcStride, sid, dstGap, ifTranspose,
 * addrMode). */
struct LoadData2DParams {
    LoadData2DParams() = default;
    LoadData2DParams(uint16_t startIndex_, uint8_t repeatTimes_, uint16_t srcStride_, uint8_t sid_,
                     uint16_t dstGap_, bool ifTranspose_, uint8_t addrMode_)
        : startIndex(startIndex_), dstGap(dstGap_), srcStride(srcStride_),
          ifTranspose(ifTranspose_), repeatTimes(repeatTimes_), sid(sid_), addrMode(addrMode_) {}
    uint16_t startIndex = 0;
    uint16_t dstGap = 0;
    uint16_t srcStride = 0;
    bool ifTranspose = false;
    uint8_t repeatTimes = 0;
    uint8_t sid = 0;
    uint8_t addrMode = 0;
};

template <typename T>
void LoadData(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LoadData2DParams &p) {
    tandem_ascend::CoreContext &c = tandem_ascend::current("LoadData(LoadData2DParams)");
    if (p.sid != 0 || p.addrMode != 0)
        throw tandem::sim::SimError(
            "LoadData: sid and addrMode must be 0 (incrementing addresses)");
    if (p.repeatTimes == 0)
        return;
    tandem::sim::ascend::LoadData2D l;
    l.start_index = p.startIndex;
    l.repeat_times = p.repeatTimes;
    l.src_stride = p.srcStride;
    l.dst_gap = p.dstGap;
    l.transpose = p.ifTranspose;
    c.machine.core(c.core).load_data_2d(dst.buffer_, dst.offset_, src.buffer_, src.offset_, l,
                                        "LoadData " + c.machine.name(src.buffer_) + " -> " +
                                            c.machine.name(dst.buffer_));
}

/** L1 -> L0A/L0B (MTE1) transposing 8-bit data, a 32 x 32 block (two fractals) per repeat
 * (sim/Ascend.h LoadDataTranspose8). Fields in AscendC's declaration order; set them by name. */
struct LoadData2dTransposeParams {
    uint16_t startIndex = 0;
    uint8_t repeatTimes = 0;
    uint16_t srcStride = 0;
    uint16_t dstGap = 0;
    uint16_t dstFracGap = 0;
    uint8_t addrMode = 0;
};

template <typename T>
void LoadDataWithTranspose(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                           const LoadData2dTransposeParams &p) {
    tandem_ascend::CoreContext &c = tandem_ascend::current("LoadDataWithTranspose");
    static_assert(sizeof(T) == 1, "Tandem's runtime has LoadDataWithTranspose for 8-bit data");
    if (p.addrMode != 0)
        throw tandem::sim::SimError("LoadDataWithTranspose: addrMode must be 0");
    if (p.repeatTimes == 0)
        return;
    tandem::sim::ascend::LoadDataTranspose8 l;
    l.start_index = p.startIndex;
    l.repeat_times = p.repeatTimes;
    l.src_stride = p.srcStride;
    l.dst_gap = p.dstGap;
    l.dst_frac_gap = p.dstFracGap;
    c.machine.core(c.core).load_data_transpose_8(
        dst.buffer_, dst.offset_, src.buffer_, src.offset_, l,
        "LoadDataWithTranspose " + c.machine.name(src.buffer_) + " -> " +
            c.machine.name(dst.buffer_));
}

/** AscendC's MmadParams (the fields the 910B has; set them by name). cmatrixInitVal: C = A * B
 * instead of C += A * B. */
struct MmadParams {
    uint16_t m = 0, n = 0, k = 0;
    bool isBias = false;
    int32_t fmOffset = 0;
    bool enSsparse = false, enWinogradA = false, enWinogradB = false;
    uint8_t unitFlag = 0;
    bool kDirectionAlign = false, cmatrixSource = false, cmatrixInitVal = true;
};

/** dst (L0C, Nz) (+)= fm (L0A, Zz) * filter (L0B, Zn) on the cube (M). */
template <typename T, typename U, typename S>
void Mmad(const LocalTensor<T> &dst, const LocalTensor<U> &fm, const LocalTensor<S> &filter,
          const MmadParams &p) {
    tandem_ascend::CoreContext &c = tandem_ascend::current("Mmad");
    static_assert(std::is_same_v<U, S> && (std::is_same_v<U, int8_t> ? std::is_same_v<T, int32_t>
                                                                     : std::is_same_v<T, float>),
                  "Mmad: two operands of one type, into an f32 L0C (int32 for int8 operands)");
    if (p.isBias || p.cmatrixSource || p.unitFlag != 0 || p.enSsparse || p.enWinogradA ||
        p.enWinogradB || p.fmOffset != 0 || p.kDirectionAlign)
        throw tandem::sim::SimError("Mmad: isBias, cmatrixSource, unitFlag, sparsity, Winograd, "
                                    "fmOffset and kDirectionAlign are not in Tandem's runtime");
    tandem_ascend::Machine &m = c.machine;
    m.core(c.core).mmad_fractal(dst.buffer_, dst.offset_, fm.buffer_, fm.offset_, filter.buffer_,
                                filter.offset_, p.m, p.n, p.k, !p.cmatrixInitVal,
                                m.name(dst.buffer_) + " += " + m.name(fm.buffer_) + " * " +
                                    m.name(filter.buffer_));
}

/** The quantization Fixpipe applies on the way out (the values the 910B has). */
enum QuantMode_t {
    NoQuant,
    F322F16,
    F322BF16,
    DEQF16,
    VDEQF16,
    QF322B8_PRE,
    VQF322B8_PRE,
    REQ8,
    VREQ8
};

struct FixpipeParamsV220 {
    uint16_t nSize = 0, mSize = 0, srcStride = 0;
    uint32_t dstStride = 0;
    QuantMode_t quantPre = NoQuant;
    uint64_t deqScalar = 0;
    uint16_t ndNum = 1, srcNdStride = 0, dstNdStride = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    bool isChannelSplit = false;
};

enum class CO2Layout : uint8_t { NZ, ROW_MAJOR };
struct FixpipeConfig {
    CO2Layout format;
};
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};

/** L0C (Nz, f32 or int32) -> GM (FIX): CFG_ROW_MAJOR writes rows dstStride elements apart,
 * quantPre F322BF16 for a bf16 result, F322F16 for half, NoQuant for f32 (and int32 from an
 * int32 L0C). */
template <typename T, typename U, const FixpipeConfig &config = CFG_ROW_MAJOR>
void Fixpipe(const GlobalTensor<T> &dst, const LocalTensor<U> &src, const FixpipeParamsV220 &p) {
    tandem_ascend::CoreContext &c = tandem_ascend::current("Fixpipe(FixpipeParamsV220)");
    static_assert(std::is_same_v<U, float> || (std::is_same_v<U, int32_t> && std::is_same_v<T, U>),
                  "Fixpipe: the source is the f32 L0C, or an int32 L0C written as int32");
    static_assert(config.format == CO2Layout::ROW_MAJOR,
                  "Tandem's runtime has Fixpipe CFG_ROW_MAJOR only");
    const QuantMode_t want = std::is_same_v<T, bfloat16_t> ? F322BF16
                             : std::is_same_v<T, half>     ? F322F16
                                                           : NoQuant;
    if (p.quantPre != want)
        throw tandem::sim::SimError(std::string("Fixpipe: quantPre must be ") +
                                    (want == F322BF16  ? "F322BF16 for a bf16"
                                     : want == F322F16 ? "F322F16 for a half"
                                                       : "NoQuant for an f32 or int32") +
                                    " destination");
    if (p.ndNum != 1 || p.unitFlag != 0 || p.isChannelSplit)
        throw tandem::sim::SimError(
            "Fixpipe: ndNum 1, unitFlag 0 and no channel split in Tandem's runtime");
    tandem::sim::ascend::FixpipeNz2Nd f;
    f.n_size = p.nSize;
    f.m_size = p.mSize;
    f.src_stride = p.srcStride;
    f.dst_stride = p.dstStride;
    f.relu = p.reluEn;
    c.machine.core(c.core).fixpipe_nz2nd(dst.buffer_, dst.offset_, src.buffer_, src.offset_, f,
                                         "Fixpipe " + c.machine.name(src.buffer_) + " -> " +
                                             c.machine.name(dst.buffer_));
}

} // namespace AscendC

namespace tandem_ascend {

/** KERNEL_TASK_TYPE_DEFAULT: the kernel states the cores it runs on; running it on the other
 * kind is a SimError. */
inline void kernel_type(AscendC::KernelMetaType type) {
    CoreContext &c = current("KERNEL_TASK_TYPE_DEFAULT");
    tandem::sim::ascend::CoreKind kind = c.machine.kind(c.core);
    bool aiv = kind == tandem::sim::ascend::CoreKind::AIV;
    if ((type == AscendC::KERNEL_TYPE_MIX_AIC_1_2) != c.machine.mix()) {
        throw SimError(std::string("KERNEL_TASK_TYPE_DEFAULT(") +
                       (c.machine.mix() ? (aiv ? "KERNEL_TYPE_AIV_ONLY" : "KERNEL_TYPE_AIC_ONLY")
                                        : "KERNEL_TYPE_MIX_AIC_1_2") +
                       "): the kernel is launched " +
                       (c.machine.mix() ? "as a mix kernel" : "on one kind of core") +
                       "; run it with KernelMode::" +
                       (c.machine.mix() ? (aiv ? "AIV_MODE" : "AIC_MODE") : "MIX_MODE"));
    }
    if ((type == AscendC::KERNEL_TYPE_AIV_ONLY && !aiv) ||
        (type == AscendC::KERNEL_TYPE_AIC_ONLY && aiv)) {
        throw SimError(std::string("KERNEL_TASK_TYPE_DEFAULT(") +
                       (aiv ? "KERNEL_TYPE_AIC_ONLY" : "KERNEL_TYPE_AIV_ONLY") +
                       "): the kernel is launched on an " + (aiv ? "AIV" : "AIC") +
                       " core; run it with KernelMode::" + (aiv ? "AIC_MODE" : "AIV_MODE"));
    }
}

namespace detail {

/** Makes `context` current for the lifetime of the guard. */
class Current {
public:
    explicit Current(CoreContext &context) : previous(current_slot()) { current_slot() = &context; }
    ~Current() { current_slot() = previous; }
    Current(const Current &) = delete;
    Current &operator=(const Current &) = delete;

private:
    CoreContext *previous;
};

template <typename... Params, size_t... I>
void call(void (*kernel)(Params...), const std::vector<GM_ADDR> &args, std::index_sequence<I...>) {
    kernel(args[I]...);
}

} // namespace detail

/** One GM_ADDR argument: GM buffers (machine buffer ids) at byte offsets from its address. A
 * tensor is one buffer at 0; a mix kernel's workspace holds each of its workspaces in a buffer of
 * that workspace's type (the model types GM), at the offset the kernel adds. */
using GmArgument = std::vector<std::pair<int, int64_t>>;

/** Runs `kernel` once per core of `machine` that `mode` names (AIC_MODE: the cube cores,
 * AIV_MODE: the vector cores, MIX_MODE: both, launched as a mix kernel; GetBlockIdx() = the
 * index among them), its GM_ADDR arguments pointing at `arguments` (in the kernel's parameter
 * order); each core's program is ended (machine.run_core) when its kernel returns, then its flags
 * are checked (SimError for a SetFlag left unconsumed). A SimError from a call propagates and
 * leaves the core unrun. */
template <typename... Params>
void run_parts(Machine &machine, void (*kernel)(Params...),
               const std::vector<GmArgument> &arguments, AscendC::KernelMode mode) {
    static_assert((std::is_same_v<Params, GM_ADDR> && ...), "kernel parameters are GM_ADDR");
    if (arguments.size() != sizeof...(Params)) {
        throw SimError("tandem_ascend::run: the kernel takes " + std::to_string(sizeof...(Params)) +
                       " GM_ADDR arguments but " + std::to_string(arguments.size()) +
                       " were given");
    }
    std::vector<tandem::sim::ascend::CoreKind> kinds;
    if (mode != AscendC::KernelMode::AIV_MODE)
        kinds.push_back(tandem::sim::ascend::CoreKind::AIC);
    if (mode != AscendC::KernelMode::AIC_MODE)
        kinds.push_back(tandem::sim::ascend::CoreKind::AIV);
    if (mode == AscendC::KernelMode::MIX_MODE)
        machine.launch_mix();
    for (tandem::sim::ascend::CoreKind kind : kinds) {
        for (int block = 0; block < machine.cores_of(kind); block++) {
            const int core = machine.core_of(kind, block);
            CoreContext context(machine, core, block);
            std::vector<GM_ADDR> args;
            for (const GmArgument &argument : arguments) {
                // Without numerics there is no storage, and the parts of an argument are apart:
                // a distinct placeholder address (GlobalTensor maps it back to its buffer).
                const int first = argument.at(0).first;
                void *data = machine.data(first);
                const uintptr_t base = data && argument.size() == 1
                                           ? reinterpret_cast<uintptr_t>(data)
                                           : (uintptr_t(first) + 1) << 40;
                for (const auto &[buffer, offset] : argument) {
                    int64_t bytes =
                        machine.elements(buffer) * tandem::sim::bytes_of(machine.type(buffer));
                    context.gm.push_back({base + uintptr_t(offset), bytes, buffer});
                }
                args.push_back(reinterpret_cast<GM_ADDR>(base));
            }
            // The core stays current while it is simulated: vector ops' element loops run then.
            detail::Current guard(context);
            detail::call(kernel, args, std::index_sequence_for<Params...>{});
            machine.run_core(core);
            context.check_flags_consumed();
        }
    }
}

/** run_parts() with one GM buffer per argument. */
template <typename... Params>
void run(Machine &machine, void (*kernel)(Params...), const std::vector<int> &gm_buffers,
         AscendC::KernelMode mode) {
    std::vector<GmArgument> arguments;
    for (int buffer : gm_buffers)
        arguments.push_back({{buffer, 0}});
    run_parts(machine, kernel, arguments, mode);
}

} // namespace tandem_ascend

#endif
