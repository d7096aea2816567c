#include "Tune.h"

#include "Fuzz.h"
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

/** The tunable parameters and their values: the app's choices (without repeats) for parameters the
 * user did not fix and that only schedule the problem (every value leaves its Workload as it is:
 * an output type or a fused epilogue changes the algorithm), plus the target's schedules. */
std::map<std::string, std::vector<std::string>> search_space(const App &app, const TuneOptions &o) {
    std::map<std::string, std::vector<std::string>> space;
    const Params defaults = with_defaults(app, o.fixed, o.target);
    const Workload problem = app.workload(defaults);
    for (const auto &[name, values] : app.choices) {
        if (o.fixed.has(name) || std::count(app.variants.begin(), app.variants.end(), name)) continue;
        bool schedule_only = true;
        for (const std::string &v : values) {
            Params p = defaults;
            p.set(name, v);
            schedule_only = schedule_only && same_problem(app.workload(p), problem);
        }
        if (!schedule_only) continue;
        std::vector<std::string> distinct;
        for (const std::string &v : values) {
            if (std::find(distinct.begin(), distinct.end(), v) == distinct.end()) distinct.push_back(v);
        }
        if (distinct.size() > 1) space[name] = distinct;
    }
    if (!o.fixed.has("schedule")) space["schedule"] = schedules_for(app, o.target);
    return space;
}

std::string now_utc() {
    std::time_t t = std::time(nullptr);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return text;
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
        if (k != "schedule") run_options.params.set(k, v);
    }
    run_options.schedule = c.count("schedule") ? c.at("schedule") : o.fixed.has("schedule") ? o.fixed.get("schedule") : "";
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

/** measure() in a child process: a candidate that runs past `timeout_seconds`, or past the memory
 * limit, or crashes, is a record (timeout / crash) and the tuner goes on. */
TuningRecord measure_isolated(const App &app, const TuneOptions &o, const Candidate &c) {
    int fds[2];
    if (pipe(fds) != 0) throw Error(std::string("tune: pipe failed: ") + std::strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) throw Error(std::string("tune: fork failed: ") + std::strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        const rlim_t bytes = rlim_t(o.memory_gb * (1ull << 30));
        const rlimit limit{bytes, bytes};
        setrlimit(RLIMIT_AS, &limit);
        const TuningRecord r = measure(app, o, c);
        const std::string text = nlohmann::json({{"status", r.status}, {"cycles", r.cycles},
                                                 {"roofline_fraction", r.roofline_fraction}, {"device", r.device},
                                                 {"message", r.message}})
                                     .dump();
        const ssize_t written = write(fds[1], text.data(), text.size());
        _exit(written == ssize_t(text.size()) ? 0 : 1);
    }
    close(fds[1]);
    TuningRecord r;
    r.candidate = c;
    r.seed = o.seed;
    r.date = now_utc();
    const auto start = std::chrono::steady_clock::now();
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > o.timeout_seconds) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            close(fds[0]);
            r.status = "timeout";
            r.message = "no result after " + std::to_string(int(o.timeout_seconds)) + " s";
            return r;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string text;
    char buffer[4096];
    ssize_t n;
    while ((n = read(fds[0], buffer, sizeof buffer)) > 0) text.append(buffer, size_t(n));
    close(fds[0]);
    if (WIFSIGNALED(status) || text.empty()) {
        r.status = "crash";
        r.message = WIFSIGNALED(status) ? std::string("killed by signal ") + strsignal(WTERMSIG(status))
                                        : "exited with status " + std::to_string(WEXITSTATUS(status)) + " and no result";
        return r;
    }
    const nlohmann::json j = nlohmann::json::parse(text);
    r.status = j.at("status");
    r.cycles = j.at("cycles");
    r.roofline_fraction = j.at("roofline_fraction");
    r.device = j.at("device");
    r.message = j.at("message");
    return r;
}

} // namespace

TuningWorkload tuning_workload(const TuneOptions &o) {
    const App &app = find_app(o.app);
    TuningWorkload w;
    w.generator = app.name;
    w.target = o.target;
    const Target target = Target::parse(o.target);
    w.compiler = std::string("tandem ") + TANDEM_COMPILER_VERSION + ", " + target.name() + " v" +
                 std::to_string(target.machine.version()) + (o.numerics ? "" : ", no numerics");
    // The workload is the fixed parameters with the defaults of everything not tuned.
    Params all = with_defaults(app, o.fixed, o.target);
    const auto space = search_space(app, o);
    for (const auto &[k, v] : all.values()) {
        if (!space.count(k)) w.fixed[k] = v;
    }
    if (o.fixed.has("schedule")) w.fixed["schedule"] = o.fixed.get("schedule");
    return w;
}

