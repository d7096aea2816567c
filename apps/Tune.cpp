#include "Tune.h"

#include "Fuzz.h"
#include "GpuTiming.h"
#include "Run.h"
#include "tandem/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <random>
#include <set>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#ifndef TANDEM_COMPILER_VERSION
#define TANDEM_COMPILER_VERSION "unknown"
#endif

namespace tandem::apps {

namespace {

using Candidate = std::map<std::string, std::string>;

bool same_problem(const Workload &a, const Workload &b) {
    return a.macs == b.macs && a.vector_flops == b.vector_flops && a.bytes == b.bytes;
}

/** A candidate correct on the model, timed on the GPU: its time, or why it has none. */
void time_on_the_gpu(const App &app, const RunOptions &run_options, const TuneOptions &o,
                     TuningRecord *r) {
    const Params params = with_defaults(app, run_options.params, o.target);
    const std::string schedule =
        run_options.schedule.empty() ? schedules_for(app, o.target).front() : run_options.schedule;
    const GpuTiming t = time_on_gpu(app, params, schedule, o.timeout_seconds);
    if (!t.failure.empty()) {
        r->status = t.failure.rfind("timed out", 0) == 0 ? "timeout" : "crash";
        r->message = "on the GPU: " + t.failure;
    } else if (!t.correct) {
        r->status = "wrong";
        r->message = "on the GPU (" + t.device + "): max relative error " +
                     std::to_string(t.max_rel_err) + " or launches that differ";
    } else {
        r->message = "timed on the GPU; the model (" + r->device +
                     ") ran it correctly; the reference (cuBLAS or "
                     "a copy) took " +
                     std::to_string(t.reference_ms) + " ms";
        r->time_ms = t.time_ms;
        r->device = t.device;
    }
}

/** Compiles and runs one candidate on the model; every outcome is a record. */
TuningRecord measure(const App &app, const TuneOptions &o, const Candidate &c) {
    TuningRecord r;
    r.candidate = c;
    r.seed = o.seed;
    r.date = now_utc();
    RunOptions run_options;
    run_options.params = o.fixed;
    for (const auto &[k, v] : c) {
        if (k != "schedule")
            run_options.params.set(k, v);
    }
    run_options.schedule = c.count("schedule")       ? c.at("schedule")
                           : o.fixed.has("schedule") ? o.fixed.get("schedule")
                                                     : "";
    run_options.target = o.target;
    run_options.numerics = o.numerics;
    run_options.seed = o.seed;
    try {
        RunResult result = run(app, run_options);
        r.device = result.model;
        if (result.report.deadlock) {
            r.status = "deadlock";
        } else if (result.report.race_count > 0) {
            r.status = "race";
        } else if (result.checked && !result.correct) {
            r.status = "wrong";
            r.message = "max relative error " + std::to_string(result.max_rel_err);
        } else {
            r.status = "ok";
            r.cycles = double(result.report.cycles);
            r.roofline_fraction = result.roofline_fraction();
            if (o.device == "gpu")
                time_on_the_gpu(app, run_options, o, &r);
        }
    } catch (const Error &e) {
        r.status = "user_error";
        r.message = e.what();
    } catch (const std::exception &e) {
        r.status = "crash";
        r.message = e.what();
    }
    return r;
}

/** How a worker measures a job: the tuner's options that decide a measurement. */
std::string spec_of(const TuneOptions &o) {
    return nlohmann::json({{"app", o.app},
                           {"target", o.target},
                           {"params", o.fixed.values()},
                           {"device", o.device},
                           {"numerics", o.numerics},
                           {"seed", o.seed},
                           {"isolate", o.isolate},
                           {"timeout", o.timeout_seconds},
                           {"memory_gb", o.memory_gb}})
        .dump();
}

TuneOptions options_of(const std::string &spec) {
    TuneOptions o;
    try {
        const nlohmann::json j = nlohmann::json::parse(spec);
        o.app = j.at("app");
        o.target = j.at("target");
        o.fixed = Params(j.at("params").get<std::map<std::string, std::string>>());
        o.device = j.value("device", "model");
        o.numerics = j.at("numerics");
        o.seed = j.at("seed");
        o.isolate = j.at("isolate");
        o.timeout_seconds = j.at("timeout");
        o.memory_gb = j.at("memory_gb");
    } catch (const nlohmann::json::exception &e) {
        throw Error(std::string("tune: a job's measuring spec is not what this tuner writes: ") +
                    e.what());
    }
    return o;
}

std::string record_json(const TuningRecord &r) {
    return nlohmann::json({{"status", r.status},
                           {"cycles", r.cycles},
                           {"roofline_fraction", r.roofline_fraction},
                           {"time_ms", r.time_ms},
                           {"device", r.device},
                           {"message", r.message}})
        .dump();
}

/** A measurement running in a child process: a candidate that runs past its timeout, or past the
 * memory limit, or crashes, becomes a record (timeout / crash) and the worker goes on. */
struct Child {
    TuningJob job;
    TuneOptions options;
    pid_t pid = -1;
    int fd = -1;
    std::string out;
    std::chrono::steady_clock::time_point start;
};

Child start_child(const TuningJob &job) {
    Child c;
    c.job = job;
    c.options = options_of(job.spec);
    c.start = std::chrono::steady_clock::now();
    int fds[2];
    if (pipe(fds) != 0)
        throw Error(std::string("tune: pipe failed: ") + std::strerror(errno));
    c.pid = fork();
    if (c.pid < 0)
        throw Error(std::string("tune: fork failed: ") + std::strerror(errno));
    if (c.pid == 0) {
        close(fds[0]);
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        // The soft limit: GPU timing lifts it for nvcc and the harness (their address space is not
        // the candidate's compile).
        const rlim_t bytes = rlim_t(c.options.memory_gb * (1ull << 30));
        const rlimit limit{bytes, RLIM_INFINITY};
        setrlimit(RLIMIT_AS, &limit);
        const std::string text =
            record_json(measure(find_app(c.options.app), c.options, job.candidate));
        size_t written = 0;
        while (written < text.size()) {
            const ssize_t n = write(fds[1], text.data() + written, text.size() - written);
            if (n <= 0)
                _exit(1);
            written += size_t(n);
        }
        _exit(0);
    }
    close(fds[1]);
    c.fd = fds[0];
    fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK);
    return c;
}

/** Whether the child has finished; then `r` is its record. */
bool child_finished(Child &c, TuningRecord *r) {
    char buffer[4096];
    ssize_t n;
    while ((n = read(c.fd, buffer, sizeof buffer)) > 0)
        c.out.append(buffer, size_t(n));
    int status = 0;
    const bool exited = waitpid(c.pid, &status, WNOHANG) == c.pid;
    const bool late =
        !exited &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count() >
            c.options.timeout_seconds;
    if (!exited && !late)
        return false;
    *r = TuningRecord();
    r->candidate = c.job.candidate;
    r->seed = c.options.seed;
    r->date = now_utc();
    if (late) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &status, 0);
        r->status = "timeout";
        r->message = "no result after " + std::to_string(int(c.options.timeout_seconds)) + " s";
    } else {
        while ((n = read(c.fd, buffer, sizeof buffer)) > 0)
            c.out.append(buffer, size_t(n));
        if (WIFSIGNALED(status) || c.out.empty()) {
            r->status = "crash";
            r->message = WIFSIGNALED(status)
                             ? std::string("killed by signal ") + strsignal(WTERMSIG(status))
                             : "exited with status " + std::to_string(WEXITSTATUS(status)) +
                                   " and no result";
        } else {
            const nlohmann::json j = nlohmann::json::parse(c.out);
            r->status = j.at("status");
            r->cycles = j.at("cycles");
            r->roofline_fraction = j.at("roofline_fraction");
            r->time_ms = j.at("time_ms");
            r->device = j.at("device");
            r->message = j.at("message");
        }
    }
    close(c.fd);
    return true;
}

