// Self-tests of the Hopper machine model (backends/sim/Hopper.h): a warp-specialised GEMM ring
// (TMA producer, wgmma consumer, full/empty mbarriers, TMA store epilogue) against a naive GEMM,
// the deadlock and race detectors on broken versions of it, named barriers, user errors,
// cross-CTA races, clusters (multicast, remote arrivals), exact timing and the trace file.

#include "sim/Hopper.h"
#include "sim/Numerics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace tandem::sim::hopper {
namespace {

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

Cycles busy(const Report &r, const std::string &engine) {
    for (const EngineBusy &b : r.busy) {
        if (b.engine == engine) {
            return b.busy;
        }
    }
    ADD_FAILURE() << "no engine " << engine;
    return -1;
}

std::string all_races(const Report &r) {
    std::string text;
    for (const Race &race : r.races) {
        text += race.str() + "\n";
    }
    return text;
}

/** Does some stored race name both ops (in either order)? */
bool has_race(const Report &r, const std::string &op1, const std::string &op2) {
    for (const Race &race : r.races) {
        if ((contains(race.first, op1) && contains(race.second, op2)) ||
            (contains(race.first, op2) && contains(race.second, op1))) {
            return true;
        }
    }
    return false;
}

/** An agent program: a list of ops, one per step. An op returning false is a failed wait: the
 * step returns Blocked and the op runs again when the agent wakes. */
class Script : public AgentProgram {
public:
    Script &op(const std::string &what, std::function<bool(AgentOps &)> run) {
        ops_.push_back({what, std::move(run)});
        return *this;
    }
    Script &call(const std::string &what, std::function<void(AgentOps &)> run) {
        return op(what, [run](AgentOps &ops) {
            run(ops);
            return true;
        });
    }
    Script &init(int barrier, int count) {
        return call("init", [=](AgentOps &o) { o.mbarrier_init(barrier, count); });
    }
    Script &arrive(int barrier) {
        return call("arrive", [=](AgentOps &o) { o.mbarrier_arrive(barrier); });
    }
    Script &expect_tx(int barrier, int64_t bytes) {
        return call("expect_tx", [=](AgentOps &o) { o.mbarrier_arrive_expect_tx(barrier, bytes); });
    }
    Script &wait(int barrier, int parity, const std::string &name) {
        return op("wait " + name + " parity " + std::to_string(parity),
                  [=](AgentOps &o) { return o.mbarrier_try_wait_parity(barrier, parity); });
    }
    Script &sync(int id, int agents) {
        return op("named barrier " + std::to_string(id) + " for " + std::to_string(agents),
                  [=](AgentOps &o) { return o.named_barrier_sync(id, agents); });
    }

    Step step(AgentOps &ops) override {
        if (pc_ == ops_.size()) {
            return Step::Done;
        }
        if (!ops_[pc_].run(ops)) {
            return Step::Blocked;
        }
        ++pc_;
        return Step::Progress;
    }
    std::string waiting_for() const override {
        return pc_ < ops_.size() ? ops_[pc_].what : "nothing (finished)";
    }

private:
    struct Op {
        std::string what;
        std::function<bool(AgentOps &)> run;
    };
    std::vector<Op> ops_;
    size_t pc_ = 0;
};

/** The model's parameters without the delays fitted on the GPU (the launch, the power-limited
 * tensor clock, the wgmma and HBM latencies of machines/hopper.json v9), so that the tests below
 * can count cycles by hand. */
HopperParams counted() {
    HopperParams p;
    p.launch_cycles = 0;
    p.tensor_clock = 1;
    p.wgmma_latency = 30;
    p.hbm_latency = p.tma_latency;
    p.tma_split_row_cycles = 0;
    p.l2_warm = 0;
    return p;
}

using Programs = std::vector<std::unique_ptr<AgentProgram>>;

template <class... Scripts> Programs programs(std::unique_ptr<Scripts>... scripts) {
    Programs out;
    (out.push_back(std::move(scripts)), ...);
    return out;
}

/** Dense 2-D box: {inner, 1}, {outer, inner}. */
Box dense(int64_t inner, int64_t outer, int64_t offset = 0) {
    return Box{offset, {{inner, 1}, {outer, inner}}};
}

TensorView row_major(int buffer, int64_t rows, int64_t cols) {
    return TensorView{buffer, {cols, rows}, {1, cols}};
}

// ---------------------------------------------------------------------------------------------
// The warp-specialised GEMM ring
// ---------------------------------------------------------------------------------------------

/** C (M x N, f32) = A (M x K, bf16) * B (K x N, bf16), row-major. One producer agent loads A
 * and B tiles into a ring of `stages` slots (full/empty mbarriers, parity convention A: the
 * producer's first wait on empty passes); one consumer agent runs one wgmma per K tile, retires
 * it, releases the slot, then stores its tile through smem with a TMA store. Bugs switch on the
 * classic mistakes. */
struct GemmConfig {
    int64_t M = 29, N = 21, BM = 16, BN = 16, BK = 8;
    int stages = 2, k_tiles = 3;
    int tiles_per_cta = 1; // > 1: a persistent CTA walks several output tiles
    bool numerics = true;
    bool consumer_parity_starts_at_1 = false;
    bool producer_parity_starts_at_0 = false;
    bool parity_reset_per_tile = false;
    bool arrive_empty_before_wgmma_wait = false;
    bool no_proxy_fence = false;
    bool no_store_wait = false;
    int64_t K() const { return k_tiles * BK - 3; } // ragged: the last K tile is zero-filled
};

struct GemmResult {
    Report report;
    bool correct = false;
    std::string mismatch;
    std::string error; // a SimError thrown by run_cta (then nothing else is filled in)
};

std::vector<uint16_t> random_bf16(int64_t count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<uint16_t> out(static_cast<size_t>(count));
    for (uint16_t &x : out) {
        x = float_to_bf16(dist(rng));
    }
    return out;
}

GemmResult run_gemm(const GemmConfig &g, HopperParams params = counted(), bool trace = false,
                    const std::string &trace_path = "") {
    Machine machine(params, g.numerics, trace);
    const int64_t M = g.M, N = g.N, K = g.K(), BM = g.BM, BN = g.BN, BK = g.BK;
    const int S = g.stages;
    int A = machine.add_global("A", DType::BF16, M * K);
    int B = machine.add_global("B", DType::BF16, K * N);
    int C = machine.add_global("C", DType::F32, M * N);
    std::vector<uint16_t> a_values, b_values;
    if (g.numerics) {
        a_values = random_bf16(M * K, 1);
        b_values = random_bf16(K * N, 2);
        std::memcpy(machine.data(A), a_values.data(), a_values.size() * 2);
        std::memcpy(machine.data(B), b_values.data(), b_values.size() * 2);
    }
    TensorView a_view = row_major(A, M, K), b_view = row_major(B, K, N),
               c_view = row_major(C, M, N);
    const int64_t m_tiles = (M + BM - 1) / BM, n_tiles = (N + BN - 1) / BN;
    const int64_t tiles = m_tiles * n_tiles;
    const int64_t stage_bytes = (BK * BM + BN * BK) * 2;

    GemmResult result;
    try {
        for (int64_t first = 0, cta = 0; first < tiles; first += g.tiles_per_cta, ++cta) {
            machine.run_cta(int(cta), [&](Machine::CtaBuilder &b, int) {
                int producer_agent = b.add_agent("producer");
                int consumer_agent = b.add_agent("consumer");
                int a_ring = b.add_smem("a_ring", DType::BF16, S * BK * BM);
                int b_ring = b.add_smem("b_ring", DType::BF16, S * BN * BK);
                int staging = b.add_smem("c_staging", DType::F32, BN * BM);
                int acc = b.add_registers(consumer_agent, "acc", DType::F32, BN * BM);
                std::vector<int> full, empty;
                for (int s = 0; s < S; ++s) {
                    full.push_back(b.add_barrier("full[" + std::to_string(s) + "]"));
                    empty.push_back(b.add_barrier("empty[" + std::to_string(s) + "]"));
                }
                auto producer = std::make_unique<Script>();
                auto consumer = std::make_unique<Script>();
                EXPECT_EQ(producer_agent, 0);
                for (int s = 0; s < S; ++s) {
                    producer->init(full[s], 1).init(empty[s], 1);
                }
                producer->sync(0, 2);
                consumer->sync(0, 2);
                int64_t use = 0; // ring position, carried across tiles
                for (int64_t tile = first; tile < std::min(tiles, first + g.tiles_per_cta);
                     ++tile) {
                    int64_t m0 = (tile / n_tiles) * BM, n0 = (tile % n_tiles) * BN;
                    if (g.parity_reset_per_tile) {
                        use = 0;
                    }
                    consumer->call("zero acc", [&machine, acc, BN, BM](AgentOps &o) {
                        o.vector_op("zero acc", BN * BM, {{acc, dense(BN, BM), true}},
                                    [&machine, acc, BN, BM] {
                                        float *p = static_cast<float *>(machine.data(acc));
                                        std::fill(p, p + BN * BM, 0.0f);
                                    });
                    });
                    for (int k = 0; k < g.k_tiles; ++k, ++use) {
                        int s = int(use % S);
                        int round = int(use / S);
                        int empty_parity =
                            g.producer_parity_starts_at_0 ? round & 1 : (round & 1) ^ 1;
                        int full_parity =
                            g.consumer_parity_starts_at_1 ? (round & 1) ^ 1 : round & 1;
                        std::string slot = "[" + std::to_string(s) + "]";
                        producer->wait(empty[s], empty_parity, "empty" + slot)
                            .expect_tx(full[s], stage_bytes)
                            .call("load a",
                                  [=](AgentOps &o) {
                                      o.tma_load(a_ring, s * BK * BM, a_view, {k * BK, m0},
                                                 {BK, BM}, full[s], "load a");
                                  })
                            .call("load b", [=](AgentOps &o) {
                                o.tma_load(b_ring, s * BN * BK, b_view, {n0, k * BK}, {BN, BK},
                                           full[s], "load b");
                            });
                        consumer->wait(full[s], full_parity, "full" + slot)
                            .call("fence", [](AgentOps &o) { o.wgmma_fence(); })
                            .call("mma",
                                  [=](AgentOps &o) {
                                      o.wgmma(acc, dense(BN, BM), a_ring,
                                              dense(BK, BM, s * BK * BM), b_ring,
                                              dense(BN, BK, s * BN * BK), "mma");
                                  })
                            .call("commit", [](AgentOps &o) { o.wgmma_commit_group(); });
                        if (g.arrive_empty_before_wgmma_wait) {
                            consumer->arrive(empty[s]).call(
                                "wait mma", [](AgentOps &o) { o.wgmma_wait_group(0); });
                        } else {
                            consumer->call("wait mma", [](AgentOps &o) { o.wgmma_wait_group(0); })
                                .arrive(empty[s]);
                        }
                    }
                    consumer->call("epilogue", [&machine, acc, staging, BN, BM](AgentOps &o) {
                        o.vector_op("epilogue", BN * BM,
                                    {{acc, dense(BN, BM), false}, {staging, dense(BN, BM), true}},
                                    [&machine, acc, staging, BN, BM] {
                                        std::memcpy(machine.data(staging), machine.data(acc),
                                                    size_t(BN * BM * 4));
                                    });
                    });
                    if (!g.no_proxy_fence) {
                        consumer->call("fence.proxy.async",
                                       [](AgentOps &o) { o.fence_proxy_async(); });
                    }
                    consumer
                        ->call("store c",
                               [=](AgentOps &o) {
                                   o.tma_store(c_view, {n0, m0}, {BN, BM}, staging, 0, "store c");
                               })
                        .call("commit store", [](AgentOps &o) { o.bulk_commit_group(); });
                    if (!g.no_store_wait) {
                        consumer->op("wait store read",
                                     [](AgentOps &o) { return o.bulk_wait_group_read(0); });
                    }
                }
                return programs(std::move(producer), std::move(consumer));
            });
        }
    } catch (const SimError &e) {
        result.error = e.what();
        return result;
    }
    result.report = machine.finish();
    if (trace) {
        machine.write_trace(trace_path);
    }
    if (!g.numerics) {
        return result;
    }
    const float *c = static_cast<const float *>(machine.data(C));
    result.correct = true;
    for (int64_t m = 0; m < M && result.correct; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float expected = 0.0f;
            for (int64_t k = 0; k < K; ++k) {
                expected += bf16_to_float(a_values[size_t(m * K + k)]) *
                            bf16_to_float(b_values[size_t(k * N + n)]);
            }
            if (c[m * N + n] != expected) {
                result.correct = false;
                result.mismatch = "C[" + std::to_string(m) + "][" + std::to_string(n) +
                                  "] = " + std::to_string(c[m * N + n]) + ", expected " +
                                  std::to_string(expected);
                break;
            }
        }
    }
    return result;
}

