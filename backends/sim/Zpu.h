#ifndef TANDEM_SIM_ZPU_H
#define TANDEM_SIM_ZPU_H

/** \file
 * The ZPU machine model: 16 cores, each with ONE control stream, a tensor core, a vector core,
 * an ODMA engine with a configurable number of channels, and three SRAM scopes. Cores have their
 * own DRAM and meet only at barriers (the mesh, below).
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
 * The mesh (issue 36; machine description v5). Cores sit in rows of `mesh_columns`. A core
 * broadcasts a box of its own buffer into a buffer of the same name on other cores of its row
 * (the row link, HLink) or its column (VLink): one leaf on the sender's link engine, costing
 * link_fixed + bytes / link rate whatever the number of receivers, in the link's routes; the
 * sender waits on its token as on a transfer's. A barrier of a set of cores releases every one of
 * them barrier_cycles after the last arrives. Machine::run runs the cores' programs one after
 * another, each until it ends or waits at a barrier (the lowest-numbered core that can go on runs
 * next), so runs are deterministic and a program without barriers runs as it would alone. A
 * barrier joins what its cores know: each leaves knowing what every one of them knew when it
 * arrived, and a receiver knows a leaf's writes into its buffer once it knows the sender waited
 * on the leaf. So a receiver orders its reads after a leaf by a barrier after the sender's wait,
 * and the leaf after its own earlier accesses by a barrier before the sender issues it; anything
 * less is a race. Cores that all wait at barriers some core of theirs never reaches deadlock,
 * each named with its barrier.
 *
 * Cost figures: ../../shared/NPU-FACTS.md (SUNMMIO's public cost model).
 */

#include "sim/Common.h"
#include "tandem/params/Zpu.h" // ZpuParams, space_name

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tandem::sim {

/** The compute engines of a core, which the control stream syncs on. */
enum class Engine : uint8_t { Tensor, Vector };
const char *engine_name(Engine e);

/** A mesh link of a core: its row's (HLink) or its column's (VLink). */
enum class Link : uint8_t { Row, Column };
const char *link_name(Link l);

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
     * bf16, f16 or f32, acc is f32. Issued to the tensor core: the control stream goes on at once.
     */
    void mma(int acc, const Box &acc_box, int a, const Box &a_box, int b, const Box &b_box,
             const std::string &label, bool accumulate = true);
    /** A vector-core op touching `accesses`; `compute` applies the numerics (not called when
     * numerics are off). Issued to the vector core: the control stream goes on at once. */
    void vector_op(const std::string &label, int64_t flops, const std::vector<Access> &accesses,
                   const std::function<void()> &compute);
    /** Block the control stream until every op issued to `engine` so far is complete. */
    void sync(Engine engine, const std::string &label);
    /** A broadcast leaf over `link`: src_box of this core's `src` into dst_box of the SRAM buffer
     * named `dst` of each of `receivers` (other cores of this core's row or column). Returns its
     * token: dma_wait on it completes the leaf on this core only (a receiver learns it through a
     * barrier). */
    Token broadcast(Link link, const std::vector<int> &receivers, const std::string &dst,
                    const Box &dst_box, int src, const Box &src_box, const std::string &label);
    /** Block until every core of `cores` (this one among them) has arrived at its barrier of the
     * same cores (the n-th call of each meets the others' n-th); only inside Machine::run. */
    void barrier(const std::vector<int> &cores, const std::string &label);

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
    /** The SRAM buffer named `name` of core `c`, -1 when it has none. */
    int sram_buffer(int c, const std::string &name) const;

    /** Runs `program` for every core, each on its own control stream, interleaved at barriers
     * (see the file comment). A core whose program deadlocks stops there (recorded); the first
     * other exception of a core stops every core and is rethrown. */
    void run(const std::function<void(Core &)> &program);

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
