// The Hopper (sm_90a) machine model. See Hopper.h for the machine and its semantics; this file
// keeps the bookkeeping. The race check, numerics and trace writer are shared with the ZPU model
// (Hazards.h, Numerics.h, Trace.h).
//
// Choices this implementation makes (all visible to callers):
// - Scheduling: the earliest of (pending TMA load completions, ready agents by local time) goes
//   next; on a tie events go first, then the lower agent index. One step() call is one op; a
//   step that issues several ops runs them back to back at the agent's time (exact timing needs
//   one op per step).
// - Every op costs the agent issue_cycles, at the time it executes. A vector op costs
//   issue_cycles + ceil(flops / vector_flops_per_cycle) ("vector" busy). A failed wait costs
//   nothing; the agent sleeps from its time until woken ("barrier_wait" busy), then retries.
// - The TMA unit and the tensor core of an SM serve one request at a time, in the order the
//   requests are issued: start = max(issue, unit free). A request occupies its unit for its
//   transfer (at the SM port, within what HBM and L2 have left in time, SharedBandwidth; lines read
//   before from L2) or compute (ceil(m n k / wgmma_macs_per_cycle)) part only, and completes
//   tma_latency or wgmma_latency later: latencies of back-to-back requests overlap, so deeper rings
//   hide them. Busy time ("tma", "tensor", bound_cycles) is the occupancy. TMA loads and stores
//   share the unit; a box's bytes are its full size.
// - mbarrier: a phase completes at the latest of its arrivals and tx completions; waiters see it
//   barrier_latency cycles later (try_wait checks visibility, so a phase that completed but is not
//   visible yet blocks until it is). Named barriers release all participants barrier_latency
//   after the last arrival; each retries its sync and passes.
// - An mbarrier phase carries the join of every arrival and TMA completion on the barrier so far
//   (arrivals are read-modify-writes of one object: a waiter that sees a phase sees the phases
//   before it). Each barrier has its own TMA lane clock: loads completing on one barrier are
//   ordered among themselves, loads on different barriers are not.
// - Using an mbarrier (arrive, wait, TMA completion) whose mbarrier_init is not ordered before
//   the use is a race on "mbarrier <name>": initialise, then sync the CTA (a named barrier of all
//   agents) before other agents touch it. Initialising twice is a SimError.
// - A TMA load no agent ever waited for (no agent's clock reached its barrier phase when the
//   CTA ended) is reported as a race with the CTA's exit: its smem would be written after the
//   CTA gave it to the next CTA on the SM. It catches waits that pass on a stale phase. Likewise
//   a TMA store no bulk wait_group_read retired before the CTA ended (it may still read smem).
// - Numerics: a TMA load writes smem at its completion, a TMA store copies at issue, wgmma and
//   vector ops compute at issue. The happens-before check, not the numerics, finds reads of data
//   still in flight.
// - wgmma accesses (a, b reads, acc write) belong to the issuing agent's tensor-core clock; a
//   TMA store's accesses (smem read, global write) to its bulk-store clock. wait_group(n) and
//   wait_group_read(n) join back exactly the groups they retire (all but the newest n).
// - fence.proxy.async: a generic-proxy smem write (vector op) read later by the async proxy
//   (TMA store source, wgmma a/b) needs a fence_proxy_async by the writing agent after the write
//   that happens before the read; otherwise the race says "missing fence.proxy.async".
// - Smem: buffers take their bytes without padding or alignment, each mbarrier 8 bytes. Register
//   buffers of a CTA together may use at most registers_per_sm 32-bit registers.
// - wgmma shapes are not restricted to the hardware's m64nNk16 (a box is a whole tile).
// - Op names in races: "kind 'label' (engine, agent 'name', CTA c)".

#include "sim/Hopper.h"

#include "sim/Hazards.h"
#include "sim/Numerics.h"
#include "sim/Trace.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <queue>
#include <tuple>
#include <unordered_map>

namespace tandem::sim::hopper {

using detail::AccessRecord;
using detail::BufferHistory;
using detail::ElementSet;

HopperParams HopperParams::from(const ParamLookup &get) {
    return params_from<HopperParams>(get);
}

int64_t HopperParams::tma_cycles(int64_t miss, int64_t hit, int active) const {
    const double share = 1.0 / std::max(active, 1);
    const double from_hbm = std::min(tma_bytes_per_cycle, hbm_bytes_per_cycle * share),
                 from_l2 = std::min(tma_bytes_per_cycle, l2_bytes_per_cycle * share);
    return tma_latency + int64_t(std::ceil(double(miss) / from_hbm + double(hit) / from_l2));
}

SharedBandwidth::SharedBandwidth(double bytes_per_cycle) : rate_(bytes_per_cycle) {}

double SharedBandwidth::move(double start, double bytes, double port) {
    total_ += std::max(bytes, 0.0);
    double t = start;
    while (bytes > 0) {
        const size_t b = size_t(t / kBucketCycles);
        if (used_.size() <= b)
            used_.resize(b + 4096, 0.0);
        const double bucket_end = double(b + 1) * kBucketCycles;
        const double room = rate_ * kBucketCycles - used_[b];
        const double span = bucket_end - t;
        const double take = std::min(room, port * span);
        if (take >= bytes) {
            add(b, bytes);
            return t +
                   bytes / std::max(take / span, 1e-9); // at this bucket's rate for the transfer
        }
        if (take > 0) {
            add(b, take);
            bytes -= take;
        }
        t = bucket_end;
    }
    return t;
}

void SharedBandwidth::add(size_t bucket, double bytes) {
    if (tree_.size() < used_.size()) { // rebuild for the new size
        tree_.assign(used_.size(), 0.0);
        for (size_t i = 0; i < used_.size(); ++i) {
            tree_[i] += used_[i];
            size_t parent = i | (i + 1);
            if (parent < tree_.size())
                tree_[parent] += tree_[i];
        }
    }
    used_[bucket] += bytes;
    for (size_t i = bucket; i < tree_.size(); i |= i + 1)
        tree_[i] += bytes;
}

double SharedBandwidth::between(double from, double to) const {
    auto prefix = [&](double t) { // the buckets before the one t lies in, and that one
        if (t < 0)
            return 0.0;
        double sum = 0;
        for (int64_t i = std::min<int64_t>(int64_t(t / kBucketCycles), int64_t(tree_.size()) - 1);
             i >= 0; i = (i & (i + 1)) - 1)
            sum += tree_[size_t(i)];
        return sum;
    };
    return from > to ? 0.0 : prefix(to) - prefix(from - kBucketCycles);
}

TimedL2::Split TimedL2::read(int buffer, const Box &box, int element_bytes, double time) {
    Split split;
    uint64_t previous = ~uint64_t(0);
    // Every line (sector) a read touches moves whole: a row that straddles sectors costs more than
    // its bytes.
    detail::for_each_line(buffer, box, element_bytes, line_, [&](uint64_t key, int64_t) {
        if (key == previous)
            return; // the next run of the same line (short rows)
        previous = key;
        auto it = lines_.find(key);
        if (it == lines_.end()) {
            split.miss += line_;
            lines_.emplace(key, Uses{time, time});
            return;
        }
        Uses &u = it->second;
        double since = time >= u.last    ? hbm_.between(u.last, time)
                       : time <= u.first ? hbm_.between(time, u.first)
                                         : 0;
        (since < capacity_ ? split.hit : split.miss) += line_;
        u.first = std::min(u.first, time);
        u.last = std::max(u.last, time);
    });
    return split;
}

int64_t HopperParams::wgmma_cycles(int64_t m, int64_t n, int64_t k) const {
    return wgmma_latency +
           int64_t(std::ceil(double(m) * double(n) * double(k) / wgmma_macs_per_cycle));
}

namespace {

constexpr int kFirstCtaBuffer = 1 << 24; // smem and register buffer ids of the running CTA
constexpr int kMaxAgents = 16;
constexpr int kNamedBarriers = 16;
constexpr int64_t kBarrierBytes = 8;
constexpr int kMaxCtas = 1 << 20;
constexpr int kMaxTensorRank = 5;
constexpr int64_t kMaxBoxDim = 256;
constexpr int64_t kMaxTxBytes = (1 << 20) - 1;
constexpr int64_t kMaxIdleSteps = 1000000;

// Trace tracks of an SM; agents follow, one track per agent name.
constexpr int kTmaTrack = 0;
constexpr int kTensorTrack = 1;

enum class OpKind : uint8_t {
    TmaLoad,
    TmaStore,
    ThreadLoad,
    ThreadStore,
    Wgmma,
    Vector,
    Mbarrier,
    Exit,
    Wait,
    WgmmaWait
};

const char *op_kind_name(OpKind k) {
    switch (k) {
    case OpKind::TmaLoad:
        return "tma_load";
    case OpKind::TmaStore:
        return "tma_store";
    case OpKind::ThreadLoad:
        return "thread_load";
    case OpKind::ThreadStore:
        return "thread_store";
    case OpKind::Wgmma:
        return "wgmma";
    case OpKind::Vector:
        return "vector";
    case OpKind::Mbarrier:
        return "mbarrier";
    case OpKind::Exit:
        return "exit";
    case OpKind::Wait:
        return "wait";
    case OpKind::WgmmaWait:
        return "wgmma_wait";
    }
    return "?";
}

/** An op instance as races name it: kind, issuing agent, CTA, label, packed in 64 bits. */
struct OpName {
    OpKind kind;
    int agent; // -1: none
    int cta;
    uint32_t label;

