// The ZPU machine model. See Zpu.h for the machine and its timing, happens-before and deadlock
// semantics; this file keeps the bookkeeping. The race check, numerics and trace writer are
// shared with the Hopper model (Hazards.h, Numerics.h, Trace.h).
//
// Choices this implementation makes (all visible to callers):
// - Issuing a DMA descriptor costs the control stream 0 cycles. When `dma_queue_depth`
//   transfers are still in flight (end > now), the control stream stalls until the in-flight
//   transfer that ends first has ended; that stall is the "control_stall" busy time.
// - A descriptor runs on the channel that frees first (lowest channel index on a tie), starting
//   at max(now, that channel's free time). Transfers on one channel run in issue order (timing).
// - Happens-before follows the tokens, not the channels: a transfer is ordered after what the
//   control stream did before issuing it, and the control stream after a transfer once it waited
//   on that transfer's token. Completing a later transfer of the same channel orders nothing: the
//   engine, not the program, picks the channel, so a program that relies on it is not race-free.
// - A transfer whose token the core's program never waited on is a race with the program's end
//   (its data may land after the kernel returned); a deadlocked core is not checked.
// - Numerics: transfers, MMAs and vector ops compute at issue. The happens-before check (not the
//   numerics) is what finds a read of data still in flight or an op issued without a sync.
// - A sync on an engine with nothing issued is free; every op ever issued to the engine counts
//   (the engine drains, it does not wait for one op).
// - A DMA pairs the elements of its two boxes in enumeration order (dims[0] fastest), so the
//   boxes need the same element count and type but not the same shape. No type conversion.
// - mma operands must be on-core SRAM in their scopes: a in ASRAM, b in WSRAM, acc in RSRAM.
// - SRAM is allocated in bytes without padding; buffers are never freed.
// - Races are reported once per (first op, second op, buffer), ops named by kind, label, engine
//   and core; Report::races keeps the first kMaxStoredRaces, Report::race_count counts them all.
// - Access histories are pruned: an access that happens before a later access covering its
//   elements (a write, or a read when both read) is dropped. A race against the dropped access
//   is then still found, against the later access (happens-before is transitive).
// - Overlap of two boxes (Hazards.h) is exact (an integer search over the union of their strides,
// with a
//   budget after which it answers "overlap", which is conservative); covering is exact for boxes
//   of nested strides and conservative ("not covered") otherwise.

#include "sim/Zpu.h"

#include "sim/Hazards.h"
#include "sim/Numerics.h"
#include "sim/Trace.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <queue>
#include <thread>

namespace tandem::sim {

using detail::AccessRecord;
using detail::BufferHistory;
using detail::ceil_div;
using detail::ElementSet;

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

const char *engine_name(Engine e) {
    return e == Engine::Tensor ? "tensor" : "vector";
}

const char *link_name(Link l) {
    return l == Link::Row ? "row" : "column";
}

// ---------------------------------------------------------------------------------------------
// Ops, accesses, per-core state
// ---------------------------------------------------------------------------------------------

namespace {

enum class OpKind : uint8_t { Dma, Mma, Vector, Wait, Sync, Stall, End, Leaf, Barrier };

const char *op_kind_name(OpKind k) {
    switch (k) {
    case OpKind::Dma:
        return "dma";
    case OpKind::Mma:
        return "mma";
    case OpKind::Vector:
        return "vector";
    case OpKind::Wait:
        return "dma_wait";
    case OpKind::Sync:
        return "sync";
    case OpKind::Stall:
        return "stall";
    case OpKind::End:
        return "end";
    case OpKind::Leaf:
        return "broadcast";
    case OpKind::Barrier:
        return "barrier";
    }
    return "?";
}

// Trace tracks (Chrome "tid") of a core.
constexpr int kControlTrack = 0;
constexpr int kTensorTrack = 1;
constexpr int kVectorTrack = 2;
constexpr int kFirstDmaTrack = 3; // then the DMA channels, then the row and column links

/** An op instance as races name it: kind, label, engine, core, packed in 64 bits. */
struct OpName {
    OpKind kind;
    int channel; // DMA channel, -1 for other engines
    int core;
    uint32_t label;

    uint64_t pack() const {
        return uint64_t(label) << 32 | uint64_t(uint16_t(core)) << 16 |
               uint64_t(uint8_t(channel + 1)) << 8 | uint64_t(kind);
    }
    static OpName unpack(uint64_t bits) {
        return {OpKind(bits & 0xff), int((bits >> 8) & 0xff) - 1, int((bits >> 16) & 0xffff),
                uint32_t(bits >> 32)};
    }
};

/** Async ops (transfers, MMAs, vector ops) of one core known to be complete, by their index on the
 * core (1, 2, ...), as sorted, disjoint, non-adjacent runs [first, last]. An op waited late (an
 * output store drained a tile later) leaves a gap below everything known after it; runs keep
 * that one gap instead of a list of every later op, so that copying what an agent knows, which
 * each issued op does, costs the number of gaps, not the number of ops. */
struct OpSet {
    struct Run {
        int64_t first, last;
    };
    std::vector<Run> runs;

