#ifndef TANDEM_SIM_ASCEND_RUN_H
#define TANDEM_SIM_ASCEND_RUN_H

/** \file
 * Internal to the Ascend model: the recorded ops, a core's program and state (Core::State), the
 * machine's state (Machine::Impl) and the simulation of one core (Machine::Impl::CoreRun), shared
 * by the three files that define their members: AscendInstructions.cpp (recording each
 * instruction: its checks, cost and numerics), AscendScheduler.cpp (the discrete-event simulation
 * over the cores' pipes, time, the Machine API) and AscendChecks.cpp (races and deadlocks). The
 * model's semantics: Ascend.h.
 */

// The Ascend 910B (A2) AI-core machine model. See Ascend.h for the machine and its semantics;
// these files keep the bookkeeping. The race check, numerics and trace writer are shared with the
// ZPU and Hopper models (Hazards.h, Numerics.h, Trace.h).
//
// Choices this implementation makes (all visible to callers):
// - Recording: Core calls check their arguments at once (SimError from the call) and append one
//   op to the core's program. run_core ends the program (recording into it afterwards is an
//   error, and so is finish() while a core with a recorded program has not ended); finish() (or
//   write_trace) simulates the ended cores together: at each step the op that starts earliest
//   over all cores' pipes runs (ties: the earlier ended core, then as within a core).
// - Dispatch: the scalar stream (pipe S) walks the program in order and spends
//   scalar_issue_cycles on every op, flags and barriers included: op i (0-based) is dispatched at
//   (i + 1) * scalar_issue_cycles unless S blocked before it. Ops of S itself (SetFlag<S_X>,
//   WaitFlag<X_S>, PipeBarrier<PIPE_S>, PipeBarrier<PIPE_ALL>) run on S instead; a wait there
//   holds the dispatch of every later op.
// - Pipes: each runs its queue in program order; an op starts at max(pipe free, dispatched, and
//   for a WaitFlag the time its matching SetFlag fired) and holds the pipe for its cost. Ops run
//   in order of start time (ties: program order), and their numerics and accesses happen then.
//   Single pipe example: copy, SetFlag<MTE2_MTE1>, WaitFlag<MTE2_MTE1>, LoadData takes
//   scalar_issue + copy + flag + flag + load cycles.
// - Costs: a copy fixed + ceil(bytes / rate of its path) with bytes those written (Fixpipe: the
//   destination type's); Mmad cube_fixed + ceil(m/16) ceil(n/16) ceil(k/16); a vector op
//   vector_fixed + ceil(flops / rate); SetFlag and WaitFlag flag_cycles (a set fires at its end);
//   PipeBarrier pipe_barrier_cycles (PIPE_ALL on S after every pipe drained the ops before it).
// - Kinds: AIC cores have L1, L0A, L0B, L0C and the pipes S, MTE2, MTE1, M, FIX; AIV cores have
//   UB and S, MTE2, V, MTE3. A buffer, copy, flag or barrier the core's kind lacks is a SimError
//   when recorded. The kinds meet only in GM (no L1 <-> UB path on the 910B).
// - Paths (pipe, rate): GM->L1/L0A/L0B on MTE2 (gm_to_l1) and GM->UB (gm_to_ub); L1->L0A/L0B on
//   MTE1 (LoadData); UB->GM on MTE3; L0C->GM/L1 on FIX (both at l0c_to_gm), by Fixpipe only.
// - The cube's instructions work on fractal data (layouts in Ascend.h): nd2nz, load_data_2d,
//   mmad_fractal and fixpipe_nz2nd record one op each whose accesses cover whole fractals (the
//   padding the hardware reads and writes) and whose numerics follow the layouts exactly.
// - L2: a GM read (DataCopy from GM) costs copy_fixed + ceil(miss / HBM rate + hit / l2_read),
//   where hit counts the bytes in l2_line-sized lines of that buffer that some read started before
//   (any core, in the machine's time order) and miss the others; the lines it missed are then in
//   L2 while fewer than l2_bytes / l2_line are (no eviction). Writes do not allocate. data_copy
//   moves elements without conversion; only fixpipe converts (f32 -> bf16 or f32; the model has
//   no f16 type).
// - HBM: one queue shared by every core at hbm_bytes_per_cycle, served in the machine's time
//   order. A read's missed bytes take their turn in it (the read ends no earlier than its turn
//   plus copy_fixed); a write to GM (MTE3, Fixpipe) books its bytes as write-back without waiting
//   (it lands in L2), delaying the reads behind it. L2 likewise: one queue at
//   l2_bytes_per_cycle for every GM read (hits and misses) and write. A line a read missed is in
//   L2 only when that read ends: a read that hits it earlier waits for it (then its L2 time).
// - Flags: the k-th WaitFlag of (src, dst, id) matches the k-th SetFlag of it. Setting it while
//   an earlier set of it is not consumed by a wait recorded before is "set twice without a
//   wait". A wait recorded before its set is legal (the set may come from another pipe).
// - Happens-before: one vector clock per pipe (S included). A SetFlag carries its pipe's clock
//   (and ticks it); the matching WaitFlag joins it. Dispatch joins S's clock into the op, so ops
//   after a wait on S or a PIPE_ALL are ordered after what S joined. PIPE_ALL joins every pipe
//   into S (and ticks them). Ops of one pipe are ordered with each other, except V's: its
//   pipeline overlaps them, so a V op is ordered after an earlier one only by a
//   PipeBarrier<PIPE_V>, a PIPE_ALL, or a flag V set after it (clock entry V_DONE: how many V
//   ops are known complete).
// - Busy ("MTE2", "MTE1", "M", "FIX", "V", "MTE3", summed over cores) counts data and compute
//   ops only, not flags, waits or barriers; bound_cycles is the max over cores of the busiest.
// - Memories: add_local places a buffer at the next multiple of alignment(mem) of its core's
//   memory (padding counts against capacity); buffers are never freed. Boxes on L0A/L0B must
//   start at a multiple of l0ab_align bytes; other memories' box offsets are not checked. Data
//   is laid out as the boxes say (no fractal layouts).
// - Deadlock: when no pipe can start its next op, the core stops; the report names the core, the
//   cycle and, per blocked pipe, its WaitFlag<SRC_DST>(id) or PipeBarrier<PIPE_ALL> and label.
// - Races: once per (first op, second op, buffer); ops named "kind 'label' (pipe, core c)". GM
//   accesses of different cores are checked against each other at finish().
// - Trace: one process per core that ran, tracks VECTOR, SCALAR, CUBE, MTE1, MTE2, MTE3, FIXP;
//   SCALAR shows each dispatch; a WaitFlag's event spans the time its pipe waited.