    uint64_t pack() const {
        return uint64_t(label) << 32 | uint64_t(uint32_t(cta) & 0xfffffu) << 12 |
               uint64_t(uint8_t(agent + 1)) << 4 | uint64_t(kind);
    }
    static OpName unpack(uint64_t bits) {
        return {OpKind(bits & 0xf), int((bits >> 4) & 0xff) - 1, int((bits >> 12) & 0xfffff),
                uint32_t(bits >> 32)};
    }
};

enum class Memory : uint8_t { Global, Shared, Registers };

const char *memory_name(Memory m) {
    switch (m) {
    case Memory::Global:
        return "global memory";
    case Memory::Shared:
        return "smem";
    case Memory::Registers:
        return "registers";
    }
    return "?";
}

// Memory proxies of an access (fence.proxy.async orders the generic one before the async one).
constexpr uint8_t kGenericProxy = 0;
constexpr uint8_t kAsyncProxy = 1;

// Race kinds, part of the dedup key.
enum RaceKind : int64_t {
    kUnordered = 0,
    kMissingFence = 1,
    kBarrierInit = 2,
    kLostLoad = 3,
    kUnretiredStore = 4,
    kRemoteArrival = 5,
    kRaceKinds = 8 // room for the kinds in the dedup key
};

struct Buffer {
    std::string name;
    DType type;
    Memory memory;
    int agent; // registers: the owning agent
    int64_t elements;
    std::unique_ptr<std::byte[]> data;
    bool written = false; // global: by some CTA (enables the cross-CTA check)
};

/** A committed wgmma or bulk-store group: when it ends and the clock that retiring it joins
 * (a store group also names its last store and the smem it reads). */
struct Group {
    Cycles end = 0;
    std::vector<int64_t> clock;
    uint64_t op = 0;
    int buffer = -1;
};

enum class WaitKind : uint8_t { None, Mbarrier, NamedBarrier, BulkRead, ClusterSync };

struct Agent {
    std::string name;
    uint32_t label = 0;
    std::unique_ptr<AgentProgram> program;
    enum class State : uint8_t { Ready, Blocked, Done } state = State::Ready;
    Cycles now = 0, blocked_since = 0;
    WaitKind wait = WaitKind::None;
    int wait_id = -1;
    int64_t idle_steps = 0;
    bool wgmma_open = false;
    Cycles wgmma_open_end = 0;
    std::deque<Group> wgmma_groups;
    bool store_open = false;
    Cycles store_open_end = 0;
    uint64_t store_open_op = 0;
    int store_open_buffer = -1;
    std::deque<Group> store_groups;
    std::vector<int64_t> fence_epochs; // own epochs at which it ran fence_proxy_async
    std::array<bool, kNamedBarriers> released{};
    bool cluster_released = false;
    int max_registers = 0; // setmaxnreg; 0 until set
    int track = 0;
};

struct Completion {
    Cycles time;
    std::vector<int64_t> clock;
};

struct Barrier {
    std::string name;
    bool initialised = false;
    int count = 0, pending = 0;
    int64_t tx = 0;
    Cycles phase_latest = 0;
    int64_t completions = 0;
    std::deque<Completion> recent; // the latest completion visible now and later ones
    std::vector<int64_t> clock;    // join of every arrival and TMA completion so far
    std::vector<int> waiters;
    int init_agent = -1;
    int64_t init_epoch = 0;
    uint64_t init_op = 0;
    int64_t last_load_epoch = 0; // of its TMA lane
    uint64_t last_load_op = 0;
    int last_load_buffer = -1;
};

struct NamedBarrier {
    int expected = 0;
    std::vector<int> arrived;
    std::vector<int64_t> clock;
    Cycles latest = 0;
};

struct Load {
    std::string issuer; // the issuing agent, for messages ("agent 'producer' of CTA 3")
    bool remote;        // multicast by another CTA of the cluster
    int barrier;
    int64_t bytes;
    int smem, global;
    Box smem_full, smem_inside, global_inside;
    bool any_inside, clipped;
    uint32_t label;
    std::vector<int64_t> clock;
    const char *op; // tma_load or thread_load
};

struct Event {
    Cycles time;
    int64_t sequence;
    size_t load;
    bool operator>(const Event &o) const {
        return std::tie(time, sequence) > std::tie(o.time, o.sequence);
    }
};

/** The boxes of one TMA transfer: the dense smem box, and the parts inside the view. */
struct TmaBoxes {
    Box smem_full, smem_inside, global_inside;
    int64_t elements = 0;
    bool any_inside = false, clipped = false;
};

} // namespace

// ---------------------------------------------------------------------------------------------
// Machine state
// ---------------------------------------------------------------------------------------------

struct Machine::Impl {
    class CtaRun;
    struct Cluster;

    Impl(const HopperParams &p, bool numerics_on, bool trace_on)
        : params(p), numerics(numerics_on), trace(trace_on), active_sms(p.sms),
          sm_free(size_t(p.sms), 0), vector_free(size_t(p.sms), 0), tma_free(size_t(p.sms), 0),
          tensor_free(size_t(p.sms), 0), tma_busy(size_t(p.sms), 0), tensor_busy(size_t(p.sms), 0),
          sm_tracks(size_t(p.sms)) {}

    HopperParams params;
    bool numerics;
    detail::TraceLog trace;
    int active_sms; // SMs sharing HBM and L2: min(grid, sms)
    SharedBandwidth hbm{params.hbm_bytes_per_cycle}, l2_bandwidth{params.l2_bytes_per_cycle};
    TimedL2 l2_lines{32, params.l2_bytes, hbm}; // 32-byte sectors: what a miss fills
    std::vector<Buffer> globals;
    CtaRun *running = nullptr;

    std::vector<Cycles> sm_free, vector_free, tma_free, tensor_free, tma_busy, tensor_busy;
    Cycles vector_busy = 0, barrier_wait = 0;
    std::vector<std::vector<std::string>> sm_tracks; // per SM, empty until a CTA ran there

    detail::Labels labels;
    detail::RaceLog races;
    detail::MatrixMultiplier multiplier;
    std::unordered_map<int, std::vector<uint32_t>> cta_agents; // agent labels, for op names
    std::vector<bool> cta_ran;

    struct CtaGlobals {
        int cta;
        std::vector<std::pair<int, BufferHistory>> histories; // global buffer id, accesses
    };
    std::vector<CtaGlobals> finished;

    bool deadlock = false;
    std::string deadlock_message;

    std::string op_text(uint64_t packed) const {
        OpName op = OpName::unpack(packed);
        std::string cta = "CTA " + std::to_string(op.cta);
        if (op.kind == OpKind::Exit) {
            return "exit of " + cta;
        }
        std::string agent;
        auto it = cta_agents.find(op.cta);
        if (it != cta_agents.end() && op.agent >= 0 && size_t(op.agent) < it->second.size()) {
            agent = "agent '" + labels.text(it->second[size_t(op.agent)]) + "', ";
        }
        std::string engine;
        switch (op.kind) {
        case OpKind::TmaLoad:
        case OpKind::TmaStore:
            engine = "tma, ";
            break;
        case OpKind::Wgmma:
            engine = "tensor core, ";
            break;
        default:
            break;
        }
        return std::string(op_kind_name(op.kind)) + " '" + labels.text(op.label) + "' (" + engine +
               agent + cta + ")";
    }

    void add_race(uint64_t first, uint64_t second, int64_t key, RaceKind kind,
                  const std::string &buffer, const char *reason) {
        races.add(first, second, key * kRaceKinds + kind, [&] {
            return Race{op_text(first), op_text(second), buffer, reason};
        });
    }

    int track(int sm, const std::string &agent_name) {
        std::vector<std::string> &tracks = sm_tracks[size_t(sm)];
        if (tracks.empty()) {
            tracks = {"tma", "tensor"};
        }
        for (size_t t = 2; t < tracks.size(); ++t) {
            if (tracks[t] == agent_name) {
                return int(t);
            }
        }
        tracks.push_back(agent_name);
        return int(tracks.size()) - 1;
    }

    void cross_cta_races() {
        std::vector<std::vector<detail::RunHistory>> by_buffer(globals.size());
        for (const CtaGlobals &cta : finished) {
            for (const auto &entry : cta.histories) {
                by_buffer[size_t(entry.first)].push_back({cta.cta, &entry.second});
            }
        }
        for (size_t buffer = 0; buffer < globals.size(); ++buffer) {
            if (!globals[buffer].written) {
                continue;
            }
            detail::cross_run_races(by_buffer[buffer],
                                    [&](const AccessRecord &first, const AccessRecord &second) {
                                        add_race(first.op, second.op, int64_t(buffer), kUnordered,
                                                 globals[buffer].name, "");
                                    });
        }
    }

    void run_cluster(int first_cta, int ctas, const CtaFactory &make_cta);
    /** A global buffer, or smem or registers of the running CTA; SimError otherwise. */
    Buffer &buffer(int id);
};

// ---------------------------------------------------------------------------------------------
// One CTA: its builder, its agents' ops and the scheduler
// ---------------------------------------------------------------------------------------------

/** What the CTAs of one cluster share: one space of vector clocks (each CTA's from its base), the
 * time of the step or event being processed, and the state of cluster_sync. */
struct Machine::Impl::Cluster {
    std::vector<CtaRun *> ctas; // by rank
    detail::VectorClocks clocks;
    Cycles time = 0;
    struct Arrival {
        int rank, agent;
    };
    std::vector<Arrival> sync_arrived;
    std::vector<int64_t> sync_clock;
    Cycles sync_latest = 0;
};

class Machine::Impl::CtaRun final : public AgentOps, public Machine::CtaBuilder {
public:
    CtaRun(Impl &impl, Cluster &cluster, int rank, int cta, int sm, Cycles start)
        : impl_(impl), params_(impl.params), cluster_(cluster), rank_(rank), cta_(cta), sm_(sm),
          start_(start), end_(start), clocks_(cluster.clocks), time_(cluster.time) {}

    // --- builder -----------------------------------------------------------------------------

    int add_smem(const std::string &name, DType type, int64_t elements,
                 int64_t charged_bytes) override {
        std::string what = "add_smem '" + name + "'";
        check_building(what);
        if (elements < 0) {
            build_error(what + ": negative element count " + std::to_string(elements));
        }
        take_smem(name, "buffer", charged_bytes >= 0 ? charged_bytes : elements * bytes_of(type));
        return add_local(name, type, Memory::Shared, -1, elements);
    }

    int add_registers(int agent, const std::string &name, DType type, int64_t elements) override {
        std::string what = "add_registers '" + name + "'";
        check_building(what);
        if (agent < 0 || size_t(agent) >= agents_.size()) {
            build_error(what + ": agent " + std::to_string(agent) +
                        " does not exist (the CTA has " + std::to_string(agents_.size()) +
                        " agents; add_agent first)");
        }
        if (elements < 0) {
            build_error(what + ": negative element count " + std::to_string(elements));
        }
        int64_t registers = detail::ceil_div(elements * bytes_of(type), 4);
        int64_t free = params_.registers_per_sm - registers_used_;
        if (registers > free) {
            build_error("register file overflow in CTA " + std::to_string(cta_) + ": buffer '" +
                        name + "' of agent '" + agents_[size_t(agent)].name + "' needs " +
                        std::to_string(registers) + " registers, but only " + std::to_string(free) +
                        " of " + std::to_string(params_.registers_per_sm) +
                        " are free; use smaller accumulator tiles");
        }
        registers_used_ += registers;
        return add_local(name, type, Memory::Registers, agent, elements);
    }

    int add_barrier(const std::string &name) override {
        check_building("add_barrier '" + name + "'");
        take_smem(name, "mbarrier", kBarrierBytes);
        barriers_.emplace_back();
        barriers_.back().name = name;
        return int(barriers_.size()) - 1;
    }