    bool contains(int64_t index) const {
        auto r = std::upper_bound(runs.begin(), runs.end(), index,
                                  [](int64_t i, const Run &run) { return i < run.first; });
        return r != runs.begin() && std::prev(r)->last >= index;
    }
    void insert(int64_t index) { add({index, index}); }
    void join(const OpSet &other) {
        if (other.runs.empty())
            return;
        if (runs.empty()) {
            runs = other.runs;
            return;
        }
        std::vector<Run> merged;
        merged.reserve(runs.size() + other.runs.size());
        std::merge(runs.begin(), runs.end(), other.runs.begin(), other.runs.end(),
                   std::back_inserter(merged),
                   [](const Run &x, const Run &y) { return x.first < y.first; });
        runs.clear();
        for (const Run &r : merged)
            append(r);
    }

private:
    /** Appends a run that starts at or after the last one's start. */
    void append(const Run &r) {
        if (!runs.empty() && r.first <= runs.back().last + 1)
            runs.back().last = std::max(runs.back().last, r.last);
        else
            runs.push_back(r);
    }
    void add(const Run &r) {
        if (runs.empty() || r.first >= runs.back().first) {
            append(r);
            return;
        }
        OpSet one;
        one.runs = {r};
        join(one);
    }
};

/** What an agent knows of one core: its control stream's ops up to epoch `control`, and its
 * async ops `ops` (by their index on that core). */
struct CoreKnowledge {
    int64_t control = 0;
    OpSet ops;
};

/** What the control stream (or an async op, as of its start) has seen happen: the control stream's
 * own ops up to epoch `control`, the async ops `ops`, and what barriers told it of the other
 * cores (by core id; shared, since every issued op copies it; null before any barrier). */
struct Knowledge {
    int64_t control = 0;
    OpSet ops;
    std::shared_ptr<const std::vector<CoreKnowledge>> others;
};

// Access records name their agent: the control stream (its epoch) or an async op (its index).
constexpr int kControlAgent = 0;
constexpr int kAsyncAgent = 1;

struct CoreRun {
    int id = 0;
    Cycles now = 0;
    std::vector<Cycles> channel_free;
    std::vector<Cycles> pinned_busy; // by channel: transfers of routes pinned to it
    std::priority_queue<Cycles, std::vector<Cycles>, std::greater<Cycles>> in_flight_ends;
    Knowledge known{1, {}, nullptr};      // the control stream's; its own epoch is known.control
    int64_t issued = 0;                   // async ops issued so far
    std::array<Cycles, 2> engine_free{};  // by Engine: when its last op ends
    std::array<int64_t, 2> engine_last{}; // by Engine: token id of its last op, 0 if none
    std::array<Cycles, 2> link_free{};    // by Link: when its last leaf ends
    std::array<Cycles, 2> link_busy{};
    std::map<std::vector<int>, int64_t> barriers_met; // by the barrier's cores: calls so far
    bool blocked = false;                             // deadlocked: its program did not end
    Cycles tensor_busy = 0, vector_busy = 0, dma_busy = 0, control_stall = 0;
    Cycles longest_dma = 0, last_transfer_end = 0;
    std::vector<BufferHistory> history; // by buffer id

    BufferHistory &history_of(int buffer) {
        if (size_t(buffer) >= history.size()) {
            history.resize(size_t(buffer) + 1);
        }
        return history[buffer];
    }
};

} // namespace

// ---------------------------------------------------------------------------------------------
// Machine state
// ---------------------------------------------------------------------------------------------

struct Core::State {
    CoreRun run;
};

struct Machine::Impl {
    struct Buffer {
        std::string name;
        DType type;
        Space space;
        int core; // -1: DRAM, shared by all cores
        int64_t elements;
        std::unique_ptr<std::byte[]> data;
        bool written = false; // by some core (DRAM: enables the cross-core check)
    };
    /** An asynchronous op: a transfer, an MMA or a vector op. */
    struct AsyncOp {
        int core;
        Cycles end;
        int64_t index;   // on its core, from 1
        Knowledge known; // the control stream's at issue, and the transfer itself
        uint64_t op;
        int dst;
    };
    Impl(const ZpuParams &p, bool numerics_on, bool trace_on)
        : params(p), numerics(numerics_on), trace(trace_on),
          sram_used(size_t(p.cores), std::array<int64_t, 4>{}) {}

    ZpuParams params;
    bool numerics;
    detail::TraceLog trace;
    std::vector<Buffer> buffers;
    std::vector<std::array<int64_t, 4>> sram_used; // [core][Space]
    std::vector<std::unique_ptr<Core>> cores;

    std::vector<AsyncOp> async_ops;                          // token id - 1
    std::map<std::pair<int, std::string>, int> sram_by_name; // (core, name) -> buffer id

    /** A leaf whose receivers do not all know its writes yet: once a barrier's cores know the
     * sender's `index`, they know each receiver's (core, index) of it. */
    struct PendingLeaf {
        int sender;
        int64_t index;
        std::vector<std::pair<int, int64_t>> receivers;
    };
    std::vector<PendingLeaf> pending_leaves;

    /** A barrier some of its cores have reached: by its cores and the call's number on each. */
    struct BarrierState {
        std::vector<int> arrived;
        std::string label;
    };
    std::map<std::pair<std::vector<int>, int64_t>, BarrierState> barriers;

    /** Machine::run's baton: the core whose program runs (-1: none, the scheduler's turn). */
    struct Scheduler {
        std::mutex mutex;
        std::condition_variable changed;
        int turn = -1;
        enum State : uint8_t { Ready, Blocked, Done };
        std::vector<State> state;
        std::vector<bool> unwind;      // resumed to unwind (deadlocked, or another core failed)
        std::vector<std::string> wait; // by core: what a blocked core waits at
    };
    std::unique_ptr<Scheduler> scheduler; // null outside Machine::run

    detail::Labels labels;
    detail::RaceLog races;

    bool deadlock = false;
    std::string deadlock_message;

    detail::MatrixMultiplier multiplier; // mma numerics

    uint32_t label_id(const std::string &label) { return labels.id(label); }