TEST(HopperGemm, RingMatchesNaiveGemmForStagesAndKTiles) {
    for (int tiles_per_cta : {1, 2}) {
        for (int stages = 1; stages <= 4; ++stages) {
            for (int k_tiles = 1; k_tiles <= 7; ++k_tiles) {
                GemmConfig g;
                g.stages = stages;
                g.k_tiles = k_tiles;
                g.tiles_per_cta = tiles_per_cta;
                GemmResult r = run_gemm(g);
                SCOPED_TRACE("stages " + std::to_string(stages) + ", k tiles " +
                             std::to_string(k_tiles) + ", tiles per CTA " +
                             std::to_string(tiles_per_cta));
                EXPECT_TRUE(r.correct) << r.mismatch;
                EXPECT_EQ(r.report.race_count, 0) << all_races(r.report);
                EXPECT_FALSE(r.report.deadlock) << r.report.deadlock_message;
                EXPECT_GT(r.report.cycles, 0);
            }
        }
    }
}

TEST(HopperGemm, DeeperRingsHideTmaLatency) {
    // Timing only, many K tiles: more stages overlap more loads, never fewer.
    Cycles previous = std::numeric_limits<Cycles>::max();
    for (int stages = 1; stages <= 4; ++stages) {
        GemmConfig g;
        g.numerics = false;
        g.stages = stages;
        g.k_tiles = 16;
        Report r = run_gemm(g).report;
        EXPECT_EQ(r.race_count, 0);
        EXPECT_LE(r.cycles, previous) << stages << " stages";
        if (stages > 1) {
            EXPECT_LT(r.cycles, previous) << stages << " stages";
        }
        previous = r.cycles;
        EXPECT_GT(busy(r, "tma"), 0);
        EXPECT_GT(busy(r, "tensor"), 0);
        EXPECT_LE(r.bound_cycles, r.cycles);
    }
}

TEST(HopperGemm, ConsumerWaitingParityOneFirstReadsBeforeTheLoad) {
    // On a fresh barrier the phase "before" phase 0 counts as completed with parity 1, so the
    // consumer's first wait on each slot passes at once: it reads the slot before the TMA load
    // lands (a race), releases it early, and from then on runs one phase ahead.
    GemmConfig g;
    g.k_tiles = 1;
    GemmResult r = [&] {
        g.consumer_parity_starts_at_1 = true;
        return run_gemm(g);
    }();
    ASSERT_EQ(r.error, "");
    EXPECT_FALSE(r.report.deadlock);
    EXPECT_GT(r.report.race_count, 0);
    EXPECT_TRUE(has_race(r.report, "tma_load 'load", "wgmma 'mma'")) << all_races(r.report);
    EXPECT_FALSE(r.correct);

    // With a slot used twice, the early release lets the producer arrive on the full barrier of
    // the slot's next phase while the loads of the current one are still in flight: more
    // arrivals than the barrier's count in one phase.
    g.k_tiles = 3;
    r = run_gemm(g);
    EXPECT_TRUE(contains(r.error, "CTA 0, agent 'producer': mbarrier_arrive_expect_tx: mbarrier "
                                  "'full[0]' gets more arrivals than its count (1) in phase 0"))
        << r.error;
}

TEST(HopperGemm, ProducerWaitingEmptyWithTheWrongInitialParityDeadlocks) {
    GemmConfig g;
    g.producer_parity_starts_at_0 = true;
    GemmResult r = run_gemm(g);
    ASSERT_TRUE(r.report.deadlock);
    const std::string &m = r.report.deadlock_message;
    EXPECT_TRUE(contains(m, "deadlock in CTA 0")) << m;
    EXPECT_TRUE(contains(m, "agent 'producer' waits for 'wait empty[0] parity 0'")) << m;
    EXPECT_TRUE(contains(m, "agent 'consumer' waits for 'wait full[0] parity 0'")) << m;
    EXPECT_TRUE(contains(m, "mbarrier 'empty[0]' is in phase 0 (parity 0) with 1 of 1 arrivals"))
        << m;
    EXPECT_TRUE(contains(m, "deadlock in CTA 3")) << m; // every CTA deadlocks, each reported
    EXPECT_EQ(r.report.race_count, 0) << all_races(r.report);
}