    int add_agent(const std::string &name) override {
        check_building("add_agent '" + name + "'");
        if (agents_.size() >= size_t(kMaxAgents)) {
            build_error("add_agent '" + name + "': a CTA has at most " +
                        std::to_string(kMaxAgents) + " agents (warpgroups)");
        }
        agents_.emplace_back();
        agents_.back().name = name;
        agents_.back().label = impl_.labels.id(name);
        return int(agents_.size()) - 1;
    }

    // --- agent ops ---------------------------------------------------------------------------

    int agent() const override { return current_; }
    int cta() const override { return cta_; }
    Cycles now() const override { return agents_[size_t(current_)].now; }

    void mbarrier_init(int barrier, int count) override {
        const char *op = "mbarrier_init";
        begin_op(op);
        Barrier &bar = barrier_of(op, barrier);
        if (bar.initialised) {
            fail(op, "mbarrier '" + bar.name + "' is already initialised (count " +
                         std::to_string(bar.count) + "); initialise each barrier once");
        }
        if (count < 1 || count > kMaxTxBytes) {
            fail(op, "mbarrier '" + bar.name + "': count " + std::to_string(count) +
                         " must be in [1, " + std::to_string(kMaxTxBytes) + "]");
        }
        bar.initialised = true;
        bar.count = bar.pending = count;
        bar.init_agent = wg(current_);
        bar.init_epoch = clocks_.epoch(wg(current_));
        bar.init_op = op_name(OpKind::Mbarrier, "init " + bar.name);
        me().now += params_.issue_cycles;
    }

    void mbarrier_arrive(int barrier) override { arrive("mbarrier_arrive", barrier, 0); }

    void mbarrier_arrive_expect_tx(int barrier, int64_t bytes) override {
        arrive("mbarrier_arrive_expect_tx", barrier, bytes);
    }

    bool mbarrier_try_wait_parity(int barrier, int parity) override {
        const char *op = "mbarrier_try_wait_parity";
        begin_op(op);
        Barrier &bar = used_barrier(op, barrier, "wait");
        if (parity != 0 && parity != 1) {
            fail(op, "mbarrier '" + bar.name + "': parity " + std::to_string(parity) +
                         " must be 0 or 1");
        }
        Agent &agent = me();
        prune(bar);
        // Completions visible at this agent's time: all but a suffix of the recent ones.
        int64_t visible = bar.completions;
        size_t at = bar.recent.size();
        while (at > 0 && bar.recent[at - 1].time + params_.barrier_latency > agent.now) {
            --at;
            --visible;
        }
        if ((visible & 1) != parity) {
            if (visible > 0) {
                clocks_.join(wg(current_), bar.recent[at - 1].clock.data());
            }
            agent.now += params_.issue_cycles;
            return true;
        }
        Cycles wake = at < bar.recent.size() ? bar.recent[at].time + params_.barrier_latency : -1;
        block(WaitKind::Mbarrier, barrier, wake);
        if (wake < 0) {
            bar.waiters.push_back(current_);
        }
        return false;
    }

    void tma_load(int smem, int64_t smem_offset, const TensorView &view,
                  const std::vector<int64_t> &coords, const std::vector<int64_t> &box, int barrier,
                  const std::string &label) override {
        const char *op = "tma_load";
        begin_op(op, &label);
        TmaBoxes boxes = tma_boxes(op, label, smem, smem_offset, view, coords, box);
        land(OpKind::TmaLoad, smem, view.buffer, boxes, barrier, label);
    }

    void tma_load_multicast(int smem, int64_t smem_offset, const TensorView &view,
                            const std::vector<int64_t> &coords, const std::vector<int64_t> &box,
                            int barrier, uint32_t cta_mask, const std::string &label) override {
        const char *op = "tma_load_multicast";
        begin_op(op, &label);
        if (cta_mask == 0 || (cta_mask >> cluster_size()) != 0) {
            fail(op, label,
                 "CTA mask " + std::to_string(cta_mask) + " must name ranks of the cluster (" +
                     std::to_string(cluster_size()) + " CTAs), at least one");
        }
        TmaBoxes boxes = tma_boxes(op, label, smem, smem_offset, view, coords, box);
        land(OpKind::TmaLoad, smem, view.buffer, boxes, barrier, label, cta_mask);
    }

    void mbarrier_arrive_remote(int barrier, int rank) override {
        const char *op = "mbarrier_arrive_remote";
        if (rank < 0 || rank >= cluster_size()) {
            fail(op, "rank " + std::to_string(rank) + " is not in the cluster (" +
                         std::to_string(cluster_size()) + " CTAs)");
        }
        CtaRun *to = cluster_.ctas[size_t(rank)];
        arrive(op, barrier, 0, to == this ? nullptr : to);
    }

    int cluster_rank() const override { return rank_; }
    int cluster_size() const override { return int(cluster_.ctas.size()); }

    bool cluster_sync() override {
        const char *op = "cluster_sync";
        begin_op(op);
        Agent &agent = me();
        if (agent.cluster_released) {
            agent.cluster_released = false;
            agent.now += params_.issue_cycles;
            return true;
        }
        cluster_.sync_arrived.push_back({rank_, current_});
        clocks_.join_into(cluster_.sync_clock, clocks_.clock(wg(current_)));
        clocks_.tick(wg(current_));
        cluster_.sync_latest = std::max(cluster_.sync_latest, agent.now);
        size_t expected = 0;
        for (const CtaRun *cta : cluster_.ctas) {
            expected += cta->agents_.size();
        }
        if (cluster_.sync_arrived.size() < expected) {
            block(WaitKind::ClusterSync, 0, -1);
            return false;
        }
        Cycles release = cluster_.sync_latest + params_.barrier_latency;
        for (const Cluster::Arrival &a : cluster_.sync_arrived) {
            CtaRun &cta = *cluster_.ctas[size_t(a.rank)];
            clocks_.join(cta.wg(a.agent), cluster_.sync_clock.data());
            cta.agents_[size_t(a.agent)].cluster_released = true;
            if (&cta != this || a.agent != current_) {
                cta.wake(a.agent, release);
            }
        }
        cluster_.sync_arrived.clear();
        cluster_.sync_clock.clear();
        cluster_.sync_latest = 0;
        block(WaitKind::ClusterSync, 0, release);
        return false;
    }

    void thread_load(int smem, const Box &smem_box, int global, const Box &global_box, int barrier,
                     const std::string &label) override {
        const char *op = "thread_load";
        begin_op(op, &label);
        land(OpKind::ThreadLoad, smem, global,
             thread_boxes(op, label, smem, smem_box, global, global_box), barrier, label);
    }

    /** A TMA or thread load: the data lands when the transfer ends and completes its bytes on
     * the barrier; a thread load keeps its agent busy until then. `multicast` > 0: the CTAs of
     * the cluster it lands in (a mask of ranks), the same smem buffer and barrier in each. */
    void land(OpKind kind, int smem, int global, const TmaBoxes &boxes, int barrier,
              const std::string &label, uint32_t multicast = 0) {
        const char *op = op_kind_name(kind);
        const bool threads = kind == OpKind::ThreadLoad;
        uint64_t name = op_name(kind, label);
        std::vector<CtaRun *> into;
        for (size_t r = 0; r < cluster_.ctas.size(); ++r) {
            if (multicast ? (multicast >> r & 1) != 0 : cluster_.ctas[r] == this) {
                into.push_back(cluster_.ctas[r]);
            }
        }
        for (CtaRun *cta : into) {
            used_barrier(op, barrier, nullptr, &name, cta == this ? nullptr : cta);
            const Buffer *peer = cta->local_buffer(smem);
            const Buffer &own = local(smem);
            if (!peer || peer->memory != Memory::Shared || peer->name != own.name ||
                peer->elements != own.elements || peer->type != own.type) {
                fail(op, label,
                     "smem '" + own.name + "' is not the same buffer in CTA " +
                         std::to_string(cta->cta_) +
                         "; a multicast lands at the same smem of every CTA");
            }
        }
        int64_t bytes = boxes.elements * bytes_of(local(smem).type);
        Agent &agent = me();
        detail::L2Lines::Split traffic;
        if (boxes.any_inside) {
            TimedL2::Split lines =
                impl_.l2_lines.read(global, boxes.global_inside, bytes_of(local(smem).type),
                                    double(std::max(agent.now, impl_.tma_free[size_t(sm_)])));
            traffic.miss = lines.miss;
            traffic.hit = lines.hit;
        }
        // A multicast streams into every receiving SM at once: it starts when all their ports
        // are free, and occupies each for the transfer (the L2 reads the bytes once).
        Cycles issue = agent.now;
        for (CtaRun *cta : into) {
            issue = std::max(issue, impl_.tma_free[size_t(cta->sm_)]);
        }
        const Cycles start = std::max(issue, impl_.tma_free[size_t(sm_)]);
        Cycles end = reserve_tma(issue, traffic, name);
        if (threads)
            end += thread_latencies(boxes.elements);

        // Each CTA's TMA lane of the barrier is ordered after the issue.
        for (CtaRun *cta : into) {
            clocks_.join(cta->lane_of(barrier), clocks_.clock(wg(current_)));
        }
        clocks_.tick(wg(current_));
        if (boxes.any_inside) {
            access(global, boxes.global_inside, false, into.front()->lane_of(barrier), name,
                   kAsyncProxy);
        }
        const std::string issuer = "agent '" + agents_[size_t(current_)].name + "'";
        const Cycles transfer_end = impl_.tma_free[size_t(sm_)];
        for (CtaRun *cta : into) {
            if (cta != this) {
                Cycles &port = impl_.tma_free[size_t(cta->sm_)];
                impl_.tma_busy[size_t(cta->sm_)] += transfer_end - start;
                port = transfer_end;
            }
            cta->receive(Load{cta == this ? issuer : issuer + " of CTA " + std::to_string(cta_),
                              cta != this,
                              barrier,
                              bytes,
                              smem,
                              global,
                              boxes.smem_full,
                              boxes.smem_inside,
                              boxes.global_inside,
                              boxes.any_inside,
                              boxes.clipped,
                              uint32_t(name >> 32),
                              {},
                              op},
                         name, end);
        }
        agent.now = threads ? end : agent.now + params_.issue_cycles;
    }