std::string worker_name() {
    char host[256] = "host";
    gethostname(host, sizeof host - 1);
    return std::string(host) + ":" + std::to_string(getpid());
}

/** Claims jobs (of `generators`, and of workload `only` when given) and measures up to `jobs` at
 * once, renewing its leases, until `stop(idle)` says so (idle: nothing running and nothing to
 * claim); then waits for what it runs. `done` hears of each completed job. */
void work(TuningDb &db, int jobs, double lease_seconds, const std::vector<std::string> &generators,
          const std::string &device, const TuningWorkload *only,
          const std::function<bool(bool idle)> &stop,
          const std::function<void(const TuningJob &, const TuningRecord &)> &done) {
    const std::string name = worker_name();
    std::vector<Child> running;
    auto renewed = std::chrono::steady_clock::now();
    bool stopping = false;
    while (true) {
        bool nothing_to_claim = jobs == 0;
        while (!stopping && int(running.size()) < jobs) {
            std::optional<TuningJob> job =
                db.claim(name, TANDEM_COMPILER_VERSION, lease_seconds, generators, device, only);
            if (!job) {
                nothing_to_claim = true;
                break;
            }
            const TuneOptions o = options_of(job->spec);
            if (o.isolate) {
                running.push_back(start_child(*job));
            } else { // in this process (tests): one at a time
                TuningRecord r = measure(find_app(o.app), o, job->candidate);
                db.complete(*job, r);
                if (done)
                    done(*job, r);
            }
        }
        for (auto it = running.begin(); it != running.end();) {
            TuningRecord r;
            if (!child_finished(*it, &r)) {
                ++it;
                continue;
            }
            db.complete(it->job, r);
            if (done)
                done(it->job, r);
            it = running.erase(it);
        }
        const auto now = std::chrono::steady_clock::now();
        if (!running.empty() &&
            std::chrono::duration<double>(now - renewed).count() > lease_seconds / 3) {
            db.renew(name, lease_seconds);
            renewed = now;
        }
        stopping = stopping || stop(running.empty() && nothing_to_claim);
        if (stopping && running.empty())
            return;
        std::this_thread::sleep_for(std::chrono::milliseconds(running.empty() ? 20 : 5));
    }
}

} // namespace

