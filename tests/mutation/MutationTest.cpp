// Protocol mutation testing on the zpu and hopper targets, and ascend's cross-core flags
// (Mutants.h): every mutant of a kernel's async Stmt - one wait deleted, one parity flipped, one
// version index shifted, one fence, arrive, expect, counter advance or cross-core flag dropped -
// run through the target's executor on its machine model must
// end in a race, a deadlock, a model error or a result the Halide reference rejects. A mutant that
// runs clean is a sync op the kernel does not need (the lowering should not emit it), a hole in
// the machine model, or an equivalent mutant: a shifted wait that waits for a later event than it
// needs, which is still a correct program, or, on Hopper, a fence before a store that threads make
// where TMA cannot (generic proxy: the emitter drops that fence) (see equivalent(); counted apart
// and printed).
//
// Each run happens at the model's own timing and, for warp-specialised Hopper kernels, again with
// the producer or the consumers paused before every wait, since a protocol must hold whatever the
// warp scheduler does. Prints "<target> <kernel>: mutants M, killed K, equivalent E" per kernel and
// a "[ mutant ]" line per mutant; TANDEM_MUTANT=n runs mutant n only and prints its Stmt.
#include "Mutants.h"

#include "App.h"
#include "Run.h"
#include "common/Backend.h"
#include "common/Evaluator.h"
#include "hopper/Executor.h"
#include "hopper/Plan.h"
#include "tandem/AsyncIR.h"
#include "zpu/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

using namespace tandem;

