#ifndef TANDEM_SIM_HOPPER_H
#define TANDEM_SIM_HOPPER_H

/** \file
 * The Hopper (sm_90a) machine model: CTAs of warpgroup agents joined by mbarriers, a TMA unit,
 * asynchronous wgmma groups, bulk store groups, named barriers and the async-proxy fence.
 *
 * Agents are warpgroups. Each runs its own program (an AgentProgram the caller supplies, e.g. an
 * interpreter of one role of the async Stmt) one op at a time; the model interleaves agents in
 * time order (discrete events: the agent or event with the smallest time goes next). A wait that
 * cannot be satisfied yet blocks the agent until the barrier changes; when every agent of a CTA is
 * blocked and no event is pending, that is a deadlock, reported with what each agent waits for.
 *
 * CTAs run independently; CTA i runs on SM i % sms after the CTAs before it on that SM (waves).
 * run_grid runs a kernel's CTAs that overlap in time in one event loop, so their loads share HBM
 * and L2 in the order of time; run_cta and run_cluster run one CTA (cluster) after another.
 * Global memory is shared: accesses of different CTAs are checked against each other at finish().
 *
 * A cluster (run_cluster) is CTAs that run at once, on SMs of their own, in one event loop: each
 * may arrive on another's mbarriers (mbarrier_arrive_remote: mapa + arrive.shared::cluster), a TMA
 * load may be multicast into every CTA of a mask (the same smem buffer and mbarrier ids in each:
 * the CTAs are built alike), and cluster_sync is barrier.cluster over all their agents. Smem,
 * register and mbarrier ids are per CTA. A multicast load may complete its bytes on a peer's
 * barrier before that CTA's own arrive.expect_tx (the tx count goes negative while an arrival
 * is still pending, as PTX allows). A remote arrival into a CTA must happen before that CTA exits
 * (its producer waits for the phase the arrival completes, or a cluster_sync), else it is a race
 * with the exit.
 *
 * Semantics modelled (HOPPER-FACTS.md):
 *  - mbarrier: init count; arrive; arrive.expect_tx adds expected bytes; a TMA load completes
 *    its bytes at its end time; a phase completes when the pending arrival count reaches 0 and
 *    the tx count is 0, then the phase flips and the count resets. try_wait.parity P succeeds
 *    once the phase with parity P has completed (the current phase parity differs from P).
 *    Arriving on a barrier whose arrivals are exhausted for the phase is an error.
 *  - TMA load: box of a global tensor view at coordinates (elements outside the view read as
 *    zero) into a dense smem box, completing tx bytes on a barrier. TMA store: dense smem box to
 *    the view (elements outside are dropped), in the issuing agent's current bulk group;
 *    commit_group closes the group; wait_group_read(n) blocks until at most n groups still read
 *    smem. A store no wait_group_read retired before its CTA exits is a race with the exit (the
 *    SM hands the smem to its next CTA), as is a TMA load whose barrier phase no agent waited for.
 *  - wgmma: acc(n, m) += a(k, m) * b(n, k), acc in the agent's registers (a per-agent buffer),
 *    a and b in smem; asynchronous: fence, mma_async..., commit_group, wait_group(n). Its smem
 *    reads happen between issue and the wait that retires it.
 *  - Thread copies (where TMA cannot copy): a load lands like a TMA load (async proxy, tx bytes on
 *    a barrier) but keeps its agent busy until then; a store reads smem through the generic proxy
 *    and, like a TMA store, retires its reads at wait_group_read.
 *  - Generic-proxy writes to smem (vector ops) read next by the async proxy (TMA store, wgmma)
 *    need fence_proxy_async by the writing agent after the write; otherwise it is a race
 *    ("missing fence.proxy.async").
 *
 * Happens-before: vector clocks per agent plus the TMA unit and the tensor core; an mbarrier
 * phase carries the join of every arrival (and TMA completion) of that phase to its waiters;
 * named barriers join all participants; wgmma accesses carry the issuing agent's clock and join
 * back at the retiring wait. Every smem/register/global access is checked as in the ZPU model.
 */

