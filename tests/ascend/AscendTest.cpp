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
#include <map>
#include <set>
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
        k, apps::static_extents(k),
        [&](const std::string &n, sim::DType t, int64_t e) { return m.add_gm(n, t, e); },
        [&](int id) { return m.data(id); }, numerics, 7);
}

/** The kernel's GM buffers in argument order, then a mix kernel's workspace, then a runtime-shape
 * kernel's tiling data (its extents: the static ones here, the estimates of a runtime shape). */
std::vector<int> in_argument_order(const Kernel &k, const std::map<std::string, int> &ids,
                                   sim::ascend::Machine &m) {
    std::vector<int> r;
    for (const KernelArg &a : k.args)
        r.push_back(ids.at(a.name));
    if (int64_t bytes = ascend_backend::workspace_bytes(k))
        r.push_back(m.add_gm("workspace", sim::DType::F32,
                             bytes / 4)); // the model types GM: f32 workspaces
    if (k.has_runtime_shapes()) {
        const std::vector<int32_t> tiling = ascend_backend::tiling(k, apps::static_extents(k));
        r.push_back(m.add_gm("tiling", sim::DType::I32, int64_t(tiling.size())));
        if (void *data = m.data(r.back()))
            std::memcpy(data, tiling.data(), tiling.size() * sizeof(int32_t));
    }
    return r;
}

/** The launch's KernelMode (EmittedKernel::launch). */
int kind(const Kernel &k) {
    return k.mix ? 2 : k.vector_units_only ? 1 : 0;
}

class EmittedAscend : public ::testing::TestWithParam<EmittedKernel> {};

