#ifndef TANDEM_APPS_RUN_H
#define TANDEM_APPS_RUN_H

/** \file
 * Running an app: compile it for the target, run the kernel on the machine model (through the
 * executor of the async Stmt) on random inputs, check it against the Halide CPU JIT of the same
 * algorithm, and report cycles, the bound, the roofline and the hazards.
 */

#include "App.h"
#include "sim/Zpu.h"

#include <functional>
#include <string>

namespace tandem::apps {

struct RunOptions {
    Params params;        // given by the user; the app's defaults fill the rest
    Params at;            // a runtime-shape kernel runs at these extents (else at the params')
    std::string schedule; // empty = the app's default
    std::string target = "zpu";
    bool numerics = true; // false: timing and hazards only (no data, no reference)
    std::string trace;    // Chrome/Perfetto trace file, if not empty
    std::string timeline; // SVG picture of the overlap (one lane per engine), if not empty
    uint64_t seed = 1;
    // If not empty: a directory the run's inputs and the reference's output are written to, each
    // argument as <name>.bin (its elements, dense, in Halide's order) beside `tolerance` (the
    // largest max_rel_err that passes), for a library's runner to check against (`<lib>_run
    // --check DIR`): the same problem on the hardware the library runs on.
    std::string save;
    // > 0: a kernel whose simulation would take more steps than this (kernel_steps) is not run
    // (TooLarge); the fuzzer's bound, so that a legal but very fine schedule is not a timeout.
    int64_t max_steps = 0;
};

/** A run refused because its simulation would be too long (RunOptions::max_steps). */
struct TooLarge : Error {
    using Error::Error;
};

/** The steps the machine model would take to run `kernel` at `shapes`: every op and every element
 * an element nest stores, times the trip counts of the loops around it (each loop's extent taken
 * with the loops around it at their first iteration; an extent that depends on a buffer counts
 * 1), times the cores that run it. An estimate of the simulation's cost, not a bound on its cycles.
 */
int64_t kernel_steps(const Kernel &kernel, const Shapes &shapes);

struct RunResult {
    std::string app, target, schedule;
    std::string model; // the machine model and its version ("zpu v2"), Machine.h
    Params params;
    bool checked = false; // numerics were on and compared with the reference
    bool correct = false;
    double max_rel_err = 0; // max |out - ref| / max |ref|
    sim::Report report;
    Kernel kernel; // what was compiled and run
    double roofline_cycles = 0;
    std::string roofline_bound; // the roofline's largest term: "matrix", "vector" or "memory"
    double compile_ms = 0, simulate_ms = 0, reference_ms = 0;

    double efficiency() const { return report.efficiency(); }
    double roofline_fraction() const {
        return report.cycles ? roofline_cycles / double(report.cycles) : 0;
    }
    /** One JSON object with every field the CLI promises. */
    std::string json() const;
    /** The same for a person: correctness, cycles and bound, engines, hazards. */
    std::string text() const;
    /** The run found something wrong: a wrong result, a race or a deadlock. */
    bool failed() const { return (checked && !correct) || report.race_count || report.deadlock; }
};

/** Element i of raw storage of sim type t, as a number (an FP8 element: its value). */
double element_value(const void *data, sim::DType t, int64_t i);

/** Adds the kernel's arguments to `machine` as DRAM buffers: inputs filled with seeded random
 * values in [-1, 1] (copied into `inputs` for the reference when given), the output poisoned
 * with NaN so that an element the kernel never writes cannot pass. Returns buffer ids by name. */
std::map<std::string, int> add_arguments(const Kernel &kernel, sim::Machine &machine, uint64_t seed,
                                         std::vector<Halide::Buffer<>> *inputs = nullptr);
/** The same for any machine model, with the arguments' extents at this call (their static
 * extents, or any for a runtime shape): `add` makes a global buffer, `data` gives its storage. */
std::map<std::string, int>
add_arguments(const Kernel &kernel, const std::vector<std::vector<int>> &extents,
              const std::function<int(const std::string &, sim::DType, int64_t)> &add,
              const std::function<void *(int)> &data, bool numerics, uint64_t seed,
              std::vector<Halide::Buffer<>> *inputs = nullptr);

/** Builds the app with the schedule and compiles it. */
Kernel compile_app(const App &app, const Params &params, const std::string &schedule,
                   const Target &target);

/** Compiles the app and runs it (options.params over the app's defaults). */
RunResult run(const App &app, const RunOptions &options);
/** Runs a kernel of the app at the problem of `params` (every parameter given): the parameters it
 * was compiled with, but for the extents of a runtime-shape kernel (shapes=runtime), which may be
 * any. `reference`: the app's reference built once with runtime shapes, so that its JIT compiles
 * once for many calls (else one is built at `params`). compile_ms is left 0. */
RunResult run_kernel(const App &app, const Kernel &kernel, const Params &params,
                     const std::string &schedule, const RunOptions &options,
                     Built *reference = nullptr);
/** The static extents of the kernel's arguments. */
std::vector<std::vector<int>> static_extents(const Kernel &kernel);

/** The target the Halide reference is JIT-compiled for: the host, minus features Halide 14
 * detects wrongly, each float op rounded as written (no contraction into FMA). */
Halide::Target reference_target();

/** The problem's roofline on `target`: max of MACs / peak MAC rate, vector work (vector_work:
 * weighted by the target's vector costs) / vector rate and compulsory bytes / DMA bandwidth, all
 * cores together. */
double roofline_cycles(const Workload &w, const Target &target);
/** Which term of the roofline is the largest: "matrix", "vector" or "memory". */
std::string roofline_bound(const Workload &w, const Target &target);

} // namespace tandem::apps

#endif