TEST(HopperGemm, ParityNotCarriedAcrossTilesIsDetected) {
    // A persistent CTA that restarts its ring position (and so its parities) at every output
    // tile. Harmless only when every slot is used an even number of times per tile; otherwise
    // the consumer's wait on that slot passes on the previous tile's phase and reads stale data
    // (no unordered pair: the stale data is ordered), and the load meant for it is never waited
    // for, which the exit check reports; or, with the consumer a phase ahead, the producer
    // arrives on a full barrier whose phase still waits for its loads (a SimError).
    int detected = 0, harmless = 0, overran = 0, lost = 0;
    for (int stages = 1; stages <= 3; ++stages) {
        for (int k_tiles = 1; k_tiles <= 6; ++k_tiles) {
            GemmConfig g;
            g.stages = stages;
            g.k_tiles = k_tiles;
            g.tiles_per_cta = 2;
            g.parity_reset_per_tile = true;
            bool odd_slot = false;
            for (int s = 0; s < stages; ++s) {
                int uses = k_tiles / stages + (s < k_tiles % stages ? 1 : 0);
                odd_slot = odd_slot || uses % 2 == 1;
            }
            GemmResult r = run_gemm(g);
            SCOPED_TRACE("stages " + std::to_string(stages) + ", k tiles " +
                         std::to_string(k_tiles));
            if (odd_slot) {
                ++detected;
                if (!r.error.empty()) { // the producer overran a full barrier's phase
                    ++overran;
                    EXPECT_TRUE(contains(r.error, "gets more arrivals than its count")) << r.error;
                    continue;
                }
                EXPECT_TRUE(r.report.deadlock || r.report.race_count > 0);
                EXPECT_FALSE(r.correct);
                if (!r.report.deadlock) {
                    ++lost;
                    EXPECT_TRUE(has_race(r.report, "tma_load", "exit of CTA"))
                        << all_races(r.report);
                    EXPECT_TRUE(contains(all_races(r.report), "no agent waited"));
                }
            } else {
                ++harmless;
                EXPECT_EQ(r.error, "");
                EXPECT_TRUE(r.correct) << r.mismatch;
                EXPECT_EQ(r.report.race_count, 0) << all_races(r.report);
                EXPECT_FALSE(r.report.deadlock);
            }
        }
    }
    EXPECT_GT(detected, 0);
    EXPECT_GT(harmless, 0);
    EXPECT_GT(lost, 0);
    std::printf("[ info     ] parity reset: %d harmless, %d detected (%d as a lost load, %d as "
                "an overrun barrier)\n",
                harmless, detected, lost, overran);
}

TEST(HopperGemm, ReleasingTheSlotBeforeWgmmaRetiresRaces) {
    GemmConfig g;
    g.stages = 2;
    g.k_tiles = 4; // slot 0 is reloaded while the first wgmma may still read it
    g.arrive_empty_before_wgmma_wait = true;
    GemmResult r = run_gemm(g);
    EXPECT_FALSE(r.report.deadlock);
    ASSERT_GT(r.report.race_count, 0);
    EXPECT_TRUE(has_race(r.report, "wgmma 'mma' (tensor core, agent 'consumer', CTA 0)",
                         "tma_load 'load a' (tma, agent 'producer', CTA 0)"))
        << all_races(r.report);
    EXPECT_EQ(r.report.races[0].first, "wgmma 'mma' (tensor core, agent 'consumer', CTA 0)");
    EXPECT_EQ(r.report.races[0].buffer, "a_ring");
}

TEST(HopperGemm, MissingProxyFenceBeforeTheStoreRaces) {
    GemmConfig g;
    g.no_proxy_fence = true;
    GemmResult r = run_gemm(g);
    ASSERT_GT(r.report.race_count, 0);
    const Race &race = r.report.races[0];
    EXPECT_EQ(race.first, "vector 'epilogue' (agent 'consumer', CTA 0)");
    EXPECT_EQ(race.second, "tma_store 'store c' (tma, agent 'consumer', CTA 0)");
    EXPECT_EQ(race.buffer, "c_staging");
    EXPECT_TRUE(contains(race.str(), "missing fence.proxy.async")) << race.str();
    EXPECT_EQ(r.report.race_count, 4); // once per CTA
    EXPECT_TRUE(r.correct);            // the numerics do not model the proxies
}

TEST(HopperGemm, RewritingTheStagingBeforeTheStoreReadItRaces) {
    GemmConfig g;
    g.tiles_per_cta = 2;
    g.no_store_wait = true;
    GemmResult r = run_gemm(g);
    ASSERT_GT(r.report.race_count, 0);
    const Race &race = r.report.races[0];
    EXPECT_EQ(race.first, "tma_store 'store c' (tma, agent 'consumer', CTA 0)");
    EXPECT_EQ(race.second, "vector 'epilogue' (agent 'consumer', CTA 0)");
    EXPECT_EQ(race.buffer, "c_staging");
    EXPECT_TRUE(contains(race.str(), "neither happens before the other"));
}

TEST(HopperGemm, ExitingBeforeTheStoreReadItsSmemRaces) {
    GemmConfig g;
    g.no_store_wait = true; // one tile per CTA: only the exit follows the store
    GemmResult r = run_gemm(g);
    ASSERT_GT(r.report.race_count, 0);
    const Race &race = r.report.races[0];
    EXPECT_EQ(race.first, "tma_store 'store c' (tma, agent 'consumer', CTA 0)");
    EXPECT_EQ(race.second, "exit of CTA 0");
    EXPECT_EQ(race.buffer, "c_staging");
    EXPECT_TRUE(contains(race.str(), "no bulk wait_group_read retired this TMA store"))
        << race.str();
    EXPECT_EQ(r.report.race_count, 4); // once per CTA
    EXPECT_TRUE(r.correct);
}

// ---------------------------------------------------------------------------------------------
// Named barriers
// ---------------------------------------------------------------------------------------------

struct Handover {
    Report report;
    float seen = 0;
};

/** consumer0 writes smem, hands it to consumer1 through named barrier 1 (or not), consumer1 reads
 * it; a third agent takes no part. */
Handover handover(bool with_barrier, int count) {
    Machine machine(counted(), true);
    Handover out;
    machine.run_cta(0, [&](Machine::CtaBuilder &b, int) {
        b.add_agent("producer");
        b.add_agent("consumer0");
        b.add_agent("consumer1");
        int shared = b.add_smem("exchange", DType::F32, 64);
        int reg = b.add_registers(2, "values", DType::F32, 64);
        auto producer = std::make_unique<Script>();
        producer->call("idle", [](AgentOps &o) { o.wgmma_fence(); });
        auto c0 = std::make_unique<Script>();
        c0->call("write", [&machine, shared](AgentOps &o) {
            o.vector_op("write exchange", 64, {{shared, Box{0, {{64, 1}}}, true}},
                        [&machine, shared] {
                            float *p = static_cast<float *>(machine.data(shared));
                            std::fill(p, p + 64, 7.0f);
                        });
        });
        auto c1 = std::make_unique<Script>();
        if (with_barrier) {
            c0->sync(1, count);
            c1->sync(1, count);
        }
        c1->call("read", [&machine, &out, shared, reg](AgentOps &o) {
            o.vector_op("read exchange", 64,
                        {{shared, Box{0, {{64, 1}}}, false}, {reg, Box{0, {{64, 1}}}, true}},
                        [&machine, &out, shared] {
                            out.seen = static_cast<float *>(machine.data(shared))[63];
                        });
        });
        return programs(std::move(producer), std::move(c0), std::move(c1));
    });
    out.report = machine.finish();
    return out;
}

TEST(HopperNamedBarrier, HandoverBetweenConsumersOrdersTheirAccesses) {
    Handover ok = handover(true, 2);
    EXPECT_EQ(ok.report.race_count, 0) << all_races(ok.report);
    EXPECT_FALSE(ok.report.deadlock);
    EXPECT_EQ(ok.seen, 7.0f);
    // consumer0: write (1 + ceil(64/128) = 2 cycles), arrives at 2; consumer1 arrives at 0;
    // both released at 2 + barrier latency 20, retry 1, then the read (2 cycles).
    EXPECT_EQ(ok.report.cycles, 2 + 20 + 1 + 2);
    EXPECT_EQ(busy(ok.report, "barrier_wait"), 20 + 22);

    Handover racy = handover(false, 2);
    ASSERT_EQ(racy.report.race_count, 1);
    EXPECT_EQ(racy.report.races[0].first, "vector 'write exchange' (agent 'consumer0', CTA 0)");
    EXPECT_EQ(racy.report.races[0].second, "vector 'read exchange' (agent 'consumer1', CTA 0)");
}

TEST(HopperNamedBarrier, WrongAgentCountDeadlocks) {
    Handover wrong = handover(true, 3); // the producer never arrives
    ASSERT_TRUE(wrong.report.deadlock);
    const std::string &m = wrong.report.deadlock_message;
    EXPECT_TRUE(contains(m, "agent 'producer' finished")) << m;
    EXPECT_TRUE(contains(m, "agent 'consumer0' waits for 'named barrier 1 for 3'")) << m;
    EXPECT_TRUE(contains(m, "named barrier 1 has 2 of 3 agents")) << m;
}

// ---------------------------------------------------------------------------------------------
// User errors
// ---------------------------------------------------------------------------------------------

/** Runs one CTA whose only agent "worker" runs `body` in one step; returns the SimError text. */
std::string error_of(const std::function<void(AgentOps &, int smem, int barrier, int global)> &body,
                     int64_t smem_elements = 1024) {
    Machine machine(counted(), true);
    int global = machine.add_global("G", DType::BF16, 1 << 16);
    try {
        machine.run_cta(0, [&](Machine::CtaBuilder &b, int) {
            b.add_agent("worker");
            int smem = b.add_smem("tile", DType::BF16, smem_elements);
            int barrier = b.add_barrier("full");
            auto script = std::make_unique<Script>();
            script->call("body", [=](AgentOps &o) { body(o, smem, barrier, global); });
            return programs(std::move(script));
        });
    } catch (const SimError &e) {
        return e.what();
    }
    return "";
}