    std::string op_text(uint64_t packed) const {
        OpName op = OpName::unpack(packed);
        if (op.kind == OpKind::End) {
            return "end of the program of core " + std::to_string(op.core);
        }
        std::string text =
            std::string(op_kind_name(op.kind)) + " '" + labels.text(op.label) + "' (";
        switch (op.kind) {
        case OpKind::Dma:
            text += "dma channel " + std::to_string(op.channel);
            break;
        case OpKind::Leaf:
            text += std::string(link_name(Link(op.channel))) + " link";
            break;
        case OpKind::Mma:
            text += "tensor";
            break;
        case OpKind::Vector:
            text += "vector";
            break;
        default:
            text += "control";
        }
        return text + ", core " + std::to_string(op.core) + ")";
    }

    void add_race(uint64_t first, uint64_t second, int buffer) {
        races.add(first, second, buffer, [&] {
            return Race{op_text(first), op_text(second), buffers[buffer].name, ""};
        });
    }

    void add_event(OpKind kind, uint32_t label, int core, int track, Cycles start,
                   Cycles duration) {
        trace.add(label, op_kind_name(kind), core, track, start, duration);
    }

    // --- validation --------------------------------------------------------------------------

    [[noreturn]] static void fail(const std::string &what, const CoreRun &core,
                                  const std::string &message) {
        throw SimError(what + " on core " + std::to_string(core.id) + ": " + message);
    }

    const Buffer &checked_buffer(const std::string &what, const CoreRun &core, const char *role,
                                 int buffer, const Box &box) const {
        if (buffer < 0 || size_t(buffer) >= buffers.size()) {
            fail(what, core,
                 std::string(role) + " buffer id " + std::to_string(buffer) +
                     " does not exist (the machine has " + std::to_string(buffers.size()) +
                     " buffers)");
        }
        const Buffer &b = buffers[buffer];
        if (b.core >= 0 && b.core != core.id) {
            fail(what, core,
                 std::string(role) + " buffer '" + b.name + "' is " + space_name(b.space) +
                     " of core " + std::to_string(b.core) +
                     "; a core can only touch its own SRAM and DRAM");
        }
        std::string outside = detail::box_outside_error(role, box, b.name, b.elements);
        if (!outside.empty()) {
            fail(what, core, outside);
        }
        return b;
    }

    // --- happens-before ----------------------------------------------------------------------

    /** Checks one access against the core's history of the buffer, then records it. The access is
     * the control stream's (async op 0) or async op `async`'s; `known` is what its agent has seen.
     */
    void access(CoreRun &core, int buffer, const Box &box, bool write, const Knowledge &known,
                int64_t async, uint64_t op) {
        ElementSet elements = detail::element_set(box);
        if (elements.empty) {
            return;
        }
        AccessRecord record = async
                                  ? AccessRecord{elements, kAsyncAgent, async, op, write}
                                  : AccessRecord{elements, kControlAgent, known.control, op, write};
        detail::check_access_ordered(
            core.history_of(buffer), record,
            [&](const AccessRecord &earlier) {
                return earlier.agent == kControlAgent ? earlier.epoch <= known.control
                                                      : known.ops.contains(earlier.epoch);
            },
            [&](const AccessRecord &earlier) { add_race(earlier.op, op, buffer); },
            [](const AccessRecord &) {});
        if (write) {
            buffers[buffer].written = true;
        }
    }

    // --- ops ---------------------------------------------------------------------------------

    Token dma_start(CoreRun &core, int dst, const Box &dst_box, int src, const Box &src_box,
                    const std::string &label) {
        std::string what = "dma '" + label + "'";
        const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
        const Buffer &from = checked_buffer(what, core, "source", src, src_box);
        if (to.type != from.type) {
            fail(what, core,
                 "destination '" + to.name + "' is " + dtype_name(to.type) + " but source '" +
                     from.name + "' is " + dtype_name(from.type) +
                     "; the DMA engine copies elements without conversion");
        }
        int64_t count = dst_box.elements();
        if (count != src_box.elements()) {
            fail(what, core,
                 "destination box " + dst_box.str() + " has " + std::to_string(count) +
                     " elements but source box " + src_box.str() + " has " +
                     std::to_string(src_box.elements()));
        }
        uint32_t label_index = label_id(label);

        // The descriptor queue: stall while it is full.
        while (!core.in_flight_ends.empty() && core.in_flight_ends.top() <= core.now) {
            core.in_flight_ends.pop();
        }
        while (int(core.in_flight_ends.size()) >= params.dma_queue_depth) {
            Cycles first_end = core.in_flight_ends.top();
            core.in_flight_ends.pop();
            if (first_end > core.now) {
                add_event(OpKind::Stall, label_index, core.id, kControlTrack, core.now,
                          first_end - core.now);
                core.control_stall += first_end - core.now;
                core.now = first_end;
            }
        }

        // Each route is pinned to its ODMA unit (folded onto the units there are).
        const int unit = params.route_unit(from.space, to.space);
        if (unit == ZpuParams::kAnyUnit) {
            // No pinned route: the unit that frees first.
        } else if (unit < 0) {
            fail(what, core,
                 std::string("no single transfer goes from ") + space_name(from.space) + " to " +
                     space_name(to.space) + " (the ODMA routes of the machine description; " +
                     "DRAM -> ASRAM goes through RSRAM)");
        }
        const int channel =
            unit == ZpuParams::kAnyUnit
                ? int(std::min_element(core.channel_free.begin(), core.channel_free.end()) -
                      core.channel_free.begin())
                : unit % params.dma_channels;
        Cycles start = std::max(core.now, core.channel_free[channel]);
        Cycles duration = params.dma_cycles(count * bytes_of(to.type));
        Cycles end = start + duration;
        core.channel_free[channel] = end;
        core.in_flight_ends.push(end);
        core.dma_busy += duration;
        if (unit != ZpuParams::kAnyUnit)
            core.pinned_busy[channel] += duration;
        core.longest_dma = std::max(core.longest_dma, duration);
        core.last_transfer_end = std::max(core.last_transfer_end, end);
        add_event(OpKind::Dma, label_index, core.id, kFirstDmaTrack + channel, start, duration);

        // Issue edge control -> transfer: it sees what the control stream did so far (and itself);
        // the control stream's later ops are not ordered before it.
        uint64_t op = OpName{OpKind::Dma, channel, core.id, label_index}.pack();
        AsyncOp transfer{core.id, end, ++core.issued, core.known, op, dst};
        transfer.known.ops.insert(transfer.index);
        ++core.known.control;
        access(core, src, src_box, false, transfer.known, transfer.index, op);
        access(core, dst, dst_box, true, transfer.known, transfer.index, op);
        async_ops.push_back(std::move(transfer));

        if (numerics && count > 0) {
            detail::copy_box(buffers[dst].data.get(), dst_box, buffers[src].data.get(), src_box,
                             bytes_of(to.type));
        }
        return Token{int64_t(async_ops.size())};
    }

