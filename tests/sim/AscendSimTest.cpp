// Self-tests of the Ascend 910B machine model (backends/sim/Ascend.h): exact cycle counts of small
// programs, the overlap double buffering buys, numerics of the cube pipeline, the race and
// deadlock detectors on broken flag programs (and silence on their correct versions), user
// errors and the trace file.

#include "sim/Ascend.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

namespace tandem::sim::ascend {
namespace {

/** A 2-D box: dims[0] = {inner extent, inner stride}, dims[1] = {outer extent, outer stride}. */
Box box2(int64_t offset, int64_t inner, int64_t inner_stride, int64_t outer, int64_t outer_stride) {
    return Box{offset, {{inner, inner_stride}, {outer, outer_stride}}};
}

Box dense(int64_t inner, int64_t outer) {
    return box2(0, inner, 1, outer, inner);
}

Box line(int64_t offset, int64_t count) {
    return Box{offset, {{count, 1}}};
}

/** n cube cores (AIC: machine cores 0 .. n - 1) and n vector cores (AIV: n .. 2n - 1). */
AscendParams cores(int n) {
    AscendParams p;
    p.cube_cores = n;
    p.vector_cores = n;
    return p;
}

/** The machine index of vector core i. */
int aiv(const Machine &m, int i) {
    return m.core_of(CoreKind::AIV, i);
}

Cycles busy(const Report &r, const std::string &pipe) {
    for (const EngineBusy &b : r.busy) {
        if (b.engine == pipe) {
            return b.busy;
        }
    }
    ADD_FAILURE() << "no pipe " << pipe;
    return -1;
}

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

std::string races_text(const Report &r) {
    std::string text;
    for (const Race &race : r.races) {
        text += race.str() + "\n";
    }
    return text;
}

/** Runs `record` on a fresh SimError-expecting call and returns the message ("" if none). */
template <class F> std::string error_of(F &&record) {
    try {
        record();
    } catch (const SimError &e) {
        return e.what();
    }
    return "";
}

// ---------------------------------------------------------------------------------------------
// Costs and exact timing
// ---------------------------------------------------------------------------------------------

TEST(AscendCost, FormulasFromNpuFacts) {
    AscendParams p;
    EXPECT_EQ(p.copy_cycles(Mem::GM, Mem::L1, 2048), 30 + 64);  // GM 32 B/cycle
    EXPECT_EQ(p.copy_cycles(Mem::GM, Mem::L1, 2049), 30 + 65);  // rounded up
    EXPECT_EQ(p.copy_cycles(Mem::L1, Mem::L0A, 2048), 30 + 8);  // 256 B/cycle (AscendC docs)
    EXPECT_EQ(p.copy_cycles(Mem::L1, Mem::L0B, 2048), 30 + 16); // 128 B/cycle
    EXPECT_EQ(p.copy_cycles(Mem::UB, Mem::GM, 2048), 30 + 32);  // 64 B/cycle
    EXPECT_EQ(p.copy_cycles(Mem::L0C, Mem::GM, 2048), 30 + 24); // fixpipe into L2, 86 B/cycle
    EXPECT_EQ(p.gm_read_cycles(Mem::L1, 2048, 0), 30 + 64);     // HBM 32 B/cycle
    EXPECT_EQ(p.gm_read_cycles(Mem::L1, 0, 2200), 30 + 20);     // L2 110 B/cycle
    EXPECT_EQ(p.gm_read_cycles(Mem::L1, 320, 1100), 30 + 10 + 10);
    EXPECT_EQ(p.mmad_cycles(32, 48, 96), 10 + 2 * 3 * 6);
    EXPECT_EQ(p.mmad_cycles(17, 1, 16), 10 + 2 * 1 * 1);
    EXPECT_EQ(p.mmad_cycles(32, 48, 96, DType::F32), 10 + 2 * 3 * 24); // 16x16x4 MACs per cycle
    EXPECT_EQ(p.vector_cycles(1024), 10 + 4); // 256 bytes of lanes per cycle
    EXPECT_EQ(p.vector_cycles(1025), 10 + 5);
    EXPECT_EQ(p.capacity(Mem::L0A), 64 << 10);
    EXPECT_EQ(p.capacity(Mem::UB), 192 << 10);
    EXPECT_EQ(p.alignment(Mem::L0B), 512);
    EXPECT_EQ(p.alignment(Mem::L0C), 64);
    EXPECT_EQ(p.alignment(Mem::UB), 32);
    EXPECT_EQ(p.pipe_for(Mem::GM, Mem::UB), Pipe::MTE2);
    EXPECT_EQ(p.pipe_for(Mem::L1, Mem::L0A), Pipe::MTE1);
    EXPECT_EQ(p.pipe_for(Mem::L0C, Mem::GM), Pipe::FIX);
    EXPECT_EQ(p.pipe_for(Mem::UB, Mem::GM), Pipe::MTE3);
    EXPECT_THROW(p.pipe_for(Mem::UB, Mem::L0A), SimError);
    EXPECT_THROW(p.pipe_for(Mem::L1, Mem::UB), SimError); // separated: AIC and AIV meet in GM
    EXPECT_THROW(p.pipe_for(Mem::UB, Mem::L1), SimError);
    EXPECT_THROW(p.copy_cycles(Mem::GM, Mem::L0C, 64), SimError);
    EXPECT_STREQ(pipe_name(Pipe::MTE2), "MTE2");
    EXPECT_STREQ(mem_name(Mem::L0A), "L0A");
}

// GM->L1 (2048 B: 94 cycles), SetFlag<MTE2_MTE1>, WaitFlag<MTE2_MTE1>, L1->L0A (38 cycles).
// Op i is dispatched at i + 1, so: copy [1, 95), set [95, 96) fires at 96, wait [96, 97),
// LoadData [97, 135): cycles = scalar_issue + copy + flag + flag + load = 1 + 94 + 1 + 1 + 38.
TEST(AscendTiming, CopyFlagLoadIsExact) {
    Machine machine(cores(1), /*numerics=*/false);
    int a_gm = machine.add_gm("A", DType::BF16, 32 * 32);
    int a_l1 = machine.add_local(0, "a_l1", Mem::L1, DType::BF16, 32 * 32);
    int a_l0 = machine.add_local(0, "a_l0", Mem::L0A, DType::BF16, 32 * 32);
    EXPECT_EQ(machine.data(a_l1), nullptr); // timing only: no storage
    Core &core = machine.core(0);
    core.data_copy(a_l1, dense(32, 32), a_gm, dense(32, 32), "load a");
    core.set_flag(Pipe::MTE2, Pipe::MTE1, 0);
    core.wait_flag(Pipe::MTE2, Pipe::MTE1, 0);
    core.data_copy(a_l0, dense(32, 32), a_l1, dense(32, 32), "LoadData a");
    machine.run_core(0);
    Report r = machine.finish();
    EXPECT_EQ(r.cycles, 1 + 94 + 1 + 1 + 38);
    EXPECT_EQ(r.core_cycles, (std::vector<Cycles>{135, 0})); // AIC 0 ran, AIV 0 did not
    EXPECT_EQ(busy(r, "MTE2"), 94);
    EXPECT_EQ(busy(r, "MTE1"), 38);
    EXPECT_EQ(busy(r, "M"), 0);
    EXPECT_EQ(busy(r, "V"), 0);
    EXPECT_EQ(r.bound_cycles, 94);
    EXPECT_TRUE(r.races.empty()) << races_text(r);
    EXPECT_FALSE(r.deadlock);
}

// L2: the first read of a line comes from HBM (32 B/cycle), later reads of it from L2 (110).
TEST(AscendL2, SecondReadOfALineHitsL2) {
    Machine machine(cores(1), false);
    int a_gm = machine.add_gm("A", DType::BF16, 32 * 32);
    int a_l1 = machine.add_local(0, "a_l1", Mem::L1, DType::BF16, 2 * 32 * 32);
    Core &core = machine.core(0);
    core.data_copy(a_l1, dense(32, 32), a_gm, dense(32, 32), "first");
    // Rows 8..15 (1 KB, lines 2 and 3 of the first read) plus nothing new: all hits.
    core.data_copy(a_l1, Box{1024, {{32, 1}, {16, 32}}}, a_gm, Box{256, {{32, 1}, {16, 32}}},
                   "again");
    machine.run_core(0);
    Report r = machine.finish();
    EXPECT_EQ(busy(r, "MTE2"), (30 + 64) + (30 + 10)); // 2048 B from HBM, then 1024 B from L2
}

// Only what was read earlier in time hits: AIV 1 reads A at cycle 1 and AIV 0 reads it after a
// 200-cycle vector op; AIV 0 hits even though it is the lower core, AIV 1 misses.
TEST(AscendL2, HitsFollowTimeOrderAcrossCores) {
    Machine machine(cores(2), false);
    const int v0 = aiv(machine, 0), v1 = aiv(machine, 1);
    int a_gm = machine.add_gm("A", DType::BF16, 32 * 32);
    int ub0 = machine.add_local(v0, "ub0", Mem::UB, DType::BF16, 32 * 32);
    int ub1 = machine.add_local(v1, "ub1", Mem::UB, DType::BF16, 32 * 32);
    Core &c0 = machine.core(v0);
    c0.vector_op("wait", 256 * 190, {}, nullptr);
    c0.set_flag(Pipe::V, Pipe::MTE2, 0);
    c0.wait_flag(Pipe::V, Pipe::MTE2, 0);
    c0.data_copy(ub0, dense(32, 32), a_gm, dense(32, 32), "late");
    machine.core(v1).data_copy(ub1, dense(32, 32), a_gm, dense(32, 32), "early");
    machine.run_core(v0);
    machine.run_core(v1);
    Report r = machine.finish();
    EXPECT_EQ(r.core_cycles[size_t(v1)], 1 + 30 + 64);
    EXPECT_EQ(busy(r, "MTE2"), (30 + 64) + (30 + 19)); // ceil(2048 / 110) = 19
}

// A line still on its way from HBM is not there yet: AIV 0 misses A at cycle 1 (its read ends at
// 95); AIV 1 reads A at cycle 1 too, after it in the machine's order, and waits for the lines to
// arrive, then takes them from L2 (ceil(2048 / 110) = 19 cycles).
TEST(AscendL2, ALineInFlightIsNotAHitYet) {
    Machine machine(cores(2), false);
    const int v0 = aiv(machine, 0), v1 = aiv(machine, 1);
    int a_gm = machine.add_gm("A", DType::BF16, 32 * 32);
    for (int c : {v0, v1}) {
        int ub = machine.add_local(c, "ub", Mem::UB, DType::BF16, 32 * 32);
        machine.core(c).data_copy(ub, dense(32, 32), a_gm, dense(32, 32), "read A");
        machine.run_core(c);
    }
    Report r = machine.finish();
    EXPECT_EQ(r.core_cycles[size_t(v0)], 1 + 30 + 64);
    EXPECT_EQ(r.core_cycles[size_t(v1)], 95 + 19);
}

TEST(AscendL2, AFullL2StopsAllocating) {
    AscendParams p = cores(1);
    p.l2_bytes = 512; // one line
    Machine machine(p, false);
    int a_gm = machine.add_gm("A", DType::BF16, 32 * 32);
    int a_l1 = machine.add_local(0, "a_l1", Mem::L1, DType::BF16, 32 * 32);
    Core &core = machine.core(0);
    core.data_copy(a_l1, dense(32, 32), a_gm, dense(32, 32), "first");
    core.data_copy(a_l1, dense(32, 32), a_gm, dense(32, 32), "again");
    machine.run_core(0);
    Report r = machine.finish();
    // The second read hits the one line kept (512 B) and reads 1536 B from HBM again.
    EXPECT_EQ(busy(r, "MTE2"), (30 + 64) + (30 + 48 + 5));
}

TEST(AscendTiming, WithoutTheFlagTheLoadStartsAtDispatchAndRaces) {
    Machine machine(cores(1), false);
    int a_gm = machine.add_gm("A", DType::BF16, 32 * 32);
    int a_l1 = machine.add_local(0, "a_l1", Mem::L1, DType::BF16, 32 * 32);
    int a_l0 = machine.add_local(0, "a_l0", Mem::L0A, DType::BF16, 32 * 32);
    Core &core = machine.core(0);
    core.data_copy(a_l1, dense(32, 32), a_gm, dense(32, 32), "load a");
    core.data_copy(a_l0, dense(32, 32), a_l1, dense(32, 32), "LoadData a");
    machine.run_core(0);
    Report r = machine.finish();
    EXPECT_EQ(r.cycles, 1 + 94); // MTE1 ran [2, 36) beside MTE2 [1, 95)
    ASSERT_EQ(r.race_count, 1);
    EXPECT_EQ(r.races[0].buffer, "a_l1");
    EXPECT_EQ(r.races[0].first, "DataCopy 'load a' (MTE2, AIC 0)");
    EXPECT_EQ(r.races[0].second, "LoadData 'LoadData a' (MTE1, AIC 0)");
}

// A WaitFlag on S holds the scalar stream: the vector op is dispatched only after the copy.
// copy [1, 1 + 542), set fires at 544, wait on S [544, 545), dispatch [545, 546), vector from 546.
TEST(AscendTiming, WaitOnScalarHoldsDispatchAndOrdersLaterOps) {
    Machine machine(cores(1), false);
    const int v0 = aiv(machine, 0);
    int x = machine.add_gm("x", DType::F32, 4096);
    int ub = machine.add_local(v0, "ub", Mem::UB, DType::F32, 4096);
    Core &core = machine.core(v0);
    core.data_copy(ub, line(0, 4096), x, line(0, 4096), "load");
    core.set_flag(Pipe::MTE2, Pipe::S, 0);
    core.wait_flag(Pipe::MTE2, Pipe::S, 0);
    core.vector_op("scale", 2048, {{ub, line(0, 4096), true}}, nullptr);
    machine.run_core(v0);
    Report r = machine.finish();
    EXPECT_EQ(r.cycles, 546 + 18);
    EXPECT_TRUE(r.races.empty()) << races_text(r);
}

TEST(AscendTiming, PipeBarrierCostsAFewCycles) {
    Machine machine(cores(1), false);
    const int v0 = aiv(machine, 0);
    int x = machine.add_gm("x", DType::F32, 1024);
    int ub = machine.add_local(v0, "ub", Mem::UB, DType::F32, 1024);
    Core &core = machine.core(v0);
    core.vector_op("a", 128, {{ub, line(0, 1024), true}}, nullptr); // [1, 12)
    core.pipe_barrier(Pipe::V);                                     // [12, 16)
    core.vector_op("b", 128, {{ub, line(0, 1024), true}}, nullptr); // [16, 27)
    core.data_copy(x, line(0, 1024), ub, line(0, 1024), "store");   // [4, 98)
    machine.run_core(v0);
    Report r = machine.finish();
    EXPECT_EQ(busy(r, "V"), 22);
    EXPECT_EQ(r.cycles, 4 + 30 + 64); // the store started at its dispatch (cycle 4)
    // PipeBarrier<PIPE_V> orders V with itself only: the store races with both vector ops.
    EXPECT_EQ(r.race_count, 2) << races_text(r);
}

// ---------------------------------------------------------------------------------------------
// The vector pipeline: GM -> UB, V in place, UB -> GM, with `slots` UB tiles
// ---------------------------------------------------------------------------------------------

/** One statement of a kernel: a flag (with the source site it stands for) or an op. */
struct Step {
    std::function<void(Core &)> record;
    bool flag = false, set = false;
    Pipe src = Pipe::S, dst = Pipe::S;
    int event = 0;
    std::string site; // which statement of the kernel text: "prearm", "loop", "drain"
};

constexpr int64_t kTile = 4096;            // f32: 16 KB, load 542 cycles, store 286
constexpr int64_t kTileFlops = kTile * 32; // 522 cycles: balanced with the load
constexpr int kTiles = 8;

struct VectorKernel {
    int x = -1, y = -1;
    std::vector<int> ub;
    std::vector<Step> steps;
};

/** The NPU-FACTS idiom: pre-arm the reverse edge (slot free, MTE3 -> MTE2), each stage waits
 * for its producer and releases its consumer; drain the pre-armed flags at the end. */
VectorKernel vector_kernel(Machine &machine, int slots) {
    VectorKernel k;
    k.x = machine.add_gm("x", DType::F32, kTiles * kTile);
    k.y = machine.add_gm("y", DType::F32, kTiles * kTile);
    for (int s = 0; s < slots; ++s) {
        k.ub.push_back(machine.add_local(aiv(machine, 0), "ub" + std::to_string(s), Mem::UB,
                                         DType::F32, kTile));
    }
    auto flag = [&](bool set, Pipe src, Pipe dst, int event, const std::string &site,
                    const std::string &label) {
        Step step;
        step.flag = true;
        step.set = set;
        step.src = src;
        step.dst = dst;
        step.event = event;
        step.site = site;
        step.record = [=](Core &core) {
            if (set) {
                core.set_flag(src, dst, event, label);
            } else {
                core.wait_flag(src, dst, event, label);
            }
        };
        k.steps.push_back(step);
    };
    auto op = [&](std::function<void(Core &)> record) {
        Step step;
        step.record = std::move(record);
        k.steps.push_back(step);
    };
    for (int s = 0; s < slots; ++s) {
        flag(true, Pipe::MTE3, Pipe::MTE2, s, "prearm", "slot " + std::to_string(s) + " free");
    }
    for (int t = 0; t < kTiles; ++t) {
        int s = t % slots, ub = k.ub[size_t(s)];
        std::string tile = " tile " + std::to_string(t);
        float *data = static_cast<float *>(machine.data(ub));
        int x = k.x, y = k.y;
        flag(false, Pipe::MTE3, Pipe::MTE2, s, "loop", "wait slot free" + tile);
        op([=](Core &core) {
            core.data_copy(ub, line(0, kTile), x, line(t * kTile, kTile), "load" + tile);
        });
        flag(true, Pipe::MTE2, Pipe::V, s, "loop", "slot full" + tile);
        flag(false, Pipe::MTE2, Pipe::V, s, "loop", "wait slot full" + tile);
        op([=](Core &core) {
            core.vector_op("2x+1" + tile, kTileFlops, {{ub, line(0, kTile), true}}, [=] {
                for (int64_t i = 0; i < kTile; ++i) {
                    data[i] = 2 * data[i] + 1;
                }
            });
        });
        flag(true, Pipe::V, Pipe::MTE3, s, "loop", "computed" + tile);
        flag(false, Pipe::V, Pipe::MTE3, s, "loop", "wait computed" + tile);
        op([=](Core &core) {
            core.data_copy(y, line(t * kTile, kTile), ub, line(0, kTile), "store" + tile);
        });
        flag(true, Pipe::MTE3, Pipe::MTE2, s, "loop", "slot free" + tile);
    }
    for (int s = 0; s < slots; ++s) {
        flag(false, Pipe::MTE3, Pipe::MTE2, s, "drain", "drain slot " + std::to_string(s));
    }
    return k;
}

struct Outcome {
    Report report;
    std::vector<float> y;
};

/** Runs the kernel with `slots` UB tiles, leaving out the steps in `skip`. */
Outcome run_vector_kernel(int slots, const std::set<size_t> &skip = {}, bool numerics = true) {
    Machine machine(cores(1), numerics);
    VectorKernel k = vector_kernel(machine, slots);
    if (numerics) {
        float *x = static_cast<float *>(machine.data(k.x));
        for (int64_t i = 0; i < kTiles * kTile; ++i) {
            x[i] = float(i % 1000) * 0.5f;
        }
    }
    Core &core = machine.core(aiv(machine, 0));
    for (size_t i = 0; i < k.steps.size(); ++i) {
        if (!skip.count(i)) {
            k.steps[i].record(core);
        }
    }
    machine.run_core(aiv(machine, 0));
    Outcome out{machine.finish(), {}};
    if (numerics) {
        const float *y = static_cast<const float *>(machine.data(k.y));
        out.y.assign(y, y + kTiles * kTile);
    }
    return out;
}

TEST(AscendOverlap, DoubleBufferingIsAtLeast1p8TimesFaster) {
    Outcome single = run_vector_kernel(1);
    Outcome twice = run_vector_kernel(2);
    for (const Outcome *o : {&single, &twice}) {
        EXPECT_TRUE(o->report.races.empty()) << races_text(o->report);
        EXPECT_FALSE(o->report.deadlock) << o->report.deadlock_message;
        for (int64_t i = 0; i < kTiles * kTile; ++i) {
            ASSERT_EQ(o->y[size_t(i)], 2 * (float(i % 1000) * 0.5f) + 1) << i;
        }
        EXPECT_EQ(busy(o->report, "MTE2"), kTiles * 542);
        EXPECT_EQ(busy(o->report, "V"), kTiles * 522);
        EXPECT_EQ(busy(o->report, "MTE3"), kTiles * 286);
    }
    // Single: load, compute and store of a tile in series (8 x 1350 + flags). Double: two
    // slots' chains interleave, each tile's chain hides under the other's.
    double speedup = double(single.report.cycles) / double(twice.report.cycles);
    EXPECT_GE(speedup, 1.8) << single.report.cycles << " vs " << twice.report.cycles;
    EXPECT_GT(single.report.cycles, kTiles * (542 + 522 + 286));
    EXPECT_LT(twice.report.cycles, kTiles / 2 * (542 + 522 + 286 + 20) + 542 + 20);
}

/** (set step, wait step) index pairs: the k-th wait of a flag matches its k-th set. */
std::vector<std::pair<size_t, size_t>> matched_pairs(const std::vector<Step> &steps) {
    std::map<std::tuple<Pipe, Pipe, int>, std::vector<size_t>> sets, waits;
    for (size_t i = 0; i < steps.size(); ++i) {
        if (steps[i].flag) {
            auto key = std::make_tuple(steps[i].src, steps[i].dst, steps[i].event);
            (steps[i].set ? sets : waits)[key].push_back(i);
        }
    }
    std::vector<std::pair<size_t, size_t>> pairs;
    for (const auto &entry : sets) {
        const std::vector<size_t> &w = waits[entry.first];
        EXPECT_EQ(entry.second.size(), w.size());
        for (size_t k = 0; k < entry.second.size() && k < w.size(); ++k) {
            pairs.push_back({entry.second[k], w[k]});
        }
    }
    return pairs;
}

// The statement pairs of the kernel text: per flag (src, dst), the set statement and the wait
// statement of one site. Leaving out a statement pair (every instance of both) must be caught.
TEST(AscendRaces, RemovingAnyFlagStatementPairIsDetected) {
    Machine machine(cores(1), false);
    VectorKernel k = vector_kernel(machine, 2);
    std::map<std::tuple<Pipe, Pipe, std::string>, std::set<size_t>> statements;
    for (size_t i = 0; i < k.steps.size(); ++i) {
        const Step &s = k.steps[i];
        if (!s.flag) {
            continue;
        }
        // The pre-armed set and the drain wait are one statement pair; so are each loop pair.
        std::string site = s.site == "loop" ? "loop" : "prearm/drain";
        statements[std::make_tuple(s.src, s.dst, site)].insert(i);
    }
    EXPECT_EQ(statements.size(), 4u); // MTE3_MTE2 twice (pre-arm/drain, loop), MTE2_V, V_MTE3
    for (const auto &entry : statements) {
        std::string what = std::string(pipe_name(std::get<0>(entry.first))) + "_" +
                           pipe_name(std::get<1>(entry.first)) + " " + std::get<2>(entry.first);
        Outcome o = run_vector_kernel(2, entry.second, false);
        EXPECT_TRUE(o.report.race_count > 0 || o.report.deadlock) << "undetected: " << what;
    }
    // Which way each is caught.
    auto outcome = [&](Pipe src, Pipe dst, const char *site) {
        return run_vector_kernel(2, statements[std::make_tuple(src, dst, std::string(site))], false)
            .report;
    };
    Report no_prearm = outcome(Pipe::MTE3, Pipe::MTE2, "prearm/drain");
    EXPECT_TRUE(no_prearm.deadlock);
    EXPECT_TRUE(contains(no_prearm.deadlock_message, "WaitFlag<MTE3_MTE2>(0)"));
    EXPECT_GT(outcome(Pipe::MTE3, Pipe::MTE2, "loop").race_count, 0);
    EXPECT_GT(outcome(Pipe::MTE2, Pipe::V, "loop").race_count, 0);
    EXPECT_GT(outcome(Pipe::V, Pipe::MTE3, "loop").race_count, 0);
}

// Every dynamic pair (one set instance and the wait it matches) guards an access, except the
// pre-armed sets (matched by each slot's first wait: the slot was never used) and the sets the
// drain consumes (nothing follows them): those two kinds are benign and must stay silent.
TEST(AscendRaces, RemovingAnyGuardingFlagInstancePairIsDetected) {
    Machine machine(cores(1), false);
    VectorKernel k = vector_kernel(machine, 2);
    int detected = 0, benign = 0;
    for (const auto &pair : matched_pairs(k.steps)) {
        Outcome o = run_vector_kernel(2, {pair.first, pair.second}, false);
        bool caught = o.report.race_count > 0 || o.report.deadlock;
        bool guards = k.steps[pair.first].site != "prearm" && k.steps[pair.second].site != "drain";
        EXPECT_EQ(caught, guards) << "set step " << pair.first << ", wait step " << pair.second;
        (guards ? detected : benign) += 1;
    }
    EXPECT_EQ(benign, 4);                // 2 slots x (pre-armed, drained)
    EXPECT_EQ(detected, 3 * kTiles - 2); // MTE2_V, V_MTE3 per tile; 6 loop reuses
}

// ---------------------------------------------------------------------------------------------
// The cube pipeline: GM -> L1 -> L0A/L0B -> Mmad (k in 3 steps) -> Fixpipe -> GM
// ---------------------------------------------------------------------------------------------

std::vector<uint16_t> random_bf16(size_t count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<uint16_t> v(count);
    for (uint16_t &x : v) {
        x = float_to_bf16(dist(rng));
    }
    return v;
}

/** C (M x N) = A (M x K) * B (K x N), all row-major in GM, with the real instructions on fractal
 * data: Nd2Nz into L1, LoadData2D per 16-row strip of A (Zz) and per K block of B (Zn, each
 * fractal transposed), Mmad, Fixpipe Nz -> ND. Returns the f32 or bf16 result as floats. */
std::vector<float> cube_gemm(DType out_type, Report &report) {
    const int64_t M = 32, N = 48, KT = 32, steps = 3, K = KT * steps;
    Machine machine(cores(1));
    int a_gm = machine.add_gm("A", DType::BF16, M * K);
    int b_gm = machine.add_gm("B", DType::BF16, K * N);
    int c_gm = machine.add_gm("C", out_type, M * N);
    int a_l1 = machine.add_local(0, "a_l1", Mem::L1, DType::BF16, M * KT);
    int b_l1 = machine.add_local(0, "b_l1", Mem::L1, DType::BF16, KT * N);
    int a_l0 = machine.add_local(0, "a_l0a", Mem::L0A, DType::BF16, M * KT);
    int b_l0 = machine.add_local(0, "b_l0b", Mem::L0B, DType::BF16, KT * N);
    int c_l0 = machine.add_local(0, "c_l0c", Mem::L0C, DType::F32, M * N);
    std::vector<uint16_t> a = random_bf16(size_t(M * K), 1), b = random_bf16(size_t(K * N), 2);
    std::memcpy(machine.data(a_gm), a.data(), a.size() * 2);
    std::memcpy(machine.data(b_gm), b.data(), b.size() * 2);
    // A debris value in L0C: the first Mmad overwrites it.
    static_cast<float *>(machine.data(c_l0))[0] = 1e6f;

    Core &core = machine.core(0);
    core.set_flag(Pipe::MTE1, Pipe::MTE2, 0, "L1 free");
    core.set_flag(Pipe::M, Pipe::MTE1, 0, "L0 free");
    for (int64_t s = 0; s < steps; ++s) {
        std::string step = " k" + std::to_string(s);
        core.wait_flag(Pipe::MTE1, Pipe::MTE2, 0, "wait L1 free" + step);
        core.nd2nz(a_l1, 0, a_gm, s * KT, Nd2Nz{M, KT, K, M, 1}, "A tile" + step);
        core.nd2nz(b_l1, 0, b_gm, s * KT * N, Nd2Nz{KT, N, N, KT, 1}, "B tile" + step);
        core.set_flag(Pipe::MTE2, Pipe::MTE1, 0, "L1 full" + step);
        core.wait_flag(Pipe::MTE2, Pipe::MTE1, 0, "wait L1 full" + step);
        core.wait_flag(Pipe::M, Pipe::MTE1, 0, "wait L0 free" + step);
        for (int64_t strip = 0; strip < M / 16; ++strip) { // A: rows of fractals, Zz
            core.load_data_2d(a_l0, strip * KT * 16, a_l1, 0,
                              LoadData2D{strip, KT / 16, M / 16, 0, false}, "LoadData A" + step);
        }
        for (int64_t block = 0; block < KT / 16;
             ++block) { // B: K blocks, each fractal transposed, Zn
            core.load_data_2d(b_l0, block * N * 16, b_l1, 0,
                              LoadData2D{block, N / 16, KT / 16, 0, true}, "LoadData B" + step);
        }
        core.set_flag(Pipe::MTE1, Pipe::MTE2, 0, "L1 free" + step);
        core.set_flag(Pipe::MTE1, Pipe::M, 0, "L0 full" + step);
        core.wait_flag(Pipe::MTE1, Pipe::M, 0, "wait L0 full" + step);
        core.mmad_fractal(c_l0, 0, a_l0, 0, b_l0, 0, M, N, KT, /*accumulate=*/s > 0, "Mmad" + step);
        core.set_flag(Pipe::M, Pipe::MTE1, 0, "L0 free" + step);
    }
    core.set_flag(Pipe::M, Pipe::FIX, 0, "C done");
    core.wait_flag(Pipe::M, Pipe::FIX, 0, "wait C done");
    core.fixpipe_nz2nd(c_gm, 0, c_l0, 0, FixpipeNz2Nd{N, M, M, N}, "Fixpipe C");
    core.wait_flag(Pipe::MTE1, Pipe::MTE2, 0, "drain L1 free");
    core.wait_flag(Pipe::M, Pipe::MTE1, 0, "drain L0 free");
    machine.run_core(0);
    report = machine.finish();

    // The naive GEMM: f32 accumulation of bf16 products, k ascending.
    std::vector<float> result(size_t(M * N));
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t kk = 0; kk < K; ++kk) {
                acc += bf16_to_float(a[size_t(m * K + kk)]) * bf16_to_float(b[size_t(kk * N + n)]);
            }
            float got =
                out_type == DType::F32
                    ? static_cast<const float *>(machine.data(c_gm))[m * N + n]
                    : bf16_to_float(static_cast<const uint16_t *>(machine.data(c_gm))[m * N + n]);
            float want = out_type == DType::F32 ? acc : bf16_to_float(float_to_bf16(acc));
            EXPECT_EQ(got, want) << "m " << m << " n " << n;
            result[size_t(m * N + n)] = got;
        }
    }
    return result;
}

