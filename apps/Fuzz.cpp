#include "Fuzz.h"

#include "Run.h"
#include "common/Backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace tandem::apps {

namespace {

/** The most model steps (kernel_steps) a fuzzed case may take: about a minute of simulation, half
 * the timeout, at the slowest rate measured (session 35, this project's 2-core machine: 4.2 us
 * per step for a batched matmul with 3 x 1 x 2 tiles on the Ascend model, whose 31.5M steps took
 * 133 s alone and timed out in fuzz_session34; 1-6 us per step for the apps' defaults on every
 * target). A case above it is too_large, not a failure. */
constexpr int64_t kFuzzMaxSteps = 12'000'000;
/** On Ascend memory binds first: its model keeps every op of the run, about 2.3 KB per step
 * (session 47: a flash_attention of 9512 heads, 1.42M steps, took 3.2 GB; one of 10.2M steps
 * took 22.9 GB and 129 s). 4M steps is about 9 GB: two fuzz jobs fit this machine's 24 GB. */
constexpr int64_t kFuzzMaxAscendSteps = 4'000'000;

const double max_tiles = 2048; // tiles per case: each costs the models a few ops

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/** An extent biased to the values that break loop nests: 1, 2, primes, the tile and its
 * neighbours, multiples of the tile, and anything up to `max`. */
int draw_extent(std::mt19937_64 &rng, int tile, int max) {
    static const int primes[] = {3, 5, 7, 11, 13, 17, 31, 61, 127, 257, 509, 1021, 4099, 65537};
    auto pick = [&](int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
    int v = 1;
    switch (pick(tile > 1 ? 10 : 5)) {
    case 0:
        v = 1;
        break;
    case 1:
        v = 2;
        break;
    case 2:
        v = primes[pick(int(std::size(primes)))];
        break;
    case 3:
    case 4:
        v = 1 + pick(max);
        break;
    case 5:
        v = tile - 1;
        break;
    case 6:
        v = tile;
        break;
    case 7:
        v = tile + 1;
        break;
    case 8:
        v = tile * (2 + pick(3));
        break;
    default:
        v = tile * (2 + pick(3)) + (pick(2) ? 1 : -1);
        break;
    }
    return std::clamp(v, 1, max);
}

std::string first_line(const std::string &s) {
    std::string line = s.substr(0, s.find('\n'));
    return line.size() > 400 ? line.substr(0, 400) + "..." : line;
}

std::string emit(const Kernel &k) {
    const Source &source = backend_of(k.target).sources.front();
    return source.emit(k, "fuzz", EmitOptions{});
}

} // namespace

const char *outcome_name(Outcome o) {
    switch (o) {
    case Outcome::Ok:
        return "ok";
    case Outcome::UserError:
        return "user_error";
    case Outcome::Wrong:
        return "wrong";
    case Outcome::Race:
        return "race";
    case Outcome::Deadlock:
        return "deadlock";
    case Outcome::InternalError:
        return "internal_error";
    case Outcome::Crash:
        return "crash";
    case Outcome::Timeout:
        return "timeout";
    case Outcome::TooLarge:
        return "too_large";
    }
    return "?";
}

std::string FuzzCase::command() const {
    if (!program.empty()) {
        std::string s = program + " -g " + app + " --run target=" + target;
        if (schedule != "default")
            s += " schedule=" + schedule;
        for (const auto &[k, v] : params.values())
            s += " " + k + "=" + v;
        return s + " --seed " + std::to_string(index + 1);
    }
    std::string s = "./tandem run " + app + " --target " + target + " --schedule " + schedule;
    for (const auto &[k, v] : params.values())
        s += " --param " + k + "=" + v;
    if (!at.empty()) {
        for (const auto &[k, v] : at.front().values())
            s += " --at " + k + "=" + v;
    }
    return s + " --seed " + std::to_string(index + 1);
}

namespace {

bool is_tandem_app(const std::string &name) {
    return std::any_of(all_apps().begin(), all_apps().end(),
                       [&](const App &a) { return a.name == name; });
}

/** A case of one of this program's own generators: a generator, a target, a schedule, and every
 * other parameter drawn from its declaration (ints log-uniform in [min, min(max, 300)], so a 1 is
 * as likely as a 200; bools either way; strings one of their choices; floats keep their
 * defaults). */
FuzzCase draw_generator_case(const FuzzOptions &options, uint64_t index, std::mt19937_64 &rng) {
    auto pick = [&](size_t n) {
        return size_t(std::uniform_int_distribution<size_t>(0, n - 1)(rng));
    };
    std::vector<std::string> names;
    for (const std::string &name : GeneratorRegistry::names()) {
        if (!is_tandem_app(name) && (options.app.empty() || options.app == name))
            names.push_back(name);
    }
    if (names.empty())
        throw Error("fuzz: " + options.program + " has no generator of its own" +
                    (options.app.empty() ? "" : " named " + options.app));
    const std::vector<std::string> targets =
        options.target.empty() ? Target::names() : std::vector<std::string>{options.target};
    FuzzCase c;
    c.index = index;
    c.emit = options.emit;
    c.program = options.program;
    c.app = names[pick(names.size())];
    c.target = targets[pick(targets.size())];
    const std::vector<std::string> &schedules = schedules_for(find_app(c.app), c.target);
    c.schedule = schedules[pick(schedules.size())];
    // Parameters the generator's own algorithm refuses (its checks in generate(): a head count
    // that is not a multiple of the key-value heads, a causal mask with fewer keys than queries)
    // test only those checks: they are drawn again, up to fifty times, so that most cases reach the
    // compiler.
    for (int attempt = 0; attempt < 50; attempt++) {
        c.params = Params();
        for (const GeneratorParamInfo &info : GeneratorRegistry::create(c.app)->params()) {
            if (info.name == "schedule")
                continue;
            if (info.kind == "int") {
                const int lo = int(info.min.value_or(1)),
                          hi = std::max(lo, std::min(int(info.max.value_or(300)), 300));
                const double u = std::uniform_real_distribution<double>(0, 1)(rng);
                const int v =
                    std::min(hi, lo + int(std::exp(u * std::log(double(hi - lo + 1)))) - 1);
                c.params.set(info.name, std::to_string(v));
            } else if (info.kind == "bool") {
                c.params.set(info.name, pick(2) ? "true" : "false");
            } else if (info.kind == "string" && !info.choices.empty()) {
                c.params.set(info.name, info.choices[pick(info.choices.size())]);
            }
        }
        if (algorithm_accepts(c))
            break;
    }
    return c;
}

} // namespace

bool algorithm_accepts(const FuzzCase &c) {
    try {
        std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create(c.app);
        for (const auto &[name, value] : c.params.values())
            g->set_param(name, value);
        g->build_algorithm();
    } catch (const Error &) {
        return false;
    } catch (...) {
    }
    return true;
}

FuzzCase draw_case(const FuzzOptions &options, uint64_t index) {
    // One generator per case: the case does not depend on which cases ran before it.
    std::seed_seq seq{uint32_t(options.seed), uint32_t(options.seed >> 32), uint32_t(index),
                      uint32_t(index >> 32)};
    std::mt19937_64 rng(seq);
    if (!options.program.empty())
        return draw_generator_case(options, index, rng);
    auto pick = [&](size_t n) {
        return size_t(std::uniform_int_distribution<size_t>(0, n - 1)(rng));
    };

    std::vector<std::pair<const App *, std::string>> pairs;
    for (const App &app : all_apps()) {
        if (!options.app.empty() && app.name != options.app)
            continue;
        if (options.runtime_shapes && !app.defaults.count("shapes"))
            continue;
        for (const std::string &t : Target::names()) {
            if (!options.target.empty() && options.target != t)
                continue;
            if (options.runtime_shapes && !takes_runtime_shapes(Target::parse(t)))
                continue;
            pairs.push_back({&app, t});
        }
    }
    if (pairs.empty()) {
        throw Error(options.runtime_shapes
                        ? "fuzz --runtime-shapes: no app takes shapes=runtime on the given --app "
                          "and --target"
                        : "fuzz: no app has a schedule for the given --app and --target");
    }
    FuzzCase c;
    c.index = index;
    c.emit = options.emit;
    auto [app, target] = pairs[pick(pairs.size())];
    c.app = app->name;
    c.target = target;
    const std::vector<std::string> &schedules = schedules_for(*app, target);
    c.schedule = schedules[pick(schedules.size())];
    c.defaults = pick(2) == 0;
    for (const auto &[key, values] : app->choices) {
        // Defaults mode keeps the schedule's parameters and draws the algorithm's variants.
        if (c.defaults &&
            std::find(app->variants.begin(), app->variants.end(), key) == app->variants.end())
            continue;
        c.params.set(key, values[pick(values.size())]);
    }
    if (options.runtime_shapes)
        c.params.set("shapes", "runtime");
    Params all = with_defaults(*app, c.params, target);
    auto tile_of = [&](size_t i) {
        const std::string &t = app->extents[i].tile;
        return t.empty() ? 0 : all.get_int(t);
    };
    // A fixed extent of a runtime-shape kernel (attention's head size D) is drawn once.
    auto fixed = [&](size_t i) { return options.runtime_shapes && app->extents[i].tile.empty(); };
    auto draw_extents = [&](const std::vector<int> *estimates) {
        std::vector<int> extents;
        for (size_t i = 0; i < app->extents.size(); i++) {
            extents.push_back(estimates && fixed(i)
                                  ? (*estimates)[i]
                                  : draw_extent(rng, tile_of(i), app->extents[i].max));
        }
        // Keep the problem small enough for the models (elements, and tiles: each is a few ops):
        // cut the largest extent, or the one with the most tiles, until it fits.
        auto tiles = [&](size_t i) {
            return tile_of(i) > 0 ? (extents[i] + tile_of(i) - 1) / tile_of(i) : 1;
        };
        auto cut = [&](int &e) {
            e = std::max(1, int(std::uniform_int_distribution<int>(e / 4, e / 2)(rng)));
        };
        while (true) {
            double problem = 1, all_tiles = 1;
            size_t most_tiles = 0, largest = 0;
            for (size_t i = 0; i < extents.size(); i++) {
                problem *= extents[i];
                all_tiles *= tiles(i);
                if (tiles(i) > tiles(most_tiles))
                    most_tiles = i;
                if (extents[i] > extents[largest] && !(estimates && fixed(i)))
                    largest = i;
            }
            if (problem > app->max_problem && extents[largest] > 1)
                cut(extents[largest]);
            else if (all_tiles > max_tiles)
                cut(extents[most_tiles]);
            else
                break;
        }
        return extents;
    };
    const std::vector<int> extents = draw_extents(nullptr);
    for (size_t i = 0; i < extents.size(); i++)
        c.params.set(app->extents[i].name, std::to_string(extents[i]));
    for (int s = 0; options.runtime_shapes && s < options.shapes_per_case; s++) {
        Params shape;
        std::vector<int> at = draw_extents(&extents);
        // Hopper takes rows of a multiple of 16 bytes at the call (TMA strides; others are refused,
        // ShapeError): mostly multiples of 8, so that most shapes run.
        for (size_t i = 0; target == "hopper" && i < at.size(); i++) {
            if (!fixed(i) && pick(4) != 0)
                at[i] = (at[i] + 7) / 8 * 8;
        }
        for (size_t i = 0; i < at.size(); i++) {
            if (!fixed(i))
                shape.set(app->extents[i].name, std::to_string(at[i]));
        }
        c.at.push_back(shape);
    }
    return c;
}

FuzzResult run_case(const FuzzCase &c) {
    FuzzResult r;
    r.c = c;
    auto t0 = std::chrono::steady_clock::now();
    std::string where; // runtime shapes: the shape a failure is at (the command shows the first)
    try {
        RunOptions o;
        o.params = c.params;
        o.schedule = c.schedule;
        o.target = c.target;
        o.seed = c.index + 1;
        o.max_steps = c.target.rfind("ascend", 0) == 0 ? kFuzzMaxAscendSteps : kFuzzMaxSteps;
        const App &app = find_app(c.app);
        RunResult run_result;
        if (c.at.empty()) {
            run_result = run(app, o);
        } else {
            // One kernel at every shape; the first shape it fails at is the case's.
            const Params compiled = with_defaults(app, c.params, c.target);
            const Kernel kernel = compile_app(app, compiled, c.schedule, Target::parse(c.target));
            Built reference = app.build(compiled, "reference", Target::parse(c.target));
            run_result.correct = true; // every shape refused: nothing ran wrong
            run_result.kernel = kernel;
            for (const Params &shape : c.at) {
                Params call = compiled;
                for (const auto &[k, v] : shape.values())
                    call.set(k, v);
                where = "at";
                for (const auto &[k, v] : shape.values())
                    where += " " + k + "=" + v;
                where += ": ";
                try {
                    run_result = run_kernel(app, kernel, call, c.schedule, o, &reference);
                } catch (const ShapeError &e) {
                    // A stride the target cannot take is a clear refusal; the shapes drawn here are
                    // consistent, so an input the algorithm reads past is the checks' own bug.
                    if (!e.target_limit)
                        throw Error(e.what());
                    r.refused++;
                    where.clear();
                    continue;
                }
                if (run_result.report.deadlock || run_result.report.race_count ||
                    !run_result.correct)
                    break;
            }
        }
        const sim::Report &report = run_result.report;
        if (report.deadlock) {
            r.outcome = Outcome::Deadlock;
            r.message = report.deadlock_message;
        } else if (report.race_count) {
            r.outcome = Outcome::Race;
            r.message = report.races.empty() ? "race" : report.races.front().str();
        } else if (!run_result.correct) {
            r.outcome = Outcome::Wrong;
            r.message = "max_rel_err " + std::to_string(run_result.max_rel_err);
        } else if (c.emit) {
            // What runs on the model emits: an emitter's refusal after a clean run is the
            // compiler's gap (it should have been refused before the model ran it), a failure.
            try {
                emit(run_result.kernel);
            } catch (const Error &e) {
                throw std::runtime_error(std::string("emit: the model ran it, the emitter refused "
                                                     "it: ") +
                                         e.what());
            }
        }
    } catch (const TooLarge &e) {
        r.outcome = Outcome::TooLarge;
        r.message = e.what();
    } catch (const Error &e) {
        r.outcome = Outcome::UserError;
        r.message = e.what();
    } catch (const std::exception &e) {
        r.outcome = Outcome::InternalError;
        r.message = e.what();
    }
    if (r.outcome != Outcome::Ok)
        r.message = where + r.message;
    r.message = first_line(r.message);
    r.seconds = seconds_since(t0);
    return r;
}

std::string FuzzResult::line() const {
    char head[64];
    std::snprintf(head, sizeof head, " (%s, %.1f s) ",
                  c.program.empty() ? (c.defaults ? "defaults" : "random") : "generator", seconds);
    return std::string(failure() ? "FAIL " : "pass ") + outcome_name(outcome) + head + c.command() +
           "  # " + message;
}

namespace {

nlohmann::ordered_json counts_json(const FuzzSummary &s) {
    nlohmann::ordered_json by = nlohmann::ordered_json::object();
    for (const auto &[target, counts] : s.by_target) {
        for (const auto &[k, n] : counts)
            by[target][k] = n;
    }
    return by;
}

} // namespace

std::string FuzzSummary::json(uint64_t seed) const {
    nlohmann::ordered_json j;
    j["fuzz"] = {{"runs", runs},
                 {"failures", failures},
                 {"seed", seed},
                 {"seconds", int64_t(seconds)},
                 {"by_target", counts_json(*this)}};
    if (shapes_per_run)
        j["fuzz"]["shapes_per_run"] = shapes_per_run;
    for (const FuzzSummary &p : programs) {
        j["fuzz"]["generators"][p.program] = {
            {"runs", p.runs}, {"failures", p.failures}, {"by_target", counts_json(p)}};
    }
    return j.dump();
}

std::string FuzzSummary::text(uint64_t seed) const {
    std::string s;
    auto add = [&](const char *format, auto... args) {
        char line[512];
        std::snprintf(line, sizeof line, format, args...);
        s += line;
    };
    add("fuzz: %lld runs in %.0f s (seed %llu), %lld failures\n", (long long)runs, seconds,
        (unsigned long long)seed, (long long)failures);
    auto by = [&](const FuzzSummary &summary, const char *indent) {
        for (const auto &[target, counts] : summary.by_target) {
            add("%s%-7s", indent, target.c_str());
            for (const auto &[k, n] : counts)
                add(" %s %lld", k.c_str(), (long long)n);
            add("\n");
        }
    };
    by(*this, "  ");
    for (const FuzzSummary &p : programs) {
        add("  generators of %s: %lld runs, %lld failures\n", p.program.c_str(), (long long)p.runs,
            (long long)p.failures);
        by(p, "    ");
    }
    return s;
}

FuzzSummary FuzzSummary::from_json(const std::string &line) {
    const nlohmann::json j = nlohmann::json::parse(line).at("fuzz");
    FuzzSummary s;
    s.runs = j.at("runs").get<int64_t>();
    s.failures = j.at("failures").get<int64_t>();
    s.seconds = j.at("seconds").get<double>();
    for (const auto &[target, counts] : j.at("by_target").items()) {
        for (const auto &[k, n] : counts.items())
            s.by_target[target][k] = n.get<int64_t>();
    }
    return s;
}

namespace {

struct Child {
    pid_t pid;
    int fd;
    FuzzCase c;
    std::chrono::steady_clock::time_point start;
};

Child spawn(const FuzzCase &c) {
    int fds[2];
    if (pipe(fds) != 0)
        throw Error(std::string("fuzz: pipe failed: ") + std::strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        throw Error(std::string("fuzz: fork failed: ") + std::strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        FuzzResult r = run_case(c);
        std::string line =
            std::to_string(int(r.outcome)) + "\t" + std::to_string(r.refused) + "\t" + r.message;
        ssize_t written = write(fds[1], line.data(), line.size());
        _exit(written == ssize_t(line.size()) ? 0 : 1);
    }
    close(fds[1]);
    return {pid, fds[0], c, std::chrono::steady_clock::now()};
}

std::string read_all(int fd) {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        s.append(buf, size_t(n));
    return s;
}

} // namespace

/** JIT-compiles Halide's runtime for the reference target once, here, so that every child
 * inherits it instead of compiling it again (most of a case's time otherwise). No parallel loop
 * runs here: a thread pool would not survive fork(). */
void warm_up_reference_jit() {
    Halide::Func f("fuzz_warm_up");
    Halide::Var x("x");
    f(x) = Halide::cast<float>(x) * 2.0f;
    Halide::Buffer<float> out(8);
    f.realize(out, reference_target());
}

FuzzSummary fuzz(const FuzzOptions &options,
                 const std::function<void(const FuzzResult &)> &report) {
    warm_up_reference_jit();
    FuzzSummary summary;
    if (options.runtime_shapes)
        summary.shapes_per_run = options.shapes_per_case;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<Child> running;
    uint64_t next = 0;
    auto more = [&] {
        return (options.runs < 0 || int64_t(next) < options.runs) &&
               (options.seconds <= 0 || seconds_since(t0) < options.seconds);
    };
    while (true) {
        while (int(running.size()) < std::max(1, options.jobs) && more())
            running.push_back(spawn(draw_case(options, next++)));
        if (running.empty())
            break;
        bool any = false;
        for (size_t i = 0; i < running.size();) {
            Child &child = running[i];
            int status = 0;
            pid_t done = waitpid(child.pid, &status, WNOHANG);
            FuzzResult r;
            r.c = child.c;
            r.seconds = seconds_since(child.start);
            if (done == 0 && r.seconds < options.timeout) {
                i++;
                continue;
            }
            if (done == 0) {
                kill(child.pid, SIGKILL);
                waitpid(child.pid, &status, 0);
                r.outcome = Outcome::Timeout;
                r.message = "no result after " + std::to_string(int(options.timeout)) + " s";
            } else {
                std::string line = read_all(child.fd);
                auto tab = line.find('\t');
                if (WIFSIGNALED(status)) {
                    r.outcome = Outcome::Crash;
                    r.message = std::string("killed by signal ") + strsignal(WTERMSIG(status));
                } else if (tab == std::string::npos) {
                    r.outcome = Outcome::Crash;
                    r.message = "exited with status " + std::to_string(WEXITSTATUS(status)) +
                                " and no result";
                } else {
                    r.outcome = Outcome(std::stoi(line.substr(0, tab)));
                    const auto second = line.find('\t', tab + 1);
                    r.refused = std::stoi(line.substr(tab + 1, second - tab - 1));
                    r.message = line.substr(second + 1);
                }
            }
            close(child.fd);
            running.erase(running.begin() + long(i));
            any = true;
            summary.runs++;
            auto &counts = summary.by_target[r.c.target];
            counts["runs"]++;
            counts[r.c.defaults ? "runs_at_defaults" : "runs_at_random"]++;
            counts[outcome_name(r.outcome)]++;
            if (r.refused)
                counts["shapes_refused"] += r.refused;
            if (r.failure()) {
                summary.failures++;
                counts["failures"]++;
                counts[r.c.defaults ? "failures_at_defaults" : "failures_at_random"]++;
            }
            report(r);
        }
        if (!any)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    summary.seconds = seconds_since(t0);
    return summary;
}

} // namespace tandem::apps