    void dma_wait(CoreRun &core, Token token, const std::string &label) {
        if (token.id == 0) {
            return;
        }
        if (token.id < 0 || size_t(token.id) > async_ops.size() ||
            async_ops[token.id - 1].core != core.id) {
            std::string why = token.id > 0 && size_t(token.id) <= async_ops.size()
                                  ? "which core " + std::to_string(async_ops[token.id - 1].core) +
                                        " issued; a token is waited on by its own core"
                                  : "which was never issued";
            std::string message = "deadlock on core " + std::to_string(core.id) + ": dma_wait '" +
                                  label + "' waits on token " + std::to_string(token.id) + ", " +
                                  why + ", so the control stream blocks for ever";
            core.blocked = true;
            report_deadlock(message);
            throw DeadlockError(message);
        }
        complete(core, async_ops[token.id - 1], OpKind::Wait, label);
    }

    /** The control stream waits until `done` has ended and then knows what it knew. */
    void complete(CoreRun &core, const AsyncOp &done, OpKind kind, const std::string &label) {
        if (done.end > core.now) {
            add_event(kind, label_id(label), core.id, kControlTrack, core.now, done.end - core.now);
            core.now = done.end;
        }
        core.known.ops.join(done.known.ops);
    }

    void sync(CoreRun &core, Engine engine, const std::string &label) {
        int64_t last = core.engine_last[size_t(engine)];
        if (last != 0) {
            complete(core, async_ops[size_t(last - 1)], OpKind::Sync, label);
        }
    }

    CoreRun &run_of(int core);

    Token broadcast(CoreRun &core, Link link, const std::vector<int> &receivers,
                    const std::string &dst, const Box &dst_box, int src, const Box &src_box,
                    const std::string &label) {
        std::string what = "broadcast '" + label + "'";
        const Buffer &from = checked_buffer(what, core, "source", src, src_box);
        if (receivers.empty()) {
            fail(what, core, "no receivers");
        }
        const bool column = link == Link::Column;
        const int64_t count = src_box.elements();
        std::vector<int> dsts;
        for (int r : receivers) {
            if (r < 0 || r >= params.cores || r == core.id ||
                std::count(receivers.begin(), receivers.end(), r) > 1) {
                fail(what, core,
                     "receiver " + std::to_string(r) +
                         " is not another core of the machine, named once");
            }
            if (column ? params.mesh_column(r) != params.mesh_column(core.id)
                       : params.mesh_row(r) != params.mesh_row(core.id)) {
                fail(what, core,
                     "core " + std::to_string(r) + " is not in this core's mesh " +
                         link_name(link) + " (rows of " + std::to_string(params.mesh_columns) +
                         " cores)");
            }
            auto named = sram_by_name.find({r, dst});
            if (named == sram_by_name.end()) {
                fail(what, core,
                     "core " + std::to_string(r) + " has no buffer named '" + dst + "'");
            }
            const Buffer &to = buffers[size_t(named->second)];
            if (!params.link_route[size_t(link)][size_t(from.space)][size_t(to.space)]) {
                fail(what, core,
                     std::string("the ") + link_name(link) + " link does not go from " +
                         space_name(from.space) + " to " + space_name(to.space) +
                         " (the link routes of the machine description)");
            }
            if (to.type != from.type || dst_box.elements() != count) {
                fail(what, core,
                     "destination '" + to.name + "' box " + dst_box.str() + " of " +
                         dtype_name(to.type) + " does not take source '" + from.name + "' box " +
                         src_box.str() + " of " + dtype_name(from.type));
            }
            std::string outside =
                detail::box_outside_error("destination", dst_box, to.name, to.elements);
            if (!outside.empty()) {
                fail(what, core, outside);
            }
            dsts.push_back(named->second);
        }
        const uint32_t label_index = label_id(label);
        const size_t l = size_t(link);
        Cycles start = std::max(core.now, core.link_free[l]);
        Cycles duration = params.link_cycles(column, count * bytes_of(from.type));
        Cycles end = start + duration;
        core.link_free[l] = end;
        core.link_busy[l] += duration;
        core.last_transfer_end = std::max(core.last_transfer_end, end);
        add_event(OpKind::Leaf, label_index, core.id, kFirstDmaTrack + params.dma_channels + int(l),
                  start, duration);

        // The sender's side, as a transfer's: ordered after what its control stream did so far.
        uint64_t op = OpName{OpKind::Leaf, int(l), core.id, label_index}.pack();
        AsyncOp leaf{core.id, end, ++core.issued, core.known, op, dsts[0]};
        leaf.known.ops.insert(leaf.index);
        ++core.known.control;
        access(core, src, src_box, false, leaf.known, leaf.index, op);
        PendingLeaf pending{core.id, leaf.index, {}};
        const std::shared_ptr<const std::vector<CoreKnowledge>> seen = leaf.known.others;
        async_ops.push_back(std::move(leaf));
        const Token token{int64_t(async_ops.size())};
        // Each receiver's side: an op of the receiver's numbering, ordered after what the sender
        // knew of the receiver (through barriers), writing the receiver's buffer.
        for (size_t i = 0; i < receivers.size(); ++i) {
            CoreRun &to = run_of(receivers[i]);
            Knowledge known;
            if (seen) {
                known.control = (*seen)[size_t(to.id)].control;
                known.ops = (*seen)[size_t(to.id)].ops;
            }
            AsyncOp arrival{to.id, end, ++to.issued, known, op, dsts[i]};
            arrival.known.ops.insert(arrival.index);
            access(to, dsts[i], dst_box, true, arrival.known, arrival.index, op);
            pending.receivers.push_back({to.id, arrival.index});
            async_ops.push_back(std::move(arrival));
            if (numerics && count > 0) {
                detail::copy_box(buffers[size_t(dsts[i])].data.get(), dst_box,
                                 buffers[size_t(src)].data.get(), src_box, bytes_of(from.type));
            }
        }
        pending_leaves.push_back(std::move(pending));
        return token;
    }

