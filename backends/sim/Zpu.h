#ifndef TANDEM_SIM_ZPU_H
#define TANDEM_SIM_ZPU_H

/** \file
 * The ZPU machine model: 16 cores, each with ONE control stream, a tensor core, a vector core,
 * an ODMA engine with a configurable number of channels, and three SRAM scopes. Cores have their
 * own DRAM and never synchronise with each other.
 *
 * Timing is analytic and exact for this in-order machine. The control stream only issues: MMAs go
 * to the tensor core, vector ops to the vector core, DMA descriptors to the ODMA units, and all
 * three run concurrently (SUNMMIO/Tilelang: MMA, vector and ODMA ops are asynchronous launches;
 * `sync(units)` drains whole units). Each compute engine runs its ops in issue order, one after
 * the other; sync(engine) advances the control stream to the end of the engine's last op. A
 * descriptor starts on its route's ODMA unit (FIFO), at most `dma_queue_depth` are in flight (the
 * control stream stalls on the oldest when the queue is full), and dma_wait advances the control
 * stream to the transfer's end. Issuing and syncing cost the control stream nothing (the public
 * cost model charges neither). Tile granularity: no per-element loops unless numerics are on.
 *
 * Happens-before follows the program: an issue is an edge control -> op; an op is ordered after
 * the op before it on the same compute engine (in order); a completed wait on a token is an edge
 * from that transfer (only) -> control, a sync(engine) an edge from every op issued to the engine
 * so far -> control. Transfers sharing a channel are not ordered by it (the engine picks the
 * channel, not the program). Every access to a buffer region is checked against earlier
 * conflicting accesses; an unordered pair is a race naming both ops. A transfer the core's program
 * never waited on, or a compute op whose engine it never synced, is a race with the end of the
 * program. DRAM accesses of different cores are checked against each other at finish().
 *
 * Deadlock: the control stream waiting on a token that no transfer of its core will ever
 * complete (never issued, or issued by another core) blocks every agent of the core for ever.
 *
 * Cost figures: ../../shared/NPU-FACTS.md (SUNMMIO's public cost model).
 */