/** The tunable parameters and their values: the app's choices (without repeats) for parameters the
 * user did not fix and that only schedule the problem (every value leaves its Workload as it is:
 * an output type or a fused epilogue changes the algorithm) and that set something the target
 * takes (App::choice_directives), plus the target's schedules. */
std::map<std::string, std::vector<std::string>> search_space(const App &app, const TuneOptions &o) {
    std::map<std::string, std::vector<std::string>> space;
    const Params defaults = with_defaults(app, o.fixed, o.target);
    const Workload problem = app.workload(defaults);
    const Target target = Target::parse(o.target);
    for (const auto &[name, values] : app.choices) {
        if (o.fixed.has(name) || std::count(app.variants.begin(), app.variants.end(), name))
            continue;
        auto directive = app.choice_directives.find(name);
        if (directive != app.choice_directives.end() && !target.takes(directive->second))
            continue; // a directive the target does not take: every value is the same kernel
        bool schedule_only = true;
        for (const std::string &v : values) {
            Params p = defaults;
            p.set(name, v);
            schedule_only = schedule_only && same_problem(app.workload(p), problem);
        }
        if (!schedule_only)
            continue;
        std::vector<std::string> distinct;
        for (const std::string &v : values) {
            if (std::find(distinct.begin(), distinct.end(), v) == distinct.end())
                distinct.push_back(v);
        }
        if (distinct.size() > 1)
            space[name] = distinct;
    }
    if (!o.fixed.has("schedule") && schedules_for(app, o.target).size() > 1)
        space["schedule"] = schedules_for(app, o.target);
    return space;
}

std::string now_utc() {
    std::time_t t = std::time(nullptr);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return text;
}

std::string compiler_version() {
    return TANDEM_COMPILER_VERSION;
}

TuningWorkload tuning_workload(const TuneOptions &o) {
    const App &app = find_app(o.app);
    TuningWorkload w;
    w.generator = app.name;
    w.target = o.target;
    w.device = o.device;
    const Target target = Target::parse(o.target);
    w.compiler = std::string("tandem ") + TANDEM_COMPILER_VERSION + ", " + target.name() + " v" +
                 std::to_string(target.machine.version()) + (o.numerics ? "" : ", no numerics");
    // The workload is the fixed parameters with the defaults of everything not tuned.
    Params all = with_defaults(app, o.fixed, o.target);
    const auto space = search_space(app, o);
    for (const auto &[k, v] : all.values()) {
        if (!space.count(k))
            w.fixed[k] = v;
    }
    if (o.fixed.has("schedule"))
        w.fixed["schedule"] = o.fixed.get("schedule");
    return w;
}

