// The Ascend 910B (A2) AI-core machine model. See Ascend.h for the machine and its semantics;
// this file keeps the bookkeeping. The race check, numerics and trace writer are shared with the
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

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <unordered_set>

namespace tandem::sim::ascend {

using detail::AccessRecord;
using detail::BufferHistory;
using detail::ceil_div;
using detail::ElementSet;

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

const char *core_kind_name(CoreKind k) {
    return k == CoreKind::AIC ? "AIC" : "AIV";
}

bool has_pipe(CoreKind k, Pipe p) {
    switch (p) {
    case Pipe::S:
    case Pipe::MTE2:
    case Pipe::ALL:
        return true;
    case Pipe::MTE1:
    case Pipe::M:
    case Pipe::FIX:
        return k == CoreKind::AIC;
    case Pipe::V:
    case Pipe::MTE3:
        return k == CoreKind::AIV;
    }
    return false;
}

bool has_memory(CoreKind k, Mem m) {
    switch (m) {
    case Mem::GM:
        return true;
    case Mem::L1:
    case Mem::L0A:
    case Mem::L0B:
    case Mem::L0C:
        return k == CoreKind::AIC;
    case Mem::UB:
        return k == CoreKind::AIV;
    }
    return false;
}

namespace {

constexpr int kPipes = 7;      // S .. MTE3: the pipes that queue ops (ALL is not one)
constexpr int kVDone = kPipes; // the clock entry counting V ops known complete
constexpr int kAgents = kPipes + 1;
constexpr int kMems = 6;
constexpr int kMaxCores = 4096;
constexpr int kMaxEventIds = 64;
constexpr int kCrossFlags = 16; // cross-core flag ids per core (a larger id keeps its low 4 bits)
constexpr int kCrossCounterMax = 15; // a cross-core flag's counter: 0 .. 15
constexpr Pipe kWorkPipes[] = {Pipe::MTE2, Pipe::MTE1, Pipe::M, Pipe::FIX, Pipe::V, Pipe::MTE3};

} // namespace

// ---------------------------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------------------------

namespace {

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

const char *op_kind_name(OpKind k) {
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

int track_of(Pipe p) {
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

std::string flag_text(const char *kind, Pipe src, Pipe dst, int event) {
    return std::string(kind) + "<" + pipe_name(src) + "_" + pipe_name(dst) + ">(" +
           std::to_string(event) + ")";
}

std::string barrier_text(Pipe p) {
    return std::string("PipeBarrier<PIPE_") + pipe_name(p) + ">";
}

/** A set that fired: when, and the clock it releases to its waits. */
struct Fire {
    Cycles time;
    std::vector<int64_t> clock;
};

bool is_queue_pipe(Pipe p) {
    return p != Pipe::ALL && int(p) < kPipes;
}

} // namespace

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
    Cycles gm_read_cost(const Op &op, const Buffer &from, const Buffer &to, Cycles start) {
        detail::L2Lines::Split split = l2_lines.read(op.src, op.src_box, bytes_of(from.type));
        Cycles own = params.gm_read_cycles(to.mem, split.miss, split.hit);
        double through = l2.book(start, split.miss + split.hit);
        if (split.fill > 0) {
            through = std::max(through, hbm.book(start, split.fill)); // whole lines come from HBM
        }
        Cycles cost = std::max(own, Cycles(std::ceil(through)) - start + params.copy_fixed);
        // A line another read brought in but not yet arrived: this read waits for it, then
        // takes its bytes from L2.
        if (split.ready > double(start)) {
            cost = std::max(cost, Cycles(std::ceil(split.ready)) - start +
                                      Cycles(std::ceil(double(split.hit) / params.l2_read)));
        }
        l2_lines.arrived(double(start + cost));
        return cost;
    }

    int flag_key(Pipe src, Pipe dst, int event) const {
        return (int(src) * kPipes + int(dst)) * params.event_ids + event;
    }

    std::string op_text(uint64_t packed) const {
        OpName op = OpName::unpack(packed);
        return std::string(op_kind_name(op.kind)) + " '" + labels.text(op.label) + "' (" +
               pipe_name(op.pipe) + ", " + core_text(op.core) + ")";
    }

    void add_race(uint64_t first, uint64_t second, int buffer) {
        races.add(first, second, buffer, [&] {
            return Race{op_text(first), op_text(second), buffers[size_t(buffer)].name, ""};
        });
    }

    // --- recording ---------------------------------------------------------------------------

    [[noreturn]] void fail(const std::string &what, int core, const std::string &message) const {
        throw SimError(what + " on " + core_text(core) + ": " + message);
    }

    /** A pipe the core's kind lacks (MTE1, M, FIX on an AIV; V, MTE3 on an AIC). */
    void check_pipe(const std::string &what, int core, Pipe p) const {
        if (!has_pipe(kind(core), p)) {
            fail(what, core,
                 std::string("pipe ") + pipe_name(p) + " is on the " +
                     (kind(core) == CoreKind::AIC ? "vector cores (AIV)" : "cube cores (AIC)") +
                     "; an " + core_kind_name(kind(core)) + " has " +
                     (kind(core) == CoreKind::AIC ? "S, MTE2, MTE1, M and FIX"
                                                  : "S, MTE2, V and MTE3"));
        }
    }

    Core::State &recording(const std::string &what, int core) {
        Core::State &state = *cores[size_t(core)]->state_;
        if (state.ran) {
            fail(what, core,
                 "the core already ran; record its whole program before run_core(" +
                     std::to_string(core) + ")");
        }
        return state;
    }

    const Buffer &checked_buffer(const std::string &what, int core, const char *role, int buffer,
                                 const Box &box) const {
        if (buffer < 0 || size_t(buffer) >= buffers.size()) {
            fail(what, core,
                 std::string(role) + " buffer id " + std::to_string(buffer) +
                     " does not exist (the machine has " + std::to_string(buffers.size()) +
                     " buffers)");
        }
        const Buffer &b = buffers[size_t(buffer)];
        if (b.core >= 0 && b.core != core) {
            fail(what, core,
                 std::string(role) + " buffer '" + b.name + "' is " + mem_name(b.mem) + " of " +
                     core_text(b.core) + "; a core can only touch its own local memories and GM");
        }
        std::string outside = detail::box_outside_error(role, box, b.name, b.elements);
        if (!outside.empty()) {
            fail(what, core, outside);
        }
        return b;
    }

    /** L0A/L0B operands start at l0ab_align bytes (the buffer's start is aligned already). */
    void check_aligned(const std::string &what, int core, const char *role, const Buffer &b,
                       const Box &box) const {
        if (b.mem != Mem::L0A && b.mem != Mem::L0B) {
            return;
        }
        int64_t byte = box.offset * bytes_of(b.type);
        if (byte % params.l0ab_align != 0) {
            fail(what, core,
                 std::string(role) + " box on buffer '" + b.name + "' (" + mem_name(b.mem) +
                     ") starts at byte " + std::to_string(byte) + " (element offset " +
                     std::to_string(box.offset) + "), which is not a multiple of " +
                     std::to_string(params.l0ab_align) + "; " + mem_name(b.mem) +
                     " operands start at " + std::to_string(params.l0ab_align) +
                     "-byte boundaries: pad the tile or move its offset");
        }
    }

    void data_copy(int core, int dst, const Box &dst_box, int src, const Box &src_box,
                   const std::string &label) {
        std::string what = "DataCopy '" + label + "'";
        Core::State &state = recording(what, core);
        const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
        const Buffer &from = checked_buffer(what, core, "source", src, src_box);
        const Path *path = find_path(from.mem, to.mem);
        if (!path) {
            fail(what, core,
                 std::string("no pipe copies ") + mem_name(from.mem) + " -> " + mem_name(to.mem) +
                     " ('" + from.name + "' -> '" + to.name + "'); the data paths are " +
                     paths_text());
        }
        what += std::string(" (") + pipe_name(path->pipe) + ")";
        if (from.mem == Mem::L0C) {
            fail(what, core, "only Fixpipe reads L0C (Nz -> ND, converting); use fixpipe_nz2nd");
        }
        if (to.type != from.type) {
            fail(what, core,
                 "destination '" + to.name + "' is " + dtype_name(to.type) + " but source '" +
                     from.name + "' is " + dtype_name(from.type) +
                     "; DataCopy moves elements without conversion (fixpipe converts from L0C)");
        }
        int64_t count = dst_box.elements();
        if (count != src_box.elements()) {
            fail(what, core,
                 "destination box " + dst_box.str() + " has " + std::to_string(count) +
                     " elements but source box " + src_box.str() + " has " +
                     std::to_string(src_box.elements()));
        }
        check_aligned(what, core, "destination", to, dst_box);
        check_aligned(what, core, "source", from, src_box);
        Op op;
        op.kind = path->pipe == Pipe::MTE1 && (to.mem == Mem::L0A || to.mem == Mem::L0B)
                      ? OpKind::LoadData
                      : OpKind::DataCopy;
        op.pipe = path->pipe;
        op.label = labels.id(label);
        op.cost = params.copy_cycles(from.mem, to.mem, count * bytes_of(to.type));
        op.dst = dst;
        op.dst_box = dst_box;
        op.src = src;
        op.src_box = src_box;
        state.program.push_back(std::move(op));
    }

    // --- the real cube instructions on fractal data ------------------------------------------

    /** Elements of 32 bytes (a fractal row) of `type`. */
    static int64_t c0_of(DType type) { return 32 / bytes_of(type); }

    void nd2nz(int core, int dst, int64_t dst_offset, int src, int64_t src_offset, const Nd2Nz &p,
               const std::string &label) {
        std::string what = "DataCopy '" + label + "' (Nd2Nz, MTE2)";
        Core::State &state = recording(what, core);
        if (p.n_value < 0 || p.d_value < 0 || p.dst_nz_c0_stride < 0 || p.dst_nz_n_stride < 1) {
            fail(what, core,
                 "nValue, dValue and the strides must not be negative (dstNzNStride >= 1)");
        }
        // Nd2NzParams' fields are 16 bits; nValue at most 16384 (the AscendC docs).
        if (p.n_value > 16384 || p.d_value > 65535 || p.src_d_value > 65535 ||
            p.dst_nz_c0_stride > 65535 || p.dst_nz_n_stride > 65535) {
            fail(what, core,
                 "nValue " + std::to_string(p.n_value) + ", dValue " + std::to_string(p.d_value) +
                     ", srcDValue " + std::to_string(p.src_d_value) + ", dstNzC0Stride " +
                     std::to_string(p.dst_nz_c0_stride) +
                     ": Nd2NzParams holds 16-bit fields (nValue at most 16384)");
        }
        const int64_t c0 =
            dst >= 0 && size_t(dst) < buffers.size() ? c0_of(buffers[size_t(dst)].type) : 1;
        const int64_t blocks = ceil_div(p.d_value, c0);
        Box dst_box{
            dst_offset,
            {{c0, 1}, {p.n_value, p.dst_nz_n_stride * c0}, {blocks, p.dst_nz_c0_stride * c0}}};
        Box src_box{src_offset, {{p.d_value, 1}, {p.n_value, p.src_d_value}}};
        const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
        const Buffer &from = checked_buffer(what, core, "source", src, src_box);
        if (to.mem != Mem::L1 || from.mem != Mem::GM || to.type != from.type) {
            fail(what, core,
                 "Nd2Nz copies GM to L1 without conversion; got " +
                     std::string(mem_name(from.mem)) + " " + dtype_name(from.type) + " -> " +
                     mem_name(to.mem) + " " + dtype_name(to.type));
        }
        if (p.dst_nz_c0_stride < p.n_value * p.dst_nz_n_stride && blocks > 1) {
            fail(what, core,
                 "dstNzC0Stride " + std::to_string(p.dst_nz_c0_stride) + " is less than the " +
                     std::to_string(p.n_value) + " rows a column block holds");
        }
        Op op;
        op.kind = OpKind::DataCopy;
        op.pipe = Pipe::MTE2;
        op.label = labels.id(label);
        op.cost = params.copy_cycles(Mem::GM, Mem::L1, p.n_value * blocks * 32);
        op.dst = dst;
        op.dst_box = dst_box;
        op.src = src;
        op.src_box = src_box;
        if (numerics && p.n_value > 0 && p.d_value > 0) {
            std::byte *d = to.data.get();
            const std::byte *s = from.data.get();
            const int64_t e = bytes_of(to.type);
            op.compute = [d, s, e, c0, blocks, p, dst_offset, src_offset] {
                for (int64_t n = 0; n < p.n_value; ++n) {
                    for (int64_t col = 0; col < blocks * c0; ++col) {
                        std::byte *out = d + (dst_offset + (col / c0) * p.dst_nz_c0_stride * c0 +
                                              n * p.dst_nz_n_stride * c0 + col % c0) *
                                                 e;
                        if (col < p.d_value) {
                            std::memcpy(out, s + (src_offset + n * p.src_d_value + col) * e,
                                        size_t(e));
                        } else {
                            std::memset(out, 0, size_t(e)); // padded to 32 bytes with zeros
                        }
                    }
                }
            };
        }
        state.program.push_back(std::move(op));
    }

    void load_data_2d(int core, int dst, int64_t dst_offset, int src, int64_t src_offset,
                      const LoadData2D &p, const std::string &label) {
        std::string what = "LoadData '" + label + "' (MTE1)";
        recording(what, core);
        if (p.repeat_times < 0 || p.repeat_times > 255 || p.start_index < 0 ||
            p.start_index > 65535 || p.src_stride < 0 || p.src_stride > 65535 || p.dst_gap < 0 ||
            p.dst_gap > 65535) {
            fail(what, core,
                 "repeatTimes must be in 0..255 (one 512-byte fractal each) and startIndex, "
                 "srcStride and dstGap in 0..65535 (LoadData2DParams' field widths)");
        }
        const DType type =
            dst >= 0 && size_t(dst) < buffers.size() ? buffers[size_t(dst)].type : DType::BF16;
        const int64_t fractal = 512 / bytes_of(type);
        if (p.transpose && bytes_of(type) != 2) {
            fail(what, core,
                 "ifTranspose transposes 16 x 16 fractals of 16-bit data; " +
                     std::string(dtype_name(type)) + " takes LoadDataWithTranspose");
        }
        Box dst_box, src_box;
        const int64_t first = src_offset + p.start_index * fractal;
        if (p.transpose) {
            dst_box = {dst_offset,
                       {{16, 1}, {16, 16}, {p.repeat_times, (1 + p.dst_gap) * fractal}}};
            src_box = {first, {{16, 16}, {16, 1}, {p.repeat_times, p.src_stride * fractal}}};
        } else {
            dst_box = {dst_offset, {{fractal, 1}, {p.repeat_times, (1 + p.dst_gap) * fractal}}};
            src_box = {first, {{fractal, 1}, {p.repeat_times, p.src_stride * fractal}}};
        }
        const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
        checked_buffer(what, core, "source", src, src_box);
        if (to.mem != Mem::L0A && to.mem != Mem::L0B) {
            fail(what, core,
                 "LoadData2D loads L0A or L0B; '" + to.name + "' is in " + mem_name(to.mem));
        }
        data_copy(core, dst, dst_box, src, src_box, label);
    }

    void mmad_fractal(int core, int c, int64_t c_offset, int a, int64_t a_offset, int b,
                      int64_t b_offset, int64_t m, int64_t n, int64_t k, bool accumulate,
                      const std::string &label) {
        std::string what = "Mmad '" + label + "' (M)";
        Core::State &state = recording(what, core);
        if (m < 0 || n < 0 || k < 0 || m > 4095 || n > 4095 || k > 4095) {
            fail(what, core, "MmadParams m, n and k must be in 0..4095");
        }
        const DType type =
            a >= 0 && size_t(a) < buffers.size() ? buffers[size_t(a)].type : DType::BF16;
        const int64_t c0 = c0_of(type);
        const int64_t mp = ceil_div(m, 16) * 16, np = ceil_div(n, 16) * 16,
                      kp = ceil_div(k, c0) * c0;
        Box c_box{c_offset, {{mp * np, 1}}}, a_box{a_offset, {{mp * kp, 1}}},
            b_box{b_offset, {{kp * np, 1}}};
        const Buffer &cb = checked_buffer(what, core, "c", c, c_box);
        const Buffer &ab = checked_buffer(what, core, "a", a, a_box);
        const Buffer &bb = checked_buffer(what, core, "b", b, b_box);
        if (cb.mem != Mem::L0C || ab.mem != Mem::L0A || bb.mem != Mem::L0B) {
            fail(what, core,
                 "Mmad takes c from L0C, a from L0A and b from L0B; got " +
                     std::string(mem_name(cb.mem)) + ", " + mem_name(ab.mem) + ", " +
                     mem_name(bb.mem));
        }
        std::string types =
            detail::mma_type_error(cb.name, cb.type, ab.name, ab.type, bb.name, bb.type, "Mmad");
        if (!types.empty() || ab.type != bb.type) {
            fail(what, core, types.empty() ? "a and b must have one type" : types);
        }
        check_aligned(what, core, "a", ab, a_box);
        check_aligned(what, core, "b", bb, b_box);
        Op op;
        op.kind = OpKind::Mmad;
        op.pipe = Pipe::M;
        op.label = labels.id(label);
        op.cost = params.mmad_cycles(m, n, k, type);
        op.dst = c;
        op.dst_box = c_box;
        op.src = a;
        op.src_box = a_box;
        op.src2 = b;
        op.src2_box = b_box;
        op.accumulate = accumulate;
        if (numerics && m > 0 && n > 0) {
            float *cd = reinterpret_cast<float *>(cb.data.get());
            const std::byte *ad = ab.data.get(), *bd = bb.data.get();
            const int64_t e = bytes_of(type);
            Impl *impl = this;
            op.compute = [=] {
                // Gather the fractal operands into dense a(k, m), b(n, k), c(n, m), multiply,
                // scatter.
                std::vector<std::byte> ga(size_t(k * m * e)), gb(size_t(n * k * e));
                std::vector<float> gc(size_t(n * m));
                for (int64_t mi = 0; mi < m; ++mi)
                    for (int64_t ki = 0; ki < k; ++ki)
                        std::memcpy(&ga[size_t((mi * k + ki) * e)],
                                    ad + (a_offset + (mi / 16) * kp * 16 + (ki / c0) * 16 * c0 +
                                          (mi % 16) * c0 + ki % c0) *
                                             e,
                                    size_t(e));
                for (int64_t ki = 0; ki < k; ++ki)
                    for (int64_t ni = 0; ni < n; ++ni)
                        std::memcpy(&gb[size_t((ki * n + ni) * e)],
                                    bd + (b_offset + (ki / c0) * np * c0 + (ni / 16) * 16 * c0 +
                                          (ni % 16) * c0 + ki % c0) *
                                             e,
                                    size_t(e));
                auto c_at = [&](int64_t mi, int64_t ni) -> float & {
                    return cd[c_offset + (ni / 16) * mp * 16 + mi * 16 + ni % 16];
                };
                for (int64_t mi = 0; mi < m; ++mi)
                    for (int64_t ni = 0; ni < n; ++ni)
                        gc[size_t(mi * n + ni)] = c_at(mi, ni);
                impl->multiplier.multiply_add(reinterpret_cast<std::byte *>(gc.data()),
                                              Box{0, {{n, 1}, {m, n}}}, ga.data(), type,
                                              Box{0, {{k, 1}, {m, k}}}, gb.data(), type,
                                              Box{0, {{n, 1}, {k, n}}}, accumulate);
                for (int64_t mi = 0; mi < m; ++mi)
                    for (int64_t ni = 0; ni < n; ++ni)
                        c_at(mi, ni) = gc[size_t(mi * n + ni)];
            };
        }
        state.program.push_back(std::move(op));
    }

    void fixpipe_nz2nd(int core, int dst, int64_t dst_offset, int src, int64_t src_offset,
                       const FixpipeNz2Nd &p, const std::string &label) {
        std::string what = "Fixpipe '" + label + "' (FIX)";
        Core::State &state = recording(what, core);
        if (p.n_size < 0 || p.m_size < 0 || p.src_stride < 0 || p.dst_stride < 0 ||
            p.n_size > 65535 || p.m_size > 65535 || p.src_stride > 65535 ||
            p.dst_stride > 0xffffffffLL) {
            fail(what, core,
                 "nSize, mSize and srcStride must be in 0..65535 and dstStride in 32 bits "
                 "(FixpipeParamsV220's field widths)");
        }
        if (p.src_stride < p.m_size && p.n_size > 16) {
            fail(what, core,
                 "srcStride " + std::to_string(p.src_stride) + " is less than mSize " +
                     std::to_string(p.m_size) + ": L0C column blocks would overlap");
        }
        Box src_box{src_offset,
                    {{16, 1}, {p.m_size, 16}, {ceil_div(p.n_size, 16), p.src_stride * 16}}};
        Box dst_box{dst_offset, {{p.n_size, 1}, {p.m_size, p.dst_stride}}};
        const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
        const Buffer &from = checked_buffer(what, core, "source", src, src_box);
        if (from.mem != Mem::L0C || from.type != DType::F32) {
            fail(what, core,
                 "fixpipe reads f32 from L0C; '" + from.name + "' is " + dtype_name(from.type) +
                     " in " + mem_name(from.mem));
        }
        if (to.mem != Mem::GM || (to.type != DType::BF16 && to.type != DType::F32)) {
            fail(what, core,
                 "Fixpipe (CFG_ROW_MAJOR) writes bf16 (F322BF16) or f32 (NoQuant) to GM; '" +
                     to.name + "' is " + dtype_name(to.type) + " in " + mem_name(to.mem));
        }
        Op op;
        op.kind = OpKind::Fixpipe;
        op.pipe = Pipe::FIX;
        op.label = labels.id(label);
        op.cost = params.copy_cycles(Mem::L0C, Mem::GM, p.m_size * p.n_size * bytes_of(to.type));
        op.dst = dst;
        op.dst_box = dst_box;
        op.src = src;
        op.src_box = src_box;
        if (numerics && p.m_size > 0 && p.n_size > 0) {
            std::byte *d = to.data.get();
            const float *s = reinterpret_cast<const float *>(from.data.get());
            const bool bf16 = to.type == DType::BF16;
            op.compute = [=] {
                for (int64_t mi = 0; mi < p.m_size; ++mi) {
                    for (int64_t ni = 0; ni < p.n_size; ++ni) {
                        float v = s[src_offset + (ni / 16) * p.src_stride * 16 + mi * 16 + ni % 16];
                        if (p.relu)
                            v = std::max(v, 0.0f);
                        int64_t at = dst_offset + mi * p.dst_stride + ni;
                        if (bf16) {
                            uint16_t bits = float_to_bf16(v);
                            std::memcpy(d + at * 2, &bits, 2);
                        } else {
                            std::memcpy(d + at * 4, &v, 4);
                        }
                    }
                }
            };
        }
        state.program.push_back(std::move(op));
    }

    /** The elements of one operand a vector call touches, in lane order (count form: contiguous;
     * repeat form: the first `mask` lanes of each repeat's eight 32-byte blocks). */
    static std::vector<int64_t> lanes(const VectorCall &c, const VectorOperand &o, int per_block) {
        std::vector<int64_t> at;
        if (c.count >= 0) {
            for (int64_t i = 0; i < c.count; ++i)
                at.push_back(o.offset + i);
            return at;
        }
        for (int64_t r = 0; r < c.repeats; ++r) {
            for (int j = 0; j < c.mask; ++j) {
                at.push_back(o.offset + r * o.repeat_stride * per_block +
                             (j / per_block) * o.block_stride * per_block + j % per_block);
            }
        }
        return at;
    }

    /** The boxes one operand touches (what the hazard checker sees). */
    static std::vector<Box> boxes(const VectorCall &c, const VectorOperand &o, int per_block) {
        if (c.count >= 0)
            return {Box{o.offset, {{c.count, 1}}}};
        const int64_t full = c.mask / per_block, part = c.mask % per_block;
        std::vector<Box> out;
        const Dim repeat{c.repeats, int64_t(o.repeat_stride) * per_block};
        if (full > 0)
            out.push_back(Box{
                o.offset, {{per_block, 1}, {full, int64_t(o.block_stride) * per_block}, repeat}});
        if (part > 0)
            out.push_back(Box{o.offset + full * o.block_stride * per_block, {{part, 1}, repeat}});
        return out;
    }

    void vector_instruction(int core, const VectorCall &c) {
        struct Shape {
            size_t sources;
            double weight; // cost units per lane byte
        };
        static const std::map<std::string, Shape> shapes = {
            {"Add", {2, 1}},  {"Sub", {2, 1}},       {"Mul", {2, 1}},     {"Div", {2, 2}},
            {"Max", {2, 1}},  {"Min", {2, 1}},       {"Adds", {1, 1}},    {"Muls", {1, 1}},
            {"Maxs", {1, 1}}, {"Mins", {1, 1}},      {"Exp", {1, 2}},     {"Ln", {1, 2}},
            {"Sqrt", {1, 2}}, {"Abs", {1, 1}},       {"Relu", {1, 1}},    {"Duplicate", {0, 1}},
            {"Brcb", {1, 1}}, {"ReduceSum", {2, 2}}, {"Compare", {2, 1}}, {"Select", {3, 1}},
            {"Cast", {1, 1}}};
        const std::string what = "vector " + c.op;
        auto shape = shapes.find(c.op);
        if (shape == shapes.end())
            fail(what, core, "no such vector instruction in the model");
        if (c.srcs.size() != shape->second.sources)
            fail(what, core, "takes " + std::to_string(shape->second.sources) + " source tensors");
        const bool brcb = c.op == "Brcb", reduce = c.op == "ReduceSum", compare = c.op == "Compare",
                   select = c.op == "Select", cast = c.op == "Cast";
        if (c.count < 0) {
            if (reduce || compare || select || cast)
                fail(what, core, "is used here in its count form only");
            if (c.repeats < 0 || c.repeats > 255)
                fail(what, core,
                     "repeatTime " + std::to_string(c.repeats) + " is outside 0..255 (uint8_t)");
            if (!brcb && (c.mask < 1 || c.mask > 64))
                fail(what, core,
                     "mask " + std::to_string(c.mask) +
                         " is outside 1..64 (f32 lanes of a repeat)");
            for (const VectorOperand *o : operands(c)) {
                if (o->block_stride < 0 || o->repeat_stride < 0 ||
                    o->repeat_stride > (brcb ? 65535 : 255) || o->block_stride > 65535)
                    fail(what, core, "a stride is outside its field's range");
            }
            if (c.dst.block_stride == 0)
                fail(what, core, "dstBlkStride 0 is not allowed");
        } else if (brcb) {
            fail(what, core, "has no count form");
        }
        if (compare && c.count % 64 != 0)
            fail(what, core,
                 "count " + std::to_string(c.count) +
                     " is not a multiple of 64: Compare's count form compares whole 256-byte "
                     "repeats");
        if (select && c.mode != 2)
            fail(what, core, "only VSEL_TENSOR_TENSOR_MODE (2) is in the model");
        if (compare && (c.mode < 0 || c.mode > 5))
            fail(what, core, "CMPMODE " + std::to_string(c.mode) + " is unknown");
        if (cast && c.mode != 1)
            fail(what, core,
                 "only RoundMode::CAST_RINT (1) from float to bfloat16_t is in the model");

        // Operands, their types and places.
        std::vector<Access> accesses;
        auto check = [&](const VectorOperand &o, bool write, bool is_mask,
                         const char *role) -> const Buffer & {
            if (o.buffer < 0 || size_t(o.buffer) >= buffers.size())
                fail(what, core,
                     std::string(role) + " buffer id " + std::to_string(o.buffer) +
                         " does not exist");
            const Buffer &b = buffers[size_t(o.buffer)];
            const DType want = is_mask ? DType::U8 : cast && write ? DType::BF16 : DType::F32;
            if (b.mem != Mem::UB || b.type != want)
                fail(what, core,
                     std::string(role) + " '" + b.name + "' is " + dtype_name(b.type) + " in " +
                         mem_name(b.mem) + "; it takes " + dtype_name(want) + " UB tensors");
            const int64_t byte = o.offset * bytes_of(b.type);
            const int64_t align = reduce && write ? 4 : 32;
            if (byte % align != 0)
                fail(what, core,
                     std::string(role) + " '" + b.name + "' starts at byte " +
                         std::to_string(byte) + ": AscendC's vector operands start on " +
                         std::to_string(align) + "-byte boundaries");
            std::vector<Box> touched;
            if (is_mask) {
                touched.push_back(Box{o.offset, {{(c.count + 7) / 8, 1}}});
            } else if (brcb && write) {
                touched.push_back(Box{o.offset,
                                      {{8, 1},
                                       {8, int64_t(o.block_stride) * 8},
                                       {c.repeats, int64_t(o.repeat_stride) * 8}}});
            } else if (brcb) {
                touched.push_back(Box{o.offset, {{8 * c.repeats, 1}}});
            } else if (reduce && write) {
                touched.push_back(Box{o.offset, {{1, 1}}});
            } else if (reduce && &o == &c.srcs[1]) {
                // sharedTmpBuffer: the count form does not use it on the 910B
            } else {
                touched = boxes(c, o, 8);
            }
            for (const Box &box : touched) {
                checked_buffer(what, core, role, o.buffer, box);
                accesses.push_back({o.buffer, box, write});
            }
            return b;
        };
        check(c.dst, true, compare, "destination");
        for (size_t i = 0; i < c.srcs.size(); ++i)
            check(c.srcs[i], false, select && i == 0, "source");

        const int64_t lanes_done =
            c.count >= 0 ? c.count : c.repeats * 64; // a repeat costs all its lanes
        const int64_t work = int64_t(std::ceil(double(lanes_done) * 4 * shape->second.weight));
        std::function<void()> compute;
        if (numerics) {
            auto data = [&](const VectorOperand &o) {
                return buffers[size_t(o.buffer)].data.get();
            };
            std::byte *out = data(c.dst);
            std::vector<const std::byte *> in;
            for (const VectorOperand &o : c.srcs)
                in.push_back(data(o));
            if (brcb) {
                const VectorOperand d = c.dst, src = c.srcs[0];
                const int64_t repeats = c.repeats;
                compute = [out, in, d, src, repeats] {
                    const float *s = reinterpret_cast<const float *>(in[0]);
                    float *o = reinterpret_cast<float *>(out);
                    for (int64_t r = 0; r < repeats; ++r)
                        for (int j = 0; j < 8; ++j)
                            for (int l = 0; l < 8; ++l)
                                o[d.offset + r * d.repeat_stride * 8 + j * d.block_stride * 8 + l] =
                                    s[src.offset + r * 8 + j];
                };
            } else if (reduce) {
                const int64_t count = c.count, dst = c.dst.offset, src = c.srcs[0].offset;
                compute = [out, in, count, dst, src] {
                    const float *s = reinterpret_cast<const float *>(in[0]) + src;
                    float total = 0;
                    for (int64_t base = 0; base < count; base += 64) { // a tree within each repeat
                        float level[64];
                        int n = int(std::min<int64_t>(64, count - base));
                        for (int i = 0; i < n; ++i)
                            level[i] = s[base + i];
                        while (n > 1) {
                            const int half = (n + 1) / 2;
                            for (int i = 0; i + half < n; ++i)
                                level[i] = level[i] + level[i + half];
                            n = half;
                        }
                        total = base == 0 ? level[0] : total + level[0]; // the repeats in order
                    }
                    reinterpret_cast<float *>(out)[dst] = count > 0 ? total : 0.0f;
                };
            } else if (compare) {
                const int64_t count = c.count, dst = c.dst.offset, a = c.srcs[0].offset,
                              b = c.srcs[1].offset;
                const int mode = c.mode;
                compute = [out, in, count, dst, a, b, mode] {
                    const float *x = reinterpret_cast<const float *>(in[0]) + a;
                    const float *y = reinterpret_cast<const float *>(in[1]) + b;
                    uint8_t *bits = reinterpret_cast<uint8_t *>(out) + dst;
                    for (int64_t i = 0; i < count; i += 8)
                        bits[i / 8] = 0;
                    for (int64_t i = 0; i < count; ++i) {
                        const bool r = mode == 0   ? x[i] < y[i]
                                       : mode == 1 ? x[i] > y[i]
                                       : mode == 2 ? x[i] == y[i]
                                       : mode == 3 ? x[i] <= y[i]
                                       : mode == 4 ? x[i] >= y[i]
                                                   : x[i] != y[i];
                        if (r)
                            bits[i / 8] = uint8_t(bits[i / 8] | (1u << (i % 8)));
                    }
                };
            } else if (cast) {
                const int64_t count = c.count, dst = c.dst.offset, src = c.srcs[0].offset;
                compute = [out, in, count, dst, src] {
                    const float *x = reinterpret_cast<const float *>(in[0]) + src;
                    uint16_t *o = reinterpret_cast<uint16_t *>(out) + dst;
                    for (int64_t i = 0; i < count; ++i)
                        o[i] = float_to_bf16(x[i]); // CAST_RINT: ties to even
                };
            } else if (select) {
                const int64_t count = c.count, dst = c.dst.offset, m = c.srcs[0].offset,
                              a = c.srcs[1].offset, b = c.srcs[2].offset;
                compute = [out, in, count, dst, m, a, b] {
                    const uint8_t *bits = reinterpret_cast<const uint8_t *>(in[0]) + m;
                    const float *x = reinterpret_cast<const float *>(in[1]) + a;
                    const float *y = reinterpret_cast<const float *>(in[2]) + b;
                    float *o = reinterpret_cast<float *>(out) + dst;
                    for (int64_t i = 0; i < count; ++i)
                        o[i] = (bits[i / 8] >> (i % 8)) & 1 ? x[i] : y[i];
                };
            } else {
                static const std::vector<std::string> order = {
                    "Add", "Adds", "Sub", "Mul", "Muls", "Div", "Max",  "Maxs",
                    "Min", "Mins", "Exp", "Ln",  "Sqrt", "Abs", "Relu", "Duplicate"};
                const int code = int(std::find(order.begin(), order.end(), c.op) - order.begin());
                const std::vector<int64_t> d = lanes(c, c.dst, 8);
                std::vector<std::vector<int64_t>> s;
                for (const VectorOperand &o : c.srcs)
                    s.push_back(lanes(c, o, 8));
                const float scalar = c.scalar;
                compute = [code, in, out, scalar, d, s] {
                    const float *x = in.empty() ? nullptr : reinterpret_cast<const float *>(in[0]);
                    const float *y =
                        in.size() > 1 ? reinterpret_cast<const float *>(in[1]) : nullptr;
                    float *o = reinterpret_cast<float *>(out);
                    // Every lane reads before any writes: a source may be the destination.
                    std::vector<float> result(d.size());
                    for (size_t i = 0; i < d.size(); ++i) {
                        const float a = x ? x[s[0][i]] : 0.0f, b = y ? y[s[1][i]] : scalar;
                        float r = scalar; // Duplicate
                        switch (code) {
                        case 0:
                        case 1:
                            r = a + b;
                            break;
                        case 2:
                            r = a - b;
                            break;
                        case 3:
                        case 4:
                            r = a * b;
                            break;
                        case 5:
                            r = a / b;
                            break;
                        case 6:
                        case 7:
                            r = std::max(a, b);
                            break;
                        case 8:
                        case 9:
                            r = std::min(a, b);
                            break;
                        case 10:
                            r = std::exp(a);
                            break;
                        case 11:
                            r = std::log(a);
                            break;
                        case 12:
                            r = std::sqrt(a);
                            break;
                        case 13:
                            r = std::abs(a);
                            break;
                        case 14:
                            r = std::max(a, 0.0f);
                            break;
                        }
                        result[i] = r;
                    }
                    for (size_t i = 0; i < d.size(); ++i)
                        o[d[i]] = result[i];
                };
            }
        }
        vector_op(core, c.op + " " + buffers[size_t(c.dst.buffer)].name, work, accesses, compute);
    }

    static std::vector<const VectorOperand *> operands(const VectorCall &c) {
        std::vector<const VectorOperand *> all = {&c.dst};
        for (const VectorOperand &o : c.srcs)
            all.push_back(&o);
        return all;
    }

    void vector_op(int core, const std::string &label, int64_t work,
                   const std::vector<Access> &accesses, const std::function<void()> &compute) {
        std::string what = "vector '" + label + "' (V)";
        Core::State &state = recording(what, core);
        check_pipe(what, core, Pipe::V);
        if (work < 0) {
            fail(what, core, "negative work " + std::to_string(work));
        }
        for (const Access &x : accesses) {
            const Buffer &b =
                checked_buffer(what, core, x.write ? "written" : "read", x.buffer, x.box);
            if (b.mem != Mem::UB) {
                fail(what, core,
                     "buffer '" + b.name + "' is in " + mem_name(b.mem) +
                         "; vector ops read and write UB only");
            }
        }
        Op op;
        op.kind = OpKind::Vector;
        op.pipe = Pipe::V;
        op.label = labels.id(label);
        op.cost = params.vector_cycles(work);
        op.accesses = accesses;
        op.compute = compute;
        state.program.push_back(std::move(op));
    }

    void flag(int core, bool set, Pipe src, Pipe dst, int event, const std::string &label) {
        const char *kind = set ? "SetFlag" : "WaitFlag";
        std::string text = flag_text(kind, src, dst, event);
        std::string what = text + (label.empty() ? "" : " '" + label + "'");
        Core::State &state = recording(what, core);
        if (!is_queue_pipe(src) || !is_queue_pipe(dst) || src == dst) {
            fail(what, core,
                 "a flag joins two different pipes among S, MTE2, MTE1, M, FIX, V, MTE3; use "
                 "PipeBarrier to order a pipe with itself or PIPE_ALL to drain all");
        }
        if (event < 0 || event >= params.event_ids) {
            fail(what, core,
                 "event id " + std::to_string(event) + " is outside 0.." +
                     std::to_string(params.event_ids - 1) + " (" +
                     std::to_string(params.event_ids) + " event ids per pipe pair)");
        }
        check_pipe(what, core, src);
        check_pipe(what, core, dst);
        size_t key = size_t(flag_key(src, dst, event));
        Op op;
        op.kind = set ? OpKind::SetFlag : OpKind::WaitFlag;
        op.pipe = set ? src : dst;
        op.label = labels.id(label.empty() ? text : label);
        op.cost = params.flag_cycles;
        op.flag_src = src;
        op.flag_dst = dst;
        op.event = event;
        if (set) {
            if (state.sets[key] - state.waits[key] > 0) {
                fail(what, core,
                     "set twice without a wait: the previous " +
                         flag_text("SetFlag", src, dst, event) + " '" +
                         labels.text(state.last_set[key]) +
                         "' is not consumed by a WaitFlag recorded since; wait for it first "
                         "(or use another event id)");
            }
            state.last_set[key] = op.label;
            op.ordinal = state.sets[key]++;
        } else {
            op.ordinal = state.waits[key]++;
        }
        state.program.push_back(std::move(op));
    }

    void pipe_barrier(int core, Pipe pipe) {
        std::string what = barrier_text(pipe);
        Core::State &state = recording(what, core);
        if (pipe != Pipe::ALL && !is_queue_pipe(pipe)) {
            fail(what, core, "no such pipe");
        }
        check_pipe(what, core, pipe);
        Op op;
        op.kind = OpKind::Barrier;
        op.pipe = pipe == Pipe::ALL ? Pipe::S : pipe;
        op.barrier = pipe;
        op.label = labels.id(what);
        op.cost = params.pipe_barrier_cycles;
        state.program.push_back(std::move(op));
    }

    /** CrossCoreSetFlag<2, pipe>(flag) / CrossCoreWaitFlag(flag) of a mix kernel (mode 2: an AIC
     * and its two AIVs). */
    void cross_flag(int core, bool set, Pipe pipe, int flag, const std::string &label) {
        std::string text = set ? std::string("CrossCoreSetFlag<2, PIPE_") + pipe_name(pipe) + ">(" +
                                     std::to_string(flag) + ")"
                               : "CrossCoreWaitFlag(" + std::to_string(flag) + ")";
        std::string what = text + (label.empty() ? "" : " '" + label + "'");
        Core::State &state = recording(what, core);
        if (!mix) {
            fail(what, core,
                 "cross-core flags need a mix kernel (KERNEL_TYPE_MIX_AIC_1_2: an AIC and its two "
                 "AIVs); "
                 "this launch is AIC-only or AIV-only");
        }
        if (set && (pipe == Pipe::S || pipe == Pipe::ALL)) {
            fail(what, core,
                 "a cross-core set is queued on PIPE_V, M, MTE1, MTE2, MTE3 or FIX, not PIPE_S or "
                 "PIPE_ALL");
        }
        if (set) {
            check_pipe(what, core, pipe);
        }
        Op op;
        op.kind = set ? OpKind::CrossSet : OpKind::CrossWait;
        op.pipe = set ? pipe : Pipe::S; // a wait stalls the issue of every later instruction
        op.label = labels.id(label.empty() ? text : label);
        op.cost = params.flag_cycles;
        op.event = flag & (kCrossFlags - 1); // the hardware keeps the id's low 4 bits
        op.ordinal = (set ? state.cross_sets : state.cross_waits)[size_t(op.event)]++;
        state.program.push_back(std::move(op));
    }

    // --- simulation --------------------------------------------------------------------------

    /** Mix groups: AIC i with AIV 2i and 2i + 1 (mode 2 of the cross-core flags). */
    int aic_of(int aiv) const { return (aiv - params.cube_cores) / 2; }
    int aiv_of(int aic, int sub) const { return params.cube_cores + 2 * aic + sub; }
    std::string cross_rule(int core) const {
        return kind(core) == CoreKind::AIC
                   ? "an AIC's counter moves when both its AIVs (" + core_text(aiv_of(core, 0)) +
                         ", " + core_text(aiv_of(core, 1)) + ") have set the flag"
                   : "an AIV's counter moves when its AIC (" + core_text(aic_of(core)) +
                         ") sets the flag";
    }
    /** Per (core, flag): the increments of its counter that happened (a wait passes the n-th). */
    std::map<std::pair<int, int>, std::vector<Fire>> cross_counter;
    std::map<std::pair<int, int>, int64_t> cross_consumed;
    std::map<std::pair<int, int>, std::vector<Fire>>
        aiv_sets; // per (AIV, flag): its sets, for its AIC

    const std::vector<Fire> &cross_passes(int core, int flag) {
        return cross_counter[{core, flag}];
    }
    const Fire &cross_pass(int core, int flag, int64_t ordinal) {
        ++cross_consumed[{core, flag}];
        return cross_counter[{core, flag}][size_t(ordinal)];
    }
    void count_up(int core, int flag, Fire fire) {
        std::vector<Fire> &counter = cross_counter[{core, flag}];
        counter.push_back(std::move(fire));
        int64_t pending = int64_t(counter.size()) - cross_consumed[{core, flag}];
        if (pending > kCrossCounterMax && !cross_overflow) {
            cross_overflow = true;
            deadlock = true;
            deadlock_message +=
                std::string(deadlock_message.empty() ? "" : "\n") + "cross-core flag " +
                std::to_string(flag) + " of " + core_text(core) + " is set " +
                std::to_string(pending) +
                " times without a wait: its counter holds at most 15 (the hardware hangs)";
        }
    }
    bool cross_overflow = false;
    /** A cross-core set fired on `core`: an AIC's reaches both its AIVs; an AIV's reaches its AIC
     * once the other AIV has set the flag as often. */
    void cross_set(int core, int flag, Fire fire) {
        if (kind(core) == CoreKind::AIC) {
            count_up(aiv_of(core, 0), flag, fire);
            count_up(aiv_of(core, 1), flag, std::move(fire));
            return;
        }
        const int aic = aic_of(core);
        aiv_sets[{core, flag}].push_back(std::move(fire));
        const std::vector<Fire> &a = aiv_sets[{aiv_of(aic, 0), flag}],
                                &b = aiv_sets[{aiv_of(aic, 1), flag}];
        const size_t next = cross_counter[{aic, flag}].size();
        if (a.size() > next && b.size() > next) {
            Fire both{std::max(a[next].time, b[next].time), a[next].clock};
            for (size_t i = 0; i < both.clock.size(); ++i)
                both.clock[i] = std::max(both.clock[i], b[next].clock[i]);
            count_up(aic, flag, std::move(both));
        }
    }

    class CoreRun;
    void run_core(int core);
    void simulate();

    void cross_core_races() {
        for (size_t buffer = 0; buffer < buffers.size(); ++buffer) {
            if (buffers[buffer].mem != Mem::GM || !buffers[buffer].written) {
                continue;
            }
            std::vector<detail::RunHistory> histories;
            for (const auto &core : cores) {
                const Core::State &state = *core->state_;
                if (buffer < state.history.size()) {
                    histories.push_back({core->id(), &state.history[buffer]});
                }
            }
            detail::cross_run_races(histories,
                                    [&](const AccessRecord &first, const AccessRecord &second) {
                                        add_race(first.op, second.op, int(buffer));
                                    });
        }
    }
};

/** Discrete-event simulation of one core's recorded program over its pipes' queues. */
class Machine::Impl::CoreRun {
public:
    /** `clocks`: the clock domain the core shares with the cores it synchronises with (its mix
     * group: the AIC and its two AIVs), its agents from `base`; `gm`: the state whose histories
     * hold the domain's GM accesses. */
    CoreRun(Impl &impl, int core, Core::State &state, detail::VectorClocks &clocks, int base,
            Core::State &gm)
        : impl_(impl), core_(core), state_(state), gm_state_(gm), program_(state.program),
          dispatched_(program_.size(), -1),
          dispatch_clock_(program_.size() * size_t(clocks.agents()), 0),
          fires_(size_t(kPipes * kPipes * impl.params.event_ids)), clocks_(clocks), base_(base) {
        for (size_t i = 0; i < program_.size(); ++i) {
            queue_[0].push_back(int(i)); // S walks every op
            if (program_[i].pipe != Pipe::S) {
                queue_[size_t(program_[i].pipe)].push_back(int(i));
            }
        }
    }