TEST(HopperErrors, TooManyArrivalsInAPhase) {
    std::string e = error_of([](AgentOps &o, int, int barrier, int) {
        o.mbarrier_init(barrier, 1);
        o.mbarrier_arrive_expect_tx(barrier, 128); // the phase now waits for 128 tx bytes
        o.mbarrier_arrive(barrier);
    });
    EXPECT_TRUE(contains(e, "CTA 0, agent 'worker': mbarrier_arrive: mbarrier 'full' gets more "
                            "arrivals than its count (1) in phase 0"))
        << e;
}

TEST(HopperErrors, ArriveOnAnUninitialisedBarrier) {
    std::string e =
        error_of([](AgentOps &o, int, int barrier, int) { o.mbarrier_arrive(barrier); });
    EXPECT_TRUE(contains(e, "CTA 0, agent 'worker': mbarrier_arrive: mbarrier 'full' is not "
                            "initialised"))
        << e;
    e = error_of([](AgentOps &o, int, int barrier, int) {
        o.mbarrier_init(barrier, 1);
        o.mbarrier_init(barrier, 1);
    });
    EXPECT_TRUE(contains(e, "already initialised")) << e;
}

TEST(HopperErrors, TxCountGoingNegative) {
    std::string e = error_of([](AgentOps &o, int smem, int barrier, int global) {
        o.mbarrier_init(barrier, 1);
        o.mbarrier_arrive_expect_tx(barrier, 100);
        o.tma_load(smem, 0, row_major(global, 256, 256), {0, 0}, {64, 8}, barrier, "load tile");
    });
    EXPECT_TRUE(contains(e, "CTA 0, agent 'worker': tma_load 'load tile' completes 1024 tx bytes "
                            "on mbarrier 'full', whose phase 0 expects only 100 more"))
        << e;
}

TEST(HopperErrors, SmemOverflowNamesTheBuffer) {
    std::string e = error_of([](AgentOps &, int, int, int) {}, 120000); // 240000 bytes
    EXPECT_TRUE(contains(e, "smem overflow in CTA 0: buffer 'tile' needs 240000 bytes, but only "
                            "232448 of 232448 bytes are free"))
        << e;
    // 227 KB exactly fits, but then the mbarrier does not.
    e = error_of([](AgentOps &, int, int, int) {}, 232448 / 2);
    EXPECT_TRUE(contains(e, "mbarrier 'full' needs 8 bytes, but only 0 of 232448")) << e;
}

TEST(HopperErrors, SetmaxnregValues) {
    std::string e = error_of([](AgentOps &o, int, int, int) { o.setmaxnreg(250, true); });
    EXPECT_TRUE(contains(e, "CTA 0, agent 'worker': setmaxnreg: inc to 250 registers: the count "
                            "must be a multiple of 8 in [24, 256]"))
        << e;
    EXPECT_FALSE(error_of([](AgentOps &o, int, int, int) { o.setmaxnreg(16, false); }).empty());
    EXPECT_FALSE(error_of([](AgentOps &o, int, int, int) { o.setmaxnreg(264, true); }).empty());
    EXPECT_EQ(error_of([](AgentOps &o, int, int, int) {
                  o.setmaxnreg(40, false);
                  o.setmaxnreg(232, true);
                  o.setmaxnreg(24, false);
                  o.setmaxnreg(256, true);
              }),
              "");
}

TEST(HopperErrors, WgmmaOperandsAndTmaBoxes) {
    std::string e = error_of([](AgentOps &o, int smem, int, int) {
        o.wgmma(smem, dense(8, 8), smem, dense(8, 8), smem, dense(8, 8), "mma");
    });
    EXPECT_TRUE(contains(e, "wgmma 'mma': operand acc (buffer 'tile') is in smem; wgmma takes it "
                            "from registers of the issuing agent"))
        << e;
    e = error_of([](AgentOps &o, int smem, int barrier, int global) {
        o.mbarrier_init(barrier, 1);
        o.tma_load(smem, 0, row_major(global, 256, 256), {0, 0}, {512, 1}, barrier, "too wide");
    });
    EXPECT_TRUE(contains(e, "box dim 0 is 512; each TMA box dim must be in [1, 256]")) << e;
    e = error_of([](AgentOps &o, int smem, int barrier, int global) {
        o.mbarrier_init(barrier, 1);
        o.tma_load(smem, 1000, row_major(global, 256, 256), {0, 0}, {64, 2}, barrier, "overrun");
    });
    EXPECT_TRUE(contains(e, "reaches elements [1000, 1127] of buffer 'tile'")) << e;
}

TEST(HopperErrors, WgmmaIntoAnotherAgentsRegisters) {
    Machine machine(counted(), false);
    try {
        machine.run_cta(0, [&](Machine::CtaBuilder &b, int) {
            b.add_agent("consumer0");
            int other = b.add_agent("consumer1");
            int a = b.add_smem("a", DType::BF16, 64);
            int acc = b.add_registers(other, "acc1", DType::F32, 64);
            auto script = std::make_unique<Script>();
            script->call("mma", [=](AgentOps &o) {
                o.wgmma(acc, dense(8, 8), a, dense(8, 8), a, dense(8, 8), "mma");
            });
            return programs(std::move(script), std::make_unique<Script>());
        });
        FAIL() << "no SimError";
    } catch (const SimError &e) {
        EXPECT_TRUE(contains(e.what(), "CTA 0, agent 'consumer0': wgmma 'mma': acc buffer 'acc1' "
                                       "is registers of agent 'consumer1'"))
            << e.what();
    }
}

TEST(HopperErrors, RegisterFileAndProgramContract) {
    Machine machine(counted(), false);
    EXPECT_THROW(machine.run_cta(0,
                                 [&](Machine::CtaBuilder &b, int) {
                                     int a = b.add_agent("consumer");
                                     b.add_registers(a, "acc0", DType::F32, 40000);
                                     b.add_registers(a, "acc1", DType::F32, 40000);
                                     return programs(std::make_unique<Script>());
                                 }),
                 SimError);
    struct BlocksForNothing : AgentProgram {
        Step step(AgentOps &) override { return Step::Blocked; }
        std::string waiting_for() const override { return "?"; }
    };
    try {
        machine.run_cta(1, [&](Machine::CtaBuilder &b, int) {
            b.add_agent("confused");
            Programs p;
            p.push_back(std::make_unique<BlocksForNothing>());
            return p;
        });
        FAIL() << "no SimError";
    } catch (const SimError &e) {
        EXPECT_TRUE(contains(e.what(), "CTA 1, agent 'confused': step() returned Step::Blocked but "
                                       "no wait in the step returned false"))
            << e.what();
    }
    EXPECT_THROW(machine.run_cta(2,
                                 [&](Machine::CtaBuilder &b, int) {
                                     b.add_agent("a");
                                     b.add_agent("b");
                                     return programs(
                                         std::make_unique<Script>()); // one program for two agents
                                 }),
                 SimError);
    EXPECT_THROW(machine.run_cta(1,
                                 [&](Machine::CtaBuilder &b, int) {
                                     b.add_agent("again");
                                     return programs(std::make_unique<Script>());
                                 }),
                 SimError); // CTA 1 already ran
}

TEST(HopperRaces, BarrierUsedBeforeItsInitIsOrdered) {
    // The producer initialises, the consumer arrives without a CTA-wide sync in between.
    Machine machine(counted(), false);
    machine.run_cta(0, [&](Machine::CtaBuilder &b, int) {
        b.add_agent("producer");
        b.add_agent("consumer");
        int bar = b.add_barrier("empty[0]");
        auto producer = std::make_unique<Script>();
        producer->init(bar, 1).wait(bar, 0, "empty[0]");
        auto consumer = std::make_unique<Script>();
        consumer->call("late", [](AgentOps &o) { o.wgmma_fence(); }).arrive(bar);
        return programs(std::move(producer), std::move(consumer));
    });
    Report r = machine.finish();
    ASSERT_EQ(r.race_count, 1) << all_races(r);
    EXPECT_EQ(r.races[0].buffer, "mbarrier empty[0]");
    EXPECT_EQ(r.races[0].first, "mbarrier 'init empty[0]' (agent 'producer', CTA 0)");
    EXPECT_EQ(r.races[0].second, "mbarrier 'arrive empty[0]' (agent 'consumer', CTA 0)");
    EXPECT_FALSE(r.deadlock);
}

