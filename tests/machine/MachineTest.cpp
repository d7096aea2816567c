// Machine descriptions as data (machines/*.json, tandem/Machine.h): every parameter has a unit and
// a public source; the machine models' defaults are the descriptions' values; a target string
// overrides them or loads a file; and the public rules the models follow, each pinned against its
// formula.
#include "App.h"
#include "Run.h"
#include "sim/Ascend.h"
#include "sim/Hopper.h"
#include "sim/Zpu.h"
#include "tandem/AsyncIR.h"
#include "tandem/Target.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

using namespace tandem;

namespace {

TEST(MachineDescription, EveryParameterHasAUnitAndASource) {
    for (const char *target : {"zpu", "hopper", "ascend"}) {
        MachineDescription d = MachineDescription::builtin(target);
        EXPECT_EQ(d.target(), target);
        EXPECT_GE(d.version(), 1) << target;
        EXPECT_GE(d.params().size(), 10u) << target;
        for (const auto &[key, p] : d.params()) {
            EXPECT_FALSE(p.unit.empty()) << target << " " << key;
            EXPECT_FALSE(p.source.empty()) << target << " " << key;
        }
    }
    EXPECT_THROW(MachineDescription::builtin("tpu"), Error);
}

TEST(MachineDescription, RolesNameParametersOfTheDescription) {
    // Which parameter counts the parallel units and which sizes the vector memory is data, so the
    // compiler asks the description instead of switching on the target.
    for (const char *target : {"zpu", "hopper", "ascend"}) {
        MachineDescription d = MachineDescription::builtin(target);
        for (const char *role : {"units", "vector_memory"}) {
            EXPECT_TRUE(d.params().count(d.role(role))) << target << " " << role;
        }
        EXPECT_THROW(d.role("warp_size"), Error);
    }
    EXPECT_EQ(MachineDescription::builtin("hopper").role("units"), "sms");
}

/** Every field a description sets, by name, as a number. */
template <class Params> std::map<std::string, double> values(Params p) {
    std::map<std::string, double> v;
    p.fields([&](const char *name, auto &field) { v[name] = double(field); });
    return v;
}

/** The model's defaults equal the built-in description, field by field, and the description has
 * every field the model reads. */
template <class Params> void expect_defaults_are(const std::string &target) {
    const Target t = Target::parse(target);
    const std::map<std::string, double> defaults = values(Params{}),
                                        described = values(Params::from(t.lookup()));
    EXPECT_GE(defaults.size(), 10u);
    for (const auto &[name, value] : defaults) {
        EXPECT_TRUE(t.machine.params().count(name)) << target << " " << name;
        EXPECT_EQ(described.at(name), value) << target << " " << name;
    }
}

TEST(MachineDescription, ModelDefaultsAreTheDescriptions) {
    expect_defaults_are<sim::ZpuParams>("zpu");
    expect_defaults_are<sim::hopper::HopperParams>("hopper");
    expect_defaults_are<sim::ascend::AscendParams>("ascend");
    EXPECT_EQ(sim::ZpuParams::from(Target::parse("zpu").lookup()).route,
              sim::ZpuParams::default_routes());
}

TEST(MachineDescription, TargetStringOverrides) {
    Target t = Target::parse("zpu:cores=4,dma_channels=1");
    EXPECT_EQ(t.units(), 4);
    EXPECT_EQ(sim::ZpuParams::from(t.lookup()).dma_channels, 1);
    EXPECT_EQ(t.machine.params().at("cores").source, "set by the target string");
    EXPECT_EQ(Target::parse("hopper:sms=8").units(), 8);
    EXPECT_EQ(Target::parse("ascend:cube_cores=2").units(), 2);
    EXPECT_EQ(Target::parse("ascend:vector_cores=6").vector_units(), 6);
    EXPECT_EQ(Target::parse("ascend").vector_units(), 48);     // 910B: two AIV per AIC
    EXPECT_EQ(Target::parse("zpu:cores=3").vector_units(), 3); // no separate vector cores

    auto message = [](const std::string &text) {
        try {
            Target::parse(text);
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(message("zpu:bogus=1").find("unknown parameter 'bogus'"), std::string::npos);
    EXPECT_NE(message("zpu:cores=abc").find("needs a number"), std::string::npos);
    EXPECT_NE(message("zpu:cores=0").find("'cores' must be at least 1"), std::string::npos);
    EXPECT_NE(message("zpu:vector_fixed=-1").find("at least 0"), std::string::npos);
    EXPECT_EQ(message("zpu:vector_fixed=0"), "");
    EXPECT_NE(message("zpu:cores").find("not key=value"), std::string::npos);
    EXPECT_NE(message("zpu:file=/nonexistent.json").find("cannot read"), std::string::npos);
}

TEST(MachineDescription, FileOverrides) {
    const std::string path = ::testing::TempDir() + "tandem_machine_test.json";
    std::ofstream(path) << R"({"params": {"rsram_bytes": 1000000,
                                 "dma_channels": {"value": 1, "source": "my board"}}})";
    Target t = Target::parse("zpu:file=" + path);
    EXPECT_EQ(t.vector_memory_bytes(), 1000000);
    EXPECT_EQ(t.machine.params().at("dma_channels").source, "my board");
    EXPECT_EQ(t.machine.params().at("rsram_bytes").source, path);
    EXPECT_EQ(t.machine.params().at("cores").value, 16); // untouched
    std::ofstream(path) << R"({"target": "hopper", "params": {"sms": 1}})";
    EXPECT_THROW(Target::parse("zpu:file=" + path), Error);
    std::ofstream(path) << R"({"params": {"tensor_cores": 2}})";
    EXPECT_THROW(Target::parse("zpu:file=" + path), Error);
    std::remove(path.c_str());
}