    /** A load landing in this CTA at `at` (issued here, or multicast by a peer). */
    void receive(Load load, uint64_t name, Cycles at) {
        int lane = lane_of(load.barrier);
        access(load.smem, load.smem_full, true, lane, name, kAsyncProxy);
        Barrier &bar = barriers_[size_t(load.barrier)];
        bar.last_load_epoch = clocks_.epoch(lane);
        bar.last_load_op = name;
        bar.last_load_buffer = load.smem;
        load.clock = clocks_.copy(lane);
        loads_.push_back(std::move(load));
        clocks_.tick(lane);
        events_.push(Event{at, next_event_++, loads_.size() - 1});
        end_ = std::max(end_, at);
    }

    /** The memory latencies a thread copy waits beyond its first: one per batch of loads. */
    Cycles thread_latencies(int64_t elements) const {
        const int64_t batch = 128 * int64_t(params_.thread_copy_batch);
        return std::max<int64_t>(0, (elements + batch - 1) / batch - 1) * params_.tma_latency;
    }

    /** The boxes of a thread copy: any strides, nothing clipped. */
    TmaBoxes thread_boxes(const char *op, const std::string &label, int smem, const Box &smem_box,
                          int global, const Box &global_box) {
        const Buffer &shared = checked(op, label, "smem", smem, smem_box);
        const Buffer &tensor = checked(op, label, "global", global, global_box);
        if (shared.memory != Memory::Shared || tensor.memory != Memory::Global) {
            fail(op, label,
                 "a thread copy moves a box between global memory ('" + tensor.name +
                     "') and smem ('" + shared.name + "')");
        }
        if (shared.type != tensor.type) {
            fail(op, label,
                 "smem '" + shared.name + "' is " + dtype_name(shared.type) + " but '" +
                     tensor.name + "' is " + dtype_name(tensor.type) +
                     "; a thread copy moves elements without conversion");
        }
        if (smem_box.elements() != global_box.elements()) {
            fail(op, label,
                 "the smem box has " + std::to_string(smem_box.elements()) +
                     " elements but the global box " + std::to_string(global_box.elements()));
        }
        TmaBoxes out;
        out.smem_full = out.smem_inside = smem_box;
        out.global_inside = global_box;
        out.elements = smem_box.elements();
        out.any_inside = out.elements > 0;
        return out;
    }

    void thread_store(int global, const Box &global_box, int smem, const Box &smem_box,
                      const std::string &label) override {
        const char *op = "thread_store";
        begin_op(op, &label);
        drain(OpKind::ThreadStore, global,
              thread_boxes(op, label, smem, smem_box, global, global_box), smem, label);
    }

    void tma_store(const TensorView &view, const std::vector<int64_t> &coords,
                   const std::vector<int64_t> &box, int smem, int64_t smem_offset,
                   const std::string &label) override {
        const char *op = "tma_store";
        begin_op(op, &label);
        drain(OpKind::TmaStore, view.buffer,
              tma_boxes(op, label, smem, smem_offset, view, coords, box), smem, label);
    }

    /** A TMA or thread store, in the agent's open bulk group: its smem reads are retired by
     * bulk_wait_group_read (for threads, the warpgroup barrier the emitter places there). Threads
     * read smem through the generic proxy and keep the agent busy while they issue the stores. */
    void drain(OpKind kind, int global, const TmaBoxes &boxes, int smem, const std::string &label) {
        const bool threads = kind == OpKind::ThreadStore;
        const uint8_t proxy = threads ? kGenericProxy : kAsyncProxy;
        uint64_t name = op_name(kind, label);
        const Buffer &source = local(smem);
        Agent &agent = me();
        // Stores go to HBM (writes do not allocate L2 lines here).
        detail::L2Lines::Split traffic;
        if (boxes.any_inside)
            traffic.miss = boxes.global_inside.elements() * bytes_of(source.type);
        Cycles end = reserve_tma(agent.now, traffic, name);

        int store = store_of(current_);
        clocks_.join(store, clocks_.clock(wg(current_)));
        clocks_.tick(wg(current_));
        access(smem, boxes.smem_full, false, store, name, proxy);
        if (boxes.any_inside) {
            access(global, boxes.global_inside, true, store, name, proxy);
            if (impl_.numerics) {
                detail::copy_box(impl_.globals[size_t(global)].data.get(), boxes.global_inside,
                                 source.data.get(), boxes.smem_inside, bytes_of(source.type));
            }
        }
        agent.store_open = true;
        agent.store_open_end = std::max(agent.store_open_end, end);
        agent.store_open_op = name;
        agent.store_open_buffer = smem;
        agent.now = threads ? std::max(agent.now + params_.issue_cycles, end - params_.tma_latency)
                            : agent.now + params_.issue_cycles;
    }

    void bulk_commit_group() override {
        begin_op("bulk_commit_group");
        Agent &agent = me();
        int store = store_of(current_);
        if (agent.store_open) {
            agent.store_groups.push_back(Group{agent.store_open_end, clocks_.copy(store),
                                               agent.store_open_op, agent.store_open_buffer});
        } else {
            agent.store_groups.push_back(Group{0, clocks_.copy(store)});
        }
        clocks_.tick(store);
        agent.store_open = false;
        agent.store_open_end = 0;
        agent.now += params_.issue_cycles;
    }

    bool bulk_wait_group_read(int pending) override {
        const char *op = "bulk_wait_group_read";
        begin_op(op);
        if (pending < 0) {
            fail(op, "pending group count " + std::to_string(pending) + " is negative");
        }
        Agent &agent = me();
        std::deque<Group> &groups = agent.store_groups;
        if (groups.size() <= size_t(pending)) {
            agent.now += params_.issue_cycles;
            return true;
        }
        size_t retire = groups.size() - size_t(pending);
        Cycles end = 0;
        for (size_t g = 0; g < retire; ++g) {
            end = std::max(end, groups[g].end);
        }
        if (end > agent.now) {
            block(WaitKind::BulkRead, pending, end);
            return false;
        }
        clocks_.join(wg(current_), groups[retire - 1].clock.data());
        groups.erase(groups.begin(), groups.begin() + std::ptrdiff_t(retire));
        agent.now += params_.issue_cycles;
        return true;
    }

    void wgmma_fence() override {
        begin_op("wgmma_fence");
        me().now += params_.issue_cycles;
    }

    void wgmma(int acc, const Box &acc_box, int a, const Box &a_box, int b, const Box &b_box,
               const std::string &label) override {
        const char *op = "wgmma";
        begin_op(op, &label);
        const Buffer &acc_buffer = operand(op, label, "acc", acc, acc_box, Memory::Registers);
        const Buffer &a_buffer = operand(op, label, "a", a, a_box, Memory::Shared);
        const Buffer &b_buffer = operand(op, label, "b", b, b_box, Memory::Shared);
        struct Operand {
            const char *role;
            const Box &box;
            const char *dims;
        };
        for (const Operand &x : {Operand{"acc", acc_box, "{N, M}"}, Operand{"a", a_box, "{K, M}"},
                                 Operand{"b", b_box, "{N, K}"}}) {
            std::string rank = detail::mma_rank_error(x.role, x.box, x.dims);
            if (!rank.empty()) {
                fail(op, label, rank);
            }
        }
        std::string types =
            detail::mma_type_error(acc_buffer.name, acc_buffer.type, a_buffer.name, a_buffer.type,
                                   b_buffer.name, b_buffer.type, "wgmma");
        if (!types.empty()) {
            fail(op, label, types);
        }
        std::string shapes = detail::mma_shape_error(acc_box, a_box, b_box);
        if (!shapes.empty()) {
            fail(op, label, shapes);
        }
        int64_t n = acc_box.dims[0].extent, m = acc_box.dims[1].extent;
        int64_t k = a_box.dims[0].extent;
        uint64_t name = op_name(OpKind::Wgmma, label);
        Agent &agent = me();

        Cycles start = std::max(agent.now, impl_.tensor_free[size_t(sm_)]);
        Cycles total = params_.wgmma_cycles(m, n, k);
        Cycles compute = total - params_.wgmma_latency;
        impl_.tensor_free[size_t(sm_)] = start + compute;
        impl_.tensor_busy[size_t(sm_)] += compute;
        impl_.trace.add(uint32_t(name >> 32), "wgmma", sm_, kTensorTrack, start, compute);
        Cycles end = start + total;
        end_ = std::max(end_, end);

        int tensor = tensor_of(current_);
        clocks_.join(tensor, clocks_.clock(wg(current_)));
        clocks_.tick(wg(current_));
        access(a, a_box, false, tensor, name, kAsyncProxy);
        access(b, b_box, false, tensor, name, kAsyncProxy);
        access(acc, acc_box, true, tensor, name, kAsyncProxy);
        if (impl_.numerics) {
            impl_.multiplier.multiply_add(acc_buffer.data.get(), acc_box, a_buffer.data.get(),
                                          a_buffer.type, a_box, b_buffer.data.get(), b_buffer.type,
                                          b_box);
        }
        agent.wgmma_open = true;
        agent.wgmma_open_end = std::max(agent.wgmma_open_end, end);
        agent.now += params_.issue_cycles;
    }

    void wgmma_commit_group() override {
        begin_op("wgmma_commit_group");
        Agent &agent = me();
        int tensor = tensor_of(current_);
        agent.wgmma_groups.push_back(
            Group{agent.wgmma_open ? agent.wgmma_open_end : 0, clocks_.copy(tensor)});
        clocks_.tick(tensor);
        agent.wgmma_open = false;
        agent.wgmma_open_end = 0;
        agent.now += params_.issue_cycles;
    }

    void wgmma_wait_group(int pending) override {
        const char *op = "wgmma_wait_group";
        begin_op(op);
        if (pending < 0) {
            fail(op, "pending group count " + std::to_string(pending) + " is negative");
        }
        Agent &agent = me();
        std::deque<Group> &groups = agent.wgmma_groups;
        if (groups.size() > size_t(pending)) {
            size_t retire = groups.size() - size_t(pending);
            Cycles end = 0;
            for (size_t g = 0; g < retire; ++g) {
                end = std::max(end, groups[g].end);
            }
            clocks_.join(wg(current_), groups[retire - 1].clock.data());
            groups.erase(groups.begin(), groups.begin() + std::ptrdiff_t(retire));
            if (end > agent.now) {
                if (impl_.trace.on()) {
                    impl_.trace.add(impl_.labels.id("wgmma_wait_group " + std::to_string(pending)),
                                    "wgmma_wait", sm_, agent.track, agent.now, end - agent.now);
                }
                agent.now = end;
            }
        }
        agent.now += params_.issue_cycles;
    }

    void fence_proxy_async() override {
        begin_op("fence_proxy_async");
        int self = wg(current_);
        me().fence_epochs.push_back(clocks_.epoch(self));
        clocks_.tick(self);
        me().now += params_.issue_cycles;
    }

