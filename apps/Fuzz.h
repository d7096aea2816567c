#ifndef TANDEM_APPS_FUZZ_H
#define TANDEM_APPS_FUZZ_H

/** \file
 * The schedule fuzzer: draws an app, a target, a schedule, every extent (biased to 1, 2, primes,
 * tile - 1, tile, tile + 1 and multiples of the tile), and in "random" mode the tile sizes, stage
 * counts and output types too; runs the kernel on the target's machine model against the Halide
 * reference, emits its code, and classifies the run. Each case runs in a child process, so a
 * crash or a hang is a result, not the end of the fuzzer.
 *
 * Only ok and user error pass, and a user error at the app's default parameters (mode
 * "defaults") is a failure too: the defaults must adapt to any shape that exists.
 * Cases are a pure function of (seed, index): any failure is reproduced by its command line.
 */

#include "App.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tandem::apps {

// TooLarge: a legal case whose simulation would take longer than the fuzzer allows
// (RunOptions::max_steps); not a failure. Appended last: outcomes cross the fork as an int.
enum class Outcome {
    Ok,
    UserError,
    Wrong,
    Race,
    Deadlock,
    InternalError,
    Crash,
    Timeout,
    TooLarge
};
const char *outcome_name(Outcome o);

struct FuzzCase {
    uint64_t index = 0;
    std::string app, target, schedule;
    /** Not empty: `app` is a generator of this program (a user's, not one of Tandem's apps) and
     * `program` names the program in the command that repeats the case. */
    std::string program;
    Params params;         // the drawn ones (the app's defaults fill the rest)
    bool defaults = false; // only the shape (and output type) drawn: a user error is a failure
    bool emit = true;      // emit the kernel's code too (an emitter's refusal is a user error)
    /** Runtime-shape mode: the kernel is compiled once with shapes=runtime (params: the estimates)
     * and run at each of these extents. */
    std::vector<Params> at;
    /** The `./tandem run ...` line that reproduces the case (a generator's: `<program> -g ...
     * --run ...`). */
    std::string command() const;
};

struct FuzzResult {
    FuzzCase c;
    Outcome outcome = Outcome::Ok;
    std::string message;
    int refused = 0; // runtime-shape mode: shapes the kernel refused at the call (ShapeError)
    double seconds = 0;
    bool failure() const {
        return outcome != Outcome::Ok && outcome != Outcome::TooLarge &&
               !(outcome == Outcome::UserError && !c.defaults);
    }
    /** "FAIL <outcome> (<mode>, <seconds> s) <command>  # <message>" ("pass" for a passing case).
     */
    std::string line() const;
};

struct FuzzOptions {
    uint64_t seed = 1;
    double seconds = 60;     // stop drawing after this long (> 0) ...
    int64_t runs = -1;       // ... or after this many cases (>= 0), whichever comes first
    int jobs = 1;            // cases in flight at once (child processes)
    double timeout = 120;    // seconds before a case is a timeout
    std::string target, app; // empty: all
    bool emit = true;        // false: the machine model only
    bool runtime_shapes =
        false; // each case: one kernel with shapes=runtime, run at shapes_per_case shapes
    int shapes_per_case = 4;
    /** Not empty: draw this program's own generators (those that are not Tandem's apps) instead of
     * Tandem's apps, every int parameter in its range (capped at 300, small values as likely as
     * large ones), every bool and string choice; a user error is a refusal, not a failure. The
     * program's name, for the commands that repeat the cases. */
    std::string program;
};

/** Whether a program's own generator takes the case's parameters in its algorithm (generate(),
 * no schedule): false where it refuses them in a tandem::Error (its own checks; such parameters
 * are drawn again), true otherwise (anything else is the case's to report). */
bool algorithm_accepts(const FuzzCase &c);

/** The case number `index` of the fuzz run with `options` (app, target and mode filtered). */
FuzzCase draw_case(const FuzzOptions &options, uint64_t index);

/** Runs one case in this process (compile, model, reference, emit) and classifies it; crashes
 * and hangs are left to the caller. */
FuzzResult run_case(const FuzzCase &c);

struct FuzzSummary {
    int64_t runs = 0, failures = 0;
    int shapes_per_run = 0; // runtime-shape mode: the shapes each run's kernel ran at
    double seconds = 0;
    std::map<std::string, std::map<std::string, int64_t>> by_target; // target -> outcome -> count
    std::string program; // a generator program's summary: its name
    /** Generator programs fuzzed beside the apps (`tandem fuzz --generators`); their runs and
     * failures are in `runs` and `failures` too. */
    std::vector<FuzzSummary> programs;
    /** {"fuzz": {"runs", "failures", "seed", "seconds", "by_target": {...}}}, "shapes_per_run"
     * in runtime-shape mode, and "generators": {program: {"runs", "failures", "by_target"}} */
    std::string json(uint64_t seed) const;
    /** The summary as lines of text: runs, time, failures, then counts by target. */
    std::string text(uint64_t seed) const;
    /** The summary a `json()` line holds (a program's, read back by the fuzzer that ran it). */
    static FuzzSummary from_json(const std::string &line);
};

/** JIT-compiles Halide's runtime for the reference target once, before fork(), so that each child
 * process inherits it (the fuzzer's and the tuner's isolated runs). */
void warm_up_reference_jit();

/** Draws and runs cases in child processes, `jobs` at a time, calling `report` on each result
 * (in completion order). */
FuzzSummary fuzz(const FuzzOptions &options, const std::function<void(const FuzzResult &)> &report);

} // namespace tandem::apps

#endif