TuneResult tune(const TuneOptions &o, const std::function<void(const TuneProgress &)> &progress) {
    const App &app = find_app(o.app);
    if (o.budget < 1)
        throw Error("tune: --budget must be at least 1");
    if (o.jobs < 0)
        throw Error("tune: --jobs must be at least 0");
    if (o.device != "model" && o.device != "gpu")
        throw Error("tune: --device is model or gpu, not '" + o.device + "'");
    if (o.device == "gpu" && o.target != "hopper") {
        throw Error("tune: --device gpu times Hopper kernels on a GPU; target " + o.target +
                    " is timed on its model");
    }
    if (o.device == "gpu" && !gpu_harness_times(app)) {
        throw Error("tune: --device gpu: the GPU harness checks and times gemm, attention_scores, "
                    "elementwise and rmsnorm; " +
                    app.name + " is timed on the model only");
    }
    if (o.device == "gpu" && o.jobs > 0)
        require_gpu(); // (--jobs 0 only queues them for GPU workers)
    std::unique_ptr<TuningDb> db = TuningDb::open(o.db.empty() ? default_tuning_db() : o.db);
    if (o.isolate && o.jobs > 0)
        warm_up_reference_jit(); // once, before the children fork
    TuneResult result;
    result.workload = tuning_workload(o);
    const TuningWorkload &workload = result.workload;
    const auto space = search_space(app, o);
    result.space = 1;
    for (const auto &[k, values] : space)
        result.space =
            int(std::min<int64_t>(int64_t(result.space) * int64_t(values.size()), 1 << 30));

    // Already measured (a previous or killed run): reused, never measured again.
    std::map<std::string, TuningRecord> known;
    for (TuningRecord &r : db->records(workload))
        known[candidate_key(r.candidate)] = std::move(r);
    db->cancel(workload); // jobs a killed tuner left, beyond what this search may want

    const Params defaults = with_defaults(app, o.fixed, o.target);
    Candidate first;
    for (const auto &[k, values] : space) {
        first[k] = k == "schedule" ? schedules_for(app, o.target).front() : defaults.get(k);
    }

    // --resume continues the workload's last search: the seed of its latest record.
    const unsigned long long seed =
        o.resume && !known.empty() ? db->records(workload).back().seed : o.seed;
    std::mt19937_64 rng(seed);
    auto random_candidate = [&] {
        Candidate c;
        for (const auto &[k, values] : space)
            c[k] = values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
        return c;
    };
    auto mutate = [&](Candidate c) {
        const int changes = 1 + int(std::uniform_int_distribution<int>(0, 2)(rng) == 0);
        for (int i = 0; i < changes && !space.empty(); i++) {
            auto it = space.begin();
            std::advance(it, std::uniform_int_distribution<size_t>(0, space.size() - 1)(rng));
            const auto &values = it->second;
            size_t at =
                size_t(std::find(values.begin(), values.end(), c[it->first]) - values.begin());
            // A neighbouring value (choices are listed in order) or, one time in three, any.
            size_t next = std::uniform_int_distribution<int>(0, 2)(rng) == 0 || at >= values.size()
                              ? std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)
                          : std::uniform_int_distribution<int>(0, 1)(rng)
                              ? std::min(at + 1, values.size() - 1)
                              : (at > 0 ? at - 1 : 0);
            c[it->first] = values[next];
        }
        return c;
    };

    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    auto out_of_time = [&] { return o.seconds > 0 && elapsed() > o.seconds; };
    std::vector<TuningRecord> results; // this search's records, in the order it proposed them
    std::optional<TuningRecord> best;
    auto consider = [&](const TuningRecord &r) {
        if (r.status == "ok" && (!best || r.cost() < best->cost()))
            best = r;
    };
    std::set<std::string> visited;
    int total = 0;
    // Generation 0: the defaults and random candidates; then mutations. Fixed sizes (not from the
    // budget), so a smaller budget's search is a prefix of a larger one's: a stopped run
    // continued with a larger budget proposes what one uninterrupted run would.
    constexpr int explore = 16, generation_size = 8;
    TuneOptions measuring = o;
    measuring.seed = seed;
    const std::string spec = spec_of(measuring);
    int stale = 0;
    bool exhausted = false;
    for (int generation = 0; total < o.budget && !exhausted && !out_of_time(); generation++) {
        // The generation: every candidate counts toward the budget, measured now or recorded
        // before.
        struct Proposal {
            Candidate candidate;
            bool fresh; // not recorded when proposed
        };
        std::vector<Proposal> batch;
        const int want = std::min(o.budget - total, generation == 0 ? explore : generation_size);
        std::vector<TuningRecord> parents; // the best ok records so far, fastest first
        for (const TuningRecord &r : results) {
            if (r.status == "ok")
                parents.push_back(r);
        }
        std::stable_sort(
            parents.begin(), parents.end(),
            [](const TuningRecord &a, const TuningRecord &b) { return a.cost() < b.cost(); });
        if (parents.size() > 4)
            parents.resize(4);
        int counted = 0, proposals = 0;
        while (counted < want) {
            Candidate c = generation == 0 && proposals == 0 ? first
                          : parents.empty()
                              ? random_candidate()
                              : mutate(parents[size_t(proposals) % parents.size()].candidate);
            proposals++;
            const std::string key = candidate_key(c);
            if (!visited.insert(key).second) {
                if (++stale > 200 * int(space.size() + 1)) { // the space is exhausted
                    exhausted = true;
                    break;
                }
                continue;
            }
            stale = 0;
            batch.push_back({c, !known.count(key)});
            counted++;
        }
        std::vector<Candidate> queue;
        for (const Proposal &p : batch) {
            if (p.fresh)
                queue.push_back(p.candidate);
        }
        db->enqueue(workload, TANDEM_COMPILER_VERSION, spec, queue);

        // Measure it: this process's workers and any others sharing the database. Records are
        // reported in the generation's order as they arrive.
        size_t reported = 0;
        auto report = [&] {
            for (; reported < batch.size(); reported++) {
                const Proposal &p = batch[reported];
                auto r = known.find(candidate_key(p.candidate));
                if (r == known.end())
                    return false;
                total++;
                (p.fresh ? result.measured : result.reused)++;
                results.push_back(r->second);
                consider(r->second);
                if (r->first == candidate_key(first))
                    result.defaults = r->second;
                if (progress) {
                    TuneProgress tp;
                    tp.done = total;
                    tp.total = o.budget;
                    tp.last = &r->second;
                    tp.best = best ? &*best : nullptr;
                    tp.seconds = elapsed();
                    progress(tp);
                }
            }
            return true;
        };
        auto refresh = [&] {
            for (TuningRecord &r : db->records(workload))
                known.emplace(candidate_key(r.candidate), std::move(r));
            // Queued again if another tuner of the workload cancelled them at its start.
            std::vector<Candidate> missing;
            for (size_t i = reported; i < batch.size(); i++) {
                if (!known.count(candidate_key(batch[i].candidate)))
                    missing.push_back(batch[i].candidate);
            }
            db->enqueue(workload, TANDEM_COMPILER_VERSION, spec, missing);
        };
        auto last_refresh = std::chrono::steady_clock::now() - std::chrono::hours(1);
        work(
            *db, o.jobs, o.lease_seconds, {workload.generator}, o.device, &workload,
            [&](bool) {
                const auto now = std::chrono::steady_clock::now();
                if (now - last_refresh > std::chrono::milliseconds(250)) { // other workers' records
                    refresh();
                    last_refresh = now;
                }
                return report() || out_of_time();
            },
            [&](const TuningJob &, const TuningRecord &r) {
                known.emplace(candidate_key(r.candidate), r);
            });
        report();
        if (reported < batch.size()) { // out of time: the rest of the generation is not measured
            db->cancel(workload);
            break;
        }
    }
    if (!result.defaults && known.count(candidate_key(first)))
        result.defaults = known.at(candidate_key(first));
    result.best = best;
    return result;
}