    /** The pipe that starts the core's next op, and when; false when none can. */
    bool next(int &best, Cycles &best_at) const {
        best = -1;
        for (int p = 0; p < kPipes; ++p) {
            Cycles at = 0;
            if (!ready(p, at)) {
                continue;
            }
            if (best < 0 || at < best_at || (at == best_at && head(p) < head(best))) {
                best = p;
                best_at = at;
            }
        }
        return best >= 0;
    }

    /** After the last step: the core's end, and a deadlock if a pipe has work left. */
    void end() {
        Cycles end = *std::max_element(free_.begin(), free_.end());
        state_.end = end;
        for (int p = 0; p < kPipes; ++p) {
            if (next_[size_t(p)] < queue_[size_t(p)].size()) {
                report_deadlock(end);
                break;
            }
        }
    }

private:
    bool done(int p) const { return next_[size_t(p)] >= queue_[size_t(p)].size(); }
    int head(int p) const { return queue_[size_t(p)][next_[size_t(p)]]; }

    /** Whether pipe p can start its next op, and when. */
    bool ready(int p, Cycles &at) const {
        if (done(p)) {
            return false;
        }
        int index = head(p);
        const Op &op = program_[size_t(index)];
        at = free_[size_t(p)];
        if (p != 0) {
            if (dispatched_[size_t(index)] < 0) {
                return false;
            }
            at = std::max(at, dispatched_[size_t(index)]);
        } else if (op.pipe != Pipe::S) {
            return true; // a dispatch
        }
        if (op.kind == OpKind::WaitFlag) {
            const std::vector<Fire> &fires =
                fires_[size_t(impl_.flag_key(op.flag_src, op.flag_dst, op.event))];
            if (int64_t(fires.size()) <= op.ordinal) {
                return false;
            }
            at = std::max(at, fires[size_t(op.ordinal)].time);
        }
        if (op.kind == OpKind::CrossWait) {
            const std::vector<Fire> &passes = impl_.cross_passes(core_, op.event);
            if (int64_t(passes.size()) <= op.ordinal) {
                return false;
            }
            at = std::max(at, passes[size_t(op.ordinal)].time);
        }
        if (op.kind == OpKind::Barrier && op.barrier == Pipe::ALL) {
            for (int q = 1; q < kPipes; ++q) {
                if (!done(q) && head(q) < index) {
                    return false; // q still has ops recorded before the barrier
                }
                at = std::max(at, free_[size_t(q)]);
            }
        }
        return true;
    }

public:
    /** Starts pipe p's next op at `start` (from next()). */
    void step(int p, Cycles start) {
        int index = head(p);
        ++next_[size_t(p)];
        const Op &op = program_[size_t(index)];
        Cycles idle_from = free_[size_t(p)];
        if (p == 0 && op.pipe != Pipe::S) {
            // The scalar stream dispatches the op to its pipe with S's clock.
            Cycles end = start + impl_.params.scalar_issue_cycles;
            free_[0] = end;
            dispatched_[size_t(index)] = end;
            std::copy(clock(0), clock(0) + agents(),
                      dispatch_clock_.begin() + ptrdiff_t(index) * agents());
            impl_.trace.add(op.label, "dispatch", core_, track_of(Pipe::S), start, end - start);
            return;
        }
        if (p != 0) {
            clocks_.join(base_ + p, dispatch_clock_.data() + ptrdiff_t(index) * agents());
            idle_from = std::max(idle_from, dispatched_[size_t(index)]);
        }
        Impl::Buffer *dst = op.dst >= 0 ? &impl_.buffers[size_t(op.dst)] : nullptr;
        Impl::Buffer *src = op.src >= 0 ? &impl_.buffers[size_t(op.src)] : nullptr;
        Cycles cost = op.cost;
        if (op.kind == OpKind::DataCopy && src->mem == Mem::GM && op.src_box.elements() > 0) {
            cost = impl_.gm_read_cost(op, *src, *dst, start);
        }
        if (dst && dst->mem == Mem::GM) { // into L2, written back to HBM: neither waited for
            const int64_t bytes = op.dst_box.elements() * bytes_of(dst->type);
            impl_.l2.book(start, bytes);
            impl_.hbm.book(start, bytes);
        }
        Cycles end = start + cost;
        uint64_t name = OpName{op.kind, Pipe(p), core_, op.label}.pack();
        bool numerics = impl_.numerics;
        Cycles trace_start = start;
        switch (op.kind) {
        case OpKind::DataCopy:
        case OpKind::LoadData:
            access(op.src, op.src_box, false, p, name);
            access(op.dst, op.dst_box, true, p, name);
            if (numerics && op.compute) {
                op.compute(); // a real instruction's own element map (Nd2Nz)
            } else if (numerics && op.dst_box.elements() > 0) {
                detail::copy_box(dst->data.get(), op.dst_box, src->data.get(), op.src_box,
                                 bytes_of(dst->type));
            }
            break;
        case OpKind::Fixpipe:
            access(op.src, op.src_box, false, p, name);
            access(op.dst, op.dst_box, true, p, name);
            if (numerics && op.compute) {
                op.compute(); // Nz -> ND, converting
            }
            break;
        case OpKind::Mmad:
            access(op.src, op.src_box, false, p, name);
            access(op.src2, op.src2_box, false, p, name);
            access(op.dst, op.dst_box, true, p, name);
            if (numerics && op.compute) {
                op.compute(); // Zz x Zn -> Nz
            }
            break;
        case OpKind::Vector:
            // V's ops overlap in its pipeline: each is its own epoch of V_DONE, ordered after an
            // earlier one only by a PipeBarrier<PIPE_V>, a PIPE_ALL or a flag a V set after it.
            ++v_issued_;
            for (const Access &x : op.accesses) {
                access(x.buffer, x.box, x.write, p, name, base_ + kVDone, v_issued_);
            }
            if (numerics && op.compute) {
                op.compute();
            }
            break;
        case OpKind::SetFlag: {
            std::vector<Fire> &fires =
                fires_[size_t(impl_.flag_key(op.flag_src, op.flag_dst, op.event))];
            fires.push_back(Fire{end, released(p)});
            clocks_.tick(base_ + p); // later ops of p are not ordered by this set
            break;
        }
        case OpKind::CrossSet:
            impl_.cross_set(core_, op.event, Fire{end, released(p)});
            clocks_.tick(base_ + p);
            break;
        case OpKind::CrossWait: {
            const Fire &fire = impl_.cross_pass(core_, op.event, op.ordinal);
            clocks_.join(base_ + p, fire.clock.data());
            trace_start = idle_from;
            break;
        }
        case OpKind::WaitFlag: {
            const std::vector<Fire> &fires =
                fires_[size_t(impl_.flag_key(op.flag_src, op.flag_dst, op.event))];
            clocks_.join(base_ + p, fires[size_t(op.ordinal)].clock.data());
            trace_start = idle_from; // show how long the pipe waited
            break;
        }
        case OpKind::Barrier:
            if (op.barrier == Pipe::ALL) {
                for (int q = 1; q < kPipes; ++q) {
                    clocks_.join(base_, clock(q));
                    clocks_.tick(base_ + q);
                }
                clock(0)[base_ + kVDone] = v_issued_;
                trace_start = idle_from;
            } else if (op.barrier == Pipe::V) {
                clock(p)[base_ + kVDone] = v_issued_; // V's later ops wait for its earlier ones
            }
            break;
        }
        free_[size_t(p)] = end;
        bool work = op.kind != OpKind::SetFlag && op.kind != OpKind::WaitFlag &&
                    op.kind != OpKind::Barrier && op.kind != OpKind::CrossSet &&
                    op.kind != OpKind::CrossWait;
        if (work) {
            state_.busy[size_t(p)] += cost;
        }
        impl_.trace.add(op.label, op_kind_name(op.kind), core_, track_of(Pipe(p)), trace_start,
                        end - trace_start);
    }

private:
    /** An access by pipe `pipe`, recorded as agent `agent`'s `epoch` (default: the pipe's). */
    void access(int buffer, const Box &box, bool write, int pipe, uint64_t op, int agent = -1,
                int64_t epoch = 0) {
        ElementSet elements = detail::element_set(box);
        if (elements.empty) {
            return;
        }
        const int64_t *clock = this->clock(pipe);
        if (agent < 0) {
            agent = base_ + pipe;
            epoch = clock[agent];
        }
        // An op's own accesses (an in-place vector op reads what it writes) are one instruction.
        detail::check_access_ordered(
            (impl_.buffers[size_t(buffer)].mem == Mem::GM ? gm_state_ : state_).history_of(buffer),
            AccessRecord{elements, agent, epoch, op, write},
            [&](const AccessRecord &earlier) {
                return earlier.epoch <= clock[earlier.agent] ||
                       (earlier.agent == agent && earlier.epoch == epoch);
            },
            [&](const AccessRecord &earlier) { impl_.add_race(earlier.op, op, buffer); },
            [](const AccessRecord &) {});
        if (write) {
            impl_.buffers[size_t(buffer)].written = true;
        }
    }

