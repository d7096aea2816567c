// The emitted ZPU C++ (generated at build time by tandem-cli emit, compiled against the runtime
// header) computes the same bits in the same cycles as the executor of the async Stmt.
#include "App.h"
#include "Run.h"
#include "zpu/Executor.h"
#include "zpu/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#define TANDEM_EMITTED(name, app, schedule, params)                                                \
    const std::vector<zpu::BufferDecl> &name##_buffers();                                          \
    void name(zpu::Context &ctx);
#include "registry.inc"
#undef TANDEM_EMITTED

using namespace tandem;

namespace {

struct Emitted {
    const char *name, *app, *schedule, *params;
    const std::vector<zpu::BufferDecl> &(*buffers)();
    void (*kernel)(zpu::Context &);
};

const Emitted all[] = {
#define TANDEM_EMITTED(name, app, schedule, params)                                                \
    {#name, app, schedule, params, name##_buffers, name},
#include "registry.inc"
#undef TANDEM_EMITTED
};

void PrintTo(const Emitted &e, std::ostream *os) {
    *os << e.name << " (" << e.app << ", " << e.schedule << ")";
}

apps::Params parse_params(const std::string &text) {
    apps::Params p;
    std::stringstream ss(text);
    for (std::string kv; ss >> kv;)
        p.set(kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1));
    return p;
}

class EmittedKernel : public ::testing::TestWithParam<Emitted> {};

TEST_P(EmittedKernel, MatchesExecutorBitForBitAndCycleForCycle) {
    const Emitted &e = GetParam();
    const apps::App &app = apps::find_app(e.app);
    apps::Params params = apps::with_defaults(app, parse_params(e.params));
    Kernel k = apps::compile_app(app, params, e.schedule, Target::parse("zpu"));

    sim::Machine executed(sim::ZpuParams::from(k.target.lookup())),
        emitted(sim::ZpuParams::from(k.target.lookup()));
    auto ids_x = apps::add_arguments(k, executed, 7);
    auto ids_e = apps::add_arguments(k, emitted, 7);
    // A runtime-shape kernel runs at its estimates: the executor binds them by name, the emitted
    // code reads them from its context.
    zpu_backend::execute(k, executed, ids_x, k.bind_shapes(apps::static_extents(k)));
    std::vector<int> arguments;
    std::vector<std::vector<int64_t>> extents;
    for (const KernelArg &a : k.args) {
        arguments.push_back(ids_e[a.name]);
        extents.emplace_back(a.extents.begin(), a.extents.end());
    }
    zpu::run_on_all_cores(emitted, arguments, e.buffers(), e.kernel, extents);
    sim::Report rx = executed.finish(), re = emitted.finish();

    EXPECT_EQ(re.race_count, 0) << (re.races.empty() ? "" : re.races[0].str());
    EXPECT_FALSE(re.deadlock) << re.deadlock_message;
    EXPECT_EQ(re.cycles, rx.cycles);
    EXPECT_EQ(re.bound_cycles, rx.bound_cycles);
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

INSTANTIATE_TEST_SUITE_P(Zpu, EmittedKernel, ::testing::ValuesIn(all),
                         [](const ::testing::TestParamInfo<Emitted> &info) {
                             return std::string(info.param.name);
                         });

} // namespace