#include "sim/Common.h" // DType, Box, Access, Race, Report, errors

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace tandem::sim::hopper {

struct HopperParams {
    int sms = 132;
    int64_t smem_bytes = 232448; // per CTA (227 KB)
    int registers_per_sm = 65536;
    // What an SM holds of a grid at once (resident_ctas): its shared memory (each CTA's and 1 KB
    // the driver reserves per CTA), threads and CTAs; and the registers a thread takes beside
    // its accumulators where no setmaxnreg says how many.
    int64_t smem_per_sm = 233472; // 228 KB
    int64_t smem_reserved_per_cta = 1024;
    int threads_per_sm = 2048;
    int ctas_per_sm_max = 32;
    int thread_registers = 32;
    // Timing, in SM cycles (H100 SXM, ~1.83 GHz; HOPPER-FACTS.md)
    int tma_latency = 600;  // issue to first byte
    int hbm_latency = 1000; // the same for a load of which some sector misses L2
    // Memory (machines/hopper.json): one HBM and one L2 shared by the SMs in time
    // (SharedBandwidth); an SM moves at most tma_bytes_per_cycle itself. A read of a line some
    // earlier read brought in comes from L2 (least recently used lines leave when it is full).
    double tma_bytes_per_cycle = 64;   // one SM's port
    double hbm_bytes_per_cycle = 1600; // the device's HBM (measured copy bandwidth)
    double l2_bytes_per_cycle = 6100;  // the device's L2 (measured, machines/hopper.json)
    int64_t l2_bytes = 52428800;
    int l2_line = 128;
    double wgmma_macs_per_cycle = 2048;      // bf16 dense, per SM
    double wgmma_f16_macs_per_cycle = 1976;  // f16, per SM (fitted: the GPU runs f16 3.6% slower)
    double wgmma_int8_macs_per_cycle = 4096; // int8 -> int32 dense, per SM (twice bf16's)
    double wgmma_fp8_macs_per_cycle = 4096;  // e4m3 / e5m2 -> f32 dense, per SM (twice bf16's)
    // The clock the SMs hold while their tensor cores are busy (fitted on timed GEMMs), as a
    // fraction of the clock cycles are counted in: the wgmma rates above are at the full clock
    // (the roofline's peak), a wgmma takes 1 / tensor_clock as long.
    double tensor_clock = 0.872;
    int wgmma_latency = 540;
    int vector_flops_per_cycle = 128; // per SM, shared by its warpgroups (128 FP32 lanes)
    int barrier_latency = 20;         // arrive -> visible to a waiter
    int shared_latency = 30;          // a shared-memory load or a shuffle, issue to use
    int issue_cycles = 1;             // any other op
    int launch_cycles = 9700;         // from the launch to the first CTA's start
    // A TMA request (a box row's piece of up to 128 bytes) that starts inside a 32-byte sector
    // holds the SM's port this much longer than its sectors' bytes.
    int tma_split_row_cycles = 6;
    // 1: the kernel runs right after a launch of itself (as the GPU rows are timed, back to back
    // without flushing L2), so a kernel whose global buffers fit in L2 finds them there.
    int l2_warm = 1;
    // Thread copies (ld / st by a warpgroup's threads, where TMA cannot copy): each thread keeps
    // this many loads in flight, so a copy waits one memory latency (tma_latency) per batch of
    // 128 x thread_copy_batch elements, and moves its bytes at the SM's share of bandwidth.
    int thread_copy_batch = 8;

    /** Calls f(name, field) for every field a machine description sets (its parameter name). */
    template <class F> void fields(F &&f) {
        f("sms", sms);
        f("smem_bytes", smem_bytes);
        f("registers_per_sm", registers_per_sm);
        f("smem_per_sm", smem_per_sm);
        f("smem_reserved_per_cta", smem_reserved_per_cta);
        f("threads_per_sm", threads_per_sm);
        f("ctas_per_sm_max", ctas_per_sm_max);
        f("thread_registers", thread_registers);
        f("tma_latency", tma_latency);
        f("hbm_latency", hbm_latency);
        f("tma_bytes_per_cycle", tma_bytes_per_cycle);
        f("hbm_bytes_per_cycle", hbm_bytes_per_cycle);
        f("l2_bytes_per_cycle", l2_bytes_per_cycle);
        f("l2_bytes", l2_bytes);
        f("l2_line", l2_line);
        f("wgmma_macs_per_cycle", wgmma_macs_per_cycle);
        f("wgmma_f16_macs_per_cycle", wgmma_f16_macs_per_cycle);
        f("wgmma_int8_macs_per_cycle", wgmma_int8_macs_per_cycle);
        f("wgmma_fp8_macs_per_cycle", wgmma_fp8_macs_per_cycle);
        f("tensor_clock", tensor_clock);
        f("wgmma_latency", wgmma_latency);
        f("vector_flops_per_cycle", vector_flops_per_cycle);
        f("barrier_latency", barrier_latency);
        f("shared_latency", shared_latency);
        f("issue_cycles", issue_cycles);
        f("launch_cycles", launch_cycles);
        f("tma_split_row_cycles", tma_split_row_cycles);
        f("l2_warm", l2_warm);
        f("thread_copy_batch", thread_copy_batch);
    }
    static HopperParams from(const ParamLookup &get);
    /** An estimate: a transfer of `miss` bytes from HBM and `hit` bytes from L2 while `active`
     * SMs move bytes at once, each at its share of each source, capped by the SM's port (the
     * model itself shares HBM and L2 in time, SharedBandwidth). */
    int64_t tma_cycles(int64_t miss, int64_t hit, int active) const;
    /** How many CTAs of `threads` threads, each taking `smem` bytes of shared memory and
     * `registers` per thread (a multiple of 8 is allocated), an SM holds at once; at least 1. */
    int resident_ctas(int64_t smem, int threads, int64_t registers) const;
    /** A wgmma of m x n x k MACs on `operands` (f16 at wgmma_f16_macs_per_cycle, int8 at
     * wgmma_int8_macs_per_cycle, e4m3 or e5m2 at wgmma_fp8_macs_per_cycle, else the bf16 rate;
     * each times tensor_clock). */
    int64_t wgmma_cycles(int64_t m, int64_t n, int64_t k, DType operands = DType::BF16) const;
};

/** Bandwidth all SMs share (HBM, L2) as capacity per time bucket: a transfer takes what is left
 * in each bucket from its start, at most `port` bytes per cycle, until its bytes have moved. The
 * CTAs of a grid (run_grid) ask in the order of time, so those running at once share it alike;
 * CTAs simulated one after another (run_cta) share it too, the first simulated taking a bucket's
 * capacity first. */
class SharedBandwidth {
public:
    static constexpr double kBucketCycles = 128;
    explicit SharedBandwidth(double bytes_per_cycle);
    /** Moves `bytes` from time `start`; returns when the last byte has moved. */
    double move(double start, double bytes, double port);
    /** The bytes moved so far. */
    double total() const { return total_; }
    /** The bytes moved in the buckets from time `from` to time `to`. */
    double between(double from, double to) const;

private:
    double rate_, total_ = 0;
    std::vector<double> used_; // bytes taken per bucket
    std::vector<double> tree_; // Fenwick tree over used_, for between()
    void add(size_t bucket, double bytes);
};

/** The L2 by time, not by the order CTAs are simulated in, in lines of `line_bytes` (the model
 * uses 32-byte sectors, what a miss fills and what moves to the SM: a row straddling sectors costs
 * them whole). A line a read touches is a hit when
 * some read touched it before, at a time from which fewer than the L2's bytes came in from HBM
 * (`hbm`: every miss and write) until this read, measured from the nearest known use (the last
 * use when this read is later than every use so far, the first when it is earlier, none when it
 * lies between them). The first read of a line in simulation order misses, unless L2 is `warm`
 * (a launch of the same kernel before this one left every line there). */
class TimedL2 {
public:
    TimedL2(int64_t line_bytes, int64_t capacity_bytes, const SharedBandwidth &hbm)
        : line_(line_bytes), capacity_(double(capacity_bytes)), hbm_(hbm) {}
    struct Split {
        int64_t miss = 0, hit = 0; // bytes from HBM, bytes from L2
    };
    Split read(int buffer, const Box &box, int element_bytes, double time);
    void set_warm(bool warm) { warm_ = warm; }

private:
    struct Uses {
        double first, last;
    };
    int64_t line_;
    double capacity_;
    const SharedBandwidth &hbm_;
    bool warm_ = false;
    std::unordered_map<uint64_t, Uses> lines_;
};

/** A global tensor as TMA sees it: dims innermost first, strides in elements. */
struct TensorView {
    int buffer = -1;
    std::vector<int64_t> extents, strides;
};

/** What an agent's program sees while it runs one op. */
class AgentOps {
public:
    virtual ~AgentOps() = default;
    virtual int agent() const = 0;
    virtual int cta() const = 0;
    virtual Cycles now() const = 0;

    virtual void mbarrier_init(int barrier, int count) = 0;
    virtual void mbarrier_arrive(int barrier) = 0;
    virtual void mbarrier_arrive_expect_tx(int barrier, int64_t bytes) = 0;
    /** True if the phase with this parity has completed; false blocks the agent (the program
     * returns Step::Blocked and retries the same op when woken). */
    virtual bool mbarrier_try_wait_parity(int barrier, int parity) = 0;

    virtual void tma_load(int smem, int64_t smem_offset, const TensorView &view,
                          const std::vector<int64_t> &coords, const std::vector<int64_t> &box,
                          int barrier, const std::string &label) = 0;
    /** A TMA load multicast to the CTAs of the cluster in `cta_mask` (bit r: rank r): the box
     * lands at the same smem offset of each, completing its bytes on each one's `barrier`.
     * The L2 reads it once; each receiving SM takes its bytes through its own port. */
    virtual void tma_load_multicast(int smem, int64_t smem_offset, const TensorView &view,
                                    const std::vector<int64_t> &coords,
                                    const std::vector<int64_t> &box, int barrier, uint32_t cta_mask,
                                    const std::string &label) = 0;
    /** Arrive on mbarrier `barrier` of the CTA of cluster rank `rank` (this CTA's own included). */
    virtual void mbarrier_arrive_remote(int barrier, int rank) = 0;
    /** This CTA's rank in its cluster, and the cluster's CTA count (1 outside clusters). */
    virtual int cluster_rank() const = 0;
    virtual int cluster_size() const = 0;
    /** barrier.cluster arrive + wait by every agent of every CTA of the cluster (release /
     * acquire); false blocks until all have arrived. */
    virtual bool cluster_sync() = 0;
    virtual void tma_store(const TensorView &view, const std::vector<int64_t> &coords,
                           const std::vector<int64_t> &box, int smem, int64_t smem_offset,
                           const std::string &label) = 0;
    /** A copy by the agent's own threads (ld.global / st.shared, fence.proxy.async, then one
     * thread's mbarrier.complete_tx): what TMA cannot move, a box of any strides (the two boxes
     * have the same extents). The agent is busy until the data has landed, then the bytes
     * complete on `barrier` as a TMA load's do. */
    virtual void thread_load(int smem, const Box &smem_box, int global, const Box &global_box,
                             int barrier, const std::string &label) = 0;
    /** A store by the agent's own threads (ld.shared / st.global, generic proxy), in the agent's
     * bulk group like a TMA store: its smem reads retire at bulk_wait_group_read, where the
     * emitted code has the warpgroup meet. */
    virtual void thread_store(int global, const Box &global_box, int smem, const Box &smem_box,
                              const std::string &label) = 0;
    virtual void bulk_commit_group() = 0;
    /** False blocks until at most `pending` committed store groups still read smem. */
    virtual bool bulk_wait_group_read(int pending) = 0;

    virtual void wgmma_fence() = 0;
    /** acc: a register buffer of this agent; a, b: smem. Boxes as Core::mma of the ZPU model. */
    virtual void wgmma(int acc, const Box &acc_box, int a, const Box &a_box, int b,
                       const Box &b_box, const std::string &label) = 0;
    virtual void wgmma_commit_group() = 0;
    /** Advances this agent to when at most `pending` groups are in flight (never blocks). */
    virtual void wgmma_wait_group(int pending) = 0;

    virtual void fence_proxy_async() = 0;
    /** Named barrier `id` for `agents` agents; false blocks until all have arrived. */
    virtual bool named_barrier_sync(int id, int agents) = 0;
    virtual void setmaxnreg(int registers, bool increase) = 0;
    /** Element code: `flops` on the SM's CUDA cores, `wavefronts` of its shared-memory pipe
     * (both shared by the SM's warpgroups, each at its own rate, overlapping), then `rounds`
     * dependent round trips of shared_latency this warpgroup alone waits. */
    virtual void vector_op(const std::string &label, int64_t flops, int64_t wavefronts,
                           int64_t rounds, const std::vector<Access> &accesses,
                           const std::function<void()> &compute) = 0;
    /** Arithmetic only: no shared-memory wavefronts or rounds charged. */
    void vector_op(const std::string &label, int64_t flops, const std::vector<Access> &accesses,
                   const std::function<void()> &compute) {
        vector_op(label, flops, 0, 0, accesses, compute);
    }
};

/** One warpgroup's program. step() runs exactly one op (or a few cost-free control steps). */
class AgentProgram {
public:
    enum class Step { Progress, Blocked, Done };
    virtual ~AgentProgram() = default;
    virtual Step step(AgentOps &ops) = 0;
    /** What the agent is doing when blocked, for deadlock messages ("wait full[2] parity 1"). */
    virtual std::string waiting_for() const = 0;
};

class Machine {
public:
    explicit Machine(const HopperParams &params, bool numerics = true, bool trace = false);
    ~Machine();
    Machine(const Machine &) = delete;
    Machine &operator=(const Machine &) = delete;

    const HopperParams &params() const { return params_; }
    bool numerics() const { return numerics_; }

    int add_global(const std::string &name, DType type, int64_t elements);
    /** Element storage (nullptr when numerics are off). Smem and register buffer ids (from the
     * CtaBuilder) are valid only while their CTA runs, e.g. inside vector_op's compute. */
    void *data(int buffer);
    DType type(int buffer) const;
    int64_t elements(int buffer) const;
    const std::string &name(int buffer) const;

    /** Runs one CTA to completion: `make_cta` declares its smem, registers and barriers through
     * the CtaBuilder and returns one program per agent. A deadlock is recorded in the Report (not
     * thrown); the CTA stops there. Misuse throws SimError naming the CTA, the agent, the
     * barrier or buffer and what is wrong (arrive on an uninitialised mbarrier, more arrivals
     * than its count in a phase, a tx count going negative, a bad setmaxnreg value, ...). */
    class CtaBuilder {
    public:
        virtual ~CtaBuilder() = default;
        /** SimError naming the buffer when the CTA's smem would exceed params().smem_bytes.
         * `charged_bytes` >= 0: the buffer takes that much of the capacity, not its elements'
         * bytes (a tile the GPU holds only part of at a time, Kernel.h's chip_slot_bytes). */
        virtual int add_smem(const std::string &name, DType type, int64_t elements,
                             int64_t charged_bytes = -1) = 0;
        /** A register-file buffer private to `agent` (accumulators). */
        virtual int add_registers(int agent, const std::string &name, DType type,
                                  int64_t elements) = 0;
        virtual int add_barrier(const std::string &name) = 0;
        virtual int add_agent(const std::string &name) = 0;
    };
    using CtaFactory =
        std::function<std::vector<std::unique_ptr<AgentProgram>>(CtaBuilder &builder, int cta)>;
    void run_cta(int cta, const CtaFactory &make_cta);
    /** Runs CTAs first_cta .. first_cta + ctas - 1 as one cluster (rank = index - first_cta),
     * together: `make_cta` is called for each. SimError when the machine has fewer SMs. */
    void run_cluster(int first_cta, int ctas, const CtaFactory &make_cta);
    /** Runs a kernel's grid, CTAs 0 .. ctas - 1 in clusters of `cluster` CTAs, as the GPU does:
     * CTA i on SM i % sms, as many at once there as set_grid's `resident` (once one before it
     * there has finished where all are taken), a cluster once every SM of it has room, and the
     * CTAs that run at once in one time line (their loads take HBM and L2 bandwidth in the order
     * of time, not of CTA index; CTAs sharing an SM share its TMA unit, tensor core and vector
     * lanes). */
    void run_grid(int ctas, int cluster, const CtaFactory &make_cta);
    /** The kernel's grid: min(ctas, sms) SMs share HBM and L2 (default: every SM), and each SM
     * holds `resident` of its CTAs at once (what their shared memory, registers and threads
     * allow, the caller's count: HopperParams::resident_ctas). */
    void set_grid(int ctas, int resident = 1);

    /** Cross-CTA race check of global memory, then the totals: cycles = max over SMs of when
     * its last CTA finished (core_cycles: one entry per SM); busy "tma" and "tensor" (unit
     * occupancy), "vector", "barrier_wait" (time agents spent blocked); bound_cycles = max over
     * SMs of max(tensor busy, tma busy). */
    Report finish();
    /** Chrome/Perfetto trace (JSON): one process per SM that ran a CTA, tracks "tma", "tensor"
     * and one per agent name. SimError when the machine was made with trace = false. */
    void write_trace(const std::string &path) const;

private:
    struct Impl;
    HopperParams params_;
    bool numerics_;
    std::unique_ptr<Impl> impl_;
};

} // namespace tandem::sim::hopper

#endif