    void report_deadlock(Cycles at) {
        std::string message = "deadlock on " + impl_.core_text(core_) + " at cycle " +
                              std::to_string(at) + ": no pipe can start its next op";
        for (int p = 0; p < kPipes; ++p) {
            if (done(p)) {
                continue;
            }
            int index = head(p);
            const Op &op = program_[size_t(index)];
            if (p != 0 && dispatched_[size_t(index)] < 0) {
                continue; // not dispatched: S is blocked, and says why
            }
            const std::string &label = impl_.labels.text(op.label);
            if (op.kind == OpKind::WaitFlag) {
                std::string text = flag_text("WaitFlag", op.flag_src, op.flag_dst, op.event);
                message += "; pipe " + std::string(pipe_name(Pipe(p))) + " waits at " + text +
                           " '" + label + "' (" + why_not_fired(op) + ")";
            } else if (op.kind == OpKind::Barrier) {
                message += "; pipe S waits at PipeBarrier<PIPE_ALL> '" + label +
                           "' for every pipe to finish the ops recorded before it";
            } else if (op.kind == OpKind::CrossWait) {
                message += "; pipe S waits at CrossCoreWaitFlag(" + std::to_string(op.event) +
                           ") '" + label + "' (wait " + std::to_string(op.ordinal + 1) +
                           " of this flag, but only " +
                           std::to_string(impl_.cross_passes(core_, op.event).size()) +
                           " of its sets reached this core: " + impl_.cross_rule(core_) + ")";
            }
        }
        impl_.deadlock = true;
        impl_.deadlock_message += (impl_.deadlock_message.empty() ? "" : "\n") + message;
    }