    void barrier(CoreRun &core, const std::vector<int> &cores, const std::string &label) {
        std::string what = "barrier '" + label + "'";
        if (!scheduler) {
            fail(what, core, "a barrier needs the cores' programs run by Machine::run");
        }
        if (!std::is_sorted(cores.begin(), cores.end()) ||
            std::adjacent_find(cores.begin(), cores.end()) != cores.end() || cores.empty() ||
            cores.front() < 0 || cores.back() >= params.cores ||
            !std::binary_search(cores.begin(), cores.end(), core.id)) {
            fail(what, core,
                 "its cores must be distinct core ids in increasing order, this one among them");
        }
        const int64_t call = core.barriers_met[cores]++;
        BarrierState &state = barriers[{cores, call}];
        state.arrived.push_back(core.id);
        state.label = label;
        if (state.arrived.size() < cores.size()) {
            std::string missing;
            for (int c : cores) {
                if (std::find(state.arrived.begin(), state.arrived.end(), c) == state.arrived.end())
                    missing += (missing.empty() ? "" : ", ") + std::to_string(c);
            }
            block(core.id, "barrier '" + label + "' waits for core " + missing);
            return; // released by the last core to arrive
        }
        release(cores, label);
        barriers.erase({cores, call});
    }

    /** The last of a barrier's cores arrived: each leaves knowing what all of them knew. */
    void release(const std::vector<int> &cores, const std::string &label) {
        std::vector<CoreKnowledge> joined(size_t(params.cores));
        Cycles last = 0;
        for (int c : cores) {
            const CoreRun &run = run_of(c);
            last = std::max(last, run.now);
            joined[size_t(c)].control = std::max(joined[size_t(c)].control, run.known.control);
            joined[size_t(c)].ops.join(run.known.ops);
            if (!run.known.others) {
                continue;
            }
            for (size_t other = 0; other < joined.size(); ++other) {
                if (int(other) == c)
                    continue;
                const CoreKnowledge &k = (*run.known.others)[other];
                joined[other].control = std::max(joined[other].control, k.control);
                joined[other].ops.join(k.ops);
            }
        }
        for (const PendingLeaf &leaf : pending_leaves) {
            if (joined[size_t(leaf.sender)].ops.contains(leaf.index)) {
                for (const auto &[receiver, index] : leaf.receivers)
                    joined[size_t(receiver)].ops.insert(index);
            }
        }
        const Cycles release_at = last + params.barrier_cycles;
        auto shared = std::make_shared<const std::vector<CoreKnowledge>>(joined);
        const uint32_t label_index = label_id(label);
        for (int c : cores) {
            CoreRun &run = run_of(c);
            add_event(OpKind::Barrier, label_index, c, kControlTrack, run.now,
                      release_at - run.now);
            run.now = release_at;
            run.known.ops = joined[size_t(c)].ops;
            run.known.others = shared;
            ++run.known.control;
            if (scheduler->state[size_t(c)] == Scheduler::Blocked)
                scheduler->state[size_t(c)] = Scheduler::Ready;
        }
        pending_leaves.erase(
            std::remove_if(pending_leaves.begin(), pending_leaves.end(),
                           [&](const PendingLeaf &leaf) {
                               return std::all_of(
                                   leaf.receivers.begin(), leaf.receivers.end(), [&](auto &r) {
                                       return run_of(r.first).known.ops.contains(r.second);
                                   });
                           }),
            pending_leaves.end());
    }

    /** Hands the baton back and waits for it; throws when resumed to unwind. */
    void block(int core, const std::string &waiting_at) {
        Scheduler &s = *scheduler;
        std::unique_lock<std::mutex> lock(s.mutex);
        s.state[size_t(core)] = Scheduler::Blocked;
        s.wait[size_t(core)] = waiting_at;
        s.turn = -1;
        s.changed.notify_all();
        s.changed.wait(lock, [&] { return s.turn == core; });
        if (s.unwind[size_t(core)]) {
            throw DeadlockError("deadlock on core " + std::to_string(core) + ": " + waiting_at);
        }
    }

    void run(const std::function<void(Core &)> &program);