namespace {

struct KernelCase {
    std::string target; // Target::parse text
    std::string app, schedule;
    std::map<std::string, std::string> params;
    std::string name; // for the summary line and the test name
};

void PrintTo(const KernelCase &c, std::ostream *os) {
    *os << c.target << " " << c.name;
}

std::vector<KernelCase> kernel_cases() {
    std::vector<KernelCase> all;
    auto add = [&](const std::string &target, const std::string &app,
                   const std::vector<std::string> &schedules, const std::string &shape,
                   const std::map<std::string, std::string> &params) {
        for (const std::string &s : schedules)
            all.push_back({target, app, s, params, app + "_" + s + "_" + shape});
    };
    // Every loop runs at least three times more than a ring has versions on each core (CTA with
    // ping-pong, on a 4-SM Hopper), so that every sync op is needed at run time: square tiles with
    // more k steps than stages, and ragged shapes whose partitioned tail loops (the last row of
    // tiles, a k tail) are as long. Hopper without ping-pong runs a CTA per tile.
    const std::map<std::string, std::string> zpu_gemm = {{"M", "256"},   {"N", "256"}, {"K", "128"},
                                                         {"TM", "32"},   {"TN", "32"}, {"TK", "32"},
                                                         {"stages", "3"}};
    const std::map<std::string, std::string> zpu_gemm_ragged = {
        {"M", "40"},  {"N", "1544"}, {"K", "112"},   {"TM", "16"},
        {"TN", "32"}, {"TK", "32"},  {"stages", "2"}};
    const std::map<std::string, std::string> hopper_gemm = {
        {"M", "256"}, {"N", "256"}, {"K", "256"},   {"TM", "64"},
        {"TN", "64"}, {"TK", "32"}, {"stages", "3"}};
    const std::map<std::string, std::string> hopper_gemm_ragged = {
        {"M", "136"}, {"N", "1032"}, {"K", "240"},   {"TM", "64"},
        {"TN", "64"}, {"TK", "32"},  {"stages", "3"}};
    const std::map<std::string, std::string> stream = {
        {"W", "256"}, {"H", "192"}, {"TX", "64"}, {"TY", "16"}};
    const std::map<std::string, std::string> stream_ragged = {
        {"W", "3066"}, {"H", "42"}, {"TX", "64"}, {"TY", "16"}};
    const std::vector<std::string> zpu_gemm_schedules = {"ws_pingpong", "ws", "pipelined", "sync"};
    const std::vector<std::string> hopper_gemm_schedules = {"ws_pingpong", "ws", "pipelined"};
    const std::vector<std::string> stream_schedules = {"double_buffered", "single_buffered",
                                                       "sync"};
    add("zpu", "gemm", zpu_gemm_schedules, "256x256x128", zpu_gemm);
    add("zpu", "gemm", zpu_gemm_schedules, "40x1544x112", zpu_gemm_ragged);
    add("zpu", "elementwise", stream_schedules, "256x192", stream);
    add("zpu", "elementwise", stream_schedules, "3066x42", stream_ragged);
    add("hopper:sms=4", "gemm", hopper_gemm_schedules, "256x256x256", hopper_gemm);
    add("hopper:sms=4", "gemm", hopper_gemm_schedules, "136x1032x240", hopper_gemm_ragged);
    // Clusters of two (B multicast, remote releases, the producer's tail; the second with a short
    // last group of tile rows: tile-less CTAs). Not `ws` on the ragged one: a CTA per tile, where 3
    // mutants of the last K step (its wgmma wait deleted or weakened before a release nothing
    // refills, the consumer's last ring advance) change nothing - equivalent, not classified here.
    std::map<std::string, std::string> clustered = hopper_gemm,
                                       clustered_ragged = hopper_gemm_ragged;
    clustered["cluster_m"] = clustered_ragged["cluster_m"] = "2";
    add("hopper:sms=4", "gemm", {"ws_pingpong", "ws"}, "256x256x256_cluster_m2", clustered);
    add("hopper:sms=4", "gemm", {"ws_pingpong"}, "136x1032x240_cluster_m2", clustered_ragged);
    // TK = 64: TMA moves the tiles, so B's boxes are multicast (TK = 32 tiles are thread-copied).
    // 5 tiles of 7 K steps per CTA: the ring ends at an odd position (at an even one a tail wait
    // shifted by a version only reorders the same two waits) that is no multiple of twice the
    // versions (a dropped advance would not show), and each consumer has two tiles or more.
    add("hopper:sms=4", "gemm", {"ws_pingpong"}, "128x640x448_tk64_cluster_m2",
        {{"M", "128"},
         {"N", "640"},
         {"K", "448"},
         {"TM", "64"},
         {"TN", "64"},
         {"TK", "64"},
         {"stages", "2"},
         {"cluster_m", "2"}});
    // ZPU mesh clusters: B broadcast down mesh columns of 4 (then 2, with a short last group of
    // tile rows: cores without a tile of their own); each mesh barrier and the sender's wait
    // dropped must show.
    std::map<std::string, std::string> column = zpu_gemm, column_ragged = zpu_gemm_ragged;
    column["cluster_m"] = "4";
    column_ragged["cluster_m"] = "2";
    add("zpu", "gemm", {"ws_pingpong", "ws"}, "256x256x128_cluster_m4", column);
    add("zpu", "gemm", {"ws_pingpong"}, "40x1544x112_cluster_m2", column_ragged);
    add("hopper:sms=4", "elementwise", stream_schedules, "256x192", stream);
    add("hopper:sms=4", "elementwise", stream_schedules, "3066x42", stream_ragged);
    // Ascend's cross-core flags: the conformance suite's chain (tests/conformance), whose
    // operand goes back to the cube; two AICs, so that each runs two output tiles of four J
    // blocks (every slot used three times or more); J and M ragged, so that the partitioned
    // tails hand back too.
    // FlashAttention (the conformance attention fused by its online softmax): 7 key blocks per
    // query tile, the last shifted back; two cores (CTAs) with two query tiles and more each.
    const std::map<std::string, std::string> fused_attention = {
        {"S", "70"}, {"L", "100"}, {"D", "16"}, {"TM", "16"}, {"TK", "16"}, {"TJ", "16"}};
    add("zpu:cores=2", "attention", {""}, "online_70x100x16", fused_attention);
    add("hopper:sms=2", "attention", {""}, "online_70x100x16", fused_attention);
    // (ascend: each key block's scores out, P back and P V out, three cross-core protocols)
    add("ascend:cube_cores=2,vector_cores=4", "attention", {""}, "online_70x100x16",
        fused_attention);
    add("ascend:cube_cores=2,vector_cores=4", "matmul_chain", {"pipelined"}, "80x64x120x32",
        {{"M", "80"},
         {"N", "64"},
         {"J", "120"},
         {"K", "32"},
         {"TM", "32"},
         {"TN", "32"},
         {"TJ", "32"},
         {"TK", "32"}});
    return all;
}

/** A compiled kernel, its inputs' reference output and the app's tolerance. */
struct Subject {
    const apps::App *app = nullptr;
    apps::Params params;
    Kernel kernel;
    Halide::Buffer<> expected;
    double tolerance = 0;
};

constexpr uint64_t kSeed = 3;

/** Pauses one side of a warp-specialised kernel for `cycles` before each of its tandem_waits (a
 * vector op that touches nothing): the producer (warpgroup 0) or the consumers. A protocol is
 * race- and deadlock-free however long any warpgroup is descheduled; one that only passes because
 * the producer sees each release in time is not. */
class PauseBeforeWaits : public Halide::Internal::IRMutator {
public:
    PauseBeforeWaits(bool producer, int64_t cycles) : producer(producer), cycles(cycles) {}

private:
    using IRMutator::visit;
    bool producer;
    int64_t cycles;
    int side = -1; // -1: outside the roles, 1: the paused side, 0: the other