// ---- the public rules the models follow ----

TEST(ZpuRules, MmaMinimumBlockCount) {
    // SUNMMIO/Tilelang cost_model.cc: 21 + (7 fp32 | 8 bf16) + ceil(m/16) ceil(n/32)
    // max(ceil(k/32), b) + 70, b = 1 when m <= 16 and n <= 32, else 4.
    sim::ZpuParams p;
    EXPECT_EQ(p.mma_cycles(16, 32, 32, sim::DType::F32), 21 + 7 + 1 * 1 * 1 + 70);
    EXPECT_EQ(p.mma_cycles(32, 32, 32, sim::DType::F32), 21 + 7 + 2 * 1 * 4 + 70);
    EXPECT_EQ(p.mma_cycles(16, 64, 32, sim::DType::BF16), 21 + 8 + 1 * 2 * 4 + 70);
    EXPECT_EQ(p.mma_cycles(256, 256, 128, sim::DType::F32), 21 + 7 + 16 * 8 * 4 + 70);
    EXPECT_EQ(p.mma_cycles(256, 256, 512, sim::DType::F32), 21 + 7 + 16 * 8 * 16 + 70);
}

TEST(ZpuRules, SramSizes) {
    // SUNMMIO/Tilelang-Mesh sunmmio_driver.py: RSRAM is 1,536,000 bytes, not 1.5 MiB.
    sim::ZpuParams p;
    EXPECT_EQ(p.capacity(sim::Space::ASRAM), 1048576);
    EXPECT_EQ(p.capacity(sim::Space::WSRAM), 2097152);
    EXPECT_EQ(p.capacity(sim::Space::RSRAM), 1536000);
}

/** The MMAs and the copies of a kernel's control stream. */
struct Ops : Halide::Internal::IRVisitor {
    std::vector<ir::MmaOp> mmas;
    std::vector<ir::CopyOp> copies;
    using Halide::Internal::IRVisitor::visit;
    void visit(const Halide::Internal::Evaluate *op) override {
        ir::MmaOp m;
        ir::CopyOp c;
        if (ir::as_mma(op, &m))
            mmas.push_back(m);
        if (ir::as_copy(op, &c))
            copies.push_back(c);
    }
};

TEST(ZpuRules, AOperandsGoThroughRsramAndBf16RunsTwoPasses) {
    // No DRAM -> ASRAM route: A is loaded into RSRAM, each MMA's box hops to ASRAM; the bf16 tensor
    // core reads A from the north bank only, so 64 rows run as two passes of 32.
    const apps::App &gemm = apps::gemm_app();
    apps::Params params = apps::with_defaults(
        gemm,
        apps::Params(
            {{"M", "64"}, {"N", "64"}, {"K", "64"}, {"TM", "64"}, {"TN", "64"}, {"TK", "64"}}),
        "zpu");
    Kernel k = apps::compile_app(gemm, params, "sync", Target::parse("zpu"));
    Ops ops;
    k.body.accept(&ops);
    ASSERT_EQ(ops.mmas.size(), 2u);
    for (const ir::MmaOp &m : ops.mmas) {
        EXPECT_EQ(m.a.substr(m.a.size() - 6), ".asram") << m.a;
        EXPECT_TRUE(is_const(m.m, 32)) << m.m;
    }
    int hops = 0, dram_to_asram = 0;
    for (const ir::CopyOp &c : ops.copies) {
        const SramBuffer *dst = k.buffer(c.dst), *src = k.buffer(c.src);
        hops += dst && src && src->space == sim::Space::RSRAM && dst->space == sim::Space::ASRAM;
        dram_to_asram += dst && !src && dst->space == sim::Space::ASRAM;
    }
    EXPECT_EQ(hops, 2);
    EXPECT_EQ(dram_to_asram, 0);
    apps::RunOptions o;
    o.params = params;
    o.schedule = "sync";
    apps::RunResult r = apps::run(gemm, o);
    EXPECT_TRUE(r.correct);
    EXPECT_EQ(r.report.race_count, 0);
}

TEST(HopperRules, HbmAndL2AreSharedByTheGrid) {
    // The measured 2.93 TB/s of HBM3 at 1.83 GHz, shared by the SMs that run at once; L2 hits at
    // the L2's measured rate.
    sim::hopper::HopperParams p;
    const int64_t bytes = 1 << 20;
    EXPECT_EQ(p.tma_cycles(bytes, 0, 132) - p.tma_latency, (bytes * 132 + 1599) / 1600);
    EXPECT_EQ(p.tma_cycles(0, bytes, 132) - p.tma_latency, (bytes * 132 + 6099) / 6100);
    // One SM alone is limited by its own port, not by the device.
    EXPECT_EQ(p.tma_cycles(bytes, 0, 1) - p.tma_latency, bytes / 64);
}

} // namespace
