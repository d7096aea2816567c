#ifndef TANDEM_SIM_ASCEND_H
#define TANDEM_SIM_ASCEND_H

/** \file
 * The Ascend 910B (A2) AI-core machine model: per core, one scalar instruction stream that
 * dispatches ops in program order to in-order pipes (MTE2, MTE1, M, FIX, V, MTE3, S), joined only
 * by flags: SetFlag<SRC_DST>(id) is queued on the SRC pipe and fires when the ops queued before it
 * on SRC are done; WaitFlag<SRC_DST>(id) is queued on the DST pipe and holds every later op of DST
 * until the matching set has fired. PipeBarrier<P> orders pipe P with itself; PIPE_ALL drains all.
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
 * only GM: cube results reach a vector core through GM. The machine holds both kinds, numbered
 * AIC 0 .. cube_cores - 1, then AIV cube_cores .. cube_cores + vector_cores - 1 (aic(i), aiv(i)).
 * GM is cached in a shared L2: the first read of a line (by any core, in time order) comes from
 * HBM, later reads from L2; HBM's bandwidth is shared by every core, reads and write-backs
 * together. Rates and capacities: ../../shared/NPU-FACTS.md.
 *
 * Errors (SimError with the op, pipe and core): a buffer over a scope's capacity or misaligned; a
 * memory or pipe the core's kind does not have (UB on an AIC, L1 on an AIV); a copy between
 * memories no pipe connects; setting a flag (src, dst, id) twice without a wait
 * between; an event id outside 0..7; mismatched shapes.
 */

#include "sim/Zpu.h" // DType, Box, Access, Race, Report, errors

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tandem::sim::ascend {

enum class Pipe : uint8_t { S, MTE2, MTE1, M, FIX, V, MTE3, ALL };
const char *pipe_name(Pipe p);

/** AIC: a cube core (AscendC's AIC); AIV: a vector core. */
enum class CoreKind : uint8_t { AIC, AIV };
const char *core_kind_name(CoreKind k);
/** Whether a core of kind `k` has pipe `p` (S and ALL: both kinds) or memory `m` (GM: both). */
bool has_pipe(CoreKind k, Pipe p);
bool has_memory(CoreKind k, Mem m);

const char *mem_name(Mem m);

struct AscendParams {
    int cube_cores = 24;        // AIC
    int vector_cores = 48;      // AIV (two per AIC on the 910B)
    int64_t l1_bytes = 512 << 10, l0a_bytes = 64 << 10, l0b_bytes = 64 << 10, l0c_bytes = 128 << 10,
            ub_bytes = 192 << 10;
    int l1_align = 32, ub_align = 32, l0ab_align = 512, l0c_align = 64;
    // bytes per cycle per core (platform config, NPU-FACTS.md). GM reads that miss L2 come from HBM
    // at gm_to_l1 / gm_to_ub; reads of lines already in L2 at l2_read. Fixpipe writes land in L2
    // (l0c_to_gm = the L2 write rate).
    double gm_to_l1 = 32, gm_to_ub = 32, l1_to_l0a = 512, l1_to_l0b = 256, l0c_to_gm = 86, ub_to_gm = 64,
           l2_read = 110;
    // HBM, shared by every core: reads that miss L2 and the write-back of every GM write.
    double hbm_bytes_per_cycle = 865;
    // The L2 shared by the cores: 192 MB on the 910B (Huawei's public figure); allocation per line
    // on the first read, no eviction: once full, new lines are read from HBM every time.
    int64_t l2_bytes = int64_t(192) << 20;
    int l2_line = 512;
    int copy_fixed = 30;        // issue/latency cycles per transfer
    int cube_fixed = 10;        // per Mmad
    int vector_bytes_per_cycle = 256; // one repeat: 64 f32 or 128 f16 lanes
    int vector_fixed = 10;
    int event_ids = 8;
    int scalar_issue_cycles = 1; // the scalar stream dispatches one op (any op) per this many cycles
    int flag_cycles = 1;         // a SetFlag or WaitFlag occupies its pipe this long
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
        f("l2_bytes", l2_bytes);
        f("l2_line", l2_line);
        f("copy_fixed", copy_fixed);
        f("cube_fixed", cube_fixed);
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
    /** The cube does a 16x16x16 fp16/bf16 block per cycle. */
    int64_t mmad_cycles(int64_t m, int64_t n, int64_t k) const;
    /** A vector op doing `work` bytes of lane work (each instruction's elements times their
     * width, summed): one 256-byte repeat per cycle. */
    int64_t vector_cycles(int64_t work) const;
};

class Machine;

/** One AI core's scalar stream. Calls append to the program; the core runs when it is ended. */
class Core {
public:
    int id() const { return id_; }

    /** DataCopy between memories (GM->L1/UB on MTE2, L1->L0A/L0B on MTE1 (LoadData), UB->GM on
     * MTE3, L1<->UB); boxes of equal element counts and types. */
    void data_copy(int dst, const Box &dst_box, int src, const Box &src_box, const std::string &label);
    /** Mmad on M: c(n, m) (+)= a(k, m) * b(n, k); c in L0C (f32), a in L0A, b in L0B (bf16/f16).
     * `accumulate` false overwrites c (AscendC's init flag). */
    void mmad(int c, const Box &c_box, int a, const Box &a_box, int b, const Box &b_box, bool accumulate,
              const std::string &label);
    /** Fixpipe on FIX: L0C (f32) -> GM or L1 with conversion to the destination's type. */
    void fixpipe(int dst, const Box &dst_box, int src, const Box &src_box, const std::string &label);
    /** A vector op on V over UB regions doing `work` bytes of lane work (vector_cycles);
     * `compute` applies the numerics when the op executes, during run_core: it must capture what
     * it needs by value. */
    void vector_op(const std::string &label, int64_t work, const std::vector<Access> &accesses,
                   const std::function<void()> &compute);
    void set_flag(Pipe src, Pipe dst, int event, const std::string &label = "");
    void wait_flag(Pipe src, Pipe dst, int event, const std::string &label = "");
    void pipe_barrier(Pipe pipe);

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