    bool named_barrier_sync(int id, int agents) override {
        const char *op = "named_barrier_sync";
        begin_op(op);
        if (id < 0 || id >= kNamedBarriers) {
            fail(op, "named barrier " + std::to_string(id) + " does not exist (ids 0.." +
                         std::to_string(kNamedBarriers - 1) + ")");
        }
        if (agents < 1) {
            fail(op, "named barrier " + std::to_string(id) + ": agent count " +
                         std::to_string(agents) + " must be at least 1");
        }
        Agent &agent = me();
        if (agent.released[size_t(id)]) {
            agent.released[size_t(id)] = false;
            agent.now += params_.issue_cycles;
            return true;
        }
        NamedBarrier &barrier = named_[size_t(id)];
        if (barrier.arrived.empty()) {
            barrier.expected = agents;
        } else if (barrier.expected != agents) {
            fail(op, "named barrier " + std::to_string(id) + " is synced for " +
                         std::to_string(agents) + " agents here but for " +
                         std::to_string(barrier.expected) + " by agent '" +
                         agents_[size_t(barrier.arrived.front())].name +
                         "'; all participants must give the same count");
        }
        barrier.arrived.push_back(current_);
        clocks_.join_into(barrier.clock, clocks_.clock(wg(current_)));
        clocks_.tick(wg(current_));
        barrier.latest = std::max(barrier.latest, agent.now);
        if (int(barrier.arrived.size()) < barrier.expected) {
            block(WaitKind::NamedBarrier, id, -1);
            return false;
        }
        Cycles release = barrier.latest + params_.barrier_latency;
        for (int participant : barrier.arrived) {
            clocks_.join(wg(participant), barrier.clock.data());
            agents_[size_t(participant)].released[size_t(id)] = true;
            if (participant != current_) {
                wake(participant, release);
            }
        }
        barrier = NamedBarrier{};
        block(WaitKind::NamedBarrier, id, release);
        return false;
    }

    void setmaxnreg(int registers, bool increase) override {
        const char *op = "setmaxnreg";
        begin_op(op);
        if (registers < 24 || registers > 256 || registers % 8 != 0) {
            fail(op, std::string(increase ? "inc" : "dec") + " to " + std::to_string(registers) +
                         " registers: the count must be a multiple of 8 in [24, 256]");
        }
        me().max_registers = registers;
        me().now += params_.issue_cycles;
    }

    void vector_op(const std::string &label, int64_t flops, const std::vector<Access> &accesses,
                   const std::function<void()> &compute) override {
        const char *op = "vector";
        begin_op(op, &label);
        if (flops < 0) {
            fail(op, label, "negative flop count " + std::to_string(flops));
        }
        for (const Access &x : accesses) {
            checked(op, label, x.write ? "written" : "read", x.buffer, x.box);
        }
        Agent &agent = me();
        uint64_t name = op_name(OpKind::Vector, label);
        // The SM's CUDA cores are shared by its warpgroups: vector ops of one SM take turns.
        Cycles start = std::max(agent.now, impl_.vector_free[size_t(sm_)]);
        Cycles work =
            params_.issue_cycles + detail::ceil_div(flops, params_.vector_flops_per_cycle);
        Cycles duration = (start - agent.now) + work;
        impl_.vector_free[size_t(sm_)] = start + work;
        impl_.trace.add(uint32_t(name >> 32), "vector", sm_, agent.track, start, work);
        for (const Access &x : accesses) {
            access(x.buffer, x.box, x.write, wg(current_), name, kGenericProxy);
        }
        if (impl_.numerics && compute) {
            compute();
        }
        agent.now += duration;
        impl_.vector_busy += work;
    }

    // --- running -----------------------------------------------------------------------------

    /** After the factory: takes the programs and sets up the clocks. */
    void start(std::vector<std::unique_ptr<AgentProgram>> programs) {
        building_ = false;
        if (agents_.empty()) {
            throw SimError("CTA " + std::to_string(cta_) +
                           ": the factory declared no agent; add_agent at least one");
        }
        if (programs.size() != agents_.size()) {
            throw SimError("CTA " + std::to_string(cta_) + ": the factory declared " +
                           std::to_string(agents_.size()) + " agents but returned " +
                           std::to_string(programs.size()) + " programs; return one per agent");
        }
        std::vector<uint32_t> names;
        for (size_t a = 0; a < agents_.size(); ++a) {
            if (!programs[a]) {
                throw SimError("CTA " + std::to_string(cta_) + ": the program of agent '" +
                               agents_[a].name + "' is null");
            }
            agents_[a].program = std::move(programs[a]);
            agents_[a].now = start_;
            agents_[a].track = impl_.track(sm_, agents_[a].name);
            names.push_back(agents_[a].label);
        }
        impl_.cta_agents[cta_] = names;
    }

    /** Its clocks in the cluster's: per agent three, per mbarrier its TMA lane (from `base`). */
    int clock_count() const { return 3 * int(agents_.size()) + int(barriers_.size()); }
    void set_clock_base(int base) { base_ = base; }

    /** The ready agent with the earliest time (-1: none) and that time. */
    int next_agent(Cycles *time) const {
        int next = -1;
        *time = std::numeric_limits<Cycles>::max();
        for (size_t a = 0; a < agents_.size(); ++a) {
            if (agents_[a].state == Agent::State::Ready && agents_[a].now < *time) {
                *time = agents_[a].now;
                next = int(a);
            }
        }
        return next;
    }
    /** When the next TMA load lands (false: none in flight). */
    bool next_event(Cycles *time) const {
        if (events_.empty()) {
            return false;
        }
        *time = events_.top().time;
        return true;
    }
    void run_event() {
        Event event = events_.top();
        events_.pop();
        time_ = event.time;
        complete_load(event.time, event.load);
    }
    void run_agent(int index) {
        time_ = agents_[size_t(index)].now;
        step(index);
    }

    /** After the cluster's event loop: the CTA's end, then a deadlock or the checks at exit. */
    void finish_run() {
        for (const Agent &agent : agents_) {
            end_ = std::max(end_,
                            agent.state == Agent::State::Blocked ? agent.blocked_since : agent.now);
        }
        for (const Agent &agent : agents_) {
            for (const Group &g : agent.store_groups) {
                end_ = std::max(end_, g.end);
            }
            end_ = std::max(end_, agent.store_open_end);
        }
        bool blocked = std::any_of(agents_.begin(), agents_.end(), [](const Agent &agent) {
            return agent.state == Agent::State::Blocked;
        });
        if (blocked) {
            report_deadlock();
        } else {
            check_loads_were_waited();
            check_stores_were_retired();
            check_remote_arrivals();
        }
    }

    Cycles end() const { return end_; }

    /** The global buffers' accesses, for the cross-CTA check at finish(). */
    std::vector<std::pair<int, BufferHistory>> take_global_histories() {
        std::vector<std::pair<int, BufferHistory>> out;
        for (size_t b = 0; b < global_history_.size(); ++b) {
            if (!global_history_[b].empty()) {
                out.emplace_back(int(b), std::move(global_history_[b]));
            }
        }
        return out;
    }

    Buffer *local_buffer(int id) {
        size_t index = size_t(id - kFirstCtaBuffer);
        return id >= kFirstCtaBuffer && index < locals_.size() ? &locals_[index] : nullptr;
    }

private:
    // Clock indices: per agent a its warpgroup, its tensor-core (wgmma) and bulk-store clocks;
    // then one TMA lane per mbarrier.
    int wg(int agent) const { return base_ + 3 * agent; }
    int tensor_of(int agent) const { return base_ + 3 * agent + 1; }
    int store_of(int agent) const { return base_ + 3 * agent + 2; }
    int lane_of(int barrier) const { return base_ + 3 * int(agents_.size()) + barrier; }

    Agent &me() { return agents_[size_t(current_)]; }

    // --- errors ------------------------------------------------------------------------------

    [[noreturn]] void fail(const char *op, const std::string &message) const {
        throw SimError("CTA " + std::to_string(cta_) + ", agent '" +
                       agents_[size_t(current_)].name + "': " + op + ": " + message);
    }
    [[noreturn]] void fail(const char *op, const std::string &label,
                           const std::string &message) const {
        throw SimError("CTA " + std::to_string(cta_) + ", agent '" +
                       agents_[size_t(current_)].name + "': " + op + " '" + label +
                       "': " + message);
    }
    [[noreturn]] void build_error(const std::string &message) const { throw SimError(message); }

    void check_building(const std::string &what) const {
        if (!building_) {
            throw SimError(what + ": the CtaBuilder of CTA " + std::to_string(cta_) +
                           " is only valid inside the CTA factory");
        }
    }

    void take_smem(const std::string &name, const char *kind, int64_t bytes) {
        int64_t free = params_.smem_bytes - smem_used_;
        if (bytes > free) {
            build_error("smem overflow in CTA " + std::to_string(cta_) + ": " + kind + " '" + name +
                        "' needs " + std::to_string(bytes) + " bytes, but only " +
                        std::to_string(free) + " of " + std::to_string(params_.smem_bytes) +
                        " bytes are free; use fewer stages or smaller tiles");
        }
        smem_used_ += bytes;
    }

    int add_local(const std::string &name, DType type, Memory memory, int agent, int64_t elements) {
        Buffer buffer{name, type, memory, agent, elements, nullptr};
        if (impl_.numerics) {
            buffer.data.reset(new std::byte[size_t(elements * bytes_of(type))]());
        }
        locals_.push_back(std::move(buffer));
        local_history_.emplace_back();
        return kFirstCtaBuffer + int(locals_.size()) - 1;
    }

    void begin_op(const char *op, const std::string *label = nullptr) {
        if (failed_wait_) {
            std::string what = label ? std::string(op) + " '" + *label + "'" : std::string(op);
            throw SimError("CTA " + std::to_string(cta_) + ", agent '" + me().name + "': " + what +
                           " follows a wait that returned false in the same step; return "
                           "Step::Blocked right after a failed wait and retry that wait");
        }
        ++ops_in_step_;
    }

    // --- buffers -----------------------------------------------------------------------------

    const Buffer &local(int id) { return *local_buffer(id); }

    Buffer *find(int id) {
        if (id >= 0 && size_t(id) < impl_.globals.size()) {
            return &impl_.globals[size_t(id)];
        }
        return local_buffer(id);
    }