#include "sim/Ascend.h"

#include "sim/Hazards.h"
#include "sim/Numerics.h"
#include "sim/Trace.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tandem::sim::ascend {

using detail::AccessRecord;
using detail::BufferHistory;
using detail::ceil_div;
using detail::ElementSet;

constexpr int kPipes = 7;      // S .. MTE3: the pipes that queue ops (ALL is not one)
constexpr int kVDone = kPipes; // the clock entry counting V ops known complete
constexpr int kAgents = kPipes + 1;
constexpr int kMems = 6;
constexpr int kMaxCores = 4096;
constexpr int kMaxEventIds = 64;
constexpr int kCrossFlags = 16; // cross-core flag ids per core (a larger id keeps its low 4 bits)
constexpr int kCrossCounterMax = 15; // a cross-core flag's counter: 0 .. 15
constexpr Pipe kWorkPipes[] = {Pipe::MTE2, Pipe::MTE1, Pipe::M, Pipe::FIX, Pipe::V, Pipe::MTE3};

// ---------------------------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------------------------

enum class OpKind : uint8_t {
    DataCopy,
    LoadData,
    Fixpipe,
    Mmad,
    Vector,
    SetFlag,
    WaitFlag,
    Barrier,
    CrossSet, // CrossCoreSetFlag<2, pipe>(flag): queued on its pipe
    CrossWait // CrossCoreWaitFlag(flag): on S, holds back every later op of the core
};

inline const char *op_kind_name(OpKind k) {
    switch (k) {
    case OpKind::DataCopy:
        return "DataCopy";
    case OpKind::LoadData:
        return "LoadData";
    case OpKind::Fixpipe:
        return "Fixpipe";
    case OpKind::Mmad:
        return "Mmad";
    case OpKind::Vector:
        return "vector";
    case OpKind::SetFlag:
        return "SetFlag";
    case OpKind::WaitFlag:
        return "WaitFlag";
    case OpKind::Barrier:
        return "PipeBarrier";
    case OpKind::CrossSet:
        return "CrossCoreSetFlag";
    case OpKind::CrossWait:
        return "CrossCoreWaitFlag";
    }
    return "?";
}

