// Self-tests of the ZPU model's mesh (backends/sim/Zpu.h, issue 36): broadcast leaves over the
// row and column links with their exact cycles and data, barriers that interleave the cores'
// programs, the happens-before a barrier carries (a receiver that reads before the barrier after
// the sender's wait races, as does a leaf into a buffer the receiver may still read), deadlocks
// at barriers, and the user errors of a broadcast.

#include "sim/Zpu.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

namespace tandem::sim {
namespace {

/** Four cores in a 2 x 2 mesh: rows {0, 1} and {2, 3}, columns {0, 2} and {1, 3}. */
ZpuParams mesh_2x2() {
    ZpuParams p;
    p.cores = 4;
    p.mesh_columns = 2;
    return p;
}

Box row(int64_t elements) {
    return Box{0, {{elements, 1}}};
}

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

/** Every core has RSRAM `stage` and `buf` of n f32; DRAM `in` and `out` of n f32. */
struct Mesh {
    explicit Mesh(int64_t n, ZpuParams p = mesh_2x2()) : m(p), n(n) {
        in = m.add_dram("in", DType::F32, n);
        out = m.add_dram("out", DType::F32, n);
        for (int c = 0; c < m.num_cores(); ++c) {
            stage.push_back(m.add_sram(c, "stage", Space::RSRAM, DType::F32, n));
            buf.push_back(m.add_sram(c, "buf", Space::RSRAM, DType::F32, n));
        }
        float *x = static_cast<float *>(m.data(in));
        std::iota(x, x + n, 1.0f);
    }
    Machine m;
    int64_t n;
    int in, out;
    std::vector<int> stage, buf;
};

/** Core 0 loads `in`, broadcasts it along its row into core 1's `buf`, which stores it to `out`;
 * the barriers as `first` and `second` say, the sender's wait before the second as `wait`. */
Report row_broadcast(Mesh &mesh, bool first, bool second, bool wait) {
    mesh.m.run([&](Core &core) {
        const int c = core.id();
        const Box all = row(mesh.n);
        if (c == 0) {
            core.dma_wait(core.dma_start(mesh.stage[0], all, mesh.in, all, "load"), "loaded");
            if (first)
                core.barrier({0, 1}, "buf free");
            Token leaf = core.broadcast(Link::Row, {1}, "buf", all, mesh.stage[0], all, "leaf");
            if (wait)
                core.dma_wait(leaf, "leaf done");
            if (second)
                core.barrier({0, 1}, "buf landed");
            if (!wait)
                core.dma_wait(leaf, "leaf done late");
        } else if (c == 1) {
            if (first)
                core.barrier({0, 1}, "buf free");
            if (second)
                core.barrier({0, 1}, "buf landed");
            core.dma_wait(core.dma_start(mesh.out, all, mesh.buf[1], all, "store"), "stored");
        }
    });
    return mesh.m.finish();
}

TEST(ZpuMesh, RowBroadcastLandsInTheReceiverAtTheLinksCost) {
    Mesh mesh(256); // 1024 bytes: a DMA 100 + 1 cycles, a row leaf 100 + 1
    Report r = row_broadcast(mesh, true, true, true);
    EXPECT_EQ(r.race_count, 0) << (r.races.empty() ? "" : r.races[0].str());
    EXPECT_FALSE(r.deadlock);
    // load ends 101; "buf free" releases at 101 + 100; the leaf ends 201 + 101 = 302; "buf
    // landed" releases at 402; core 1's store ends 402 + 101.
    EXPECT_EQ(r.core_cycles[0], 402);
    EXPECT_EQ(r.core_cycles[1], 503);
    EXPECT_EQ(r.cycles, 503);
    const float *out = static_cast<const float *>(mesh.m.data(mesh.out));
    for (int i = 0; i < 256; ++i)
        ASSERT_EQ(out[i], float(i + 1)) << i;
}

TEST(ZpuMesh, ColumnLeafCostsOnceForEveryReceiverAtTheColumnRate) {
    ZpuParams p = mesh_2x2();
    p.cores = 16;
    p.mesh_columns = 4; // column 1: cores 1, 5, 9, 13
    Machine m(p);
    const int64_t n = 2048; // bf16: 4096 bytes, 100 + 2 cycles down a column
    int in = m.add_dram("b", DType::BF16, n);
    for (int c = 0; c < 16; ++c)
        m.add_sram(c, "b_tile", Space::WSRAM, DType::BF16, n);
    m.run([&](Core &core) {
        const std::vector<int> column = {1, 5, 9, 13};
        if (std::find(column.begin(), column.end(), core.id()) == column.end())
            return;
        core.barrier(column, "free");
        if (core.id() == 1) {
            Token t = core.broadcast(Link::Column, {5, 9, 13}, "b_tile", row(n), in, row(n), "b");
            core.dma_wait(t, "b done");
        }
        core.barrier(column, "landed");
    });
    Report r = m.finish();
    EXPECT_EQ(r.race_count, 0);
    EXPECT_EQ(r.core_cycles[1], 100 + 102 + 100);
    EXPECT_EQ(r.core_cycles[13], 100 + 102 + 100);
    EXPECT_EQ(r.core_cycles[0], 0);
    EXPECT_EQ(r.bound_cycles, 102); // the link's busy time counts in the bound
}

TEST(ZpuMesh, AReceiverThatReadsBeforeTheBarrierAfterTheSendersWaitRaces) {
    Mesh no_second(64);
    Report r = row_broadcast(no_second, true, false, true);
    ASSERT_GE(r.race_count, 1);
    EXPECT_TRUE(contains(r.races[0].str(), "broadcast 'leaf' (row link, core 0)"))
        << r.races[0].str();
    EXPECT_TRUE(contains(r.races[0].str(), "store")) << r.races[0].str();

    // The barrier is there, but the sender waits on the leaf only after it.
    Mesh late_wait(64);
    r = row_broadcast(late_wait, true, true, false);
    ASSERT_GE(r.race_count, 1);
    EXPECT_TRUE(contains(r.races[0].str(), "broadcast 'leaf'"));
}

TEST(ZpuMesh, ALeafIntoABufferTheReceiverMayStillReadRaces) {
    Mesh mesh(64);
    mesh.m.run([&](Core &core) {
        const Box all = row(mesh.n);
        if (core.id() == 0) {
            // No barrier before the leaf: core 1's read of `buf` is not ordered before it.
            Token leaf = core.broadcast(Link::Row, {1}, "buf", all, mesh.stage[0], all, "leaf");
            core.dma_wait(leaf, "leaf done");
            core.barrier({0, 1}, "buf landed");
        } else if (core.id() == 1) {
            core.dma_wait(core.dma_start(mesh.out, all, mesh.buf[1], all, "early read"), "read");
            core.barrier({0, 1}, "buf landed");
        }
    });
    Report r = mesh.m.finish();
    ASSERT_GE(r.race_count, 1);
    EXPECT_TRUE(contains(r.races[0].str(), "early read")) << r.races[0].str();
}

TEST(ZpuMesh, AReceiverNeverToldOfTheLeafRacesWithItsEnd) {
    Mesh mesh(64);
    mesh.m.run([&](Core &core) {
        if (core.id() == 0)
            core.dma_wait(
                core.broadcast(Link::Row, {1}, "buf", row(64), mesh.stage[0], row(64), "leaf"),
                "leaf done");
    });
    Report r = mesh.m.finish();
    ASSERT_EQ(r.race_count, 1);
    EXPECT_TRUE(contains(r.races[0].str(), "no barrier after the sender's wait"))
        << r.races[0].str();
}

TEST(ZpuMesh, CoresWaitingAtBarriersNoCoreReachesDeadlock) {
    Mesh mesh(64);
    bool after = false;
    mesh.m.run([&](Core &core) {
        if (core.id() == 1) {
            core.barrier({0, 1}, "never met");
            after = true;
        }
    });
    Report r = mesh.m.finish();
    EXPECT_FALSE(after);
    EXPECT_TRUE(r.deadlock);
    EXPECT_TRUE(contains(r.deadlock_message, "core 1")) << r.deadlock_message;
    EXPECT_TRUE(contains(r.deadlock_message, "barrier 'never met' waits for core 0"))
        << r.deadlock_message;
}

TEST(ZpuMesh, ProgramsWithoutBarriersRunAsTheyWouldAlone) {
    auto program = [](Core &core, int in, int stage) {
        for (int i = 0; i <= core.id(); ++i)
            core.dma_wait(core.dma_start(stage, row(64), in, row(64), "load"), "loaded");
    };
    Mesh alone(64), together(64);
    for (int c = 0; c < 4; ++c)
        program(alone.m.core(c), alone.in, alone.stage[size_t(c)]);
    together.m.run(
        [&](Core &core) { program(core, together.in, together.stage[size_t(core.id())]); });
    Report a = alone.m.finish(), b = together.m.finish();
    EXPECT_EQ(a.core_cycles, b.core_cycles);
    EXPECT_EQ(a.cycles, b.cycles);
}

TEST(ZpuMesh, AFailingCoreStopsTheOthersAndItsErrorComesOut) {
    Mesh mesh(64);
    EXPECT_THROW(mesh.m.run([&](Core &core) {
        if (core.id() == 0)
            core.barrier({0, 1}, "waits for ever");
        if (core.id() == 1)
            throw SimError("core 1 fails");
    }),
                 SimError);
}

TEST(ZpuMesh, ABroadcastOutsideTheLinksRoutesOrItsRowIsAUserError) {
    Mesh mesh(64);
    int a = mesh.m.add_sram(0, "a", Space::ASRAM, DType::F32, 64);
    (void)a;
    for (int c = 1; c < 4; ++c)
        mesh.m.add_sram(c, "a", Space::ASRAM, DType::F32, 64);
    auto message = [&](const std::function<void(Core &)> &body) {
        try {
            body(mesh.m.core(0));
        } catch (const SimError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    // DRAM -> ASRAM has no row route (HLink takes RSRAM only).
    EXPECT_TRUE(contains(
        message([&](Core &c) { c.broadcast(Link::Row, {1}, "a", row(64), mesh.in, row(64), "x"); }),
        "the row link does not go from DRAM to ASRAM"));
    // Core 2 is in core 0's column, not its row.
    EXPECT_TRUE(contains(message([&](Core &c) {
                             c.broadcast(Link::Row, {2}, "buf", row(64), mesh.stage[0], row(64),
                                         "x");
                         }),
                         "core 2 is not in this core's mesh row"));
    EXPECT_TRUE(contains(message([&](Core &c) {
                             c.broadcast(Link::Row, {1}, "nothing", row(64), mesh.stage[0], row(64),
                                         "x");
                         }),
                         "core 1 has no buffer named 'nothing'"));
    EXPECT_TRUE(contains(message([&](Core &c) {
                             c.barrier({0, 1}, "outside");
                         }),
                         "a barrier needs the cores' programs run by Machine::run"));
}

} // namespace
} // namespace tandem::sim