    /** A buffer this agent may touch, with the box inside it. */
    const Buffer &checked(const char *op, const std::string &label, const char *role, int id,
                          const Box &box) {
        Buffer *buffer = find(id);
        if (!buffer) {
            fail(op, label,
                 std::string(role) + " buffer id " + std::to_string(id) +
                     " is neither a global buffer nor smem or registers of CTA " +
                     std::to_string(cta_));
        }
        if (buffer->memory == Memory::Registers && buffer->agent != current_) {
            fail(op, label,
                 std::string(role) + " buffer '" + buffer->name + "' is registers of agent '" +
                     agents_[size_t(buffer->agent)].name +
                     "'; an agent can only touch its own registers");
        }
        std::string outside = detail::box_outside_error(role, box, buffer->name, buffer->elements);
        if (!outside.empty()) {
            fail(op, label, outside);
        }
        return *buffer;
    }

    const Buffer &operand(const char *op, const std::string &label, const char *role, int id,
                          const Box &box, Memory memory) {
        const Buffer &buffer = checked(op, label, role, id, box);
        if (buffer.memory != memory) {
            fail(op, label,
                 std::string("operand ") + role + " (buffer '" + buffer.name + "') is in " +
                     memory_name(buffer.memory) + "; wgmma takes it from " +
                     (memory == Memory::Registers ? "registers of the issuing agent" : "smem"));
        }
        return buffer;
    }

    BufferHistory &history(int id) {
        if (id < kFirstCtaBuffer) {
            if (size_t(id) >= global_history_.size()) {
                global_history_.resize(size_t(id) + 1);
            }
            return global_history_[size_t(id)];
        }
        return local_history_[size_t(id - kFirstCtaBuffer)];
    }

    /** Checks one access against the CTA's history of the buffer, then records it. */
    void access(int id, const Box &box, bool write, int clock_index, uint64_t op, uint8_t proxy) {
        ElementSet elements = detail::element_set(box);
        if (elements.empty) {
            return;
        }
        Buffer &buffer = *find(id);
        const int64_t *clock = clocks_.clock(clock_index);
        bool check_fence = proxy == kAsyncProxy && !write && buffer.memory == Memory::Shared;
        detail::check_access(
            history(id), AccessRecord{elements, clock_index, clock[clock_index], op, write, proxy},
            clock,
            [&](const AccessRecord &earlier) {
                impl_.add_race(earlier.op, op, id, kUnordered, buffer.name, "");
            },
            [&](const AccessRecord &earlier) {
                if (!check_fence || !earlier.write || earlier.proxy != kGenericProxy ||
                    fenced(earlier, clock) || !detail::overlaps(earlier.elements, elements)) {
                    return;
                }
                impl_.add_race(earlier.op, op, id, kMissingFence, buffer.name,
                               "missing fence.proxy.async: the async proxy (TMA or wgmma) reads "
                               "what a generic-proxy write left in smem, and the writing agent ran "
                               "no fence_proxy_async between that write and the synchronisation "
                               "that orders the read");
            });
        if (write) {
            buffer.written = true;
        }
    }

    /** Did the generic writer of `write` fence after it, in time for the reader (`clock`)? */
    bool fenced(const AccessRecord &write, const int64_t *clock) const {
        const std::vector<int64_t> &fences =
            agents_[size_t((write.agent - base_) / 3)].fence_epochs;
        auto it = std::lower_bound(fences.begin(), fences.end(), write.epoch);
        return it != fences.end() && *it <= clock[write.agent];
    }

    uint64_t op_name(OpKind kind, const std::string &label) {
        return OpName{kind, current_, cta_, impl_.labels.id(label)}.pack();
    }

    // --- barriers ----------------------------------------------------------------------------

    /** Mbarrier `barrier` of `owner` (default: this CTA; another CTA of the cluster for a
     * remote arrival or a multicast load). */
    Barrier &barrier_of(const char *op, int barrier, CtaRun *owner = nullptr) {
        CtaRun &to = owner ? *owner : *this;
        if (barrier < 0 || size_t(barrier) >= to.barriers_.size()) {
            fail(op, "mbarrier " + std::to_string(barrier) + " does not exist (CTA " +
                         std::to_string(to.cta_) + " has " + std::to_string(to.barriers_.size()) +
                         " mbarriers)");
        }
        return to.barriers_[size_t(barrier)];
    }

    /** An initialised barrier; its init must happen before this use (else a race). `use` names
     * the use in that race ("arrive", "wait"), or `use_op` is the op itself. */
    Barrier &used_barrier(const char *op, int barrier, const char *use,
                          const uint64_t *use_op = nullptr, CtaRun *owner = nullptr) {
        Barrier &bar = barrier_of(op, barrier, owner);
        if (!bar.initialised) {
            fail(op, "mbarrier '" + bar.name +
                         "' is not initialised; mbarrier_init it (and sync the CTA) first");
        }
        if (clocks_.clock(wg(current_))[bar.init_agent] < bar.init_epoch) {
            uint64_t name = use_op ? *use_op : op_name(OpKind::Mbarrier, use + (" " + bar.name));
            impl_.add_race(bar.init_op, name, -1 - int64_t(barrier), kBarrierInit,
                           "mbarrier " + bar.name,
                           "the mbarrier is used before its mbarrier_init is ordered before the "
                           "use; initialise, then sync the CTA (a named barrier of all agents; "
                           "in a cluster, cluster_sync) before other agents use it");
        }
        return bar;
    }

    /** An arrival on `barrier` of `owner` (default: this CTA). */
    void arrive(const char *op, int barrier, int64_t bytes, CtaRun *owner = nullptr) {
        begin_op(op);
        CtaRun &to = owner ? *owner : *this;
        Barrier &bar = used_barrier(op, barrier, "arrive", nullptr, owner);
        if (bytes < 0 || bytes > kMaxTxBytes) {
            fail(op, "mbarrier '" + bar.name + "': expect_tx of " + std::to_string(bytes) +
                         " bytes; it must be in [0, " + std::to_string(kMaxTxBytes) + "]");
        }
        if (bar.pending == 0) {
            fail(op, "mbarrier '" + bar.name + "' gets more arrivals than its count (" +
                         std::to_string(bar.count) + ") in phase " +
                         std::to_string(bar.completions) + " (parity " +
                         std::to_string(bar.completions & 1) + "), which still waits for " +
                         std::to_string(bar.tx) +
                         " tx bytes; arrive once per expected arrival and phase");
        }
        if (bar.tx + bytes > kMaxTxBytes) {
            fail(op, "mbarrier '" + bar.name + "' would expect " + std::to_string(bar.tx + bytes) +
                         " tx bytes in one phase; at most " + std::to_string(kMaxTxBytes));
        }
        Agent &agent = me();
        if (&to != this) {
            to.remote_arrivals_.push_back(
                {wg(current_), clocks_.epoch(wg(current_)),
                 op_name(OpKind::Mbarrier,
                         "arrive " + bar.name + " of CTA " + std::to_string(to.cta_)),
                 barrier});
        }
        clocks_.join_into(bar.clock, clocks_.clock(wg(current_)));
        clocks_.tick(wg(current_));
        bar.tx += bytes;
        --bar.pending;
        bar.phase_latest = std::max(bar.phase_latest, agent.now);
        if (bar.pending == 0 && bar.tx == 0) {
            to.complete_phase(bar, bar.phase_latest);
        }
        agent.now += params_.issue_cycles;
    }

    /** Remote arrivals on this CTA's mbarriers must happen before it exits (its smem, barriers
     * included, goes to the SM's next CTA): its agents' clocks at exit must include them. */
    void check_remote_arrivals() {
        if (remote_arrivals_.empty()) {
            return;
        }
        std::vector<int64_t> exit;
        for (size_t a = 0; a < agents_.size(); ++a) {
            clocks_.join_into(exit, clocks_.clock(wg(int(a))));
        }
        uint64_t exit_op = OpName{OpKind::Exit, -1, cta_, 0}.pack();
        for (const RemoteArrival &r : remote_arrivals_) {
            if (exit[size_t(r.clock)] >= r.epoch) {
                continue;
            }
            impl_.add_race(
                r.op, exit_op, -1 - int64_t(r.barrier), kRemoteArrival,
                "mbarrier " + barriers_[size_t(r.barrier)].name,
                "a remote arrival (another CTA of the cluster) on this CTA's mbarrier is "
                "not ordered before the CTA exits: wait for the phase it completes (the "
                "producer's tail over its ring) or cluster_sync before exit");
        }
    }

    void complete_phase(Barrier &bar, Cycles time) {
        if (!bar.recent.empty()) {
            time = std::max(time, bar.recent.back().time);
        }
        bar.recent.push_back(Completion{time, bar.clock});
        ++bar.completions;
        bar.pending = bar.count;
        bar.tx = 0;
        bar.phase_latest = 0;
        Cycles visible = time + params_.barrier_latency;
        for (int waiter : bar.waiters) {
            wake(waiter, visible);
        }
        bar.waiters.clear();
    }

    /** Drops completions no agent can still need: all before the latest one visible now. */
    void prune(Barrier &bar) {
        while (bar.recent.size() >= 2 && bar.recent[1].time + params_.barrier_latency <= time_) {
            bar.recent.pop_front();
        }
    }

    // --- TMA ---------------------------------------------------------------------------------