    /** Issues a compute op of `duration` to `engine`: it starts when the engine is free (in
     * order), touches `accesses` as an async op ordered after the engine's previous op and after
     * what the control stream did so far. */
    void issue(CoreRun &core, Engine engine, OpKind kind, uint32_t label_index, Cycles duration,
               const std::vector<Access> &accesses) {
        const size_t e = size_t(engine);
        Cycles start = std::max(core.now, core.engine_free[e]);
        Cycles end = start + duration;
        core.engine_free[e] = end;
        core.last_transfer_end = std::max(core.last_transfer_end, end);
        (engine == Engine::Tensor ? core.tensor_busy : core.vector_busy) += duration;
        add_event(kind, label_index, core.id,
                  engine == Engine::Tensor ? kTensorTrack : kVectorTrack, start, duration);
        uint64_t op = OpName{kind, -1, core.id, label_index}.pack();
        int dst = -1; // what it writes, for a race with the end of the program
        for (const Access &x : accesses) {
            if (x.write)
                dst = x.buffer;
        }
        AsyncOp issued{core.id, end, ++core.issued, core.known, op, dst};
        if (core.engine_last[e] != 0) {
            issued.known.ops.join(async_ops[size_t(core.engine_last[e] - 1)].known.ops);
        }
        issued.known.ops.insert(issued.index);
        ++core.known.control;
        for (const Access &x : accesses) {
            access(core, x.buffer, x.box, x.write, issued.known, issued.index, op);
        }
        async_ops.push_back(std::move(issued));
        core.engine_last[e] = int64_t(async_ops.size());
    }

    void mma(CoreRun &core, int acc, const Box &acc_box, int a, const Box &a_box, int b,
             const Box &b_box, const std::string &label, bool accumulate) {
        std::string what = "mma '" + label + "'";
        const Buffer &acc_buffer = checked_buffer(what, core, "acc", acc, acc_box);
        const Buffer &a_buffer = checked_buffer(what, core, "a", a, a_box);
        const Buffer &b_buffer = checked_buffer(what, core, "b", b, b_box);
        struct Operand {
            const char *role;
            const Buffer &buffer;
            const Box &box;
            Space space;
            const char *dims;
        };
        for (const Operand &operand : {Operand{"acc", acc_buffer, acc_box, Space::RSRAM, "{N, M}"},
                                       Operand{"a", a_buffer, a_box, Space::ASRAM, "{K, M}"},
                                       Operand{"b", b_buffer, b_box, Space::WSRAM, "{N, K}"}}) {
            if (operand.buffer.space != operand.space) {
                fail(what, core,
                     std::string("operand ") + operand.role + " (buffer '" + operand.buffer.name +
                         "') is in " + space_name(operand.buffer.space) +
                         "; the tensor core takes it from " + space_name(operand.space));
            }
            std::string rank = detail::mma_rank_error(operand.role, operand.box, operand.dims);
            if (!rank.empty()) {
                fail(what, core, rank);
            }
        }
        std::string types =
            detail::mma_type_error(acc_buffer.name, acc_buffer.type, a_buffer.name, a_buffer.type,
                                   b_buffer.name, b_buffer.type, "mma", false);
        if (!types.empty()) {
            fail(what, core, types);
        }
        std::string shapes = detail::mma_shape_error(acc_box, a_box, b_box);
        if (!shapes.empty()) {
            fail(what, core, shapes);
        }
        int64_t n_count = acc_box.dims[0].extent, m_count = acc_box.dims[1].extent;
        int64_t k_count = a_box.dims[0].extent;
        uint32_t label_index = label_id(label);
        Cycles duration = params.mma_cycles(m_count, n_count, k_count, DType::F32);
        std::vector<Access> accesses = {{a, a_box, false}, {b, b_box, false}, {acc, acc_box, true}};
        issue(core, Engine::Tensor, OpKind::Mma, label_index, duration, accesses);
        if (numerics) {
            multiplier.multiply_add(acc_buffer.data.get(), acc_box, a_buffer.data.get(),
                                    a_buffer.type, a_box, b_buffer.data.get(), b_buffer.type, b_box,
                                    accumulate);
        }
    }

    void vector_op(CoreRun &core, const std::string &label, int64_t flops,
                   const std::vector<Access> &accesses, const std::function<void()> &compute) {
        std::string what = "vector '" + label + "'";
        if (flops < 0) {
            fail(what, core, "negative flop count " + std::to_string(flops));
        }
        for (const Access &x : accesses) {
            checked_buffer(what, core, x.write ? "written" : "read", x.buffer, x.box);
        }
        issue(core, Engine::Vector, OpKind::Vector, label_id(label), params.vector_cycles(flops),
              accesses);
        if (numerics && compute) {
            compute();
        }
    }

    void report_deadlock(const std::string &message) {
        if (deadlock && deadlock_message.find(message) != std::string::npos) {
            return; // the core that threw reports it again
        }
        deadlock_message += (deadlock ? "\n" : "") + message;
        deadlock = true;
    }

    /** Async ops of cores whose program ended without waiting on them (a token, an engine sync). */
    void unwaited_ops(const std::vector<const CoreRun *> &runs) {
        for (const AsyncOp &async : async_ops) {
            const CoreRun &run = *runs[size_t(async.core)];
            if (run.blocked || run.known.ops.contains(async.index) || async.dst < 0) {
                continue;
            }
            uint64_t end = OpName{OpKind::End, -1, async.core, 0}.pack();
            const OpName name = OpName::unpack(async.op);
            const bool transfer = name.kind == OpKind::Dma || name.kind == OpKind::Leaf;
            const bool arrival = name.core != async.core; // a leaf's side on a receiver
            races.add(async.op, end, async.dst, [&] {
                return Race{op_text(async.op), op_text(end), buffers[size_t(async.dst)].name,
                            arrival ? "no barrier after the sender's wait told this core the "
                                      "broadcast arrived: it may land after the kernel returned"
                            : transfer
                                ? "the program ended before waiting on this transfer's token: "
                                  "its data may land after the kernel returned"
                                : "the program ended before syncing this op's engine: it may "
                                  "still run after the kernel returned"};
            });
        }
    }