    std::string why_not_fired(const Op &wait) const {
        std::string set = flag_text("SetFlag", wait.flag_src, wait.flag_dst, wait.event);
        int key = impl_.flag_key(wait.flag_src, wait.flag_dst, wait.event);
        int64_t sets = state_.sets[size_t(key)];
        std::string nth = "it is wait " + std::to_string(wait.ordinal + 1) + " of this flag";
        if (sets <= wait.ordinal) {
            return nth + ", but the program has only " + std::to_string(sets) + " " + set +
                   ": no set will ever fire it";
        }
        for (size_t i = 0; i < program_.size(); ++i) {
            const Op &op = program_[i];
            if (op.kind == OpKind::SetFlag &&
                impl_.flag_key(op.flag_src, op.flag_dst, op.event) == key &&
                op.ordinal == wait.ordinal) {
                bool dispatched = op.pipe == Pipe::S || dispatched_[i] >= 0;
                return nth + "; its " + set + " '" + impl_.labels.text(op.label) + "' on " +
                       pipe_name(op.pipe) +
                       (dispatched ? " is queued behind a blocked op of that pipe"
                                   : " is never dispatched: the scalar stream is blocked");
            }
        }
        return nth;
    }

    int64_t *clock(int p) { return clocks_.clock(base_ + p); }
    int agents() const { return clocks_.agents(); }
    /** What a set queued on pipe p releases: p's clock; on V, once V's earlier ops are done. */
    std::vector<int64_t> released(int p) {
        std::vector<int64_t> c = clocks_.copy(base_ + p);
        if (Pipe(p) == Pipe::V) {
            c[size_t(base_ + kVDone)] = v_issued_;
        }
        return c;
    }

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

void Machine::Impl::run_core(int core) {
    Core::State &state = *cores[size_t(core)]->state_;
    if (state.ran) {
        throw SimError("run_core(" + std::to_string(core) +
                       "): the core already ran; run each core once");
    }
    state.ran = true;
    ended.push_back(core);
}

void Machine::Impl::simulate() {
    // Every ended core's pipes in one time order (ties: lower core, then the core's own order),
    // so that the L2 sees the reads in the order they happen.
    // A core's clock domain: its own, or in a mix kernel its group's (AIC i and AIV 2i, 2i + 1,
    // joined by cross-core flags), whose GM accesses are checked online in the AIC's histories.
    std::map<int, std::unique_ptr<detail::VectorClocks>> domains; // by group (AIC) or core
    std::vector<std::unique_ptr<CoreRun>> runs;
    std::vector<int> groups; // per run: its clock domain
    for (int core : ended) {
        const int group = mix ? (kind(core) == CoreKind::AIC ? core : aic_of(core)) : core;
        const int base =
            mix ? (kind(core) == CoreKind::AIC ? 0 : 1 + (core - aiv_of(group, 0))) * kAgents : 0;
        auto &domain = domains[group];
        if (!domain) {
            domain = std::make_unique<detail::VectorClocks>();
            domain->reset(mix ? 3 * kAgents
                              : kAgents); // per core its pipes, and V_DONE: V ops known complete
        }
        runs.push_back(std::make_unique<CoreRun>(*this, core, *cores[size_t(core)]->state_, *domain,
                                                 base, *cores[size_t(group)]->state_));
        groups.push_back(group);
    }
    ended.clear();
    // A run's next op depends only on its own state and, through cross-core flags, on its clock
    // domain's: it is recomputed only after a step in that domain.
    struct Next {
        bool known = false, any = false;
        int pipe = 0;
        Cycles at = 0;
    };
    std::vector<Next> next(runs.size());
    std::vector<size_t> live(runs.size()); // runs that may still have work, in core order
    std::iota(live.begin(), live.end(), size_t(0));
    for (;;) {
        int best = -1;
        for (size_t i : live) {
            Next &n = next[i];
            if (!n.known) {
                n.any = runs[i]->next(n.pipe, n.at);
                n.known = true;
            }
            if (n.any && (best < 0 || n.at < next[size_t(best)].at)) {
                best = int(i);
            }
        }
        if (!mix) { // outside a mix kernel nothing else can unblock a run that has no next op
            live.erase(
                std::remove_if(live.begin(), live.end(), [&](size_t i) { return !next[i].any; }),
                live.end());
        }
        if (best < 0) {
            break;
        }
        runs[size_t(best)]->step(next[size_t(best)].pipe, next[size_t(best)].at);
        for (size_t i = 0; i < runs.size(); ++i) {
            if (groups[i] == groups[size_t(best)]) {
                next[i].known = false;
            }
        }
    }
    for (const auto &run : runs) {
        run->end();
    }
}

// ---------------------------------------------------------------------------------------------
// Core
// ---------------------------------------------------------------------------------------------

Core::Core(Machine *m, int id) : machine_(m), id_(id), state_(std::make_shared<State>()) {
    size_t keys = size_t(kPipes * kPipes * m->params().event_ids);
    state_->sets.assign(keys, 0);
    state_->waits.assign(keys, 0);
    state_->last_set.assign(keys, 0);
}

void Core::data_copy(int dst, const Box &dst_box, int src, const Box &src_box,
                     const std::string &label) {
    machine_->impl_->data_copy(id_, dst, dst_box, src, src_box, label);
}

void Core::nd2nz(int dst, int64_t dst_offset, int src, int64_t src_offset, const Nd2Nz &p,
                 const std::string &label) {
    machine_->impl_->nd2nz(id_, dst, dst_offset, src, src_offset, p, label);
}

void Core::load_data_2d(int dst, int64_t dst_offset, int src, int64_t src_offset,
                        const LoadData2D &p, const std::string &label) {
    machine_->impl_->load_data_2d(id_, dst, dst_offset, src, src_offset, p, label);
}

void Core::mmad_fractal(int c, int64_t c_offset, int a, int64_t a_offset, int b, int64_t b_offset,
                        int64_t m, int64_t n, int64_t k, bool accumulate,
                        const std::string &label) {
    machine_->impl_->mmad_fractal(id_, c, c_offset, a, a_offset, b, b_offset, m, n, k, accumulate,
                                  label);
}

void Core::fixpipe_nz2nd(int dst, int64_t dst_offset, int src, int64_t src_offset,
                         const FixpipeNz2Nd &p, const std::string &label) {
    machine_->impl_->fixpipe_nz2nd(id_, dst, dst_offset, src, src_offset, p, label);
}

void Core::vector_instruction(const VectorCall &call) {
    machine_->impl_->vector_instruction(id_, call);
}

void Core::vector_op(const std::string &label, int64_t work, const std::vector<Access> &accesses,
                     const std::function<void()> &compute) {
    machine_->impl_->vector_op(id_, label, work, accesses, compute);
}

void Core::set_flag(Pipe src, Pipe dst, int event, const std::string &label) {
    machine_->impl_->flag(id_, true, src, dst, event, label);
}

void Core::wait_flag(Pipe src, Pipe dst, int event, const std::string &label) {
    machine_->impl_->flag(id_, false, src, dst, event, label);
}

void Core::pipe_barrier(Pipe pipe) {
    machine_->impl_->pipe_barrier(id_, pipe);
}

void Core::cross_core_set_flag(Pipe pipe, int flag, const std::string &label) {
    machine_->impl_->cross_flag(id_, true, pipe, flag, label);
}

void Core::cross_core_wait_flag(int flag, const std::string &label) {
    machine_->impl_->cross_flag(id_, false, Pipe::S, flag, label);
}

// ---------------------------------------------------------------------------------------------
// Machine
// ---------------------------------------------------------------------------------------------

Machine::Machine(const AscendParams &params, bool numerics, bool trace)
    : params_(params), numerics_(numerics) {
    auto require = [](bool ok, const std::string &message) {
        if (!ok) {
            throw SimError("AscendParams: " + message);
        }
    };
    require(params.cube_cores >= 1 && params.vector_cores >= 1 &&
                params.cube_cores + params.vector_cores <= kMaxCores,
            "cube_cores and vector_cores must be at least 1, and at most 4096 together");
    require(params.hbm_bytes_per_cycle > 0 && params.l2_bytes_per_cycle > 0,
            "hbm_bytes_per_cycle and l2_bytes_per_cycle must be positive");
    require(params.l1_bytes >= 0 && params.l0a_bytes >= 0 && params.l0b_bytes >= 0 &&
                params.l0c_bytes >= 0 && params.ub_bytes >= 0,
            "capacities must not be negative");
    require(params.l1_align >= 1 && params.ub_align >= 1 && params.l0ab_align >= 1 &&
                params.l0c_align >= 1,
            "alignments must be at least 1");
    for (const Path &path : kPaths) {
        require(params.*(path.rate) > 0, "copy rates must be positive");
    }
    require(params.copy_fixed >= 0 && params.cube_fixed >= 0 && params.vector_fixed >= 0 &&
                params.scalar_issue_cycles >= 0 && params.flag_cycles >= 0 &&
                params.pipe_barrier_cycles >= 0,
            "fixed costs must not be negative");
    require(params.vector_bytes_per_cycle >= 1, "vector_bytes_per_cycle must be at least 1");
    require(params.event_ids >= 1 && params.event_ids <= kMaxEventIds,
            "event_ids must be in [1, 64]");
    impl_ = std::make_unique<Impl>(params, numerics, trace);
    for (int c = 0; c < num_cores(); ++c) {
        impl_->cores.emplace_back(new Core(this, c));
    }
}

Machine::~Machine() = default;

int Machine::add_gm(const std::string &name, DType type, int64_t elements) {
    if (elements < 0) {
        throw SimError("add_gm '" + name + "': negative element count " + std::to_string(elements));
    }
    Impl::Buffer buffer{name, type, Mem::GM, -1, elements, 0, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(elements * bytes_of(type))]());
    }
    impl_->buffers.push_back(std::move(buffer));
    return int(impl_->buffers.size()) - 1;
}

int Machine::add_local(int core, const std::string &name, Mem mem, DType type, int64_t elements) {
    std::string what = "add_local '" + name + "'";
    if (core < 0 || core >= num_cores()) {
        throw SimError(what + ": core " + std::to_string(core) +
                       " does not exist (the machine has " + std::to_string(num_cores()) +
                       " cores)");
    }
    if (mem == Mem::GM) {
        throw SimError(what + ": GM is not a local memory; use add_gm");
    }
    if (!has_memory(kind(core), mem)) {
        throw SimError(what + ": " + mem_name(mem) + " is on the " +
                       (mem == Mem::UB ? "vector cores (AIV)" : "cube cores (AIC)") +
                       ", and core " + std::to_string(core) + " is " + impl_->core_text(core) +
                       " (the 910B's cube and vector cores share only GM)");
    }
    if (elements < 0) {
        throw SimError(what + ": negative element count " + std::to_string(elements));
    }
    int64_t bytes = elements * bytes_of(type);
    int64_t &used = impl_->used[size_t(core)][size_t(mem)];
    int64_t align = params_.alignment(mem);
    int64_t start = (used + align - 1) / align * align;
    int64_t capacity = params_.capacity(mem);
    if (start > capacity || bytes > capacity - start) {
        throw SimError(std::string(mem_name(mem)) + " overflow: buffer '" + name + "' needs " +
                       std::to_string(bytes) + " bytes of " + mem_name(mem) + " on " +
                       impl_->core_text(core) + " from byte " + std::to_string(start) +
                       " (aligned to " + std::to_string(align) + "), but " + mem_name(mem) +
                       " has " + std::to_string(capacity) +
                       " bytes; use smaller tiles or fewer buffers");
    }
    used = start + bytes;
    Impl::Buffer buffer{name, type, mem, core, elements, start, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(bytes)]());
    }
    impl_->buffers.push_back(std::move(buffer));
    return int(impl_->buffers.size()) - 1;
}