TEST_P(EmittedAscend, MatchesExecutorBitForBitAndCycleForCycle) {
    const EmittedKernel &e = GetParam();
    Kernel k = compile(e);
    sim::ascend::Machine executed(sim::ascend::AscendParams::from(k.target.lookup())),
        emitted(sim::ascend::AscendParams::from(k.target.lookup()));
    auto ids_x = add_arguments(k, executed, true);
    auto ids_e = add_arguments(k, emitted, true);
    ascend_backend::execute(k, executed, ids_x, k.bind_shapes(apps::static_extents(k)));
    e.launch(emitted, in_argument_order(k, ids_e, emitted), kind(k));
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
        e.launch(machine, in_argument_order(k, ids, machine), kind(k));
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
              << pair.wait
              << "): " << (!detected.empty() ? detected.substr(0, 240) : "NOT DETECTED") << "\n";
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

namespace {

// Every AscendC name the emitter can produce, with its public reference (the AscendC headers and
// docs in mirror-cann/asc-devkit, as docs/ascendc_api_facts.md cites them). An emitted name not
// in the list fails: a new call comes with its reference; Tandem has no calls of its own.
const std::map<std::string, std::string> &ascendc_references() {
    static const std::map<std::string, std::string> refs = {
        {"AscendC::DataCopy", "include/basic_api/kernel_operator_data_copy_intf.h; docs: DataCopy"},
        {"AscendC::DataCopyParams", "include/basic_api/kernel_struct_data_copy.h"},
        {"AscendC::DataCopyPad",
         "docs: GMToUB / UBToGM non-aligned copies (DataCopyPad), Atlas A2 prototypes"},
        {"AscendC::DataCopyExtParams",
         "include/basic_api/kernel_struct_data_copy.h (blockLen and GM strides in bytes)"},
        {"AscendC::DataCopyPadExtParams", "include/basic_api/kernel_struct_data_copy.h"},
        {"AscendC::Nd2NzParams",
         "include/basic_api/kernel_struct_data_copy.h; docs: DataCopy (GMToL1 ND2NZ)"},
        {"AscendC::LoadData", "include/basic_api/kernel_operator_mm_intf.h; docs: LoadData_2D"},
        {"AscendC::LoadData2DParams", "include/basic_api/kernel_struct_mm.h"},
        {"AscendC::Mmad", "include/basic_api/kernel_operator_mm_intf.h; docs: Mmad"},
        {"AscendC::MmadParams", "include/basic_api/kernel_struct_mm.h"},
        {"AscendC::Fixpipe", "docs: Fixpipe (L0C to GM)"},
        {"AscendC::FixpipeParamsV220", "include/basic_api/kernel_struct_fixpipe.h"},
        {"AscendC::CFG_ROW_MAJOR", "include/basic_api/kernel_struct_fixpipe.h (FixpipeConfig)"},
        {"AscendC::F322BF16", "docs: Fixpipe, QuantMode_t"},
        {"AscendC::NoQuant", "docs: Fixpipe, QuantMode_t"},
        {"AscendC::SetFlag", "include/basic_api/kernel_operator_block_sync_intf.h"},
        {"AscendC::WaitFlag", "include/basic_api/kernel_operator_block_sync_intf.h"},
        {"AscendC::PipeBarrier",
         "include/basic_api/kernel_operator_block_sync_intf.h; docs: PipeBarrier(ISASI)"},
        {"AscendC::HardEvent", "impl/basic_api/kernel_event.h"},
        {"AscendC::GetBlockIdx",
         "include/basic_api/kernel_operator_sys_var_intf.h; docs: GetBlockIdx"},
        {"AscendC::GlobalTensor", "include/basic_api/kernel_tensor.h"},
        {"AscendC::LocalTensor", "include/basic_api/kernel_tensor.h"},
        {"AscendC::TBuf", "include/basic_api/kernel_tpipe.h"},
        {"AscendC::TPipe",
         "include/basic_api/kernel_tpipe.h; impl/basic_api/kernel_tpipe_impl.h (Destroy)"},
        {"AscendC::TPosition", "include/basic_api/kernel_tpipe.h"},
        {"AscendC::Add", "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Add"},
        {"AscendC::Sub", "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Sub"},
        {"AscendC::Mul", "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Mul"},
        {"AscendC::Div", "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Div"},
        {"AscendC::Max", "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Max"},
        {"AscendC::Min", "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Min"},
        {"AscendC::Adds",
         "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Adds"},
        {"AscendC::Muls",
         "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Muls"},
        {"AscendC::Maxs",
         "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Maxs"},
        {"AscendC::Mins",
         "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Mins"},
        {"AscendC::Duplicate",
         "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Duplicate"},
        {"AscendC::Sqrt",
         "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Sqrt"},
        {"AscendC::Abs", "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Abs"},
        {"AscendC::Exp", "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Exp"},
        {"AscendC::Ln", "include/basic_api/kernel_operator_vec_*_intf.h (count form); docs: Ln"},
        {"AscendC::BinaryRepeatParams",
         "include/basic_api/kernel_struct_binary.h; docs: BinaryRepeatParams, Add (tensor "
         "high-dimensional slicing)"},
        {"AscendC::UnaryRepeatParams",
         "include/basic_api/kernel_struct_unary.h; docs: UnaryRepeatParams, Adds"},
        {"AscendC::Brcb", "docs: Brcb (Atlas A2: supported)"},
        {"AscendC::BrcbRepeatParams", "include/basic_api/kernel_struct_brcb.h"},
        {"AscendC::ReduceSum",
         "docs: ReduceSum (count form: dst[0]; sharedTmpBuffer unused on Atlas A2)"},
        {"AscendC::Compare", "docs: Compare (count a multiple of 256 bytes)"},
        {"AscendC::CMPMODE", "impl/basic_api/utils/kernel_utils_mode.h"},
        {"AscendC::Select", "docs: Select (VSEL_TENSOR_TENSOR_MODE: a 1 bit selects src0)"},
        {"AscendC::SELMODE", "impl/basic_api/utils/kernel_utils_mode.h"},
        {"AscendC::Cast", "include/basic_api/kernel_operator_vec_vconv_intf.h; docs: Cast (Atlas "
                          "A2: float -> bfloat16_t)"},
        {"AscendC::RoundMode", "docs: Cast, RoundMode (CAST_RINT)"},
        // Scalar conversions (docs: 附录/接口变更说明: ToBfloat16 and ToFloat, the scalar Cast's
        // earlier names).
        {"AscendC::ToBfloat16",
         "docs: api/附录/接口变更说明 (ToBfloat16: scalar float -> bfloat16_t)"},
        {"AscendC::ToFloat", "docs: api/附录/接口变更说明 (ToFloat: scalar -> float)"},
        {"KERNEL_TASK_TYPE_DEFAULT",
         "impl/basic_api/utils/kernel_utils_macros.h; docs: Kernel-Tiling"},
        {"KERNEL_TYPE_AIV_ONLY", "impl/basic_api/utils/kernel_utils_macros.h (KernelMetaType)"},
        {"KERNEL_TYPE_AIC_ONLY", "impl/basic_api/utils/kernel_utils_macros.h (KernelMetaType)"},
        {"KERNEL_TYPE_MIX_AIC_1_2",
         "impl/basic_api/utils/kernel_utils_macros.h (KernelMetaType); docs: Kernel-Tiling"},
        {"ASCEND_IS_AIC", "impl/utils/sys_macros.h"},
        {"ASCEND_IS_AIV", "impl/utils/sys_macros.h"},
        {"AscendC::CrossCoreSetFlag",
         "include/basic_api/kernel_operator_block_sync_intf.h; docs: CrossCoreSetFlag(ISASI)"},
        {"AscendC::CrossCoreWaitFlag",
         "include/basic_api/kernel_operator_block_sync_intf.h; docs: CrossCoreWaitFlag(ISASI)"},
        {"AscendC::GetUserWorkspace", "docs: GetUserWorkspace"},
        {"AscendC::ReduceMax",
         "docs: ReduceMax (count form; sharedTmpBuffer used on Atlas A2; dst 8-byte aligned)"},
        {"AscendC::ReduceMin",
         "docs: ReduceMin (count form; sharedTmpBuffer used on Atlas A2; dst 8-byte aligned)"},
        {"AscendC::WholeReduceMax",
         "include/basic_api/kernel_operator_vec_reduce_intf.h; docs: WholeReduceMax"},
        {"AscendC::WholeReduceMin",
         "include/basic_api/kernel_operator_vec_reduce_intf.h; docs: WholeReduceMin"},
        {"AscendC::WholeReduceSum",
         "include/basic_api/kernel_operator_vec_reduce_intf.h; docs: WholeReduceSum (ReduceRepeat "
         "at HEAD)"},
        {"AscendC::BlockReduceSum", "include/basic_api/kernel_operator_vec_reduce_intf.h; docs: "
                                    "BlockReduceSum (ReduceDataBlock at HEAD)"},
        {"AscendC::BlockReduceMax", "include/basic_api/kernel_operator_vec_reduce_intf.h; docs: "
                                    "BlockReduceMax (ReduceDataBlock at HEAD)"},
        {"AscendC::BlockReduceMin", "include/basic_api/kernel_operator_vec_reduce_intf.h; docs: "
                                    "BlockReduceMin (ReduceDataBlock at HEAD)"},
        {"AscendC::ReduceOrder", "impl/basic_api/utils/kernel_utils_mode.h"},
        // Gather's byte offsets: int32_t tensors reinterpreted as uint32_t (LocalTensor::
        // ReinterpretCast), the src tensor sized by LocalTensor::SetSize.
        {"AscendC::Gather",
         "docs: Gather (Atlas A2: float; uint32_t byte offsets, srcBaseAddr in bytes); "
         "impl/basic_api/dav_c220/kernel_operator_vec_gather_impl.h"},
        {"AscendC::CreateVecIndex",
         "docs: CreateVecIndex (atlasascendc_api_07_0090; Atlas A2: int16_t, half, int32_t, "
         "float)"},
    };
    return refs;
}

TEST(AscendApi, EveryEmittedCallIsRealAscendCWithItsReference) {
    std::set<std::string> seen;
    for (const EmittedKernel &e : ascend_test::emitted_kernels()) {
        const std::string code = ascend_backend::emit_ascendc(compile(e), e.name);
        for (const char *prefix : {"AscendC::", "tandem_ascend::", "KERNEL_", "ASCEND_IS_"}) {
            for (size_t at = code.find(prefix); at != std::string::npos;
                 at = code.find(prefix, at + 1)) {
                if (at > 0 && (std::isalnum(static_cast<unsigned char>(code[at - 1])) ||
                               code[at - 1] == '_' || code[at - 1] == ':'))
                    continue; // inside a longer name
                size_t end = at + std::string(prefix).size();
                while (end < code.size() &&
                       (std::isalnum(static_cast<unsigned char>(code[end])) || code[end] == '_'))
                    end++;
                seen.insert(code.substr(at, end - at));
            }
        }
    }
    std::vector<std::string> real;
    for (const std::string &name : seen) {
        if (ascendc_references().count(name))
            real.push_back(name);
        else
            ADD_FAILURE() << name << " is emitted but has no public AscendC reference here";
    }
    std::cout << "emitted AscendC (" << real.size() << "):";
    for (const std::string &n : real)
        std::cout << " " << n;
    std::cout << "\n";
    // The cube path is AscendC's own: none of its calls is Tandem's.
    for (const char *cube :
         {"AscendC::Nd2NzParams", "AscendC::LoadData2DParams", "AscendC::MmadParams",
          "AscendC::FixpipeParamsV220", "KERNEL_TYPE_AIV_ONLY", "KERNEL_TYPE_AIC_ONLY",
          "KERNEL_TYPE_MIX_AIC_1_2", "AscendC::CrossCoreSetFlag", "AscendC::CrossCoreWaitFlag"})
        EXPECT_TRUE(seen.count(cube)) << cube << " is not emitted by any test kernel";
}

} // namespace