TuneResult tune(const TuneOptions &o, const std::function<void(const TuneProgress &)> &progress) {
    const App &app = find_app(o.app);
    if (o.budget < 1) throw Error("tune: --budget must be at least 1");
    std::unique_ptr<TuningDb> db = TuningDb::open(o.db.empty() ? default_tuning_db() : o.db);
    if (o.isolate) warm_up_reference_jit(); // once, before the children fork
    TuneResult result;
    result.workload = tuning_workload(o);
    const auto space = search_space(app, o);
    result.space = 1;
    for (const auto &[k, values] : space) result.space = int(std::min<int64_t>(int64_t(result.space) * int64_t(values.size()), 1 << 30));

    // Already measured (a previous or killed run): reused, never measured again.
    std::map<std::string, TuningRecord> known;
    for (TuningRecord &r : db->records(result.workload)) known[candidate_key(r.candidate)] = std::move(r);
    std::optional<TuningRecord> best;
    auto consider = [&](const TuningRecord &r) {
        if (r.status == "ok" && (!best || r.cycles < best->cycles)) best = r;
    };

    const Params defaults = with_defaults(app, o.fixed, o.target);
    Candidate first;
    for (const auto &[k, values] : space) {
        first[k] = k == "schedule" ? schedules_for(app, o.target).front() : defaults.get(k);
    }

    std::mt19937_64 rng(o.seed);
    auto random_candidate = [&] {
        Candidate c;
        for (const auto &[k, values] : space) c[k] = values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
        return c;
    };
    auto mutate = [&](Candidate c) {
        const int changes = 1 + int(std::uniform_int_distribution<int>(0, 2)(rng) == 0);
        for (int i = 0; i < changes && !space.empty(); i++) {
            auto it = space.begin();
            std::advance(it, std::uniform_int_distribution<size_t>(0, space.size() - 1)(rng));
            const auto &values = it->second;
            size_t at = size_t(std::find(values.begin(), values.end(), c[it->first]) - values.begin());
            // A neighbouring value (choices are listed in order) or, one time in three, any.
            size_t next = std::uniform_int_distribution<int>(0, 2)(rng) == 0 || at >= values.size()
                              ? std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)
                              : std::uniform_int_distribution<int>(0, 1)(rng) ? std::min(at + 1, values.size() - 1)
                                                                              : (at > 0 ? at - 1 : 0);
            c[it->first] = values[next];
        }
        return c;
    };

    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    std::set<std::string> visited;
    int total = o.resume ? int(known.size()) : 0;
    const int explore = std::max(1, o.budget / 3); // random candidates before local search
    int proposals = 0, stale = 0;
    while (total < o.budget && !(o.seconds > 0 && elapsed() > o.seconds)) {
        Candidate c = proposals == 0 ? first : (proposals < explore || !best) ? random_candidate() : mutate(best->candidate);
        proposals++;
        const std::string key = candidate_key(c);
        if (!visited.insert(key).second) {
            if (++stale > 200 * int(space.size() + 1)) break; // the space is exhausted
            continue;
        }
        stale = 0;
        auto old = known.find(key);
        TuningRecord r;
        if (old != known.end()) {
            r = old->second;
            result.reused++;
            if (!o.resume) total++;
        } else {
            r = o.isolate ? measure_isolated(app, o, c) : measure(app, o, c);
            db->add(result.workload, r);
            result.measured++;
            total++;
        }
        consider(r);
        if (key == candidate_key(first)) result.defaults = r;
        if (progress) {
            TuneProgress p;
            p.done = total;
            p.total = o.budget;
            p.last = &r;
            p.best = best ? &*best : nullptr;
            p.seconds = elapsed();
            progress(p);
        }
    }
    // With resume, the best of every record of the workload.
    for (const auto &[key, r] : known) consider(r);
    if (!result.defaults && known.count(candidate_key(first))) result.defaults = known.at(candidate_key(first));
    result.best = best;
    return result;
}

} // namespace tandem::apps