namespace {
[[noreturn]] void no_buffer(int buffer, size_t count) {
    throw SimError("buffer id " + std::to_string(buffer) + " does not exist (the machine has " +
                   std::to_string(count) + " buffers)");
}
} // namespace

void *Machine::data(int buffer) {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[size_t(buffer)].data.get();
}

DType Machine::type(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[size_t(buffer)].type;
}

int64_t Machine::elements(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[size_t(buffer)].elements;
}

const std::string &Machine::name(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[size_t(buffer)].name;
}

Core &Machine::core(int c) {
    if (c < 0 || c >= num_cores()) {
        throw SimError("core " + std::to_string(c) + " does not exist (the machine has " +
                       std::to_string(num_cores()) + " cores)");
    }
    return *impl_->cores[size_t(c)];
}

int Machine::core_of(CoreKind k, int i) const {
    if (i < 0 || i >= cores_of(k)) {
        throw SimError(std::string(core_kind_name(k)) + " " + std::to_string(i) +
                       " does not exist (the machine has " + std::to_string(cores_of(k)) + ")");
    }
    return k == CoreKind::AIC ? i : params_.cube_cores + i;
}

void Machine::launch_mix() {
    if (params_.vector_cores != 2 * params_.cube_cores) {
        throw SimError("launch_mix: a mix kernel (KERNEL_TYPE_MIX_AIC_1_2) pairs each AIC with two "
                       "AIVs, but the "
                       "machine has " +
                       std::to_string(params_.cube_cores) + " AIC and " +
                       std::to_string(params_.vector_cores) + " AIV");
    }
    impl_->mix = true;
}