    TmaBoxes tma_boxes(const char *op, const std::string &label, int smem, int64_t smem_offset,
                       const TensorView &view, const std::vector<int64_t> &coords,
                       const std::vector<int64_t> &box) {
        size_t rank = box.size();
        if (rank < 1 || rank > size_t(kMaxTensorRank)) {
            fail(op, label,
                 "box has " + std::to_string(rank) + " dims; TMA takes 1 to " +
                     std::to_string(kMaxTensorRank));
        }
        if (view.extents.size() != rank || view.strides.size() != rank || coords.size() != rank) {
            fail(op, label,
                 "the box has " + std::to_string(rank) + " dims but the view has " +
                     std::to_string(view.extents.size()) + " extents and " +
                     std::to_string(view.strides.size()) + " strides and there are " +
                     std::to_string(coords.size()) + " coordinates; give each one per dim");
        }
        Buffer *global = view.buffer >= 0 && size_t(view.buffer) < impl_.globals.size()
                             ? &impl_.globals[size_t(view.buffer)]
                             : nullptr;
        if (!global) {
            fail(op, label,
                 "the tensor view's buffer id " + std::to_string(view.buffer) +
                     " is not a global buffer (add_global)");
        }
        Buffer *shared = local_buffer(smem);
        if (!shared || shared->memory != Memory::Shared) {
            fail(op, label,
                 "buffer id " + std::to_string(smem) + " is not smem of CTA " +
                     std::to_string(cta_) +
                     (shared ? " ('" + shared->name + "' is registers)" : ""));
        }
        if (shared->type != global->type) {
            fail(op, label,
                 "smem '" + shared->name + "' is " + dtype_name(shared->type) + " but '" +
                     global->name + "' is " + dtype_name(global->type) +
                     "; TMA copies elements without conversion");
        }
        int64_t reach = 0;
        for (size_t d = 0; d < rank; ++d) {
            if (view.extents[d] < 1 || view.strides[d] < 1) {
                fail(op, label,
                     "view of '" + global->name + "' dim " + std::to_string(d) + " has extent " +
                         std::to_string(view.extents[d]) + " and stride " +
                         std::to_string(view.strides[d]) + "; both must be at least 1");
            }
            if (box[d] < 1 || box[d] > kMaxBoxDim) {
                fail(op, label,
                     "box dim " + std::to_string(d) + " is " + std::to_string(box[d]) +
                         "; each TMA box dim must be in [1, " + std::to_string(kMaxBoxDim) + "]");
            }
            reach += (view.extents[d] - 1) * view.strides[d];
        }
        if (reach >= global->elements) {
            fail(op, label,
                 "the view reaches element " + std::to_string(reach) + " of '" + global->name +
                     "', which has " + std::to_string(global->elements) + " elements");
        }
        TmaBoxes out;
        out.smem_full.offset = smem_offset;
        out.smem_inside.offset = smem_offset;
        out.any_inside = true;
        int64_t smem_stride = 1, global_offset = 0;
        for (size_t d = 0; d < rank; ++d) {
            int64_t lo = std::max<int64_t>(0, -coords[d]);
            int64_t hi = std::min<int64_t>(box[d], view.extents[d] - coords[d]);
            out.clipped = out.clipped || lo > 0 || hi < box[d];
            if (hi <= lo) {
                out.any_inside = false;
            }
            out.smem_full.dims.push_back({box[d], smem_stride});
            out.smem_inside.offset += lo * smem_stride;
            out.smem_inside.dims.push_back({std::max<int64_t>(hi - lo, 0), smem_stride});
            global_offset += (coords[d] + lo) * view.strides[d];
            out.global_inside.dims.push_back({std::max<int64_t>(hi - lo, 0), view.strides[d]});
            smem_stride *= box[d];
        }
        out.global_inside.offset = global_offset;
        out.elements = smem_stride;
        std::string outside =
            detail::box_outside_error("smem", out.smem_full, shared->name, shared->elements);
        if (!outside.empty()) {
            fail(op, label, outside);
        }
        return out;
    }

    /** Reserves the SM's TMA unit for a transfer of `miss` bytes from HBM and `hit` from L2;
     * returns when it completes. */
    Cycles reserve_tma(Cycles issue, detail::L2Lines::Split bytes, uint64_t name) {
        Cycles start = std::max(issue, impl_.tma_free[size_t(sm_)]);
        // At the SM's port, and within what HBM (misses) and L2 (every byte) have left at that
        // time after the transfers of the SMs' CTAs simulated before.
        const double port = params_.tma_bytes_per_cycle, from = double(start);
        const double all = double(bytes.miss + bytes.hit);
        const double done = std::max({from + all / port, impl_.l2_bandwidth.move(from, all, port),
                                      impl_.hbm.move(from, double(bytes.miss), port)});
        Cycles transfer = Cycles(std::ceil(done - from));
        Cycles total = transfer + params_.tma_latency;
        impl_.tma_free[size_t(sm_)] = start + transfer;
        impl_.tma_busy[size_t(sm_)] += transfer;
        OpName op = OpName::unpack(name);
        impl_.trace.add(op.label, op_kind_name(op.kind), sm_, kTmaTrack, start, transfer);
        end_ = std::max(end_, start + total);
        return start + total;
    }

    void complete_load(Cycles time, size_t index) {
        Load &load = loads_[index];
        if (impl_.numerics) {
            const Buffer &shared = local(load.smem);
            int bytes = bytes_of(shared.type);
            std::byte *base = shared.data.get();
            if (load.clipped) {
                std::memset(base + load.smem_full.offset * bytes, 0,
                            size_t(load.smem_full.elements() * bytes));
            }
            if (load.any_inside) {
                detail::copy_box(base, load.smem_inside,
                                 impl_.globals[size_t(load.global)].data.get(), load.global_inside,
                                 bytes);
            }
        }
        Barrier &bar = barriers_[size_t(load.barrier)];
        clocks_.join_into(bar.clock, load.clock.data());
        // A peer's multicast may land before this CTA's own expect_tx (its arrival still pending).
        if (load.bytes > bar.tx && !(load.remote && bar.pending > 0)) {
            throw SimError("CTA " + std::to_string(cta_) + ", " + load.issuer + ": " + load.op +
                           " '" + impl_.labels.text(load.label) + "' completes " +
                           std::to_string(load.bytes) + " tx bytes on mbarrier '" + bar.name +
                           "', whose phase " + std::to_string(bar.completions) + " expects only " +
                           std::to_string(bar.tx) +
                           " more: the tx count would go negative; arrive_expect_tx the full box "
                           "bytes on this barrier before the load");
        }
        bar.tx -= load.bytes;
        bar.phase_latest = std::max(bar.phase_latest, time);
        if (bar.pending == 0 && bar.tx == 0) {
            complete_phase(bar, bar.phase_latest);
        }
        load.clock = {};
    }

    // --- scheduling --------------------------------------------------------------------------

    void block(WaitKind kind, int id, Cycles wake) {
        failed_wait_ = true;
        wake_at_ = wake;
        Agent &agent = me();
        agent.wait = kind;
        agent.wait_id = id;
    }

    void wake(int index, Cycles time) {
        Agent &agent = agents_[size_t(index)];
        if (agent.state != Agent::State::Blocked) {
            return;
        }
        time = std::max(time, agent.blocked_since);
        if (impl_.trace.on() && time > agent.blocked_since) {
            impl_.trace.add(impl_.labels.id("wait: " + agent.program->waiting_for()), "wait", sm_,
                            agent.track, agent.blocked_since, time - agent.blocked_since);
        }
        impl_.barrier_wait += time - agent.blocked_since;
        agent.now = time;
        agent.state = Agent::State::Ready;
        agent.wait = WaitKind::None;
    }

    void step(int index) {
        current_ = index;
        failed_wait_ = false;
        ops_in_step_ = 0;
        wake_at_ = -1;
        Agent &agent = agents_[size_t(index)];
        AgentProgram::Step result = agent.program->step(*this);
        auto contract = [&](const std::string &message) {
            throw SimError("CTA " + std::to_string(cta_) + ", agent '" + agent.name +
                           "': " + message);
        };
        if (failed_wait_) {
            if (result != AgentProgram::Step::Blocked) {
                contract("a wait returned false but step() did not return Step::Blocked; return "
                         "Blocked after a failed wait and retry it when woken");
            }
            agent.state = Agent::State::Blocked;
            agent.blocked_since = agent.now;
            if (wake_at_ >= 0) {
                wake(index, wake_at_);
            }
            return;
        }
        if (result == AgentProgram::Step::Blocked) {
            contract("step() returned Step::Blocked but no wait in the step returned false; "
                     "Blocked only follows a failed try_wait, named_barrier_sync or "
                     "bulk_wait_group_read");
        }
        if (result == AgentProgram::Step::Done) {
            agent.state = Agent::State::Done;
            return;
        }
        agent.idle_steps = ops_in_step_ ? 0 : agent.idle_steps + 1;
        if (agent.idle_steps > kMaxIdleSteps) {
            contract("step() ran " + std::to_string(kMaxIdleSteps) +
                     " times without an op; every step must make progress");
        }
    }

    std::string wait_state(const Agent &agent) const {
        switch (agent.wait) {
        case WaitKind::Mbarrier: {
            const Barrier &bar = barriers_[size_t(agent.wait_id)];
            return "mbarrier '" + bar.name + "' is in phase " + std::to_string(bar.completions) +
                   " (parity " + std::to_string(bar.completions & 1) + ") with " +
                   std::to_string(bar.pending) + " of " + std::to_string(bar.count) +
                   " arrivals and " + std::to_string(bar.tx) + " tx bytes pending";
        }
        case WaitKind::ClusterSync:
            return "the cluster barrier has " + std::to_string(cluster_.sync_arrived.size()) +
                   " arrivals";
        case WaitKind::NamedBarrier: {
            const NamedBarrier &nb = named_[size_t(agent.wait_id)];
            return "named barrier " + std::to_string(agent.wait_id) + " has " +
                   std::to_string(nb.arrived.size()) + " of " + std::to_string(nb.expected) +
                   " agents";
        }
        default:
            return "";
        }
    }

    void report_deadlock() {
        Cycles at = 0;
        for (const Agent &agent : agents_) {
            at = std::max(at,
                          agent.state == Agent::State::Blocked ? agent.blocked_since : agent.now);
        }
        std::string message = "deadlock in CTA " + std::to_string(cta_) + " (SM " +
                              std::to_string(sm_) + ") at cycle " + std::to_string(at) +
                              ": every unfinished agent is blocked and no TMA load is in flight";
        for (const Agent &agent : agents_) {
            message += "; agent '" + agent.name + "' ";
            if (agent.state == Agent::State::Done) {
                message += "finished";
                continue;
            }
            message += "waits for '" + agent.program->waiting_for() + "' since cycle " +
                       std::to_string(agent.blocked_since);
            std::string state = wait_state(agent);
            if (!state.empty()) {
                message += " (" + state + ")";
            }
        }
        impl_.deadlock = true;
        impl_.deadlock_message += (impl_.deadlock_message.empty() ? "" : "\n") + message;
    }

    void check_loads_were_waited() {
        for (size_t b = 0; b < barriers_.size(); ++b) {
            const Barrier &bar = barriers_[b];
            if (bar.last_load_epoch == 0) {
                continue;
            }
            int lane = lane_of(int(b));
            bool seen = false;
            for (size_t a = 0; a < agents_.size() && !seen; ++a) {
                seen = clocks_.clock(wg(int(a)))[lane] >= bar.last_load_epoch;
            }
            if (!seen) {
                uint64_t exit = OpName{OpKind::Exit, -1, cta_, 0}.pack();
                impl_.add_race(bar.last_load_op, exit, bar.last_load_buffer, kLostLoad,
                               locals_[size_t(bar.last_load_buffer - kFirstCtaBuffer)].name,
                               "no agent waited for this load's mbarrier phase before the CTA "
                               "exited (a wait that passed on an older phase?): its data was never "
                               "used, and it writes smem that the SM gives to its next CTA");
            }
        }
    }

