#ifndef TANDEM_SIM_HOPPER_RUN_H
#define TANDEM_SIM_HOPPER_RUN_H

/** \file
 * Internal to the Hopper model: the state of a machine (Machine::Impl), of a cluster and of one
 * running CTA (Machine::Impl::CtaRun), shared by the three files that define their members:
 * HopperInstructions.cpp (what each op of an agent does), HopperScheduler.cpp (the event loop,
 * time and the units' occupancy, the Machine API) and HopperChecks.cpp (races, deadlocks and the
 * checks at a CTA's exit). The model's semantics: Hopper.h.
 */

// The Hopper (sm_90a) machine model. See Hopper.h for the machine and its semantics; these files
// keep the bookkeeping. The race check, numerics and trace writer are shared with the ZPU model
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

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tandem::sim::hopper {

using detail::AccessRecord;
using detail::BufferHistory;
using detail::ElementSet;

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

inline const char *op_kind_name(OpKind k) {
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

inline const char *memory_name(Memory m) {
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

// ---------------------------------------------------------------------------------------------
// Machine state
// ---------------------------------------------------------------------------------------------

struct Machine::Impl {
    class CtaRun;
    struct Cluster;
    struct ClusterRun;

    Impl(const HopperParams &p, bool numerics_on, bool trace_on)
        : params(p), numerics(numerics_on), trace(trace_on), active_sms(p.sms),
          sm_free(size_t(p.sms), p.launch_cycles), vector_free(size_t(p.sms), 0),
          tma_free(size_t(p.sms), 0), tensor_free(size_t(p.sms), 0), tma_busy(size_t(p.sms), 0),
          tensor_busy(size_t(p.sms), 0), sm_tracks(size_t(p.sms)) {}

    HopperParams params;
    bool numerics;
    detail::TraceLog trace;
    int active_sms;        // SMs sharing HBM and L2: min(grid, sms)
    int resident_ctas = 1; // CTAs of the grid an SM holds at once (set_grid)
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

    std::string op_text(uint64_t packed) const;
    void add_race(uint64_t first, uint64_t second, int64_t key, RaceKind kind,
                  const std::string &buffer, const char *reason);
    int track(int sm, const std::string &agent_name);
    void cross_cta_races();

    /** CTAs first_cta .. first_cta + ctas - 1 in clusters of `cluster`, in one event loop: CTA i
     * on SM i % sms, a cluster starting once its SMs are free, the running ones at once. */
    void run_grid(int first_cta, int ctas, int cluster, const CtaFactory &make_cta);
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
    CtaRun(Impl &impl, Cluster &cluster, int rank, int cta, int sm, int slot, Cycles start)
        : impl_(impl), params_(impl.params), cluster_(cluster), rank_(rank), cta_(cta), sm_(sm),
          slot_(slot), start_(start), end_(start), clocks_(cluster.clocks), time_(cluster.time) {}

    // --- builder -----------------------------------------------------------------------------

    int add_smem(const std::string &name, DType type, int64_t elements,
                 int64_t charged_bytes) override;
    int add_registers(int agent, const std::string &name, DType type, int64_t elements) override;
    int add_barrier(const std::string &name) override;
    int add_agent(const std::string &name) override;

    // --- agent ops ---------------------------------------------------------------------------

    int agent() const override { return current_; }
    int cta() const override { return cta_; }
    Cycles now() const override { return agents_[size_t(current_)].now; }

    void mbarrier_init(int barrier, int count) override;
    void mbarrier_arrive(int barrier) override;
    void mbarrier_arrive_expect_tx(int barrier, int64_t bytes) override;
    bool mbarrier_try_wait_parity(int barrier, int parity) override;
    void tma_load(int smem, int64_t smem_offset, const TensorView &view,
                  const std::vector<int64_t> &coords, const std::vector<int64_t> &box, int barrier,
                  const std::string &label) override;
    void tma_load_multicast(int smem, int64_t smem_offset, const TensorView &view,
                            const std::vector<int64_t> &coords, const std::vector<int64_t> &box,
                            int barrier, uint32_t cta_mask, const std::string &label) override;
    void mbarrier_arrive_remote(int barrier, int rank) override;

    int cluster_rank() const override { return rank_; }
    int cluster_size() const override { return int(cluster_.ctas.size()); }

    bool cluster_sync() override;
    void thread_load(int smem, const Box &smem_box, int global, const Box &global_box, int barrier,
                     const std::string &label) override;

    /** A TMA or thread load: the data lands when the transfer ends and completes its bytes on
     * the barrier; a thread load keeps its agent busy until then. `multicast` > 0: the CTAs of
     * the cluster it lands in (a mask of ranks), the same smem buffer and barrier in each. */
    void land(OpKind kind, int smem, int global, const TmaBoxes &boxes, int barrier,
              const std::string &label, uint32_t multicast = 0);

    /** A load landing in this CTA at `at` (issued here, or multicast by a peer). */
    void receive(Load load, uint64_t name, Cycles at);

    /** The memory latencies a thread copy waits beyond its first: one per batch of loads. */
    Cycles thread_latencies(int64_t elements) const;

    /** The boxes of a thread copy: any strides, nothing clipped. */
    TmaBoxes thread_boxes(const char *op, const std::string &label, int smem, const Box &smem_box,
                          int global, const Box &global_box);
    void thread_store(int global, const Box &global_box, int smem, const Box &smem_box,
                      const std::string &label) override;
    void tma_store(const TensorView &view, const std::vector<int64_t> &coords,
                   const std::vector<int64_t> &box, int smem, int64_t smem_offset,
                   const std::string &label) override;

    /** A TMA or thread store, in the agent's open bulk group: its smem reads are retired by
     * bulk_wait_group_read (for threads, the warpgroup barrier the emitter places there). Threads
     * read smem through the generic proxy and keep the agent busy while they issue the stores. */
    void drain(OpKind kind, int global, const TmaBoxes &boxes, int smem, const std::string &label);
    void bulk_commit_group() override;
    bool bulk_wait_group_read(int pending) override;
    void wgmma_fence() override;
    void wgmma(int acc, const Box &acc_box, int a, const Box &a_box, int b, const Box &b_box,
               const std::string &label) override;
    void wgmma_commit_group() override;
    void wgmma_wait_group(int pending) override;
    void fence_proxy_async() override;
    bool named_barrier_sync(int id, int agents) override;
    void setmaxnreg(int registers, bool increase) override;
    void vector_op(const std::string &label, int64_t flops, int64_t wavefronts, int64_t rounds,
                   const std::vector<Access> &accesses,
                   const std::function<void()> &compute) override;

    // --- running -----------------------------------------------------------------------------

    /** After the factory: takes the programs and sets up the clocks. */
    void start(std::vector<std::unique_ptr<AgentProgram>> programs);

    /** Its clocks in the cluster's: per agent three, per mbarrier its TMA lane (from `base`). */
    int clock_count() const { return 3 * int(agents_.size()) + int(barriers_.size()); }
    void set_clock_base(int base) { base_ = base; }

    /** The ready agent with the earliest time (-1: none) and that time. */
    int next_agent(Cycles *time) const;
    /** When the next TMA load lands (false: none in flight). */
    bool next_event(Cycles *time) const;
    void run_event();
    void run_agent(int index);

    /** After the cluster's event loop: the CTA's end, then a deadlock or the checks at exit. */
    void finish_run();

    Cycles end() const { return end_; }
    int sm() const { return sm_; }
    int slot() const { return slot_; } // of the CTAs resident on its SM

    /** The global buffers' accesses, for the cross-CTA check at finish(). */
    std::vector<std::pair<int, BufferHistory>> take_global_histories();
    Buffer *local_buffer(int id);

private:
    // Clock indices: per agent a its warpgroup, its tensor-core (wgmma) and bulk-store clocks;
    // then one TMA lane per mbarrier.
    int wg(int agent) const { return base_ + 3 * agent; }
    int tensor_of(int agent) const { return base_ + 3 * agent + 1; }
    int store_of(int agent) const { return base_ + 3 * agent + 2; }
    int lane_of(int barrier) const { return base_ + 3 * int(agents_.size()) + barrier; }

    Agent &me() { return agents_[size_t(current_)]; }

    // --- errors ------------------------------------------------------------------------------

    [[noreturn]] void fail(const char *op, const std::string &message) const;
    [[noreturn]] void fail(const char *op, const std::string &label,
                           const std::string &message) const;
    [[noreturn]] void build_error(const std::string &message) const { throw SimError(message); }

    void check_building(const std::string &what) const;
    void take_smem(const std::string &name, const char *kind, int64_t bytes);
    int add_local(const std::string &name, DType type, Memory memory, int agent, int64_t elements);
    void begin_op(const char *op, const std::string *label = nullptr);

    // --- buffers -----------------------------------------------------------------------------

    const Buffer &local(int id) { return *local_buffer(id); }

    Buffer *find(int id);

    /** A buffer this agent may touch, with the box inside it. */
    const Buffer &checked(const char *op, const std::string &label, const char *role, int id,
                          const Box &box);
    const Buffer &operand(const char *op, const std::string &label, const char *role, int id,
                          const Box &box, Memory memory);
    BufferHistory &history(int id);

    /** Checks one access against the CTA's history of the buffer, then records it. */
    void access(int id, const Box &box, bool write, int clock_index, uint64_t op, uint8_t proxy);

    /** Did the generic writer of `write` fence after it, in time for the reader (`clock`)? */
    bool fenced(const AccessRecord &write, const int64_t *clock) const;
    uint64_t op_name(OpKind kind, const std::string &label);

    // --- barriers ----------------------------------------------------------------------------

    /** Mbarrier `barrier` of `owner` (default: this CTA; another CTA of the cluster for a
     * remote arrival or a multicast load). */
    Barrier &barrier_of(const char *op, int barrier, CtaRun *owner = nullptr);

    /** An initialised barrier; its init must happen before this use (else a race). `use` names
     * the use in that race ("arrive", "wait"), or `use_op` is the op itself. */
    Barrier &used_barrier(const char *op, int barrier, const char *use,
                          const uint64_t *use_op = nullptr, CtaRun *owner = nullptr);

    /** An arrival on `barrier` of `owner` (default: this CTA). */
    void arrive(const char *op, int barrier, int64_t bytes, CtaRun *owner = nullptr);

    /** Remote arrivals on this CTA's mbarriers must happen before it exits (its smem, barriers
     * included, goes to the SM's next CTA): its agents' clocks at exit must include them. */
    void check_remote_arrivals();
    void complete_phase(Barrier &bar, Cycles time);

    /** Drops completions no agent can still need: all before the latest one visible now. */
    void prune(Barrier &bar);

    // --- TMA ---------------------------------------------------------------------------------

    TmaBoxes tma_boxes(const char *op, const std::string &label, int smem, int64_t smem_offset,
                       const TensorView &view, const std::vector<int64_t> &coords,
                       const std::vector<int64_t> &box);

    /** Reserves the SM's TMA unit for a transfer of `miss` bytes from HBM and `hit` from L2 that
     * holds its port `split` cycles longer than its bytes (split_cycles); returns when it
     * completes, `latency` after its last byte has moved. */
    Cycles reserve_tma(Cycles issue, detail::L2Lines::Split bytes, uint64_t name, Cycles latency,
                       double split = 0);
    /** The cycles a TMA's requests (a box row's pieces of up to 128 bytes) that start inside a
     * 32-byte sector hold the SM's port beyond their bytes (tma_split_row_cycles each); none for
     * thread copies (their cost is thread_copy_batch's). */
    double split_cycles(OpKind kind, const TmaBoxes &boxes, int element_bytes) const;
    void complete_load(Cycles time, size_t index);

    // --- scheduling --------------------------------------------------------------------------

    void block(WaitKind kind, int id, Cycles wake);
    void wake(int index, Cycles time);
    void step(int index);

    // --- deadlock and the checks at exit ---------------------------------------------------

    std::string wait_state(const Agent &agent) const;
    void report_deadlock();
    void check_loads_were_waited();

    /** Bulk stores still reading smem at the CTA's exit (no wait_group_read retired them). */
    void check_stores_were_retired();

    Impl &impl_;
    const HopperParams &params_;
    Cluster &cluster_;
    int rank_; // in the cluster
    int cta_, sm_, slot_;
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

} // namespace tandem::sim::hopper

#endif
