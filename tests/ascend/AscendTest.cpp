// The emitted AscendC (generated at build time by tandem-cli emit, compiled against the CPU runtime
// header) computes the same bits in the same cycles as the executor of the async Stmt, and every
// flag pair it has is needed: the kernel with that pair left out races, deadlocks or misuses a
// flag.
#include "AscendKernels.h"

#include "App.h"
#include "Run.h"
#include "ascend/Emitter.h"
#include "ascend/Executor.h"
#include "common/Evaluator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <sstream>

using namespace tandem;
using ascend_test::EmittedKernel;

namespace ascend_test {
void PrintTo(const EmittedKernel &e, std::ostream *os) {
    *os << e.name << " (" << e.app << ", " << e.schedule;
    if (e.dropped_pair >= 0)
        *os << ", flag pair " << e.dropped_pair << " dropped";
    *os << ")";
}
} // namespace ascend_test

namespace {

apps::Params parse_params(const std::string &text) {
    apps::Params p;
    std::stringstream ss(text);
    for (std::string kv; ss >> kv;)
        p.set(kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1));
    return p;
}

Kernel compile(const EmittedKernel &e) {
    const apps::App &app = apps::find_app(e.app);
    apps::Params params = apps::with_defaults(app, parse_params(e.params), "ascend");
    return apps::compile_app(app, params, e.schedule, Target::parse("ascend"));
}

std::map<std::string, int> add_arguments(const Kernel &k, sim::ascend::Machine &m, bool numerics) {
    return apps::add_arguments(
        k, [&](const std::string &n, sim::DType t, int64_t e) { return m.add_gm(n, t, e); },
        [&](int id) { return m.data(id); }, numerics, 7);
}

std::vector<int> in_argument_order(const Kernel &k, const std::map<std::string, int> &ids) {
    std::vector<int> r;
    for (const KernelArg &a : k.args)
        r.push_back(ids.at(a.name));
    return r;
}

class EmittedAscend : public ::testing::TestWithParam<EmittedKernel> {};

TEST_P(EmittedAscend, MatchesExecutorBitForBitAndCycleForCycle) {
    const EmittedKernel &e = GetParam();
    Kernel k = compile(e);
    sim::ascend::Machine executed(sim::ascend::AscendParams::from(k.target.lookup())), emitted(sim::ascend::AscendParams::from(k.target.lookup()));
    auto ids_x = add_arguments(k, executed, true);
    auto ids_e = add_arguments(k, emitted, true);
    ascend_backend::execute(k, executed, ids_x);
    e.launch(emitted, in_argument_order(k, ids_e), k.vector_units_only);
    sim::Report rx = executed.finish(), re = emitted.finish();

    EXPECT_EQ(re.race_count, 0) << (re.races.empty() ? "" : re.races[0].str());
    EXPECT_FALSE(re.deadlock) << re.deadlock_message;
    EXPECT_EQ(re.cycles, rx.cycles);
    EXPECT_EQ(re.bound_cycles, rx.bound_cycles);
    EXPECT_EQ(re.core_cycles, rx.core_cycles);
    ASSERT_EQ(re.busy.size(), rx.busy.size());
    for (size_t i = 0; i < re.busy.size(); i++) {
        EXPECT_EQ(re.busy[i].engine, rx.busy[i].engine);
        EXPECT_EQ(re.busy[i].busy, rx.busy[i].busy) << re.busy[i].engine;
    }
    const KernelArg &out = k.args.back();
    size_t bytes = out.elements() * sim::bytes_of(dtype_of(out.type));
    EXPECT_EQ(std::memcmp(executed.data(ids_x[out.name]), emitted.data(ids_e[out.name]), bytes), 0);
    // And the output is really written (the poison is NaN).
    const void *data = emitted.data(ids_e[out.name]);
    bool all_written = true;
    for (int64_t i = 0; i < out.elements(); i++) {
        float v = dtype_of(out.type) == sim::DType::BF16
                      ? sim::bf16_to_float(static_cast<const uint16_t *>(data)[i])
                      : static_cast<const float *>(data)[i];
        all_written = all_written && std::isfinite(v);
    }
    EXPECT_TRUE(all_written);
}

INSTANTIATE_TEST_SUITE_P(Ascend, EmittedAscend, ::testing::ValuesIn(ascend_test::emitted_kernels()),
                         [](const ::testing::TestParamInfo<EmittedKernel> &info) {
                             return std::string(info.param.name);
                         });

// ---- mutation: every flag pair is needed ----

class AscendMutant : public ::testing::TestWithParam<EmittedKernel> {};

TEST_P(AscendMutant, DroppedFlagPairIsDetected) {
    const EmittedKernel &e = GetParam();
    Kernel k = compile(e);
    std::vector<ascend_backend::FlagPair> pairs = ascend_backend::flag_pairs(k);
    ASSERT_LT(e.dropped_pair, int(pairs.size()));
    const ascend_backend::FlagPair &pair = pairs[size_t(e.dropped_pair)];
    // Timing and hazards do not need the data: run without numerics.
    sim::ascend::Machine machine(sim::ascend::AscendParams::from(k.target.lookup()), false);
    auto ids = add_arguments(k, machine, false);
    std::string detected;
    try {
        e.launch(machine, in_argument_order(k, ids), k.vector_units_only);
        sim::Report r = machine.finish();
        if (r.deadlock)
            detected = "deadlock: " + r.deadlock_message;
        else if (r.race_count)
            detected = "race (" + std::to_string(r.race_count) + "): " + r.races[0].str();
    } catch (const sim::SimError &error) {
        detected = std::string("SimError: ") + error.what(); // e.g. a flag set twice without a wait
    }
    EXPECT_FALSE(detected.empty())
        << e.name << " without flag pair " << e.dropped_pair << " (" << pair.set << " / "
        << pair.wait << ") runs clean: no race, no deadlock, no error";
    std::cout << "[ mutant ] " << e.name << " pair " << e.dropped_pair << " (" << pair.set << " / "
              << pair.wait << "): "
              << (!detected.empty() ? detected.substr(0, 240) : "NOT DETECTED")
              << "\n";
}

std::string mutant_name(const ::testing::TestParamInfo<EmittedKernel> &info) {
    return std::string(info.param.name) + "_drop" + std::to_string(info.param.dropped_pair);
}

INSTANTIATE_TEST_SUITE_P(Ascend, AscendMutant, ::testing::ValuesIn(ascend_test::mutant_kernels()),
                         mutant_name);

/** Every pair of each mutated kernel has its mutant (none missing from the build). */
TEST(AscendMutants, OneMutantPerFlagPair) {
    std::map<std::string, std::pair<const EmittedKernel *, int>> mutants;
    for (const EmittedKernel &m : ascend_test::mutant_kernels()) {
        auto &[kernel, count] = mutants[m.name];
        kernel = &m;
        EXPECT_EQ(m.dropped_pair, count) << m.name;
        count++;
    }
    EXPECT_FALSE(mutants.empty());
    for (const auto &[name, entry] : mutants) {
        Kernel k = compile(*entry.first);
        EXPECT_GT(entry.second, 0) << name;
        EXPECT_EQ(size_t(entry.second), ascend_backend::flag_pairs(k).size()) << name;
    }
}

} // namespace