TEST(AscendGemm, CubePipelineMatchesNaiveBf16Gemm) {
    Report r;
    cube_gemm(DType::BF16, r);
    EXPECT_TRUE(r.races.empty()) << races_text(r);
    EXPECT_FALSE(r.deadlock) << r.deadlock_message;
    EXPECT_EQ(busy(r, "M"), 3 * (10 + 2 * 3 * 2));
    EXPECT_EQ(busy(r, "FIX"), 30 + 36); // ceil(32 * 48 * 2 / 86)
}

TEST(AscendGemm, FixpipeToF32KeepsTheAccumulator) {
    Report r;
    cube_gemm(DType::F32, r);
    EXPECT_TRUE(r.races.empty()) << races_text(r);
    EXPECT_EQ(busy(r, "FIX"), 30 + 72); // ceil(32 * 48 * 4 / 86)
}

/** An int8 GEMM into int32 with AscendC's own int8 loads (its sample
 * mmad_s8_f16_f32_with_A_B_transpose_option): A (M x K) by LoadData2D, B (K x N, row-major) by
 * LoadDataWithTranspose, a call per 32-row K block, a repeat per 32 columns (srcStride K / 32,
 * dstGap 1, dstFracGap 0); Fixpipe NoQuant writes the exact int32 sums. */
