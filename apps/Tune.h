#ifndef TANDEM_APPS_TUNE_H
#define TANDEM_APPS_TUNE_H

/** \file
 * Schedule autotuning on the machine models: the search space is an app's schedules and its
 * schedule parameters' choices (App::choices, less the algorithm's variants and what the user
 * fixed); each candidate is compiled, run on the target's model (numerics against the Halide
 * reference unless turned off; races and deadlocks always), in a child process with a time and
 * memory limit, and recorded in a TuningDb as it finishes.
 *
 * The search goes in generations, each a batch of candidates queued in the database as jobs and
 * measured by workers: the tuner's own (--jobs, child processes) and `tandem tune-worker` processes
 * on any machine sharing a PostgreSQL database. Generation 0 is the defaults and random
 * candidates (16); every later one is 8 mutations of the best four records so far. Each
 * generation depends only on the seed and the previous generations' records, so a seed gives the
 * same search however many workers measure it. Candidates already in the database are not
 * measured again, so a killed tuner resumes where it stopped.
 *
 * On Hopper, `device = "gpu"` also times each candidate that is correct on the model on this
 * machine's GPU (GpuTiming.h: built with nvcc, checked and timed by the GPU harness) and ranks by
 * that time; its records are a workload of their own (TuningWorkload::device), measured by the
 * tuner's own jobs or by `tandem tune-worker --device gpu` on machines with a GPU.
 */

#include "App.h"
#include "TuningDb.h"

#include <functional>
#include <string>

namespace tandem::apps {

struct TuneOptions {
    std::string app, target = "zpu", db; // db: a TuningDb URI (empty: default_tuning_db())
    std::string device = "model";        // "gpu" (hopper): also timed on this machine's GPU
    Params fixed;                        // the workload: extents and any parameter not tuned
    int budget = 64;    // candidates the search proposes (measured now or recorded before)
    double seconds = 0; // > 0: stop after this long as well
    unsigned long long seed = 1;
    bool resume = false; // continue the last search of the workload: its seed
    bool numerics = true;
    /** Each candidate in its own process, killed after timeout_seconds, its address space limited
     * to memory_gb (a pathological tiling of a large problem must not take the machine). */
    bool isolate = true;
    double timeout_seconds = 120, memory_gb = 6;
    int jobs = 1;              // candidates this process measures at once (0: only queue them)
    double lease_seconds = 60; // a worker's hold on a job, renewed while it measures
};

struct WorkerOptions {
    std::string db;               // a TuningDb URI
    std::string device = "model"; // the jobs it takes: timed on the model, or on this machine's GPU
    int jobs = 1;                 // candidates measured at once
    double lease_seconds = 60;
    double idle_exit = 0; // > 0: return after this long without a job (0: run until killed)
};

struct TuneProgress {
    int done = 0, total = 0; // candidates of the search reported so far, the budget
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

/** The compiler version that keys jobs and workloads (the source's git commit at configure time).
 */
std::string compiler_version();

/** Now, as a record's date: 2026-11-27T01:00:00Z. */
std::string now_utc();

/** The tunable parameters of `options`' app on its target and the values tried: the app's choices
 * (without repeats) for parameters not fixed, that only schedule the problem and that set
 * something the target takes, plus the target's schedules. */
std::map<std::string, std::vector<std::string>> search_space(const App &app,
                                                             const TuneOptions &options);

/** The workload `options` tunes (its fixed parameters with the app's defaults filled in). */
TuningWorkload tuning_workload(const TuneOptions &options);

TuneResult tune(const TuneOptions &options,
                const std::function<void(const TuneProgress &)> &progress = {});

/** One worker: claims the jobs of this compiler version queued in the database by any tuner and
 * measures them until it has been idle for idle_exit seconds; returns how many it completed.
 * `done` hears of each. */
int tune_worker(const WorkerOptions &options,
                const std::function<void(const TuningJob &, const TuningRecord &)> &done = {});

} // namespace tandem::apps

#endif