// Trace tracks of a core, in the order vendor simulators draw them.
const char *const kTrackNames[] = {"VECTOR", "SCALAR", "CUBE", "MTE1", "MTE2", "MTE3", "FIXP"};

inline int track_of(Pipe p) {
    switch (p) {
    case Pipe::V:
        return 0;
    case Pipe::S:
    case Pipe::ALL:
        return 1;
    case Pipe::M:
        return 2;
    case Pipe::MTE1:
        return 3;
    case Pipe::MTE2:
        return 4;
    case Pipe::MTE3:
        return 5;
    case Pipe::FIX:
        return 6;
    }
    return 1;
}

/** An op instance as races name it: kind, pipe, core, label, packed in 64 bits. */
struct OpName {
    OpKind kind;
    Pipe pipe;
    int core;
    uint32_t label;

    uint64_t pack() const {
        return uint64_t(label) << 32 | uint64_t(uint16_t(core)) << 16 | uint64_t(pipe) << 8 |
               uint64_t(kind);
    }
    static OpName unpack(uint64_t bits) {
        return {OpKind(bits & 0xff), Pipe((bits >> 8) & 0xff), int((bits >> 16) & 0xffff),
                uint32_t(bits >> 32)};
    }
};

/** One recorded op. Copies: dst <- src. Mmad: dst (c) <- src (a), src2 (b). */
struct Op {
    OpKind kind;
    Pipe pipe; // the pipe that runs it
    uint32_t label;
    Cycles cost = 0;
    int dst = -1, src = -1, src2 = -1;
    Box dst_box, src_box, src2_box;
    bool accumulate = false;
    std::vector<Access> accesses; // vector ops
    std::function<void()> compute;
    Pipe flag_src = Pipe::S, flag_dst = Pipe::S; // flags
    Pipe barrier = Pipe::S;                      // PipeBarrier's pipe
    int event = 0;
    int64_t ordinal = 0; // the ordinal-th set or wait of its flag
};

inline std::string flag_text(const char *kind, Pipe src, Pipe dst, int event) {
    return std::string(kind) + "<" + pipe_name(src) + "_" + pipe_name(dst) + ">(" +
           std::to_string(event) + ")";
}

inline std::string barrier_text(Pipe p) {
    return std::string("PipeBarrier<PIPE_") + pipe_name(p) + ">";
}

/** A set that fired: when, and the clock it releases to its waits. */
struct Fire {
    Cycles time;
    std::vector<int64_t> clock;
};

inline bool is_queue_pipe(Pipe p) {
    return p != Pipe::ALL && int(p) < kPipes;
}

// ---------------------------------------------------------------------------------------------
// Machine state
// ---------------------------------------------------------------------------------------------

struct Core::State {
    std::vector<Op> program;
    std::array<int64_t, kCrossFlags> cross_sets{},
        cross_waits{};                // per cross-core flag id, recorded so far
    std::vector<int64_t> sets, waits; // per flag key, recorded so far
    std::vector<uint32_t> last_set;   // per flag key: label of its latest set
    bool ran = false;
    Cycles end = 0;
    std::array<Cycles, kPipes> busy{};
    std::vector<BufferHistory> history; // by buffer id

    BufferHistory &history_of(int buffer) {
        if (size_t(buffer) >= history.size()) {
            history.resize(size_t(buffer) + 1);
        }
        return history[size_t(buffer)];
    }
};

struct Machine::Impl {
    struct Buffer {
        std::string name;
        DType type;
        Mem mem;
        int core; // -1: GM, shared by all cores
        int64_t elements;
        int64_t start; // byte offset in its core's memory
        std::unique_ptr<std::byte[]> data;
        bool written = false; // by some core (GM: enables the cross-core check)
    };

    Impl(const AscendParams &p, bool numerics_on, bool trace_on)
        : params(p), numerics(numerics_on), trace(trace_on),
          used(size_t(p.cube_cores + p.vector_cores), std::array<int64_t, kMems>{}),
          l2_lines(p.l2_line, p.l2_bytes) {}

