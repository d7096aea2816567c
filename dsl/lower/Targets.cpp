#include "Targets.h"

#include "CoreMapping.h"
#include "MemoryPlanning.h"
#include "RejoinTails.h"
#include "ascend/AscendTarget.h"
#include "hopper/HopperTarget.h"
#include "tandem/Nest.h"
#include "zpu/ZpuTarget.h"

#include <cstdlib>
#include <iostream>
#include <set>

namespace tandem::lower {

using Halide::Internal::Stmt;

namespace {

/** The registered targets: the built-in ones (one line each), then those a program registers. */
std::vector<TargetLowering> &registry() {
    static std::vector<TargetLowering> all = {
        zpu_target(),
        hopper_target(),
        ascend_target(),
    };
    return all;
}

} // namespace

void register_target(TargetLowering lowering) {
    if (lowering.name.empty() || lowering.name.find_first_of(":, ") != std::string::npos)
        throw Error("a target's name is a word without ':', ',' or spaces; got '" + lowering.name +
                    "'");
    if (find_target(lowering.name))
        throw Error("target " + lowering.name + " is registered already");
    registry().push_back(std::move(lowering));
}

const TargetLowering *find_target(const std::string &name) {
    for (const TargetLowering &t : registry()) {
        if (t.name == name)
            return &t;
    }
    return nullptr;
}

const TargetLowering &lowering_of(const Target &target) {
    const TargetLowering *t = find_target(target.name());
    if (!t)
        throw Error("target " + target.name() + " is not registered (dsl/lower/Targets.h)");
    return *t;
}

std::vector<std::string> target_names() {
    std::vector<std::string> names;
    for (const TargetLowering &t : registry())
        names.push_back(t.name);
    return names;
}

Pass pass(const std::string &name, Stmt (*f)(const Stmt &, CompileContext &)) {
    return {name, [f](const Stmt &s, CompileContext &ctx, Kernel &) { return f(s, ctx); }};
}

Pass rejoin_tails_step() {
    return {"rejoin_tails", [](const Stmt &s, CompileContext &, Kernel &k) {
                const std::vector<std::string> names = k.runtime_extent_names();
                return rejoin_tails(s, std::set<std::string>(names.begin(), names.end()));
            }};
}

Pass map_to_cores_step() {
    return {"map_to_cores", [](const Stmt &s, CompileContext &ctx, Kernel &) {
                return Halide::Internal::simplify(map_to_cores(s, ctx));
            }};
}

Pass plan_memory_step(const MemoryPlan &place) {
    return {"plan_memory", [place](const Stmt &s, CompileContext &ctx, Kernel &k) {
                return plan_memory(s, ctx, &k.buffers, place);
            }};
}

Pass drop_guards_step() {
    return {"drop_guards_every_call_passes", [](const Stmt &s, CompileContext &, Kernel &k) {
                return drop_guards_every_call_passes(s, k.runtime_extent_names());
            }};
}

void log_lowering(const std::string &step, const Stmt &s) {
    const char *want = std::getenv("TANDEM_DEBUG_LOWERING");
    if (!want || !*want || std::string(want) == "0")
        return;
    if (std::string(want) != "1" && std::string(want) != step)
        return;
    std::cerr << "// after " << step << "\n" << s << "\n";
}

Stmt run_passes(const std::vector<Pass> &passes, const Stmt &s, CompileContext &ctx, Kernel &k) {
    Stmt result = s;
    for (const Pass &p : passes) {
        result = p.run(result, ctx, k);
        log_lowering(p.name, result);
    }
    return result;
}

} // namespace tandem::lower
