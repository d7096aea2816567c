#ifndef TANDEM_APPS_TUNE_H
#define TANDEM_APPS_TUNE_H

/** \file
 * Schedule autotuning on the machine models: the search space is an app's schedules and its
 * schedule parameters' choices (App::choices, less the algorithm's variants and what the user
 * fixed); each candidate is compiled, run on the target's model (numerics against the Halide
 * reference unless turned off; races and deadlocks always), in a child process with a time and
 * memory limit, and recorded in a TuningDb before the next one starts. The search is deterministic for a seed: the defaults first, then random
 * candidates, then mutations of the best so far. Candidates already in the database are not
 * measured again, so a killed tuner resumes where it stopped.
 */

#include "App.h"
#include "TuningDb.h"

#include <functional>
#include <string>

namespace tandem::apps {

struct TuneOptions {
    std::string app, target = "zpu", db; // db: a TuningDb URI (empty: default_tuning_db())
    Params fixed;                         // the workload: extents and any parameter not tuned
    int budget = 64;                      // candidates to measure (with resume: in all, so far included)
    double seconds = 0;                   // > 0: stop after this long as well
    unsigned long long seed = 1;
    bool resume = false;
    bool numerics = true;
    /** Each candidate in its own process, killed after timeout_seconds, its address space limited
     * to memory_gb (a pathological tiling of a large problem must not take the machine). */
    bool isolate = true;
    double timeout_seconds = 120, memory_gb = 6;
};

struct TuneProgress {
    int done = 0, total = 0; // measured (this run and, with resume, before)
    const TuningRecord *last = nullptr;
    const TuningRecord *best = nullptr;
    double seconds = 0;
};

struct TuneResult {
    TuningWorkload workload;
    std::optional<TuningRecord> best, defaults; // the best ok record and the app's defaults' record
    int measured = 0, reused = 0;               // candidates run now, records already there
    int space = 0;                              // candidates in the search space
};

/** The workload `options` tunes (its fixed parameters with the app's defaults filled in). */
TuningWorkload tuning_workload(const TuneOptions &options);

TuneResult tune(const TuneOptions &options, const std::function<void(const TuneProgress &)> &progress = {});

} // namespace tandem::apps

#endif