TEST(AscendGemm, Int8ThroughLoadDataWithTransposeIsExact) {
    const int64_t M = 32, N = 64, K = 64;
    Machine machine(cores(1));
    int a_gm = machine.add_gm("A", DType::I8, M * K), b_gm = machine.add_gm("B", DType::I8, K * N);
    int c_gm = machine.add_gm("C", DType::I32, M * N);
    int a_l1 = machine.add_local(0, "a_l1", Mem::L1, DType::I8, M * K);
    int b_l1 = machine.add_local(0, "b_l1", Mem::L1, DType::I8, K * N);
    int a_l0 = machine.add_local(0, "a_l0a", Mem::L0A, DType::I8, M * K);
    int b_l0 = machine.add_local(0, "b_l0b", Mem::L0B, DType::I8, K * N);
    int c_l0 = machine.add_local(0, "c_l0c", Mem::L0C, DType::I32, M * N);
    std::vector<int8_t> a(size_t(M * K)), b(size_t(K * N));
    for (size_t i = 0; i < a.size(); i++)
        a[i] = int8_t(int(i * 37 % 251) - 125);
    for (size_t i = 0; i < b.size(); i++)
        b[i] = int8_t(int(i * 91 % 247) - 123);
    std::memcpy(machine.data(a_gm), a.data(), a.size());
    std::memcpy(machine.data(b_gm), b.data(), b.size());
    Core &core = machine.core(0);
    core.nd2nz(a_l1, 0, a_gm, 0, Nd2Nz{M, K, K, M, 1}, "A tile");
    core.nd2nz(b_l1, 0, b_gm, 0, Nd2Nz{K, N, N, K, 1}, "B tile");
    core.set_flag(Pipe::MTE2, Pipe::MTE1, 0, "L1 full");
    core.wait_flag(Pipe::MTE2, Pipe::MTE1, 0, "wait L1 full");
    for (int64_t strip = 0; strip < M / 16; ++strip) // A: Zz, K / 32 fractals per strip
        core.load_data_2d(a_l0, strip * K * 16, a_l1, 0,
                          LoadData2D{strip, K / 32, M / 16, 0, false}, "LoadData A");
    for (int64_t block = 0; block < K / 32; ++block) // B: Zn, a 32-deep K block per call
        core.load_data_transpose_8(b_l0, block * N * 32, b_l1, block * 1024,
                                   LoadDataTranspose8{0, N / 32, K / 32, 1, 0},
                                   "LoadDataWithTranspose B");
    core.set_flag(Pipe::MTE1, Pipe::M, 0, "L0 full");
    core.wait_flag(Pipe::MTE1, Pipe::M, 0, "wait L0 full");
    core.mmad_fractal(c_l0, 0, a_l0, 0, b_l0, 0, M, N, K, false, "Mmad");
    core.set_flag(Pipe::M, Pipe::FIX, 0, "C done");
    core.wait_flag(Pipe::M, Pipe::FIX, 0, "wait C done");
    core.fixpipe_nz2nd(c_gm, 0, c_l0, 0, FixpipeNz2Nd{N, M, M, N}, "Fixpipe C");
    machine.run_core(0);
    Report report = machine.finish();
    EXPECT_TRUE(report.races.empty()) << races_text(report);
    const int32_t *c = static_cast<const int32_t *>(machine.data(c_gm));
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            int32_t want = 0;
            for (int64_t k = 0; k < K; ++k)
                want += int32_t(a[size_t(m * K + k)]) * int32_t(b[size_t(k * N + n)]);
            ASSERT_EQ(c[m * N + n], want) << "m " << m << " n " << n;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Races
// ---------------------------------------------------------------------------------------------

void load_compute_store(Core &core, int x, int ub_in, int ub_out, int y, bool pipe_all) {
    core.data_copy(ub_in, line(0, 1024), x, line(0, 1024), "load");
    if (pipe_all) {
        core.pipe_barrier(Pipe::ALL);
    }
    core.vector_op("relu", 2048, {{ub_in, line(0, 1024), false}, {ub_out, line(0, 1024), true}},
                   nullptr);
    if (pipe_all) {
        core.pipe_barrier(Pipe::ALL);
    }
    core.data_copy(y, line(0, 1024), ub_out, line(0, 1024), "store");
    if (pipe_all) {
        core.pipe_barrier(Pipe::ALL);
    }
    core.data_copy(ub_in, line(0, 1024), x, line(1024, 1024), "load again");
}

TEST(AscendRaces, PipeAllMakesARacyProgramRaceFree) {
    for (bool pipe_all : {false, true}) {
        Machine machine(cores(1), false);
        const int v0 = aiv(machine, 0);
        int x = machine.add_gm("x", DType::F32, 2048);
        int y = machine.add_gm("y", DType::F32, 1024);
        int ub_in = machine.add_local(v0, "ub_in", Mem::UB, DType::F32, 1024);
        int ub_out = machine.add_local(v0, "ub_out", Mem::UB, DType::F32, 1024);
        load_compute_store(machine.core(v0), x, ub_in, ub_out, y, pipe_all);
        machine.run_core(v0);
        Report r = machine.finish();
        EXPECT_FALSE(r.deadlock);
        if (pipe_all) {
            EXPECT_TRUE(r.races.empty()) << races_text(r);
            // load [1, 159), barrier [159, 163), dispatch, relu [164, 182), barrier, dispatch,
            // store [187, 281), barrier [281, 285), dispatch, load again [286, 444).
            EXPECT_EQ(r.cycles, 444);
        } else {
            EXPECT_EQ(r.race_count, 3) << races_text(r); // ub_in (twice), ub_out
            EXPECT_TRUE(contains(races_text(r), "vector 'relu' (V, AIV 0)"));
            EXPECT_TRUE(contains(races_text(r), "DataCopy 'load again' (MTE2, AIV 0)"));
        }
    }
}

// The vector unit overlaps its instructions: a V op that reads what the previous one wrote races
// with it unless a PipeBarrier<PIPE_V> (or a PIPE_ALL) stands between them; other pipes keep
// their order.
TEST(AscendRaces, DependentVectorOpsNeedAPipeBarrier) {
    for (int between : {0, 1, 2}) { // nothing, PipeBarrier<PIPE_V>, PipeBarrier<PIPE_ALL>
        Machine machine(cores(1), false);
        const int v0 = aiv(machine, 0);
        int x = machine.add_gm("x", DType::F32, 1024);
        int ub = machine.add_local(v0, "ub", Mem::UB, DType::F32, 1024);
        int tmp = machine.add_local(v0, "tmp", Mem::UB, DType::F32, 1024);
        Core &core = machine.core(v0);
        core.vector_op("Mul", 4096, {{ub, line(0, 1024), false}, {tmp, line(0, 1024), true}},
                       nullptr);
        if (between == 1)
            core.pipe_barrier(Pipe::V);
        if (between == 2)
            core.pipe_barrier(Pipe::ALL);
        core.vector_op("Adds", 4096, {{tmp, line(0, 1024), false}, {ub, line(0, 1024), true}},
                       nullptr);
        core.set_flag(Pipe::V, Pipe::MTE3, 0);
        core.wait_flag(Pipe::V, Pipe::MTE3, 0);
        core.data_copy(x, line(0, 1024), ub, line(0, 1024), "store"); // ordered by the flag
        machine.run_core(v0);
        Report r = machine.finish();
        if (between == 0) {
            ASSERT_EQ(r.race_count, 2)
                << races_text(r); // tmp (read after write), ub (write after read)
            EXPECT_TRUE(contains(races_text(r), "vector 'Mul' (V, AIV 0)")) << races_text(r);
            EXPECT_TRUE(contains(races_text(r), "vector 'Adds' (V, AIV 0)")) << races_text(r);
        } else {
            EXPECT_TRUE(r.races.empty()) << between << ": " << races_text(r);
        }
    }
}

TEST(AscendRaces, PipeAllOrdersOnlyWhatCameBeforeIt) {
    Machine machine(cores(1), false);
    const int v0 = aiv(machine, 0);
    int x = machine.add_gm("x", DType::F32, 1024);
    int ub = machine.add_local(v0, "ub", Mem::UB, DType::F32, 1024);
    Core &core = machine.core(v0);
    core.vector_op("init", 1024, {{ub, line(0, 1024), true}}, nullptr);
    core.pipe_barrier(Pipe::ALL);
    core.data_copy(ub, line(0, 1024), x, line(0, 1024), "load after the barrier");
    core.vector_op("use", 1024, {{ub, line(0, 1024), false}}, nullptr); // no flag: races
    machine.run_core(v0);
    Report r = machine.finish();
    ASSERT_EQ(r.race_count, 1) << races_text(r);
    EXPECT_EQ(r.races[0].first, "DataCopy 'load after the barrier' (MTE2, AIV 0)");
    EXPECT_EQ(r.races[0].second, "vector 'use' (V, AIV 0)");
}

TEST(AscendRaces, CrossCoreGmWrites) {
    for (bool overlap : {true, false}) {
        Machine machine(cores(2), false);
        int x = machine.add_gm("x", DType::F32, 2048);
        int y = machine.add_gm("y", DType::F32, 2048);
        for (int i = 0; i < 2; ++i) {
            const int c = aiv(machine, i);
            int ub = machine.add_local(c, "ub", Mem::UB, DType::F32, 1024);
            Core &core = machine.core(c);
            core.data_copy(ub, line(0, 1024), x, line(i * 1024, 1024), "load");
            core.set_flag(Pipe::MTE2, Pipe::MTE3, 0);
            core.wait_flag(Pipe::MTE2, Pipe::MTE3, 0);
            int64_t at = overlap ? i * 512 : i * 1024; // overlapping halves, or disjoint
            core.data_copy(y, line(at, 1024), ub, line(0, 1024), "store");
            machine.run_core(c);
        }
        Report r = machine.finish();
        if (overlap) {
            ASSERT_EQ(r.race_count, 1) << races_text(r);
            EXPECT_EQ(r.races[0].buffer, "y");
            EXPECT_EQ(r.races[0].first, "DataCopy 'store' (MTE3, AIV 0)");
            EXPECT_EQ(r.races[0].second, "DataCopy 'store' (MTE3, AIV 1)");
        } else {
            EXPECT_TRUE(r.races.empty()) << races_text(r);
        }
        EXPECT_EQ(r.core_cycles.size(), 4u); // every core of the machine, 2 AIC and 2 AIV
    }
}

// ---------------------------------------------------------------------------------------------
// Mix kernels: an AIC and its two AIVs joined by cross-core flags through a GM workspace
// ---------------------------------------------------------------------------------------------

/** One AIC and its two AIVs. */
AscendParams one_group() {
    AscendParams p;
    p.cube_cores = 1;
    p.vector_cores = 2;
    return p;
}

/** The AIC stores a 16 x 16 accumulator to the workspace twice (Fixpipe) and tells its AIVs after
 * the first; each AIV waits, loads it into UB and says so. `wait_before_rewrite`: the AIC waits
 * for both AIVs before the second store; `second_aiv_sets`: AIV 1 answers too. */
Report workspace_handoff(bool wait_before_rewrite, bool second_aiv_sets, bool numerics = false) {
    Machine machine(one_group(), numerics);
    machine.launch_mix();
    int ws = machine.add_gm("workspace", DType::F32, 256);
    int acc = machine.add_local(0, "acc", Mem::L0C, DType::F32, 256);
    FixpipeNz2Nd fix;
    fix.n_size = 16;
    fix.m_size = 16;
    fix.src_stride = 16;
    fix.dst_stride = 16;
    Core &aic = machine.core(0);
    aic.fixpipe_nz2nd(ws, 0, acc, 0, fix, "store tile 0");
    aic.cross_core_set_flag(Pipe::FIX, 0, "tile 0 stored");
    if (wait_before_rewrite)
        aic.cross_core_wait_flag(1, "tile 0 read");
    aic.fixpipe_nz2nd(ws, 0, acc, 0, fix, "store tile 1");
    machine.run_core(0);
    for (int sub = 0; sub < 2; ++sub) {
        const int c = machine.core_of(CoreKind::AIV, sub);
        int ub = machine.add_local(c, "acc_ub", Mem::UB, DType::F32, 256);
        Core &aiv = machine.core(c);
        aiv.cross_core_wait_flag(0, "wait tile 0");
        aiv.data_copy(ub, line(0, 256), ws, line(0, 256), "load tile 0");
        if (sub == 0 || second_aiv_sets)
            aiv.cross_core_set_flag(Pipe::MTE2, 1, "tile 0 read");
        machine.run_core(c);
    }
    return machine.finish();
}

TEST(AscendMix, CrossCoreFlagsOrderTheWorkspace) {
    Report r = workspace_handoff(true, true);
    EXPECT_FALSE(r.deadlock) << r.deadlock_message;
    EXPECT_TRUE(r.races.empty()) << races_text(r);
    // The second store waits for both loads: the AIC ends after the AIVs.
    EXPECT_GT(r.core_cycles[0], std::max(r.core_cycles[1], r.core_cycles[2]));
}

TEST(AscendMix, RewritingTheWorkspaceWithoutTheReverseFlagRaces) {
    Report r = workspace_handoff(false, true);
    // The AIVs' answer nobody waits for outlives the kernel, which is reported too.
    EXPECT_TRUE(contains(r.deadlock_message, "cross-core flag 1 of AIC 0 is left set 1 time(s)"))
        << r.deadlock_message;
    ASSERT_FALSE(r.races.empty());
    EXPECT_EQ(r.races[0].buffer, "workspace");
    EXPECT_TRUE(
        contains(r.races[0].first + r.races[0].second, "Fixpipe 'store tile 1' (FIX, AIC 0)"))
        << races_text(r);
}

TEST(AscendMix, TheAicCounterMovesOnlyWhenBothAivsSet) {
    Report r = workspace_handoff(true, false);
    ASSERT_TRUE(r.deadlock);
    EXPECT_TRUE(contains(r.deadlock_message, "deadlock on AIC 0")) << r.deadlock_message;
    EXPECT_TRUE(contains(r.deadlock_message, "CrossCoreWaitFlag(1) 'tile 0 read'"))
        << r.deadlock_message;
    EXPECT_TRUE(contains(r.deadlock_message, "both its AIVs (AIV 0, AIV 1)")) << r.deadlock_message;
}

TEST(AscendMix, ACounterHoldsFifteen) {
    Machine machine(one_group(), false);
    machine.launch_mix();
    for (int i = 0; i < 16; ++i)
        machine.core(0).cross_core_set_flag(Pipe::FIX, 3);
    machine.run_core(0);
    Report r = machine.finish();
    ASSERT_TRUE(r.deadlock);
    EXPECT_TRUE(
        contains(r.deadlock_message, "cross-core flag 3 of AIV 0 is set 16 times without a wait"))
        << r.deadlock_message;
}

TEST(AscendMix, CrossCoreFlagsNeedAMixLaunchAndARealPipe) {
    Machine machine(one_group(), false);
    try {
        machine.core(0).cross_core_set_flag(Pipe::FIX, 0);
        FAIL() << "a cross-core flag outside a mix kernel";
    } catch (const SimError &e) {
        EXPECT_TRUE(contains(e.what(), "need a mix kernel (KERNEL_TYPE_MIX_AIC_1_2")) << e.what();
    }
    machine.launch_mix();
    EXPECT_THROW(machine.core(0).cross_core_set_flag(Pipe::S, 0), SimError);
    EXPECT_THROW(machine.core(0).cross_core_set_flag(Pipe::V, 0), SimError); // V is on the AIV
    Machine unpaired(cores(2), false);
    EXPECT_THROW(unpaired.launch_mix(), SimError); // two AIV per AIC
}

// ---------------------------------------------------------------------------------------------
// Deadlocks
// ---------------------------------------------------------------------------------------------

TEST(AscendDeadlock, WaitWhoseSetNeverComes) {
    Machine machine(cores(1));
    int a_gm = machine.add_gm("A", DType::BF16, 1024);
    int a_l1 = machine.add_local(0, "a_l1", Mem::L1, DType::BF16, 1024);
    int a_l0 = machine.add_local(0, "a_l0", Mem::L0A, DType::BF16, 1024);
    Core &core = machine.core(0);
    core.data_copy(a_l1, line(0, 1024), a_gm, line(0, 1024), "load a");
    core.set_flag(Pipe::MTE2, Pipe::MTE1, 0, "a ready");
    core.wait_flag(Pipe::MTE2, Pipe::MTE1, 1, "wait a ready"); // the wrong event id
    core.data_copy(a_l0, line(0, 1024), a_l1, line(0, 1024), "LoadData a");
    machine.run_core(0);
    Report r = machine.finish();
    ASSERT_TRUE(r.deadlock);
    const std::string &m = r.deadlock_message;
    EXPECT_TRUE(contains(m, "deadlock on AIC 0")) << m;
    EXPECT_TRUE(contains(m, "pipe MTE1 waits at WaitFlag<MTE2_MTE1>(1) 'wait a ready'")) << m;
    EXPECT_TRUE(contains(m, "only 0 SetFlag<MTE2_MTE1>(1)")) << m;
    EXPECT_EQ(r.cycles, 1 + 94 + 1); // the core stopped after the set
    EXPECT_EQ(busy(r, "MTE1"), 0);
}

TEST(AscendDeadlock, CyclicWaitsNameEveryBlockedPipe) {
    Machine machine(cores(1), false);
    int gm = machine.add_gm("G", DType::BF16, 1024);
    int l1 = machine.add_local(0, "l1", Mem::L1, DType::BF16, 1024);
    int l0 = machine.add_local(0, "l0", Mem::L0A, DType::BF16, 1024);
    Core &core = machine.core(0);
    core.wait_flag(Pipe::MTE1, Pipe::MTE2, 0, "wait L1 free"); // never pre-armed
    core.data_copy(l1, line(0, 1024), gm, line(0, 1024), "load");
    core.set_flag(Pipe::MTE2, Pipe::MTE1, 0, "L1 full");
    core.wait_flag(Pipe::MTE2, Pipe::MTE1, 0, "wait L1 full");
    core.data_copy(l0, line(0, 1024), l1, line(0, 1024), "LoadData");
    core.set_flag(Pipe::MTE1, Pipe::MTE2, 0, "L1 free");
    machine.run_core(0);
    Report r = machine.finish();
    ASSERT_TRUE(r.deadlock);
    const std::string &m = r.deadlock_message;
    EXPECT_TRUE(contains(m, "pipe MTE2 waits at WaitFlag<MTE1_MTE2>(0) 'wait L1 free'")) << m;
    EXPECT_TRUE(contains(m, "its SetFlag<MTE1_MTE2>(0) 'L1 free' on MTE1 is queued behind")) << m;
    EXPECT_TRUE(contains(m, "pipe MTE1 waits at WaitFlag<MTE2_MTE1>(0) 'wait L1 full'")) << m;
}

TEST(AscendDeadlock, PipeAllBehindABlockedWait) {
    Machine machine(cores(1), false);
    const int v0 = aiv(machine, 0);
    int ub = machine.add_local(v0, "ub", Mem::UB, DType::F32, 1024);
    Core &core = machine.core(v0);
    core.wait_flag(Pipe::MTE2, Pipe::V, 3, "wait forever");
    core.pipe_barrier(Pipe::ALL);
    core.vector_op("never", 10, {{ub, line(0, 1024), true}}, nullptr);
    machine.run_core(v0);
    Report r = machine.finish();
    ASSERT_TRUE(r.deadlock);
    EXPECT_TRUE(contains(r.deadlock_message, "pipe V waits at WaitFlag<MTE2_V>(3)"));
    EXPECT_TRUE(contains(r.deadlock_message, "pipe S waits at PipeBarrier<PIPE_ALL>"));
    EXPECT_EQ(busy(r, "V"), 0);
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

TEST(AscendErrors, SetTwiceWithoutAWait) {
    Machine machine(cores(1), false);
    Core &core = machine.core(0);
    core.set_flag(Pipe::MTE2, Pipe::MTE1, 0, "first");
    std::string e = error_of([&] { core.set_flag(Pipe::MTE2, Pipe::MTE1, 0, "second"); });
    EXPECT_TRUE(contains(e, "set twice without a wait")) << e;
    EXPECT_TRUE(contains(e, "'first'")) << e;
    EXPECT_TRUE(contains(e, "SetFlag<MTE2_MTE1>(0) 'second' on AIC 0")) << e;
    // Another id or pair is fine, and so is a set after the wait.
    core.set_flag(Pipe::MTE2, Pipe::MTE1, 1);
    core.set_flag(Pipe::MTE1, Pipe::M, 0);
    core.wait_flag(Pipe::MTE2, Pipe::MTE1, 0);
    core.set_flag(Pipe::MTE2, Pipe::MTE1, 0);
}

TEST(AscendErrors, EventIdOutOfRange) {
    Machine machine(cores(1), false);
    Core &core = machine.core(0);
    std::string e = error_of([&] { core.set_flag(Pipe::MTE2, Pipe::MTE1, 8); });
    EXPECT_TRUE(contains(e, "event id 8 is outside 0..7")) << e;
    EXPECT_TRUE(contains(error_of([&] { core.wait_flag(Pipe::M, Pipe::FIX, -1); }), "event id -1"));
    EXPECT_FALSE(error_of([&] { core.set_flag(Pipe::MTE2, Pipe::MTE2, 0); }).empty());
    EXPECT_FALSE(error_of([&] { core.set_flag(Pipe::ALL, Pipe::V, 0); }).empty());
}

TEST(AscendErrors, LocalOverCapacityNamesBufferAndScope) {
    Machine machine(cores(2), false);
    std::string e = error_of([&] { machine.add_local(1, "a_big", Mem::L0A, DType::BF16, 32769); });
    EXPECT_TRUE(contains(e, "L0A overflow: buffer 'a_big'")) << e;
    EXPECT_TRUE(contains(e, "on AIC 1")) << e;
    EXPECT_TRUE(contains(e, "65536")) << e;
    // Alignment padding counts: 2 bytes, then a buffer starting at 512 fills L0A exactly.
    machine.add_local(0, "tiny", Mem::L0A, DType::BF16, 1);
    machine.add_local(0, "rest", Mem::L0A, DType::BF16, (65536 - 512) / 2);
    e = error_of([&] { machine.add_local(0, "one more", Mem::L0A, DType::BF16, 1); });
    EXPECT_TRUE(contains(e, "buffer 'one more'")) << e;
    // Per core: core 1's L0A is still empty.
    machine.add_local(1, "full", Mem::L0A, DType::BF16, 32768);
    EXPECT_FALSE(error_of([&] { machine.add_local(0, "ub", Mem::GM, DType::F32, 1); }).empty());
}

TEST(AscendErrors, MisalignedL0Offset) {
    Machine machine(cores(1), false);
    int l1 = machine.add_local(0, "a_l1", Mem::L1, DType::BF16, 2048);
    int l0a = machine.add_local(0, "a_l0a", Mem::L0A, DType::BF16, 2048);
    int l0b = machine.add_local(0, "b_l0b", Mem::L0B, DType::BF16, 2048);
    int l0c = machine.add_local(0, "c_l0c", Mem::L0C, DType::F32, 256);
    Core &core = machine.core(0);
    std::string e =
        error_of([&] { core.data_copy(l0a, line(16, 256), l1, line(0, 256), "LoadData half"); });
    EXPECT_TRUE(contains(e, "DataCopy 'LoadData half' (MTE1) on AIC 0")) << e;
    EXPECT_TRUE(contains(e, "'a_l0a' (L0A) starts at byte 32")) << e;
    core.data_copy(l0a, line(256, 256), l1, line(0, 256), "LoadData aligned"); // byte 512
    e = error_of([&] { core.mmad_fractal(l0c, 0, l0a, 8, l0b, 0, 16, 16, 16, false, "mm"); });
    EXPECT_TRUE(contains(e, "Mmad 'mm' (M)")) << e;
    EXPECT_TRUE(contains(e, "'a_l0a'")) << e;
}

TEST(AscendErrors, PathsTypesShapesAndOwnership) {
    Machine machine(cores(2), false);
    const int v0 = aiv(machine, 0), v1 = aiv(machine, 1);
    int gm = machine.add_gm("G", DType::F32, 1024);
    int gm16 = machine.add_gm("H", DType::BF16, 1024);
    int ub = machine.add_local(v0, "ub", Mem::UB, DType::F32, 1024);
    int l0a = machine.add_local(0, "l0a", Mem::L0A, DType::F32, 1024);
    int l0c = machine.add_local(0, "l0c", Mem::L0C, DType::F32, 1024);
    int other = machine.add_local(v1, "ub1", Mem::UB, DType::F32, 1024);
    Core &cube = machine.core(0), &core = machine.core(v0);
    std::string e = error_of([&] { cube.data_copy(l0a, line(0, 256), l0c, line(0, 256), "x"); });
    EXPECT_TRUE(contains(e, "no pipe copies L0C -> L0A")) << e;
    e = error_of([&] { core.data_copy(ub, line(0, 256), gm16, line(0, 256), "t"); });
    EXPECT_TRUE(contains(e, "without conversion")) << e;
    e = error_of([&] { core.data_copy(ub, line(0, 256), gm, line(0, 255), "n"); });
    EXPECT_TRUE(contains(e, "256 elements")) << e;
    e = error_of([&] { core.data_copy(other, line(0, 256), gm, line(0, 256), "o"); });
    EXPECT_TRUE(contains(e, "'ub1' is UB of AIV 1")) << e;
    e = error_of([&] { core.data_copy(ub, line(1000, 256), gm, line(0, 256), "out"); });
    EXPECT_TRUE(contains(e, "every element of a box must lie inside its buffer")) << e;
    e = error_of([&] { cube.fixpipe_nz2nd(gm16, 0, l0a, 0, FixpipeNz2Nd{16, 1, 16, 16}, "f"); });
    EXPECT_TRUE(contains(e, "fixpipe reads f32 or i32 from L0C")) << e;
    e = error_of([&] { cube.nd2nz(l0a, 0, gm, 0, Nd2Nz{1, 16, 70000, 16, 1}, "wide"); });
    EXPECT_TRUE(contains(e, "16-bit fields")) << e;
    e = error_of([&] { cube.data_copy(gm, line(0, 16), l0c, line(0, 16), "plain"); });
    EXPECT_TRUE(contains(e, "only Fixpipe reads L0C")) << e;
    e = error_of([&] { core.vector_op("v", 1, {{gm, line(0, 4), true}}, nullptr); });
    EXPECT_TRUE(contains(e, "UB only")) << e;
    e = error_of([&] { cube.mmad_fractal(l0c, 0, l0c, 0, l0a, 0, 16, 16, 16, false, "m"); });
    EXPECT_TRUE(contains(e, "a from L0A")) << e;
    machine.run_core(v0);
    e = error_of([&] { core.data_copy(ub, line(0, 256), gm, line(0, 256), "late"); });
    EXPECT_TRUE(contains(e, "already ran")) << e;
    EXPECT_FALSE(error_of([&] { machine.run_core(v0); }).empty());
    machine.core(v1).data_copy(other, line(0, 256), gm, line(0, 256), "never run");
    e = error_of([&] { machine.finish(); });
    EXPECT_TRUE(contains(e, "core " + std::to_string(v1) + " recorded 1 ops but never ran")) << e;
    AscendParams bad;
    bad.gm_to_ub = 0;
    EXPECT_THROW(Machine(bad, false), SimError);
}

// The 910B's separated architecture: UB and V, MTE3 are on the AIV only; L1, L0A/B/C and MTE1,
// M, FIX on the AIC only; GM is the only memory both reach.
TEST(AscendErrors, EachKindHasItsOwnMemoriesAndPipes) {
    Machine machine(cores(1), false);
    const int v0 = aiv(machine, 0);
    EXPECT_EQ(machine.num_cores(), 2);
    EXPECT_EQ(machine.kind(0), CoreKind::AIC);
    EXPECT_EQ(machine.kind(v0), CoreKind::AIV);
    EXPECT_EQ(v0, 1);
    EXPECT_THROW(machine.core_of(CoreKind::AIV, 1), SimError);
    std::string e = error_of([&] { machine.add_local(0, "ub", Mem::UB, DType::F32, 16); });
    EXPECT_TRUE(contains(e, "UB is on the vector cores (AIV)")) << e;
    EXPECT_TRUE(contains(e, "is AIC 0")) << e;
    e = error_of([&] { machine.add_local(v0, "l1", Mem::L1, DType::BF16, 16); });
    EXPECT_TRUE(contains(e, "L1 is on the cube cores (AIC)")) << e;
    e = error_of([&] { machine.add_local(v0, "l0c", Mem::L0C, DType::F32, 16); });
    EXPECT_TRUE(contains(e, "is AIV 0")) << e;
    Core &cube = machine.core(0), &vector = machine.core(v0);
    e = error_of([&] { cube.vector_op("v", 1, {}, nullptr); });
    EXPECT_TRUE(contains(e, "pipe V is on the vector cores (AIV)")) << e;
    e = error_of([&] { cube.set_flag(Pipe::M, Pipe::MTE3, 0); });
    EXPECT_TRUE(contains(e, "pipe MTE3 is on the vector cores")) << e;
    e = error_of([&] { vector.set_flag(Pipe::MTE2, Pipe::MTE1, 0); });
    EXPECT_TRUE(contains(e, "pipe MTE1 is on the cube cores (AIC); an AIV has S, MTE2, V and MTE3"))
        << e;
    e = error_of([&] { vector.pipe_barrier(Pipe::M); });
    EXPECT_TRUE(contains(e, "pipe M is on the cube cores")) << e;
    // What each kind has is fine.
    vector.set_flag(Pipe::MTE2, Pipe::V, 0);
    vector.wait_flag(Pipe::MTE2, Pipe::V, 0);
    vector.pipe_barrier(Pipe::ALL);
    cube.set_flag(Pipe::MTE2, Pipe::MTE1, 0);
    cube.wait_flag(Pipe::MTE2, Pipe::MTE1, 0);
    EXPECT_TRUE(has_pipe(CoreKind::AIC, Pipe::FIX) && !has_pipe(CoreKind::AIV, Pipe::FIX));
    EXPECT_TRUE(has_memory(CoreKind::AIV, Mem::GM) && has_memory(CoreKind::AIC, Mem::GM));
}

/** Two vector cores each reading 2048 B of x at cycle 1 on machine `p`. */
Report two_concurrent_reads(const AscendParams &p, int64_t *first, int64_t *second) {
    Machine machine(p, false);
    int x = machine.add_gm("x", DType::F32, 1024);
    for (int i = 0; i < 2; ++i) {
        const int c = aiv(machine, i);
        int ub = machine.add_local(c, "ub", Mem::UB, DType::F32, 512);
        machine.core(c).data_copy(ub, line(0, 512), x, line(i * 512, 512), "load");
        machine.run_core(c);
    }
    Report r = machine.finish();
    *first = r.core_cycles[size_t(aiv(machine, 0))];
    *second = r.core_cycles[size_t(aiv(machine, 1))];
    return r;
}

// HBM and L2 are each one queue for the chip: at 32 B/cycle two vector cores reading 2048 B at
// cycle 1 take turns (64 cycles each); a write books its bytes without waiting.
TEST(AscendHbm, EveryCoreSharesHbmAndL2) {
    for (const char *shared : {"HBM", "L2"}) {
        AscendParams p = cores(2);
        (std::string(shared) == "HBM" ? p.hbm_bytes_per_cycle : p.l2_bytes_per_cycle) = 32;
        int64_t first = 0, second = 0;
        Report r = two_concurrent_reads(p, &first, &second);
        EXPECT_EQ(first, 1 + 30 + 64) << shared;
        EXPECT_EQ(second, 1 + 64 + 64 + 30) << shared; // behind the first in the queue
        EXPECT_EQ(busy(r, shared), 128) << shared;
    }
    AscendParams p = cores(2);
    p.hbm_bytes_per_cycle = 32;

    // A store books HBM (write-back) but ends at its own rate; the read behind it waits.
    Machine second(p, false);
    const int v0 = aiv(second, 0), v1 = aiv(second, 1);
    int x2 = second.add_gm("x", DType::F32, 512), y2 = second.add_gm("y", DType::F32, 512);
    int ub0 = second.add_local(v0, "ub", Mem::UB, DType::F32, 512);
    int ub1 = second.add_local(v1, "ub", Mem::UB, DType::F32, 512);
    second.core(v0).data_copy(y2, line(0, 512), ub0, line(0, 512), "store"); // [1, 63): 30 + 32
    second.core(v1).vector_op("later", 256 * 10, {}, nullptr);               // [2, 22)
    second.core(v1).set_flag(Pipe::V, Pipe::MTE2, 0);
    second.core(v1).wait_flag(Pipe::V, Pipe::MTE2, 0);
    second.core(v1).data_copy(ub1, line(0, 512), x2, line(0, 512), "load"); // HBM free at 65
    second.run_core(v0);
    second.run_core(v1);
    Report s = second.finish();
    EXPECT_EQ(s.core_cycles[size_t(v0)], 1 + 30 + 32);
    EXPECT_EQ(s.core_cycles[size_t(v1)], 65 + 64 + 30);
}

// ---------------------------------------------------------------------------------------------
// Trace
// ---------------------------------------------------------------------------------------------

TEST(AscendTrace, OneTrackPerPipeWithVendorNames) {
    Machine machine(cores(1), false, /*trace=*/true);
    const int v0 = aiv(machine, 0);
    int x = machine.add_gm("x", DType::F32, 1024);
    int ub = machine.add_local(v0, "ub", Mem::UB, DType::F32, 1024);
    Core &core = machine.core(v0);
    core.data_copy(ub, line(0, 1024), x, line(0, 1024), "load \"x\"");
    core.set_flag(Pipe::MTE2, Pipe::V, 0);
    core.wait_flag(Pipe::MTE2, Pipe::V, 0);
    core.vector_op("scale", 1024, {{ub, line(0, 1024), true}}, nullptr);
    machine.run_core(v0);
    std::string path = ::testing::TempDir() + "ascend_sim_test.trace.json";
    machine.write_trace(path);
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    for (const char *track : {"VECTOR", "SCALAR", "CUBE", "MTE1", "MTE2", "MTE3", "FIXP"}) {
        EXPECT_TRUE(contains(text, std::string("\"") + track + "\"")) << track;
    }
    EXPECT_TRUE(contains(text, R"("load \"x\"")"));
    EXPECT_TRUE(contains(text, "\"cat\": \"WaitFlag\""));
    EXPECT_TRUE(contains(text, "\"cat\": \"dispatch\""));
    EXPECT_TRUE(contains(text, "AIV 0"));
    std::remove(path.c_str());
    Machine untraced(cores(1), false, false);
    EXPECT_THROW(untraced.write_trace(path), SimError);
}

} // namespace
} // namespace tandem::sim::ascend