int tune_worker(const WorkerOptions &w,
                const std::function<void(const TuningJob &, const TuningRecord &)> &done) {
    if (w.jobs < 1)
        throw Error("tune-worker: --jobs must be at least 1");
    if (w.device != "model" && w.device != "gpu") {
        throw Error("tune-worker: --device is model or gpu, not '" + w.device + "'");
    }
    std::unique_ptr<TuningDb> db = TuningDb::open(w.db.empty() ? default_tuning_db() : w.db);
    warm_up_reference_jit(); // once, before the children fork
    int completed = 0;
    auto idle_since = std::chrono::steady_clock::now();
    // The generators this program can build: Tandem's apps and its own.
    std::vector<std::string> generators = GeneratorRegistry::names();
    for (const App &app : all_apps()) {
        if (std::find(generators.begin(), generators.end(), app.name) == generators.end())
            generators.push_back(app.name);
    }
    if (w.device == "gpu")
        require_gpu();
    work(
        *db, w.jobs, w.lease_seconds, generators, w.device, nullptr,
        [&](bool idle) {
            const auto now = std::chrono::steady_clock::now();
            if (!idle)
                idle_since = now;
            return w.idle_exit > 0 &&
                   std::chrono::duration<double>(now - idle_since).count() > w.idle_exit;
        },
        [&](const TuningJob &job, const TuningRecord &r) {
            completed++;
            if (done)
                done(job, r);
        });
    return completed;
}

} // namespace tandem::apps