    AscendParams params;
    bool numerics;
    detail::TraceLog trace;
    std::vector<Buffer> buffers;
    std::vector<std::array<int64_t, kMems>> used; // [core][Mem]: bytes allocated
    std::vector<std::unique_ptr<Core>> cores;
    detail::Labels labels;
    detail::RaceLog races;
    detail::MatrixMultiplier multiplier;
    bool deadlock = false;
    std::string deadlock_message;
    bool mix = false; // KERNEL_TYPE_MIX_AIC_1_2: cross-core flags join each AIC with its two AIVs
    std::vector<int> ended; // cores whose program ended, not simulated yet
    detail::L2Lines l2_lines;
    /** A bandwidth shared by every core: one queue served in the machine's time order. */
    struct Shared {
        double rate, free = 0, bytes = 0;
        /** Books `n` bytes from `start`; returns when they are through. */
        double book(Cycles start, int64_t n) {
            free = std::max(free, double(start)) + double(n) / rate;
            bytes += double(n);
            return free;
        }
    };
    Shared hbm{params.hbm_bytes_per_cycle}; // reads that missed L2, write-backs
    Shared l2{params.l2_bytes_per_cycle};   // every GM read and write

    CoreKind kind(int core) const {
        return core < params.cube_cores ? CoreKind::AIC : CoreKind::AIV;
    }
    /** "AIC 3", "AIV 0": the core's kind and its index among them (GetBlockIdx). */
    std::string core_text(int core) const {
        return std::string(core_kind_name(kind(core))) + " " +
               std::to_string(kind(core) == CoreKind::AIC ? core : core - params.cube_cores);
    }

    /** The cost of a GM read started at `start` (in the machine's time order): lines read before
     * by any core are in L2; the others come from HBM, in their turn, and are then in L2 while it
     * has room. */
    Cycles gm_read_cost(const Op &op, const Buffer &from, const Buffer &to, Cycles start);

    int flag_key(Pipe src, Pipe dst, int event) const {
        return (int(src) * kPipes + int(dst)) * params.event_ids + event;
    }

    std::string op_text(uint64_t packed) const;
    void add_race(uint64_t first, uint64_t second, int buffer);

    // --- recording ---------------------------------------------------------------------------

    [[noreturn]] void fail(const std::string &what, int core, const std::string &message) const;

    /** A pipe the core's kind lacks (MTE1, M, FIX on an AIV; V, MTE3 on an AIC). */
    void check_pipe(const std::string &what, int core, Pipe p) const;
    Core::State &recording(const std::string &what, int core);
    const Buffer &checked_buffer(const std::string &what, int core, const char *role, int buffer,
                                 const Box &box) const;

    /** L0A/L0B operands start at l0ab_align bytes (the buffer's start is aligned already). */
    void check_aligned(const std::string &what, int core, const char *role, const Buffer &b,
                       const Box &box) const;
    void data_copy(int core, int dst, const Box &dst_box, int src, const Box &src_box,
                   const std::string &label);

    // --- the real cube instructions on fractal data ------------------------------------------

    /** Elements of 32 bytes (a fractal row) of `type`. */
    static int64_t c0_of(DType type) { return 32 / bytes_of(type); }

    void nd2nz(int core, int dst, int64_t dst_offset, int src, int64_t src_offset, const Nd2Nz &p,
               const std::string &label);
    void load_data_transpose_8(int core, int dst, int64_t dst_offset, int src, int64_t src_offset,
                               const LoadDataTranspose8 &p, const std::string &label);
    void load_data_2d(int core, int dst, int64_t dst_offset, int src, int64_t src_offset,
                      const LoadData2D &p, const std::string &label);
    void mmad_fractal(int core, int c, int64_t c_offset, int a, int64_t a_offset, int b,
                      int64_t b_offset, int64_t m, int64_t n, int64_t k, bool accumulate,
                      const std::string &label);
    void fixpipe_nz2nd(int core, int dst, int64_t dst_offset, int src, int64_t src_offset,
                       const FixpipeNz2Nd &p, const std::string &label);

    /** The elements of one operand a vector call touches, in lane order (count form: contiguous;
     * repeat form: the first `mask` lanes of each repeat's eight 32-byte blocks). */
    static std::vector<int64_t> lanes(const VectorCall &c, const VectorOperand &o, int per_block);

    /** The boxes one operand touches (what the hazard checker sees). */
    static std::vector<Box> boxes(const VectorCall &c, const VectorOperand &o, int per_block);
    void vector_instruction(int core, const VectorCall &c);
    static std::vector<const VectorOperand *> operands(const VectorCall &c);
    void vector_op(int core, const std::string &label, int64_t work,
                   const std::vector<Access> &accesses, const std::function<void()> &compute);
    void flag(int core, bool set, Pipe src, Pipe dst, int event, const std::string &label);
    void pipe_barrier(int core, Pipe pipe);