#include "sim/Common.h"
#include "tandem/Memories.h" // Space

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tandem::sim {

/** The compute engines of a core, which the control stream syncs on. */
enum class Engine : uint8_t { Tensor, Vector };
const char *engine_name(Engine e);

const char *space_name(Space s);

struct ZpuParams {
    int cores = 16;
    int dma_channels = 2;
    int dma_queue_depth = 8;       // descriptors in flight per core (the in-flight limit)
    int64_t asram_bytes = 1048576; // left matmul operand
    int64_t wsram_bytes = 2097152; // right matmul operand
    int64_t rsram_bytes = 1536000; // results and vector data
    // ODMA copy = dma_fixed + ceil(bytes / dma_bytes_per_cycle)
    int dma_fixed = 100;
    int dma_bytes_per_cycle = 1024;
    // MMA = mma_issue + (mma_fp32_out | mma_bf16_out) + ceil(m/16)*ceil(n/32)*max(ceil(k/32), b)
    // + mma_drain, b = mma_min_blocks_small if m <= 16 and n <= 32, else mma_min_blocks
    int mma_issue = 21;
    int mma_fp32_out = 7;
    int mma_bf16_out = 8;
    int mma_min_blocks = 4;
    int mma_min_blocks_small = 1;
    int mma_drain = 70;
    // A vector op costs ceil(units / vector_flops_per_cycle) + vector_fixed; the units (loads,
    // stores, arithmetic, weighted by the description's vector_* costs) come with the op.
    int vector_flops_per_cycle = 250;
    int vector_fixed = 0;
    // DMA routes: route[src][dst] is the ODMA unit that takes a transfer from src to dst, -1
    // where no single transfer can (DRAM -> ASRAM, anything out of ASRAM or WSRAM), kAnyUnit
    // where the first free unit takes it (a machine without pinned routes: free_routes()).
    static constexpr int kAnyUnit = -2;
    std::array<std::array<int, 4>, 4> route = default_routes();

    /** Calls f(name, field) for every field a machine description sets (its parameter name). */
    template <class F> void fields(F &&f) {
        f("cores", cores);
        f("dma_channels", dma_channels);
        f("dma_queue_depth", dma_queue_depth);
        f("asram_bytes", asram_bytes);
        f("wsram_bytes", wsram_bytes);
        f("rsram_bytes", rsram_bytes);
        f("dma_fixed", dma_fixed);
        f("dma_bytes_per_cycle", dma_bytes_per_cycle);
        f("mma_issue", mma_issue);
        f("mma_fp32_out", mma_fp32_out);
        f("mma_bf16_out", mma_bf16_out);
        f("mma_min_blocks", mma_min_blocks);
        f("mma_min_blocks_small", mma_min_blocks_small);
        f("mma_drain", mma_drain);
        f("vector_flops_per_cycle", vector_flops_per_cycle);
        f("vector_fixed", vector_fixed);
    }
    static ZpuParams from(const ParamLookup &get);
    static std::array<std::array<int, 4>, 4> default_routes();
    static std::array<std::array<int, 4>, 4> free_routes();
    /** The ODMA unit (channel) of a transfer, -1 when none can make it in one transfer. */
    int route_unit(Space src, Space dst) const;

    int64_t capacity(Space s) const;
    int64_t dma_cycles(int64_t bytes) const;
    int64_t mma_cycles(int64_t m, int64_t n, int64_t k, DType out) const;
    int64_t vector_cycles(int64_t flops) const;
    /** Asymptotic rates of one core, for rooflines. */
    double peak_macs_per_cycle() const { return 16.0 * 32 * 32; }
    double dma_bytes_per_cycle_per_core() const {
        return double(dma_channels) * dma_bytes_per_cycle;
    }
};

/** A DMA completion token. id 0 is the null token: already complete, waiting on it is free. */
struct Token {
    int64_t id = 0;
};

class Machine;

/** One core's control stream. The runtime API of the ZPU is a thin layer over this. */
class Core {
public:
    int id() const { return id_; }
    Cycles now() const;

    /** Start a transfer src_box -> dst_box (same element type and element count; boxes may have
     * different shapes only if their extents agree dim by dim). Returns its token. */
    Token dma_start(int dst, const Box &dst_box, int src, const Box &src_box,
                    const std::string &label);
    /** Block the control stream until the transfer of token t is complete. */
    void dma_wait(Token t, const std::string &label);
    /** acc(n, m) += sum_k a(k, m) * b(n, k), or acc = ... when `accumulate` is false (the fork's
     * clear_accum, same cost). Boxes: acc dims {N, M}, a dims {K, M}, b dims {N, K}. a and b are
     * bf16 or f32, acc is f32. Issued to the tensor core: the control stream goes on at once. */
    void mma(int acc, const Box &acc_box, int a, const Box &a_box, int b, const Box &b_box,
             const std::string &label, bool accumulate = true);
    /** A vector-core op touching `accesses`; `compute` applies the numerics (not called when
     * numerics are off). Issued to the vector core: the control stream goes on at once. */
    void vector_op(const std::string &label, int64_t flops, const std::vector<Access> &accesses,
                   const std::function<void()> &compute);
    /** Block the control stream until every op issued to `engine` so far is complete. */
    void sync(Engine engine, const std::string &label);

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
    explicit Machine(const ZpuParams &params, bool numerics = true, bool trace = false);
    ~Machine();
    Machine(const Machine &) = delete;
    Machine &operator=(const Machine &) = delete;

    const ZpuParams &params() const { return params_; }
    bool numerics() const { return numerics_; }

    /** DRAM buffers are shared by all cores (kernel arguments). Returns the buffer id. */
    int add_dram(const std::string &name, DType type, int64_t elements);
    /** SRAM buffers belong to one core; throws SimError naming the buffer and the scope when the
     * scope's capacity is exceeded. */
    int add_sram(int core, const std::string &name, Space space, DType type, int64_t elements);
    /** Raw element storage (row-major as the boxes address it); empty when numerics are off. */
    void *data(int buffer);
    DType type(int buffer) const;
    const std::string &name(int buffer) const;
    int64_t elements(int buffer) const;

    Core &core(int c);
    int num_cores() const { return params_.cores; }

    /** Marks a deadlock found by the caller (for example a core that threw DeadlockError). */
    void report_deadlock(const std::string &message);
    /** Cross-core DRAM race check, totals, bound. Call once after every core has run. */
    Report finish();
    /** Chrome/Perfetto trace (JSON): one process per core, one track per engine. */
    void write_trace(const std::string &path) const;

private:
    friend class Core;
    struct Impl;
    ZpuParams params_;
    bool numerics_;
    std::unique_ptr<Impl> impl_;
};

} // namespace tandem::sim

#endif