    /** Bulk stores still reading smem at the CTA's exit (no wait_group_read retired them). */
    void check_stores_were_retired() {
        uint64_t exit = OpName{OpKind::Exit, -1, cta_, 0}.pack();
        auto report = [&](uint64_t op, int buffer) {
            impl_.add_race(op, exit, buffer, kUnretiredStore,
                           locals_[size_t(buffer - kFirstCtaBuffer)].name,
                           "no bulk wait_group_read retired this TMA store before the CTA exited: "
                           "it may still read smem that the SM gives to its next CTA");
        };
        for (const Agent &agent : agents_) {
            for (const Group &g : agent.store_groups) {
                if (g.buffer >= 0) {
                    report(g.op, g.buffer);
                }
            }
            if (agent.store_open) {
                report(agent.store_open_op, agent.store_open_buffer);
            }
        }
    }

    Impl &impl_;
    const HopperParams &params_;
    Cluster &cluster_;
    int rank_; // in the cluster
    int cta_, sm_;
    Cycles start_, end_;
    int base_ = 0; // this CTA's first index in the cluster's clocks
    bool building_ = true;
    int64_t smem_used_ = 0, registers_used_ = 0;

    std::vector<Agent> agents_;
    std::vector<Barrier> barriers_;
    std::array<NamedBarrier, kNamedBarriers> named_;
    std::vector<Buffer> locals_;
    std::vector<BufferHistory> local_history_, global_history_;
    detail::VectorClocks &clocks_; // the cluster's
    Cycles &time_;                 // the cluster's: when the step or event being processed happens
    struct RemoteArrival {
        int clock;     // the arriving agent's clock index
        int64_t epoch; // its epoch at the arrival
        uint64_t op;
        int barrier;
    };
    std::vector<RemoteArrival> remote_arrivals_; // by other CTAs' agents, on this CTA's mbarriers
    std::vector<Load> loads_;
    std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
    int64_t next_event_ = 0;

    int current_ = 0;
    bool failed_wait_ = false;
    int64_t ops_in_step_ = 0;
    Cycles wake_at_ = -1;
};

void Machine::Impl::run_cluster(int first, int ctas, const CtaFactory &make_cta) {
    if (ctas < 1 || ctas > params.sms) {
        throw SimError(
            "run_cluster " + std::to_string(first) + ": a cluster of " + std::to_string(ctas) +
            " CTAs runs on as many SMs at once; the machine has " + std::to_string(params.sms));
    }
    if (first < 0 || first > kMaxCtas - ctas) {
        throw SimError("run_cta: CTA index " + std::to_string(first) + " must be in [0, " +
                       std::to_string(kMaxCtas - ctas + 1) + ")");
    }
    if (running) {
        throw SimError("run_cta " + std::to_string(first) + ": called while CTA " +
                       std::to_string(running->cta()) + " runs; CTAs run one after another");
    }
    if (size_t(first + ctas) > cta_ran.size()) {
        cta_ran.resize(size_t(first + ctas), false);
    }
    for (int cta = first; cta < first + ctas; ++cta) {
        if (cta_ran[size_t(cta)]) {
            throw SimError("run_cta: CTA " + std::to_string(cta) + " already ran");
        }
    }
    if (!make_cta) {
        throw SimError("run_cta " + std::to_string(first) + ": the CTA factory is empty");
    }
    // The cluster starts when all its SMs are free.
    Cycles start = 0;
    for (int cta = first; cta < first + ctas; ++cta) {
        cta_ran[size_t(cta)] = true;
        start = std::max(start, sm_free[size_t(cta % params.sms)]);
    }
    Cluster cluster;
    std::vector<std::unique_ptr<CtaRun>> runs;
    for (int rank = 0; rank < ctas; ++rank) {
        runs.push_back(std::make_unique<CtaRun>(*this, cluster, rank, first + rank,
                                                (first + rank) % params.sms, start));
        cluster.ctas.push_back(runs.back().get());
    }
    struct Running {
        CtaRun *&slot;
        ~Running() { slot = nullptr; }
    } guard{running};
    int clocks = 0;
    for (auto &run : runs) {
        running = run.get();
        run->start(make_cta(*run, run->cta()));
        run->set_clock_base(clocks);
        clocks += run->clock_count();
    }
    cluster.clocks.reset(clocks);
    // One event loop: the earliest TMA completion, else the ready agent with the earliest time.
    for (;;) {
        CtaRun *agent_cta = nullptr, *event_cta = nullptr;
        int agent = -1;
        Cycles best = std::numeric_limits<Cycles>::max(), event = best;
        for (auto &run : runs) {
            Cycles t;
            int a = run->next_agent(&t);
            if (a >= 0 && t < best) {
                best = t;
                agent = a;
                agent_cta = run.get();
            }
            if (run->next_event(&t) && t < event) {
                event = t;
                event_cta = run.get();
            }
        }
        if (event_cta && event <= best) {
            running = event_cta;
            event_cta->run_event();
            continue;
        }
        if (!agent_cta) {
            break;
        }
        running = agent_cta;
        agent_cta->run_agent(agent);
    }
    for (auto &run : runs) {
        running = run.get();
        run->finish_run();
        sm_free[size_t(run->cta() % params.sms)] = run->end();
        finished.push_back(CtaGlobals{run->cta(), run->take_global_histories()});
    }
}

// ---------------------------------------------------------------------------------------------
// Machine
// ---------------------------------------------------------------------------------------------

Machine::Machine(const HopperParams &params, bool numerics, bool trace)
    : params_(params), numerics_(numerics) {
    auto require = [](bool ok, const std::string &message) {
        if (!ok) {
            throw SimError("HopperParams: " + message);
        }
    };
    require(params.sms >= 1 && params.sms <= 4096, "sms must be in [1, 4096]");
    require(params.smem_bytes >= 0, "smem_bytes must not be negative");
    require(params.registers_per_sm >= 0, "registers_per_sm must not be negative");
    require(params.tma_latency >= 0 && params.wgmma_latency >= 0 && params.barrier_latency >= 0 &&
                params.issue_cycles >= 0,
            "latencies and issue_cycles must not be negative");
    require(params.tma_bytes_per_cycle > 0 && params.hbm_bytes_per_cycle > 0 &&
                params.l2_bytes_per_cycle > 0,
            "tma_bytes_per_cycle, hbm_bytes_per_cycle and l2_bytes_per_cycle must be positive");
    require(params.l2_line >= 1 && params.l2_bytes >= 0, "l2_line must be positive");
    require(params.wgmma_macs_per_cycle > 0, "wgmma_macs_per_cycle must be positive");
    require(params.vector_flops_per_cycle >= 1, "vector_flops_per_cycle must be at least 1");
    impl_ = std::make_unique<Impl>(params, numerics, trace);
}

Machine::~Machine() = default;

int Machine::add_global(const std::string &name, DType type, int64_t elements) {
    if (elements < 0) {
        throw SimError("add_global '" + name + "': negative element count " +
                       std::to_string(elements));
    }
    if (impl_->globals.size() + 1 >= size_t(kFirstCtaBuffer)) {
        throw SimError("add_global '" + name + "': too many global buffers");
    }
    Buffer buffer{name, type, Memory::Global, -1, elements, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(elements * bytes_of(type))]());
    }
    impl_->globals.push_back(std::move(buffer));
    return int(impl_->globals.size()) - 1;
}

namespace {
[[noreturn]] void no_buffer(int buffer, size_t count) {
    if (buffer >= kFirstCtaBuffer) {
        throw SimError("buffer id " + std::to_string(buffer) +
                       " is smem or registers of a CTA that is not running; those exist only "
                       "while their CTA runs");
    }
    throw SimError("buffer id " + std::to_string(buffer) + " does not exist (the machine has " +
                   std::to_string(count) + " global buffers)");
}
} // namespace

Buffer &Machine::Impl::buffer(int id) {
    if (id >= 0 && size_t(id) < globals.size()) {
        return globals[size_t(id)];
    }
    Buffer *local = running ? running->local_buffer(id) : nullptr;
    if (!local) {
        no_buffer(id, globals.size());
    }
    return *local;
}

void *Machine::data(int buffer) {
    return impl_->buffer(buffer).data.get();
}

DType Machine::type(int buffer) const {
    return impl_->buffer(buffer).type;
}

int64_t Machine::elements(int buffer) const {
    return impl_->buffer(buffer).elements;
}

const std::string &Machine::name(int buffer) const {
    return impl_->buffer(buffer).name;
}

void Machine::set_grid(int ctas) {
    impl_->active_sms = std::max(1, std::min(ctas, params_.sms));
}

void Machine::run_cta(int cta, const CtaFactory &make_cta) {
    impl_->run_cluster(cta, 1, make_cta);
}

void Machine::run_cluster(int first_cta, int ctas, const CtaFactory &make_cta) {
    impl_->run_cluster(first_cta, ctas, make_cta);
}

Report Machine::finish() {
    impl_->cross_cta_races();
    Report report;
    Cycles tma = 0, tensor = 0;
    for (int sm = 0; sm < params_.sms; ++sm) {
        Cycles finish = impl_->sm_free[size_t(sm)];
        report.core_cycles.push_back(finish);
        report.cycles = std::max(report.cycles, finish);
        report.bound_cycles = std::max(
            {report.bound_cycles, impl_->tma_busy[size_t(sm)], impl_->tensor_busy[size_t(sm)]});
    }
    {
        // The device's own bounds: every byte through L2, every miss and write through HBM.
        report.bound_cycles =
            std::max({report.bound_cycles,
                      Cycles(std::ceil(impl_->hbm.total() / params_.hbm_bytes_per_cycle)),
                      Cycles(std::ceil(impl_->l2_bandwidth.total() / params_.l2_bytes_per_cycle))});
    }
    for (int sm = 0; sm < params_.sms; ++sm) {
        tma += impl_->tma_busy[size_t(sm)];
        tensor += impl_->tensor_busy[size_t(sm)];
    }
    report.busy = {{"tma", tma},
                   {"tensor", tensor},
                   {"vector", impl_->vector_busy},
                   {"barrier_wait", impl_->barrier_wait}};
    impl_->races.report(report, impl_->deadlock, impl_->deadlock_message);
    return report;
}

void Machine::write_trace(const std::string &path) const {
    std::vector<detail::TraceProcess> processes;
    for (int sm = 0; sm < params_.sms; ++sm) {
        if (!impl_->sm_tracks[size_t(sm)].empty()) {
            processes.push_back({sm, "SM " + std::to_string(sm), impl_->sm_tracks[size_t(sm)]});
        }
    }
    impl_->trace.write(path, processes, impl_->labels);
}

} // namespace tandem::sim::hopper