    void cross_core_races(const std::vector<const CoreRun *> &runs) {
        for (size_t buffer = 0; buffer < buffers.size(); ++buffer) {
            if (buffers[buffer].space != Space::DRAM || !buffers[buffer].written) {
                continue;
            }
            std::vector<detail::RunHistory> histories;
            for (const CoreRun *run : runs) {
                if (buffer < run->history.size()) {
                    histories.push_back({run->id, &run->history[buffer]});
                }
            }
            detail::cross_run_races(histories,
                                    [&](const AccessRecord &first, const AccessRecord &second) {
                                        add_race(first.op, second.op, int(buffer));
                                    });
        }
    }
};

CoreRun &Machine::Impl::run_of(int core) {
    return cores[size_t(core)]->state_->run;
}

void Machine::Impl::run(const std::function<void(Core &)> &program) {
    const int n = params.cores;
    scheduler = std::make_unique<Scheduler>();
    Scheduler &s = *scheduler;
    s.state.assign(size_t(n), Scheduler::Ready);
    s.unwind.assign(size_t(n), false);
    s.wait.assign(size_t(n), "");
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int c = 0; c < n; ++c) {
        threads.emplace_back([&, c] {
            {
                std::unique_lock<std::mutex> lock(s.mutex);
                s.changed.wait(lock, [&] { return s.turn == c; });
            }
            if (!s.unwind[size_t(c)]) {
                try {
                    program(*cores[size_t(c)]);
                } catch (const DeadlockError &) {
                    // recorded by the machine; the other cores still run
                } catch (...) {
                    errors[size_t(c)] = std::current_exception();
                }
            }
            std::lock_guard<std::mutex> lock(s.mutex);
            s.state[size_t(c)] = Scheduler::Done;
            s.turn = -1;
            s.changed.notify_all();
        });
    }
    // The baton: the lowest-numbered core that can go on runs until it ends or blocks.
    std::unique_lock<std::mutex> lock(s.mutex);
    for (;;) {
        const bool failed = std::any_of(errors.begin(), errors.end(),
                                        [](const std::exception_ptr &e) { return bool(e); });
        int next = -1;
        for (int c = 0; c < n && next < 0; ++c) {
            if (s.state[size_t(c)] == Scheduler::Ready)
                next = c;
        }
        if (failed || next < 0) {
            // A core failed (every other one unwinds), or the unfinished ones all wait at
            // barriers that can never complete (a deadlock, each named with its barrier).
            for (int c = 0; c < n; ++c) {
                if (s.state[size_t(c)] == Scheduler::Done || s.unwind[size_t(c)])
                    continue;
                if (!failed) {
                    run_of(c).blocked = true;
                    report_deadlock("deadlock on core " + std::to_string(c) + ": " +
                                    s.wait[size_t(c)] + ", which no core can reach");
                }
                s.unwind[size_t(c)] = true;
                s.state[size_t(c)] = Scheduler::Ready;
                if (next < 0)
                    next = c;
            }
            if (next < 0)
                break; // every core is done
        }
        s.turn = next;
        s.changed.notify_all();
        s.changed.wait(lock, [&] { return s.turn == -1; });
    }
    lock.unlock();
    for (std::thread &t : threads)
        t.join();
    scheduler.reset();
    for (const std::exception_ptr &e : errors) {
        if (e)
            std::rethrow_exception(e);
    }
}

// ---------------------------------------------------------------------------------------------
// Core
// ---------------------------------------------------------------------------------------------

Core::Core(Machine *m, int id) : machine_(m), id_(id), state_(std::make_shared<State>()) {
    const ZpuParams &params = m->params();
    CoreRun &run = state_->run;
    run.id = id;
    run.channel_free.assign(size_t(params.dma_channels), 0);
    run.pinned_busy.assign(size_t(params.dma_channels), 0);
}

Cycles Core::now() const {
    return state_->run.now;
}

Token Core::dma_start(int dst, const Box &dst_box, int src, const Box &src_box,
                      const std::string &label) {
    return machine_->impl_->dma_start(state_->run, dst, dst_box, src, src_box, label);
}

void Core::dma_wait(Token t, const std::string &label) {
    machine_->impl_->dma_wait(state_->run, t, label);
}

void Core::mma(int acc, const Box &acc_box, int a, const Box &a_box, int b, const Box &b_box,
               const std::string &label, bool accumulate) {
    machine_->impl_->mma(state_->run, acc, acc_box, a, a_box, b, b_box, label, accumulate);
}

void Core::sync(Engine engine, const std::string &label) {
    machine_->impl_->sync(state_->run, engine, label);
}

void Core::vector_op(const std::string &label, int64_t flops, const std::vector<Access> &accesses,
                     const std::function<void()> &compute) {
    machine_->impl_->vector_op(state_->run, label, flops, accesses, compute);
}

Token Core::broadcast(Link link, const std::vector<int> &receivers, const std::string &dst,
                      const Box &dst_box, int src, const Box &src_box, const std::string &label) {
    return machine_->impl_->broadcast(state_->run, link, receivers, dst, dst_box, src, src_box,
                                      label);
}

void Core::barrier(const std::vector<int> &cores, const std::string &label) {
    machine_->impl_->barrier(state_->run, cores, label);
}

// ---------------------------------------------------------------------------------------------
// Machine
// ---------------------------------------------------------------------------------------------