TEST(HopperRaces, ReadingTheAccumulatorBeforeWgmmaWaitGroup) {
    for (bool wait : {false, true}) {
        Machine machine(counted(), false);
        machine.run_cta(0, [&](Machine::CtaBuilder &b, int) {
            int agent = b.add_agent("consumer");
            int a = b.add_smem("a", DType::BF16, 64);
            int acc = b.add_registers(agent, "acc", DType::F32, 64);
            auto s = std::make_unique<Script>();
            s->call("mma",
                    [=](AgentOps &o) {
                        o.wgmma(acc, dense(8, 8), a, dense(8, 8), a, dense(8, 8), "mma");
                    })
                .call("commit", [](AgentOps &o) { o.wgmma_commit_group(); })
                .call("wait one", [](AgentOps &o) { o.wgmma_wait_group(1); }); // retires nothing
            if (wait) {
                s->call("wait all", [](AgentOps &o) { o.wgmma_wait_group(0); });
            }
            s->call("epilogue", [=](AgentOps &o) {
                o.vector_op("epilogue", 64, {{acc, dense(8, 8), false}}, nullptr);
            });
            return programs(std::move(s));
        });
        Report r = machine.finish();
        if (wait) {
            EXPECT_EQ(r.race_count, 0) << all_races(r);
        } else {
            ASSERT_EQ(r.race_count, 1);
            EXPECT_EQ(r.races[0].buffer, "acc");
            EXPECT_EQ(r.races[0].first, "wgmma 'mma' (tensor core, agent 'consumer', CTA 0)");
            EXPECT_EQ(r.races[0].second, "vector 'epilogue' (agent 'consumer', CTA 0)");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cross-CTA global memory
// ---------------------------------------------------------------------------------------------

Report two_ctas_store(int64_t second_row) {
    Machine machine(counted(), false);
    int c = machine.add_global("C", DType::F32, 64 * 64);
    TensorView view = row_major(c, 64, 64);
    for (int cta = 0; cta < 2; ++cta) {
        int64_t row = cta == 0 ? 0 : second_row;
        machine.run_cta(cta, [&](Machine::CtaBuilder &b, int) {
            b.add_agent("consumer");
            int staging = b.add_smem("staging", DType::F32, 16 * 64);
            auto script = std::make_unique<Script>();
            script
                ->call("epilogue",
                       [=](AgentOps &o) {
                           o.vector_op("epilogue", 1024, {{staging, dense(64, 16), true}}, nullptr);
                       })
                .call("fence", [](AgentOps &o) { o.fence_proxy_async(); })
                .call("store",
                      [=](AgentOps &o) {
                          o.tma_store(view, {0, row}, {64, 16}, staging, 0, "store c");
                      })
                .call("commit", [](AgentOps &o) { o.bulk_commit_group(); })
                .op("wait", [](AgentOps &o) { return o.bulk_wait_group_read(0); });
            return programs(std::move(script));
        });
    }
    return machine.finish();
}

TEST(HopperRaces, CrossCtaGlobalStores) {
    Report overlapping = two_ctas_store(8); // rows 8..15 written by both
    ASSERT_EQ(overlapping.race_count, 1) << all_races(overlapping);
    EXPECT_EQ(overlapping.races[0].buffer, "C");
    EXPECT_EQ(overlapping.races[0].first, "tma_store 'store c' (tma, agent 'consumer', CTA 0)");
    EXPECT_EQ(overlapping.races[0].second, "tma_store 'store c' (tma, agent 'consumer', CTA 1)");

    Report disjoint = two_ctas_store(16);
    EXPECT_EQ(disjoint.race_count, 0) << all_races(disjoint);

    Report clipped = two_ctas_store(56); // rows 56..71: the part past row 63 is dropped
    EXPECT_EQ(clipped.race_count, 0) << all_races(clipped);
}

// ---------------------------------------------------------------------------------------------
// Clusters: a multicast TMA load, remote arrivals, cluster_sync
// ---------------------------------------------------------------------------------------------

/** Two CTAs of a cluster: rank 0 multicasts a 64-float row into both; each CTA waits for it on
 * its own full barrier and sums it; rank 1 then arrives on rank 0's `done` barrier, which rank 0
 * waits for before it exits (unless `wait_done` is false). `multicast` false: rank 0 loads only
 * into itself (rank 1 never gets its bytes). */
Report cluster_of_two(bool multicast, bool wait_done, std::vector<float> *sums) {
    HopperParams p = counted();
    p.sms = 4;
    Machine m(p);
    int in = m.add_global("in", DType::F32, 64);
    float *data = static_cast<float *>(m.data(in));
    for (int i = 0; i < 64; ++i)
        data[i] = float(i);
    sums->assign(2, -1);
    m.run_cluster(0, 2, [&](Machine::CtaBuilder &b, int cta) {
        int agent = b.add_agent("worker");
        int tile = b.add_smem("tile", DType::F32, 64);
        int full = b.add_barrier("full"), done = b.add_barrier("done");
        auto s = std::make_unique<Script>();
        s->init(full, 1).init(done, 1);
        s->op("cluster_sync", [](AgentOps &o) { return o.cluster_sync(); });
        s->expect_tx(full, 256);
        if (cta == 0) {
            s->call("load", [=, &m](AgentOps &o) {
                TensorView v{in, {64}, {1}};
                if (multicast)
                    o.tma_load_multicast(tile, 0, v, {0}, {64}, full, 3, "row");
                else
                    o.tma_load(tile, 0, v, {0}, {64}, full, "row");
            });
        }
        s->wait(full, 0, "full");
        s->call("sum", [=, &m](AgentOps &o) {
            o.vector_op("sum", 64, {Access{tile, Box{0, {{64, 1}}}, false}}, [=, &m] {
                const float *t = static_cast<const float *>(m.data(tile));
                float total = 0;
                for (int i = 0; i < 64; ++i)
                    total += t[i];
                (*sums)[size_t(cta)] = total;
            });
        });
        if (cta == 1)
            s->call("arrive done of rank 0",
                    [=](AgentOps &o) { o.mbarrier_arrive_remote(done, 0); });
        if (cta == 0 && wait_done)
            s->wait(done, 0, "done");
        (void)agent;
        return programs(std::move(s));
    });
    return m.finish();
}

TEST(HopperCluster, MulticastLandsInEveryCtaOfTheMask) {
    std::vector<float> sums;
    Report r = cluster_of_two(true, true, &sums);
    EXPECT_FALSE(r.deadlock) << r.deadlock_message;
    EXPECT_EQ(r.race_count, 0) << all_races(r);
    EXPECT_EQ(sums[0], 2016.f);
    EXPECT_EQ(sums[1], 2016.f);
}

TEST(HopperCluster, APeerWithoutItsBytesDeadlocksNamingItsBarrier) {
    std::vector<float> sums;
    Report r = cluster_of_two(false, true, &sums);
    ASSERT_TRUE(r.deadlock);
    EXPECT_TRUE(contains(r.deadlock_message, "deadlock in CTA 1")) << r.deadlock_message;
    EXPECT_TRUE(contains(r.deadlock_message, "wait full parity 0")) << r.deadlock_message;
    EXPECT_TRUE(contains(r.deadlock_message, "256 tx bytes pending")) << r.deadlock_message;
}

TEST(HopperCluster, ARemoteArrivalAfterThePeerExitedRaces) {
    std::vector<float> sums;
    Report r = cluster_of_two(true, false, &sums);
    EXPECT_FALSE(r.deadlock);
    ASSERT_EQ(r.race_count, 1) << all_races(r);
    EXPECT_TRUE(contains(r.races[0].reason, "remote arrival")) << all_races(r);
    EXPECT_TRUE(has_race(r, "arrive done of CTA 0", "exit of CTA 0")) << all_races(r);
}

TEST(HopperCluster, NeedsAsManySms) {
    HopperParams p = counted();
    p.sms = 1;
    Machine m(p);
    try {
        m.run_cluster(0, 2, [](Machine::CtaBuilder &, int) { return Programs{}; });
        FAIL() << "no error";
    } catch (const SimError &e) {
        EXPECT_TRUE(contains(e.what(),
                             "a cluster of 2 CTAs runs on as many SMs at once; the machine has 1"))
            << e.what();
    }
}

// ---------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------

TEST(HopperTiming, L2KeepsTheMostRecentlyUsedLines) {
    // Four 128-byte lines of room: a read of lines 0-3, then 4-5, evicts the two oldest (0, 1);
    // re-reading 2-3 hits and makes them recent again, so 6-7 evict 4-5, not them.
    sim::detail::L2Lines l2(128, 4 * 128);
    auto lines = [](int64_t first, int64_t count) { return Box{first * 128, {{count * 128, 1}}}; };
    EXPECT_EQ(l2.read(0, lines(0, 4), 1).miss, 512);
    EXPECT_EQ(l2.read(0, lines(4, 2), 1).miss, 256);
    auto again = l2.read(0, lines(2, 2), 1);
    EXPECT_EQ(again.hit, 256);
    EXPECT_EQ(again.miss, 0);
    EXPECT_EQ(l2.read(0, lines(0, 1), 1).miss, 128); // evicted: brings 0 in, 4 leaves
    EXPECT_EQ(l2.read(0, lines(6, 2), 1).miss, 256); // 5 and 2 leave
    EXPECT_EQ(l2.read(0, lines(3, 1), 1).hit, 128);
    EXPECT_EQ(l2.read(0, lines(4, 2), 1).miss, 256);
    EXPECT_EQ(l2.read(1, lines(3, 1), 1).miss, 128); // another buffer's line 3
}

TEST(HopperTiming, AMissFillsTheWholeLineFromHbm) {
    // 32 bytes of a 128-byte line: HBM brings the line (fill 128); the next 32 bytes hit.
    sim::detail::L2Lines l2(128, 1 << 20);
    auto part = l2.read(0, Box{0, {{32, 1}}}, 1);
    EXPECT_EQ(part.miss, 32);
    EXPECT_EQ(part.fill, 128);
    auto rest = l2.read(0, Box{32, {{32, 1}}}, 1);
    EXPECT_EQ(rest.hit, 32);
    EXPECT_EQ(rest.fill, 0);
    // A read of rows of 16 bytes 256 bytes apart: one line per row, each filled once.
    EXPECT_EQ(l2.read(1, Box{0, {{16, 1}, {4, 256}}}, 1).fill, 4 * 128);
}

TEST(HopperTiming, CostFormulas) {
    HopperParams p = counted();
    // One SM alone: its port (64 B/cycle) limits; 132 SMs: each gets 1/132 of HBM (1600 B/cycle)
    // or of L2 (6100 B/cycle).
    EXPECT_EQ(p.tma_cycles(4096, 0, 1), 600 + 64);
    EXPECT_EQ(p.tma_cycles(0, 4096, 1), 600 + 64);
    EXPECT_EQ(p.tma_cycles(4096, 0, 132), 600 + 338); // ceil(4096 / (1600 / 132))
    EXPECT_EQ(p.tma_cycles(0, 4096, 132), 600 + 89);  // ceil(4096 / (6100 / 132))
    EXPECT_EQ(p.tma_cycles(4096, 4096, 132), 600 + 427);
    EXPECT_EQ(p.wgmma_cycles(128, 256, 64), 30 + 1024);
    EXPECT_EQ(p.wgmma_cycles(64, 8, 16), 30 + 4); // 8192 MACs
    EXPECT_EQ(p.wgmma_cycles(64, 8, 17), 30 + 5);
    // 8-bit operands at twice the rate (the H100 datasheet's dense FP8 and INT8 figures).
    EXPECT_EQ(p.wgmma_cycles(128, 256, 128, DType::E4M3), 30 + 1024);
    EXPECT_EQ(p.wgmma_cycles(128, 256, 128, DType::E5M2), 30 + 1024);
    EXPECT_EQ(p.wgmma_cycles(128, 256, 128, DType::I8), 30 + 1024);
    // At a power-limited clock the tensor cores take longer per (full-clock) cycle.
    p.tensor_clock = 0.5;
    EXPECT_EQ(p.wgmma_cycles(128, 256, 64), 30 + 2048);
}

TEST(HopperTiming, SharedBandwidthKeepsTheTotalInTime) {
    // 100 B/cycle shared: a transfer alone runs at its port; two at once share what is left.
    SharedBandwidth b(100);
    EXPECT_DOUBLE_EQ(b.move(0, 6400, 64), 100); // 64 B/cycle, under the device's 100
    const double second = b.move(0, 6400, 64);  // 36 B/cycle left until 100, then 64
    EXPECT_GT(second, 100);
    EXPECT_LE(second, 6400.0 / 36 + 1);
    EXPECT_DOUBLE_EQ(b.total(), 12800);
    // Later in time the capacity is free again.
    EXPECT_DOUBLE_EQ(b.move(1024, 640, 64), 1034);
}

TEST(HopperTiming, L2MovesWholeSectors) {
    SharedBandwidth hbm(1000);
    TimedL2 l2(32, 1 << 20, hbm);
    // 128 bytes from byte 16: five 32-byte sectors, not four.
    EXPECT_EQ(l2.read(0, Box{16, {{128, 1}}}, 1, 0).miss, 160);
    EXPECT_EQ(l2.read(0, Box{32, {{96, 1}}}, 1, 10).hit, 96);
    // Rows of 8 bytes one after another share sectors: each sector once.
    EXPECT_EQ(l2.read(1, Box{0, {{8, 1}, {8, 8}}}, 1, 0).miss, 64);
}

TEST(HopperTiming, L2HitsByTimeNotBySimulationOrder) {
    SharedBandwidth hbm(1000);
    TimedL2 l2(128, 1 << 20, hbm);                   // 1 MB of L2
    Box line{0, {{128, 1}}};                         // one 128-byte line of buffer 0 (bytes)
    EXPECT_EQ(l2.read(0, line, 1, 5000).miss, 128);  // first read (in simulation order)
    EXPECT_EQ(l2.read(0, line, 1, 4000).hit, 128);   // earlier in time, nothing came in between
    EXPECT_EQ(l2.read(0, line, 1, 6000).hit, 128);   // later, nothing came in
    hbm.move(7000, 2 << 20, 1000);                   // 2 MB from HBM after 7000
    EXPECT_EQ(l2.read(0, line, 1, 20000).miss, 128); // pushed out by then
    EXPECT_EQ(l2.read(0, line, 1, 5500).hit, 128);   // between known uses
    EXPECT_EQ(l2.read(1, line, 1, 5500).miss, 128);  // another buffer's line
}

/** A CTA (of `ctas`) that loads its `rows` rows of 256 bf16 of global `g`, 64 rows at a time, and
 * waits for each. */
Machine::CtaFactory row_loader(int g, int ctas, int rows) {
    return [=](Machine::CtaBuilder &b, int cta) {
        b.add_agent("producer");
        int smem = b.add_smem("tile", DType::BF16, 256 * 64);
        int bar = b.add_barrier("full");
        auto script = std::make_unique<Script>();
        script->init(bar, 1);
        for (int i = 0; i < rows / 64; ++i) {
            script->expect_tx(bar, 256 * 64 * 2).call("load", [=](AgentOps &o) {
                o.tma_load(smem, 0, row_major(g, ctas * rows, 256), {0, cta * rows + i * 64},
                           {256, 64}, bar, "load");
            });
            script->wait(bar, i % 2, "full");
        }
        return programs(std::move(script));
    };
}

/** CTAs on different SMs reading distinct data at once share HBM: the kernel takes about the
 * total bytes at HBM's rate, whichever CTA is simulated first. */
TEST(HopperTiming, CtasShareHbmInTime) {
    HopperParams p = counted();
    p.hbm_bytes_per_cycle = 256; // 8 SMs at their 64 B/cycle ports would want 512
    const int ctas = 8, rows = 256;
    Machine machine(p, false);
    int g = machine.add_global("G", DType::BF16, int64_t(ctas) * rows * 256);
    machine.set_grid(ctas);
    for (int c = 0; c < ctas; ++c) {
        machine.run_cta(c, row_loader(g, ctas, rows));
    }
    Report r = machine.finish();
    const double bytes = double(ctas) * rows * 256 * 2;
    EXPECT_GE(double(r.cycles), bytes / 256);
    EXPECT_LE(double(r.cycles), bytes / 256 * 1.2 + 4 * (p.tma_latency + 50));
    EXPECT_GE(r.bound_cycles, Cycles(bytes / 256));
    EXPECT_EQ(r.race_count, 0) << all_races(r);
}

/** The CTAs of a grid that run at once take HBM in the order of time (run_grid): when they want
 * more than it has, each slows down alike and they finish together, where CTAs simulated one
 * after another (run_cta) let the first take its port's rate and leave the last the rest. A CTA
 * beyond the SMs waits for the one before it on its SM. */
TEST(HopperTiming, GridShareHbmFairly) {
    HopperParams p = counted();
    p.sms = 8;
    p.hbm_bytes_per_cycle = 128; // 8 SMs at their 64 B/cycle ports would want 512
    const int rows = 1024;
    auto make = [&](int g, int ctas) { return row_loader(g, ctas, rows); };
    auto spread = [](const Report &r) {
        auto [lo, hi] = std::minmax_element(r.core_cycles.begin(), r.core_cycles.end());
        return double(*lo) / double(*hi);
    };
    const double bytes = 8.0 * rows * 256 * 2;
    Machine together(p, false), apart(p, false);
    for (Machine *m : {&together, &apart}) {
        m->set_grid(8);
    }
    together.run_grid(8, 1, make(together.add_global("G", DType::BF16, 8 * rows * 256), 8));
    int g = apart.add_global("G", DType::BF16, 8 * rows * 256);
    for (int c = 0; c < 8; ++c) {
        apart.run_cta(c, make(g, 8));
    }
    Report a = together.finish(), b = apart.finish();
    EXPECT_GE(spread(a), 0.9) << "CTAs running at once finish together";
    EXPECT_LT(spread(b), 0.6) << "one after another, the first takes its port's rate";
    EXPECT_GE(double(a.cycles), bytes / 128);
    EXPECT_LE(double(a.cycles), bytes / 128 * 1.2 + 4 * (p.tma_latency + 50));
    EXPECT_EQ(a.race_count, 0) << all_races(a);

    // Two waves: CTA 8 + s starts on SM s when CTA s has finished there.
    Machine waves(p, false);
    waves.set_grid(16);
    waves.run_grid(16, 1, make(waves.add_global("G", DType::BF16, 16 * rows * 256), 16));
    Report w = waves.finish();
    EXPECT_GE(double(w.cycles), 2 * bytes / 128);
    EXPECT_GE(spread(w), 0.9);
    EXPECT_EQ(w.race_count, 0) << all_races(w);
    // Clusters must be whole.
    Machine odd(p, false);
    EXPECT_THROW(odd.run_grid(3, 2, make(odd.add_global("G", DType::BF16, 3 * rows * 256), 3)),
                 SimError);
}

/** An SM holds as many CTAs of a grid at once as set_grid says (what their shared memory,
 * registers and threads allow): CTAs that wait on memory overlap their waits there, and share the
 * SM's TMA unit. */
TEST(HopperTiming, AnSmHoldsSeveralCtasAtOnce) {
    HopperParams p = counted();
    p.sms = 2;
    p.tma_latency = p.hbm_latency = 20000; // each CTA waits on its loads in turn
    const int ctas = 8, rows = 128;        // two loads of 32 KB per CTA
    auto run = [&](int resident) {
        Machine m(p, false);
        int g = m.add_global("G", DType::BF16, int64_t(ctas) * rows * 256);
        m.set_grid(ctas, resident);
        m.run_grid(ctas, 1, row_loader(g, ctas, rows));
        return m.finish();
    };
    const double transfer = 256.0 * 64 * 2 / p.tma_bytes_per_cycle; // a load at the port: 512
    const double lone = 2 * (p.tma_latency + transfer);
    Report one = run(1), four = run(4);
    EXPECT_GE(double(one.cycles), 4 * lone) << "one at a time: four CTAs in turn on each SM";
    EXPECT_GE(double(four.cycles), lone);
    EXPECT_LE(double(four.cycles), lone + 2 * 4 * transfer) << "four at once: their waits overlap";
    EXPECT_EQ(four.race_count, 0) << all_races(four);
    // Bandwidth-bound, they take turns at the SM's port: no faster than its bytes at its rate.
    p.tma_latency = p.hbm_latency = 0;
    Report port = run(4);
    EXPECT_GE(double(port.cycles), 4 * 2 * transfer);
    // More CTAs than the SMs hold wait for a slot: eight CTAs on two SMs of three slots.
    p.tma_latency = p.hbm_latency = 20000;
    Report three = run(3);
    EXPECT_GE(double(three.cycles), 2 * lone);
    EXPECT_LE(double(three.cycles), 2 * (lone + 2 * 3 * transfer));
    Machine m(p, false);
    EXPECT_THROW(m.set_grid(8, 0), SimError);
}

/** What an SM holds at once (CUDA's limits per compute capability 9.0 in machines/hopper.json):
 * the fewest of its CTA slots, threads, shared memory (each CTA's and 1 KB reserved) and
 * registers (allocated in multiples of 8 per thread). */
TEST(HopperTiming, ResidentCtasAreTheTightestLimit) {
    HopperParams p;
    EXPECT_EQ(p.resident_ctas(0, 32, 16), 32);     // the CTA slots
    EXPECT_EQ(p.resident_ctas(0, 128, 24), 16);    // the threads
    EXPECT_EQ(p.resident_ctas(50352, 256, 26), 4); // shared memory: 233472 / 51376
    EXPECT_EQ(p.resident_ctas(57344, 128, 32), 4); // 4 x (57344 + 1024) = 233472
    EXPECT_EQ(p.resident_ctas(57345, 128, 32), 3);
    EXPECT_EQ(p.resident_ctas(0, 128, 154), 3);       // registers: 160 allocated, 65536 / 20480
    EXPECT_EQ(p.resident_ctas(0, 384, 168), 1);       // a warp-specialized GEMM's floor
    EXPECT_EQ(p.resident_ctas(232448, 1024, 255), 1); // at least one: it launched
}

/** One agent: init, expect_tx, the given loads of `box` (each into its own smem range) on one
 * barrier, then wait for it. */
Report load_then_wait(HopperParams p, int loads, std::vector<int64_t> box, Cycles *done,
                      int64_t column = 250) {
    Machine machine(p, true);
    int g = machine.add_global("G", DType::BF16, 256 * 256);
    for (int i = 0; i < 256 * 256; ++i) {
        static_cast<uint16_t *>(machine.data(g))[i] = float_to_bf16(float(i % 251));
    }
    int64_t elements = box[0] * box[1];
    bool checked = false;
    machine.run_cta(0, [&](Machine::CtaBuilder &b, int) {
        b.add_agent("producer");
        int smem = b.add_smem("tile", DType::BF16, elements * loads);
        int bar = b.add_barrier("full");
        auto script = std::make_unique<Script>();
        script->init(bar, 1).expect_tx(bar, elements * 2 * loads);
        for (int i = 0; i < loads; ++i) {
            script->call("load", [=](AgentOps &o) {
                o.tma_load(smem, i * elements, row_major(g, 256, 256), {column, 0}, box, bar,
                           "load");
            });
        }
        script->wait(bar, 0, "full").call("check", [&, smem](AgentOps &o) {
            *done = o.now();
            checked = true;
            if (column != 250)
                return;
            const uint16_t *t = static_cast<const uint16_t *>(machine.data(smem));
            // Columns 250..255 come from G, 256.. are outside the view: zero.
            EXPECT_EQ(bf16_to_float(t[0]), float(250 % 251));
            EXPECT_EQ(bf16_to_float(t[5]), float(255 % 251));
            EXPECT_EQ(t[6], 0);
            EXPECT_EQ(bf16_to_float(t[box[0]]), float((256 + 250) % 251));
        });
        return programs(std::move(script));
    });
    EXPECT_TRUE(checked);
    return machine.finish();
}

TEST(HopperTiming, OneLoadThenWaitIsExact) {
    HopperParams p = counted();
    Cycles done = 0;
    Report r = load_then_wait(p, 1, {64, 32}, &done); // 4096 bytes, 3712 of them zero-filled
    // Only the 384 bytes inside the tensor are read (from HBM: nothing read them before): 12 bytes
    // of each of 32 rows, one 32-byte sector each, at the SM's port (no other SM moves bytes).
    Cycles transfer = 32 * 32 / 64, tma = p.tma_latency + transfer;
    // init 1 + expect_tx 1, the load issues at 2 and ends at 2 + tma; its phase is visible 20
    // (barrier latency) later; the retried wait costs 1.
    EXPECT_EQ(done, 2 + tma + 20 + 1);
    // Cycles: the two ops before the load, the load, the barrier latency, the retried wait.
    EXPECT_EQ(r.cycles, 2 * p.issue_cycles + tma + p.barrier_latency + p.issue_cycles);
    EXPECT_EQ(busy(r, "tma"), transfer);
    EXPECT_EQ(r.bound_cycles, transfer);
    EXPECT_EQ(busy(r, "barrier_wait"), (2 + tma + 20) - 3);
    EXPECT_EQ(r.race_count, 0) << all_races(r);
    EXPECT_FALSE(r.deadlock);
}

/** A load that misses L2 waits hbm_latency instead of tma_latency; the CTAs start after the
 * launch. */
TEST(HopperTiming, MissesWaitForHbmAfterTheLaunch) {
    HopperParams p = counted();
    p.hbm_latency = 2000;
    p.launch_cycles = 500;
    Cycles done = 0;
    Report r = load_then_wait(p, 1, {64, 32}, &done);
    Cycles transfer = 32 * 32 / 64;
    EXPECT_EQ(done, 500 + 2 + transfer + 2000 + 20 + 1);
    EXPECT_EQ(r.cycles, 500 + 2 + transfer + 2000 + 20 + 1);
    // Three loads of the same lines: the first misses, the others hit and finish earlier.
    Report three = load_then_wait(p, 3, {64, 32}, &done);
    EXPECT_EQ(done, 500 + 2 + transfer + 2000 + 20 + 1);
    EXPECT_EQ(three.race_count, 0) << all_races(three);
}

/** A TMA request (a box row's piece of up to 128 bytes) that starts inside a 32-byte sector holds
 * the SM's port tma_split_row_cycles longer; requests on sector boundaries do not. */
TEST(HopperTiming, RequestsOffTheSectorsHoldThePort) {
    HopperParams p = counted();
    p.tma_split_row_cycles = 5;
    Cycles done = 0;
    // Column 250: each of the 32 rows starts at byte 500 of its 512-byte row, 20 into a sector.
    Report off = load_then_wait(p, 1, {64, 32}, &done);
    EXPECT_EQ(done, 2 + p.tma_latency + 32 * 32 / 64 + 32 * 5 + 20 + 1);
    EXPECT_EQ(busy(off, "tma"), 32 * 32 / 64 + 32 * 5);
    // Column 16: rows start on a sector (byte 32) and read 64 bytes: two sectors each.
    Report on = load_then_wait(p, 1, {32, 32}, &done, 16);
    EXPECT_EQ(done, 2 + p.tma_latency + 32 * 64 / 64 + 20 + 1);
    EXPECT_EQ(busy(on, "tma"), 32 * 64 / 64);
    // Column 8: rows of 160 bytes start 16 bytes into a sector, two requests each.
    Report two = load_then_wait(p, 1, {80, 32}, &done, 8);
    EXPECT_EQ(busy(two, "tma"), 32 * 6 * 32 / 64 + 32 * 2 * 5);
}

/** With l2_warm, a kernel whose global buffers fit in L2 finds them there (the launch before it
 * left them), so its first loads hit; one whose buffers do not fit starts with L2 empty. */
TEST(HopperTiming, AWarmL2HoldsAKernelThatFits) {
    HopperParams p = counted();
    p.hbm_latency = 2000;
    p.l2_warm = 1;
    Cycles done = 0;
    load_then_wait(p, 1, {64, 32}, &done); // G: 128 KB
    EXPECT_EQ(done, 2 + p.tma_latency + 32 * 32 / 64 + 20 + 1);
    p.l2_bytes = 64 * 1024;
    load_then_wait(p, 1, {64, 32}, &done);
    EXPECT_EQ(done, 2 + p.hbm_latency + 32 * 32 / 64 + 20 + 1);
    p.l2_bytes = 1 << 20;
    p.l2_warm = 0;
    load_then_wait(p, 1, {64, 32}, &done);
    EXPECT_EQ(done, 2 + p.hbm_latency + 32 * 32 / 64 + 20 + 1);
}

TEST(HopperTiming, TmaLoadsShareTheUnitAndOverlapTheirLatency) {
    HopperParams p = counted();
    p.hbm_bytes_per_cycle = 16; // slower than the port, so that a miss costs more than a hit
    Cycles done = 0;
    Report r = load_then_wait(p, 3, {64, 32}, &done);
    // Loads issue at 2, 3, 4; the unit streams them back to back. The first reads its lines from
    // HBM, the two others (the same lines) from L2 at the port's rate.
    // (HBM's share within its first 128-cycle bucket may run a cycle ahead: +-1.)
    Cycles miss = 32 * 32 / 16, hit = 32 * 32 / 64; // 32 sectors
    EXPECT_NEAR(double(done), double(2 + miss + 2 * hit + 600 + 20 + 1), 1);
    EXPECT_NEAR(double(busy(r, "tma")), double(miss + 2 * hit), 1);
}

TEST(HopperTiming, WgmmaSerialisesOnTheTensorCoreAndWaitGroupAdvances) {
    HopperParams p = counted();
    Machine machine(p, false);
    std::vector<Cycles> done(2);
    machine.run_cta(0, [&](Machine::CtaBuilder &b, int) {
        Programs out;
        int a = b.add_smem("a", DType::BF16, 64 * 128);
        int bb = b.add_smem("b", DType::BF16, 128 * 128);
        for (int i = 0; i < 2; ++i) {
            int agent = b.add_agent("consumer" + std::to_string(i));
            int acc = b.add_registers(agent, "acc" + std::to_string(i), DType::F32, 128 * 128);
            auto s = std::make_unique<Script>();
            s->call("mma",
                    [=](AgentOps &o) {
                        // M 128, N 128, K 64: 30 + 512 cycles
                        o.wgmma(acc, dense(128, 128), a, dense(64, 128), bb, dense(128, 64), "mma");
                    })
                .call("commit", [](AgentOps &o) { o.wgmma_commit_group(); })
                .call("wait", [&done, i](AgentOps &o) {
                    o.wgmma_wait_group(0);
                    done[size_t(i)] = o.now();
                });
            out.push_back(std::move(s));
        }
        return out;
    });
    Report r = machine.finish();
    EXPECT_EQ(done[0], 0 + 512 + 30 + 1);   // ran at once
    EXPECT_EQ(done[1], 512 + 512 + 30 + 1); // waited for the tensor core
    EXPECT_EQ(busy(r, "tensor"), 1024);
    EXPECT_EQ(r.bound_cycles, 1024);
    EXPECT_EQ(r.cycles, 512 + 512 + 30 + 1);
    EXPECT_EQ(r.race_count, 0) << all_races(r);
}

TEST(HopperTiming, VectorOpsOfAnSmShareItsLanes) {
    // 128 FP32 lanes per SM (H100 whitepaper), whichever warpgroup issues: two warpgroups' vector
    // ops of 12800 operations each take turns.
    HopperParams p = counted();
    Machine machine(p, false);
    std::vector<Cycles> done(2);
    machine.run_cta(0, [&](Machine::CtaBuilder &b, int) {
        Programs out;
        int x = b.add_smem("x", DType::F32, 1024);
        for (int i = 0; i < 2; ++i) {
            b.add_agent("warpgroup" + std::to_string(i));
            auto s = std::make_unique<Script>();
            s->call("scale", [=, &done](AgentOps &o) {
                o.vector_op("scale", 128 * 100, {{x, Box{int64_t(i) * 512, {{512, 1}}}, true}},
                            nullptr);
                done[size_t(i)] = o.now();
            });
            out.push_back(std::move(s));
        }
        return out;
    });
    Report r = machine.finish();
    EXPECT_EQ(done[0], 1 + 100);
    EXPECT_EQ(done[1], 2 * (1 + 100)); // waited for the lanes
    EXPECT_EQ(busy(r, "vector"), 2 * (1 + 100));
    EXPECT_EQ(r.race_count, 0) << all_races(r);
}

TEST(HopperTiming, CtasRunInWavesPerSm) {
    // Memory faster than an SM's port: every CTA's transfers cost the same, L2 hit or not.
    HopperParams one_sm = counted();
    one_sm.hbm_bytes_per_cycle = one_sm.l2_bytes_per_cycle = 1e6;
    one_sm.sms = 1;
    GemmConfig g;
    g.numerics = false;
    Report wave = run_gemm(g, one_sm).report; // 4 CTAs one after another
    HopperParams four_sms = one_sm;
    four_sms.sms = 4;
    Report parallel = run_gemm(g, four_sms).report;
    ASSERT_EQ(parallel.core_cycles.size(), 4u);
    // Edge CTAs read fewer bytes (TMA zero-fills what lies outside the tensor without reading it).
    Cycles total = 0;
    for (Cycles c : parallel.core_cycles)
        total += c;
    EXPECT_EQ(wave.cycles, total);
    EXPECT_EQ(busy(wave, "tensor"), busy(parallel, "tensor"));
    EXPECT_EQ(busy(wave, "tma"), busy(parallel, "tma"));
}

// ---------------------------------------------------------------------------------------------
// Trace and throughput
// ---------------------------------------------------------------------------------------------

TEST(HopperTrace, OneProcessPerSmWithAgentTracks) {
    GemmConfig g;
    std::string path = ::testing::TempDir() + "hopper_sim_test.trace.json";
    HopperParams p = counted();
    p.sms = 2;
    GemmResult r = run_gemm(g, p, true, path);
    EXPECT_TRUE(r.correct);
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::string json = text.str();
    ASSERT_FALSE(json.empty());
    for (const char *part : {"\"SM 0\"", "\"SM 1\"", "\"tma\"", "\"tensor\"", "\"producer\"",
                             "\"consumer\"", "\"cat\": \"tma_load\"", "\"cat\": \"wgmma\"",
                             "\"cat\": \"wait\"", "\"cat\": \"tma_store\""}) {
        EXPECT_TRUE(contains(json, part)) << part;
    }
    int depth = 0, lowest = 0;
    for (char ch : json) {
        depth += ch == '{' || ch == '[' ? 1 : ch == '}' || ch == ']' ? -1 : 0;
        lowest = std::min(lowest, depth);
    }
    EXPECT_EQ(depth, 0);
    EXPECT_EQ(lowest, 0);
    std::remove(path.c_str());

    Machine untraced(counted(), false, false);
    EXPECT_THROW(untraced.write_trace(path), SimError);
}

TEST(HopperThroughput, ManyTilesTimingOnly) {
    // A benchmark, not a timed assert: 4096 output tiles of a 2048 x 2048 x 512 GEMM (32 x 32
    // tiles, 8 K tiles each), and one CTA walking 4096 K tiles.
    GemmConfig g;
    g.numerics = false;
    g.M = g.N = 2048;
    g.BM = g.BN = 32;
    g.BK = 64;
    g.k_tiles = 8;
    g.stages = 4;
    auto begin = std::chrono::steady_clock::now();
    Report r = run_gemm(g).report;
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    std::printf("[ timing   ] 4096 CTAs x 8 K tiles: %.3f s, %lld cycles, efficiency %.3f\n",
                seconds, (long long)r.cycles, r.efficiency());
    EXPECT_EQ(r.race_count, 0) << all_races(r);
    EXPECT_FALSE(r.deadlock);

    GemmConfig deep;
    deep.numerics = false;
    deep.M = deep.N = 64;
    deep.BM = deep.BN = 64;
    deep.BK = 64;
    deep.k_tiles = 4096;
    deep.stages = 4;
    begin = std::chrono::steady_clock::now();
    r = run_gemm(deep).report;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    std::printf("[ timing   ] 1 CTA x 4096 K tiles: %.3f s, %lld cycles\n", seconds,
                (long long)r.cycles);
    EXPECT_EQ(r.race_count, 0) << all_races(r);
    EXPECT_FALSE(r.deadlock);
}

} // namespace
} // namespace tandem::sim::hopper