    Halide::Internal::Stmt visit(const Halide::Internal::IfThenElse *op) override {
        using namespace Halide::Internal;
        const EQ *eq = op->condition.as<EQ>();
        if (side >= 0 || !eq || !ir::is_warpgroup(eq->a) || !is_const_zero(eq->b))
            return IRMutator::visit(op);
        side = producer ? 1 : 0;
        Stmt then_case = mutate(op->then_case);
        side = producer ? 0 : 1;
        Stmt else_case = mutate(op->else_case);
        side = -1;
        return IfThenElse::make(op->condition, then_case, else_case);
    }

    Halide::Internal::Stmt visit(const Halide::Internal::Evaluate *op) override {
        using namespace Halide::Internal;
        ir::WaitOp w;
        if (side != 1 || !ir::as_wait(Stmt(op), &w))
            return op;
        // Vector ops run at vector_flops_per_cycle; an empty nest computes nothing.
        Stmt nothing =
            For::make("pause.i", 0, 0, ForType::Serial, Halide::DeviceAPI::None, Evaluate::make(0));
        Stmt pause = ir::make_vector_op({"pause", Expr(int(cycles * 128)), {}}, nothing);
        return Block::make(pause, op);
    }
};

/** The kernel as run, then with each side of a warp-specialised Hopper kernel paused before its
 * waits (long enough for the other side to run a whole ring ahead). */
std::vector<std::pair<std::string, Kernel>> timings(const Kernel &kernel) {
    std::vector<std::pair<std::string, Kernel>> all = {{"", kernel}};
    if (kernel.target.name() == "hopper" && kernel.warpgroups > 1) {
        for (bool producer : {true, false}) {
            Kernel paused = kernel;
            paused.body = PauseBeforeWaits(producer, 20000).mutate(kernel.body);
            all.push_back({producer ? "with the producer paused before each wait, "
                                    : "with the consumers paused before each wait, ",
                           paused});
        }
    }
    return all;
}

/** What a run of `kernel` ended in; empty = clean. */
std::string detect_once(const Subject &subject, const Kernel &kernel);

/** What a run of `kernel` (the subject's kernel or one of its mutants) ended in under any of the
 * timings; empty = clean under all. */
std::string detect(const Subject &subject, const Kernel &kernel) {
    for (const auto &[how_timed, timed] : timings(kernel)) {
        std::string how = detect_once(subject, timed);
        if (!how.empty())
            return how_timed + how;
    }
    return "";
}

std::string detect_once(const Subject &subject, const Kernel &kernel) {
    sim::Report report;
    std::function<const void *(int)> data_of;
    std::map<std::string, int> ids;
    std::unique_ptr<sim::Machine> zpu;
    std::unique_ptr<sim::hopper::Machine> hopper;
    std::unique_ptr<Model> model;
    try {
        if (kernel.target.name() == "hopper") {
            hopper = std::make_unique<sim::hopper::Machine>(
                sim::hopper::HopperParams::from(kernel.target.lookup()), true);
            ids = apps::add_arguments(
                kernel, apps::static_extents(kernel),
                [&](const std::string &n, sim::DType t, int64_t e) {
                    return hopper->add_global(n, t, e);
                },
                [&](int id) { return hopper->data(id); }, true, kSeed);
            hopper_backend::execute(kernel, *hopper, ids);
            report = hopper->finish();
            data_of = [&](int id) { return hopper->data(id); };
        } else if (kernel.target.name() == "ascend") {
            model = backend_of(kernel.target).model(kernel.target, true, false);
            ids = apps::add_arguments(
                kernel, apps::static_extents(kernel),
                [&](const std::string &n, sim::DType t, int64_t e) {
                    return model->add_global(n, t, e);
                },
                [&](int id) { return model->data(id); }, true, kSeed);
            model->execute(kernel, ids, {});
            report = model->finish();
            data_of = [&](int id) { return model->data(id); };
        } else {
            zpu =
                std::make_unique<sim::Machine>(sim::ZpuParams::from(kernel.target.lookup()), true);
            ids = apps::add_arguments(kernel, *zpu, kSeed);
            zpu_backend::execute(kernel, *zpu, ids);
            report = zpu->finish();
            data_of = [&](int id) { return zpu->data(id); };
        }
    } catch (const sim::SimError &e) {
        return std::string("model error: ") + e.what();
    }
    if (report.deadlock)
        return "deadlock: " + report.deadlock_message;
    if (report.race_count)
        return "race (" + std::to_string(report.race_count) + "): " + report.races[0].str();
    const KernelArg &out = kernel.args.back();
    sim::DType t = dtype_of(out.type);
    const void *got = data_of(ids.at(out.name));
    double max_ref = 0, max_err = 0;
    for (int64_t i = 0; i < out.elements(); i++) {
        double want = apps::element_value(subject.expected.data(), t, i),
               have = apps::element_value(got, t, i);
        if (!std::isfinite(have))
            return "wrong result: element " + std::to_string(i) + " is not written";
        max_ref = std::max(max_ref, std::fabs(want));
        max_err = std::max(max_err, std::fabs(have - want));
    }
    double relative = max_err / std::max(max_ref, 1e-30);
    if (relative > subject.tolerance)
        return "wrong result: max relative error " + std::to_string(relative);
    return "";
}

Subject compile_subject(const KernelCase &c) {
    Subject s;
    s.app = &apps::find_app(c.app);
    Target target = Target::parse(c.target);
    const std::string target_name = target.name();
    s.params = apps::with_defaults(*s.app, apps::Params(c.params), target_name);
    s.kernel = apps::compile_app(*s.app, s.params, c.schedule, target);
    s.tolerance = s.app->tolerance(s.params);
    // The reference output of the seeded inputs (the same for every mutant).
    sim::Machine scratch(sim::ZpuParams{}, true);
    std::vector<Halide::Buffer<>> inputs;
    apps::add_arguments(s.kernel, scratch, kSeed, &inputs);
    apps::Built ref = s.app->build(s.params, "reference", target);
    for (size_t i = 0; i < ref.inputs.size(); i++)
        ref.inputs[i].set(inputs[i]);
    const KernelArg &out = s.kernel.args.back();
    s.expected = Halide::Buffer<>(out.type, out.extents);
    ref.output.halide().realize(s.expected, apps::reference_target());
    return s;
}

bool ends_with(const std::string &s, const std::string &tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/** Why a mutant that ran clean is an equivalent mutant - a correct program, because the shifted
 * wait waits for a later event than the one it replaced - or "" when it is not one of those.
 * Only survivors are asked; the same mutation elsewhere (a tail loop whose versions restart at 0)
 * is usually a real bug, and is killed there. */
std::string equivalent(const Kernel &kernel, const mutation::Mutant &m) {
    using Kind = mutation::Mutant::Kind;
    if (kernel.target.name() == "hopper" && m.kind == Kind::Delete &&
        m.op == "tandem_fence_proxy_async") {
        // The fence orders the threads' writes before a TMA store reads the tile (async proxy).
        // Where TMA cannot store the tile, threads do, through the generic proxy: the emitter
        // drops the fence, and deleting it changes nothing.
        hopper_backend::Plan plan = hopper_backend::plan_kernel(kernel);
        bool all_threads = !plan.store_sources.empty();
        for (const std::string &b : plan.store_sources)
            all_threads = all_threads && plan.tiles.at(b).threads();
        if (all_threads)
            return "redundant: the fence before a store the threads make (generic proxy), which "
                   "the emitter drops";
    }
    if (kernel.target.name() == "hopper" && m.op == "tandem_arrive" &&
        ends_with(m.barrier, ".empty") && (m.kind == Kind::Delete || m.kind == Kind::ShiftSlot) &&
        m.loops.size() == 1 && ends_with(m.loops.back(), ".on_core")) {
        // The release after a tile's K loop (the MMA kept in flight, MmaInFlight.h). Dropped or
        // misdirected, the next use of that version waits forever - a deadlock wherever there is
        // one; it survives only after the CTA's last MMA, where no later step uses the ring.
        return "no later use: the release after the CTA's last K loop frees a version nothing "
               "waits for again";
    }
    if (m.kind != Kind::ShiftSlot || m.loops.empty() || !ends_with(m.loops.back(), ".on_core"))
        return "";
    if (kernel.target.name() == "zpu" && ends_with(m.barrier, ".empty")) {
        // Version v = tile % n of a store's staging buffer: tile t waits for the store of tile
        // t - n, which last read v. Shifted (the wait, or the store's token), tile t waits for the
        // store of tile t - n + 1 instead: a newer store of the same control stream, and tile t - 1
        // already waited for the store of tile t - n.
        return "over-wait: each tile waits for a newer store of the staging buffer than it needs, "
               "and the "
               "tile before it waited for the one it needs";
    }
    if (kernel.target.name() == "hopper" && kernel.warpgroups == 2 && m.role == 0 &&
        m.op == "tandem_wait" && ends_with(m.barrier, ".empty")) {
        // A CTA per tile: the producer's wait of the ring step after the k loop (a K tail) is the
        // CTA's last. Shifted, it waits for the release of the next version, which the consumer
        // makes after releasing the version the step needs.
        return "over-wait: the last ring step of the CTA's only tile waits for a later release "
               "than it needs";
    }
    return "";
}

class Mutation : public ::testing::TestWithParam<KernelCase> {};

TEST_P(Mutation, EveryMutantIsKilled) {
    const KernelCase &c = GetParam();
    Subject subject = compile_subject(c);
    // The kernel itself is clean, so that a mutant's race or error is the mutation's.
    std::string clean = detect(subject, subject.kernel);
    ASSERT_EQ(clean, "") << c.target << " " << c.name << " fails unmutated";

    std::vector<mutation::Mutant> all = mutation::mutants(subject.kernel);
    std::vector<std::string> survivors;
    int killed = 0, equivalents = 0, skipped = 0;
    // TANDEM_MUTANT=n runs only mutant n of each kernel and prints its Stmt (to study a survivor).
    const char *only = std::getenv("TANDEM_MUTANT");
    for (int n = 0; n < int(all.size()); n++) {
        if (only && std::atoi(only) != n)
            continue;
        // Ascend's pipe flags are in place already (a ring's slot and counter only pick the event
        // id): they are mutated in the emitted code (tests/ascend, a flag pair dropped); here
        // its cross-core protocol.
        if (c.target.rfind("ascend", 0) == 0 && all[n].op.rfind("tandem_cross_core", 0) != 0) {
            skipped++;
            continue;
        }
        Kernel mutant = mutation::mutate(subject.kernel, n);
        if (only)
            std::cout << mutant.stmt_text() << "\n";
        std::string how = detect(subject, mutant), why;
        if (how.empty())
            why = equivalent(subject.kernel, all[n]);
        std::cout << "[ mutant ] " << c.target << " " << c.name << " #" << n << " " << all[n].text
                  << ": "
                  << (!how.empty()   ? how.substr(0, 200)
                      : !why.empty() ? "equivalent (" + why + ")"
                                     : "NOT DETECTED")
                  << "\n";
        if (!how.empty()) {
            killed++;
        } else if (!why.empty()) {
            equivalents++;
        } else {
            survivors.push_back("#" + std::to_string(n) + " " + all[n].text);
        }
    }
    std::string target = c.target.substr(0, c.target.find(':'));
    std::cout << target << " " << c.name << ": mutants " << all.size() - skipped << ", killed "
              << killed << ", equivalent " << equivalents << std::endl;
    EXPECT_GT(all.size(), 0u) << c.name << " has no sync op to mutate";
    std::string list;
    for (const std::string &s : survivors)
        list += "\n  " + s;
    EXPECT_TRUE(survivors.empty())
        << target << " " << c.name << ": " << survivors.size()
        << " mutant(s) run clean (no race, deadlock, model error or wrong result):" << list;
}

INSTANTIATE_TEST_SUITE_P(ZpuHopper, Mutation, ::testing::ValuesIn(kernel_cases()),
                         [](const ::testing::TestParamInfo<KernelCase> &info) {
                             std::string target =
                                 info.param.target.substr(0, info.param.target.find(':'));
                             return target + "_" + info.param.name;
                         });

} // namespace