    /** CrossCoreSetFlag<2, pipe>(flag) / CrossCoreWaitFlag(flag) of a mix kernel (mode 2: an AIC
     * and its two AIVs). */
    void cross_flag(int core, bool set, Pipe pipe, int flag, const std::string &label);

    // --- simulation --------------------------------------------------------------------------

    /** Mix groups: AIC i with AIV 2i and 2i + 1 (mode 2 of the cross-core flags). */
    int aic_of(int aiv) const { return (aiv - params.cube_cores) / 2; }
    int aiv_of(int aic, int sub) const { return params.cube_cores + 2 * aic + sub; }
    std::string cross_rule(int core) const;
    /** Per (core, flag): the increments of its counter that happened (a wait passes the n-th). */
    std::map<std::pair<int, int>, std::vector<Fire>> cross_counter;
    std::map<std::pair<int, int>, int64_t> cross_consumed;
    std::map<std::pair<int, int>, std::vector<Fire>>
        aiv_sets; // per (AIV, flag): its sets, for its AIC

    const std::vector<Fire> &cross_passes(int core, int flag);
    const Fire &cross_pass(int core, int flag, int64_t ordinal);
    void count_up(int core, int flag, Fire fire);
    bool cross_overflow = false;
    /** A cross-core set fired on `core`: an AIC's reaches both its AIVs; an AIV's reaches its AIC
     * once the other AIV has set the flag as often. */
    void cross_set(int core, int flag, Fire fire);

    class CoreRun;
    void run_core(int core);
    void simulate();

    void cross_core_races();
    /** A cross-core counter above zero when the kernel ends: reported as a deadlock (the
     * hardware's counter outlives the kernel). */
    void cross_flags_left();
};

/** Discrete-event simulation of one core's recorded program over its pipes' queues. */
class Machine::Impl::CoreRun {
public:
    /** `clocks`: the clock domain the core shares with the cores it synchronises with (its mix
     * group: the AIC and its two AIVs), its agents from `base`; `gm`: the state whose histories
     * hold the domain's GM accesses. */
    CoreRun(Impl &impl, int core, Core::State &state, detail::VectorClocks &clocks, int base,
            Core::State &gm);

    /** The pipe that starts the core's next op, and when; false when none can. */
    bool next(int &best, Cycles &best_at) const;

    /** After the last step: the core's end, and a deadlock if a pipe has work left. */
    void end();

private:
    bool done(int p) const { return next_[size_t(p)] >= queue_[size_t(p)].size(); }
    int head(int p) const { return queue_[size_t(p)][next_[size_t(p)]]; }

    /** Whether pipe p can start its next op, and when. */
    bool ready(int p, Cycles &at) const;

public:
    /** Starts pipe p's next op at `start` (from next()). */
    void step(int p, Cycles start);

private:
    // --- checks: accesses, deadlock -----------------------------------------------------

    /** An access by pipe `pipe`, recorded as agent `agent`'s `epoch` (default: the pipe's). */
    void access(int buffer, const Box &box, bool write, int pipe, uint64_t op, int agent = -1,
                int64_t epoch = 0);
    void report_deadlock(Cycles at);
    std::string why_not_fired(const Op &wait) const;

    // --- clocks -----------------------------------------------------------------------------

    int64_t *clock(int p) { return clocks_.clock(base_ + p); }
    int agents() const { return clocks_.agents(); }
    /** What a set queued on pipe p releases: p's clock; on V, once V's earlier ops are done. */
    std::vector<int64_t> released(int p);

    Impl &impl_;
    int core_;
    Core::State &state_, &gm_state_;
    const std::vector<Op> &program_;
    std::array<std::vector<int>, kPipes> queue_; // op indices; S holds every op
    std::array<size_t, kPipes> next_{};
    std::array<Cycles, kPipes> free_{};
    std::vector<Cycles> dispatched_;       // per op: when S dispatched it (-1: not yet)
    std::vector<int64_t> dispatch_clock_;  // per op: S's clock when it was dispatched
    std::vector<std::vector<Fire>> fires_; // per flag key: the sets that fired, in order
    detail::VectorClocks
        &clocks_; // the domain's; this core's agents: its pipes, then kVDone, from base_
    int base_;
    int64_t v_issued_ = 0; // V ops started so far
};

} // namespace tandem::sim::ascend

#endif