bool Machine::mix() const {
    return impl_->mix;
}

void Machine::run_core(int c) {
    core(c); // checks the index
    impl_->run_core(c);
}

Report Machine::finish() {
    for (const auto &core : impl_->cores) {
        const Core::State &state = *core->state_;
        if (!state.ran && !state.program.empty()) {
            throw SimError("finish: core " + std::to_string(core->id()) + " recorded " +
                           std::to_string(state.program.size()) +
                           " ops but never ran; call run_core(" + std::to_string(core->id()) +
                           ") first");
        }
    }
    impl_->simulate();
    impl_->cross_core_races();
    Report report;
    std::array<Cycles, kPipes> busy{};
    for (const auto &core : impl_->cores) {
        const Core::State &state = *core->state_;
        report.core_cycles.push_back(state.end);
        report.cycles = std::max(report.cycles, state.end);
        for (Pipe p : kWorkPipes) {
            busy[size_t(p)] += state.busy[size_t(p)];
            report.bound_cycles = std::max(report.bound_cycles, state.busy[size_t(p)]);
        }
    }
    for (Pipe p : kWorkPipes) {
        report.busy.push_back({pipe_name(p), busy[size_t(p)]});
    }
    Cycles hbm = Cycles(std::ceil(impl_->hbm.bytes / params_.hbm_bytes_per_cycle));
    Cycles l2 = Cycles(std::ceil(impl_->l2.bytes / params_.l2_bytes_per_cycle));
    report.busy.push_back({"HBM", hbm});
    report.busy.push_back({"L2", l2});
    report.bound_cycles = std::max({report.bound_cycles, hbm, l2});
    impl_->races.report(report, impl_->deadlock, impl_->deadlock_message);
    return report;
}

void Machine::write_trace(const std::string &path) const {
    impl_->simulate();
    std::vector<std::string> tracks(std::begin(kTrackNames), std::end(kTrackNames));
    std::vector<detail::TraceProcess> processes;
    for (const auto &core : impl_->cores) {
        if (core->state_->ran) {
            processes.push_back({core->id(), impl_->core_text(core->id()), tracks});
        }
    }
    impl_->trace.write(path, processes, impl_->labels);
}

} // namespace tandem::sim::ascend