Machine::Machine(const ZpuParams &params, bool numerics, bool trace)
    : params_(params), numerics_(numerics) {
    auto require = [](bool ok, const std::string &message) {
        if (!ok) {
            throw SimError("ZpuParams: " + message);
        }
    };
    require(params.cores >= 1 && params.cores <= 4096, "cores must be in [1, 4096]");
    require(params.dma_channels >= 1 && params.dma_channels <= 250,
            "dma_channels must be in [1, 250]");
    require(params.dma_queue_depth >= 1, "dma_queue_depth must be at least 1");
    require(params.dma_bytes_per_cycle >= 1, "dma_bytes_per_cycle must be at least 1");
    require(params.vector_flops_per_cycle >= 1, "vector_flops_per_cycle must be at least 1");
    require(params.asram_bytes >= 0 && params.wsram_bytes >= 0 && params.rsram_bytes >= 0,
            "SRAM capacities must not be negative");
    impl_ = std::make_unique<Impl>(params, numerics, trace);
    for (int c = 0; c < params.cores; ++c) {
        impl_->cores.emplace_back(new Core(this, c));
    }
}

Machine::~Machine() = default;

int Machine::add_dram(const std::string &name, DType type, int64_t elements) {
    if (elements < 0) {
        throw SimError("add_dram '" + name + "': negative element count " +
                       std::to_string(elements));
    }
    Impl::Buffer buffer{name, type, Space::DRAM, -1, elements, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(elements * bytes_of(type))]());
    }
    impl_->buffers.push_back(std::move(buffer));
    return int(impl_->buffers.size()) - 1;
}

int Machine::add_sram(int core, const std::string &name, Space space, DType type,
                      int64_t elements) {
    std::string what = "add_sram '" + name + "'";
    if (core < 0 || core >= params_.cores) {
        throw SimError(what + ": core " + std::to_string(core) +
                       " does not exist (the machine has " + std::to_string(params_.cores) +
                       " cores)");
    }
    if (space == Space::DRAM) {
        throw SimError(what + ": DRAM is not an SRAM scope; use add_dram");
    }
    if (elements < 0) {
        throw SimError(what + ": negative element count " + std::to_string(elements));
    }
    int64_t bytes = elements * bytes_of(type);
    int64_t &used = impl_->sram_used[size_t(core)][size_t(space)];
    int64_t capacity = params_.capacity(space);
    if (bytes > capacity - used) {
        throw SimError("SRAM overflow: buffer '" + name + "' needs " + std::to_string(bytes) +
                       " bytes of " + space_name(space) + " on core " + std::to_string(core) +
                       ", but only " + std::to_string(capacity - used) + " of " +
                       std::to_string(capacity) +
                       " bytes are free; use smaller tiles or fewer stages");
    }
    used += bytes;
    Impl::Buffer buffer{name, type, space, core, elements, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(bytes)]());
    }
    impl_->buffers.push_back(std::move(buffer));
    const int id = int(impl_->buffers.size()) - 1;
    impl_->sram_by_name.emplace(std::make_pair(core, name), id);
    return id;
}

int Machine::sram_buffer(int c, const std::string &name) const {
    auto it = impl_->sram_by_name.find({c, name});
    return it == impl_->sram_by_name.end() ? -1 : it->second;
}

void Machine::run(const std::function<void(Core &)> &program) {
    impl_->run(program);
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
    return impl_->buffers[buffer].data.get();
}

DType Machine::type(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[buffer].type;
}

const std::string &Machine::name(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[buffer].name;
}

int64_t Machine::elements(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[buffer].elements;
}

Core &Machine::core(int c) {
    if (c < 0 || c >= params_.cores) {
        throw SimError("core " + std::to_string(c) + " does not exist (the machine has " +
                       std::to_string(params_.cores) + " cores)");
    }
    return *impl_->cores[size_t(c)];
}

void Machine::report_deadlock(const std::string &message) {
    impl_->report_deadlock(message);
}

Report Machine::finish() {
    std::vector<const CoreRun *> runs;
    for (const auto &core : impl_->cores) {
        runs.push_back(&core->state_->run);
    }
    impl_->cross_core_races(runs);
    impl_->unwaited_ops(runs);
    Report report;
    Cycles tensor = 0, vector = 0, dma = 0, link = 0, stall = 0;
    for (const CoreRun *core : runs) {
        const CoreRun &run = *core;
        Cycles finish = std::max(run.now, run.last_transfer_end);
        // (A route pinned to one unit loads that unit alone.)
        Cycles bound = std::max({run.tensor_busy, run.vector_busy,
                                 ceil_div(run.dma_busy, params_.dma_channels), run.longest_dma,
                                 *std::max_element(run.pinned_busy.begin(), run.pinned_busy.end()),
                                 run.link_busy[0], run.link_busy[1]});
        report.core_cycles.push_back(finish);
        report.cycles = std::max(report.cycles, finish);
        report.bound_cycles = std::max(report.bound_cycles, bound);
        tensor += run.tensor_busy;
        vector += run.vector_busy;
        dma += run.dma_busy;
        link += run.link_busy[0] + run.link_busy[1];
        stall += run.control_stall;
    }
    report.busy = {{"tensor", tensor}, {"vector", vector}, {"dma", dma}, {"control_stall", stall}};
    if (link > 0) {
        report.busy.push_back({"link", link});
    }
    impl_->races.report(report, impl_->deadlock, impl_->deadlock_message);
    return report;
}

void Machine::write_trace(const std::string &path) const {
    std::vector<std::string> tracks = {"control", "tensor", "vector"};
    for (int c = 0; c < params_.dma_channels; ++c) {
        tracks.push_back("dma" + std::to_string(c));
    }
    tracks.push_back("row link");
    tracks.push_back("column link");
    std::vector<detail::TraceProcess> processes;
    for (int core = 0; core < params_.cores; ++core) {
        processes.push_back({core, "core " + std::to_string(core), tracks});
    }
    impl_->trace.write(path, processes, impl_->labels);
}

} // namespace tandem::sim
