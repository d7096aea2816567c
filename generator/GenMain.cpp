#include "GenMain.h"

#include "Run.h"
#include "Tune.h"
#include "TuningDb.h"
#include "common/Backend.h"
#include "tandem/AsyncIR.h"
#include "tandem/Generator.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

namespace tandem {

namespace {

std::string describe_generators() {
    std::ostringstream os;
    os << "generators:\n";
    for (const std::string &name : GeneratorRegistry::names()) {
        std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create(name);
        os << "  " << name << "\n";
        for (const GeneratorParamInfo &p : g->params()) {
            os << "    " << p.name << " (" << p.kind << ") = " << p.default_value;
            if (p.min || p.max)
                os << "  in [" << (p.min ? std::to_string(*p.min) : "") << ", "
                   << (p.max ? std::to_string(*p.max) : "") << "]";
            if (!p.choices.empty()) {
                os << "  one of";
                for (const std::string &c : p.choices)
                    os << " " << c;
            }
            if (!p.tunable.empty()) {
                os << "  tuned over";
                for (const std::string &c : p.tunable)
                    os << " " << c;
            }
            os << "\n";
        }
    }
    return os.str();
}

void write_file(const std::filesystem::path &path, const std::string &text) {
    std::ofstream out(path);
    out << text;
    if (!out)
        throw Error("cannot write " + path.string());
}

/** The tunables of the best record of the workload in `uri` (timed on a GPU first, then on the
 * model; numerics checked, else without), set on `g`; a note either way. */
void apply_best(GeneratorBase &g, const std::string &uri, const std::string &target,
                const apps::Params &given) {
    apps::TuneOptions o;
    o.app = g.name();
    o.target = target;
    o.fixed = given;
    std::unique_ptr<apps::TuningDb> db = apps::TuningDb::open(uri);
    std::optional<apps::TuningRecord> best;
    apps::TuningWorkload w;
    for (const std::string device : {"gpu", "model"}) {
        for (bool numerics : {true, false}) {
            o.device = device;
            o.numerics = numerics;
            w = apps::tuning_workload(o);
            if ((best = db->best(w)))
                break;
        }
        if (best)
            break;
    }
    if (!best) {
        std::cerr << "tuning: no record of " << apps::tuning_workload(o).key() << " in " << uri
                  << ": the defaults\n";
        return;
    }
    bool has_schedule = false;
    for (const GeneratorParamInfo &p : g.params())
        has_schedule |= p.name == "schedule";
    for (const auto &[k, v] : best->candidate) {
        if (k != "schedule" || has_schedule)
            g.set_param(k, v);
    }
    std::cerr << "tuning: " << g.name() << " for " << target << " takes "
              << apps::candidate_key(best->candidate) << " ("
              << (best->time_ms > 0 ? std::to_string(best->time_ms) + " ms"
                                    : std::to_string(best->cycles) + " cycles")
              << " on " << best->device << ", " << uri << ")\n";
}

int tune_main(const std::string &name, const std::string &target, const apps::Params &given,
              const std::string &db, int budget, int jobs, double seconds, uint64_t seed,
              double lease) {
    apps::TuneOptions o;
    o.app = name;
    o.target = target;
    o.fixed = given;
    o.db = db.empty() ? apps::default_tuning_db() : db;
    o.budget = budget;
    o.jobs = jobs;
    o.seconds = seconds;
    o.seed = seed;
    o.lease_seconds = lease;
    const apps::TuneResult r = apps::tune(o, [](const apps::TuneProgress &p) {
        std::cout << p.done << "/" << p.total << " " << apps::candidate_key(p.last->candidate)
                  << " " << p.last->status;
        if (p.last->status == "ok")
            std::cout << " " << p.last->cycles << " cycles";
        std::cout << std::endl;
    });
    std::cout << "tune " << name << " on " << target << ": " << r.measured << " measured, "
              << r.reused << " from the database (" << o.db << ")\n";
    if (!r.best) {
        std::cout << "  no candidate ran correctly\n";
        return 1;
    }
    std::cout << "  best: " << apps::candidate_key(r.best->candidate) << " " << r.best->cycles
              << " cycles\n";
    return 0;
}

int run_main(const std::string &name, const std::string &target, const apps::Params &given,
             bool json, const std::string &trace, const std::string &timeline, uint64_t seed) {
    apps::RunOptions o;
    o.target = target;
    o.trace = trace;
    o.timeline = timeline;
    o.seed = seed;
    for (const auto &[k, v] : given.values()) {
        if (k == "schedule")
            o.schedule = v;
        else
            o.params.set(k, v);
    }
    const apps::RunResult r = apps::run(apps::find_app(name), o);
    for (const std::string &w : r.kernel.warnings)
        std::cerr << "warning: " << w << "\n";
    std::cout << (json ? r.json() + "\n" : r.text());
    return r.failed() ? 1 : 0;
}

/** Random parameters of generator `name`: an int in [min, min(max, 300)] (small values and
 * primes come up often), a bool either way, a string one of its choices; a float keeps its
 * default. */
apps::Params draw_params(const std::string &name, std::mt19937_64 &rng) {
    apps::Params p;
    for (const GeneratorParamInfo &info : GeneratorRegistry::create(name)->params()) {
        if (info.kind == "int") {
            const int lo = int(info.min.value_or(1)),
                      hi = std::max(lo, std::min(int(info.max.value_or(300)), 300));
            // Log-uniform: a 1 as likely as a 200.
            const double u = std::uniform_real_distribution<double>(0, 1)(rng);
            const int v = std::min(hi, lo + int(std::exp(u * std::log(double(hi - lo + 1)))) - 1);
            p.set(info.name, std::to_string(v));
        } else if (info.kind == "bool") {
            p.set(info.name, rng() % 2 ? "true" : "false");
        } else if (info.kind == "string" && !info.choices.empty()) {
            p.set(info.name, info.choices[rng() % info.choices.size()]);
        }
    }
    return p;
}

/** `runs` random cases of this binary's generators (a generator, a target, parameters), each run
 * on the model against the reference. A user error is a refusal; a wrong result, a race, a
 * deadlock or an internal error a failure, printed with the command that repeats it. */
int fuzz_main(int runs, uint64_t seed, const std::string &only) {
    std::mt19937_64 rng(seed);
    std::vector<std::string> names = GeneratorRegistry::names();
    if (!only.empty())
        names = {only};
    int ok = 0, refused = 0, failures = 0;
    for (int i = 0; i < runs; i++) {
        const std::string name = names[rng() % names.size()];
        const std::vector<std::string> targets = Target::names();
        const std::string target = targets[rng() % targets.size()];
        const apps::Params p = draw_params(name, rng);
        std::string command = "-g " + name + " --run target=" + target;
        for (const auto &[k, v] : p.values())
            command += " " + k + "=" + v;
        std::string outcome;
        try {
            apps::RunOptions o;
            o.target = target;
            for (const auto &[k, v] : p.values()) {
                if (k == "schedule")
                    o.schedule = v;
                else
                    o.params.set(k, v);
            }
            const apps::RunResult r = apps::run(apps::find_app(name), o);
            outcome = r.failed() ? "FAILED: " + std::string(r.correct ? "" : "wrong, ") +
                                       std::to_string(r.report.race_count) + " races" +
                                       (r.report.deadlock ? ", deadlock" : "")
                                 : "ok";
        } catch (const Error &e) {
            outcome = "refused: " + in_user_words(e.what());
        } catch (const std::exception &e) {
            outcome = std::string("FAILED: internal error: ") + e.what();
        }
        ok += outcome == "ok";
        refused += outcome.rfind("refused", 0) == 0;
        failures += outcome.rfind("FAILED", 0) == 0;
        std::cout << i + 1 << "/" << runs << " " << command << ": " << outcome.substr(0, 300)
                  << std::endl;
    }
    std::cout << "fuzz: " << runs << " runs, " << ok << " ok, " << refused
              << " refused (user errors), " << failures << " failures\n";
    return failures ? 1 : 0;
}

} // namespace

int generator_main(int argc, char **argv) {
    CLI::App app{
        "Tandem generator: builds a registered generator for a target and writes its outputs"};
    app.set_help_flag("-h,--help",
                      "the generators and their parameters, then the flags (also -help)");
    std::string name, dir, function, emit = "stmt,code";
    std::vector<std::string> assignments;
    bool tune = false, tune_worker = false, run = false, json = false;
    int fuzz_runs = 0;
    std::string trace, timeline;
    std::string db;
    int budget = 64, jobs = 1;
    double seconds = 0, lease = 60, idle_exit = 0;
    uint64_t seed = 1;
    app.add_option("-g", name, "the generator to build");
    app.add_option("-o", dir, "the directory the outputs go to");
    app.add_flag("--tune", tune,
                 "autotune the generator's Tunable parameters for the target and the parameters "
                 "given, recording each candidate in the tuning database (--db); writes nothing");
    app.add_flag("--run", run,
                 "run the generator on the target's machine model (no library built) on random "
                 "inputs, check it against the generator's reference on the CPU, and report "
                 "cycles, roofline and hazards; exit 1 when it is wrong, races or deadlocks. "
                 "schedule=... picks a schedule; a runtime extent runs at its estimate");
    app.add_flag("--json", json, "--run: the report as one JSON object");
    app.add_option("--trace", trace, "--run: a Chrome/Perfetto trace of the run");
    app.add_option("--timeline", timeline, "--run: an SVG picture of the overlap");
    app.add_option("--fuzz", fuzz_runs,
                   "run this many random cases of this binary's generators (-g: of one) on "
                   "random targets and parameters against their references; exit 1 on a wrong "
                   "result, a race, a deadlock or an internal error (a user error is a refusal)");
    app.add_flag("--tune-worker", tune_worker,
                 "measure the candidates of this program's generators that tuners "
                 "queued in the shared database (--db)");
    app.add_option("--db", db,
                   "the tuning database: sqlite:PATH or postgresql://user@host:port/database");
    app.add_option("--budget", budget, "--tune: candidates to try")->check(CLI::PositiveNumber);
    app.add_option("--jobs", jobs, "candidates measured at once")->check(CLI::NonNegativeNumber);
    app.add_option("--seconds", seconds, "--tune: stop after this long as well");
    app.add_option("--seed", seed,
                   "--tune: the search's seed; --run: the inputs'; --fuzz: the cases'");
    app.add_option("--lease", lease, "seconds a worker holds a job between renewals")
        ->check(CLI::PositiveNumber);
    app.add_option("--idle-exit", idle_exit, "--tune-worker: stop after this long without a job");
    app.add_option("-f", function,
                   "the function and file base name (default: the generator's name)");
    app.add_option("-e", emit,
                   "outputs, comma-separated: stmt, halide, and the target's sources (code, cuda)");
    app.add_option("assignments", assignments,
                   "target=T[:k=v,...], tuning_db=URI (the best record of the tuning database sets "
                   "the tunable "
                   "parameters not given) and the generator's param=value");
    app.footer(describe_generators());
    std::vector<std::string> args; // CLI11 wants them last to first; Halide's GenGen takes -help
    for (int i = argc - 1; i > 0; i--)
        args.push_back(std::string(argv[i]) == "-help" ? "--help" : argv[i]);
    try {
        app.parse(args);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    try {
        if (tune_worker) {
            apps::WorkerOptions o;
            o.db = db.empty() ? apps::default_tuning_db() : db;
            o.jobs = std::max(1, jobs);
            o.lease_seconds = lease;
            o.idle_exit = idle_exit;
            const int done =
                apps::tune_worker(o, [](const apps::TuningJob &job, const apps::TuningRecord &r) {
                    std::cout << job.workload.generator << " " << apps::candidate_key(r.candidate)
                              << ": " << r.status << std::endl;
                });
            std::cout << "tune-worker: " << done << " job(s) measured\n";
            return 0;
        }
        if (fuzz_runs > 0)
            return fuzz_main(fuzz_runs, seed, name);
        if (name.empty())
            throw Error("-g: name the generator (--help lists them)");
        if (dir.empty() && !tune && !run)
            throw Error("-o: name the directory the outputs go to");
        std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create(name);
        std::string target_text = "zpu", tuning_db;
        apps::Params given;
        for (const std::string &a : assignments) {
            size_t eq = a.find('=');
            if (eq == std::string::npos)
                throw Error("'" + a + "' is not key=value (target=... or a parameter)");
            if (a.substr(0, eq) == "target") {
                target_text = a.substr(eq + 1);
            } else if (a.substr(0, eq) == "tuning_db") {
                tuning_db = a.substr(eq + 1);
            } else {
                g->set_param(a.substr(0, eq), a.substr(eq + 1));
                given.set(a.substr(0, eq), a.substr(eq + 1));
            }
        }
        if (tune)
            return tune_main(name, target_text, given, db, budget, jobs, seconds, seed, lease);
        if (run)
            return run_main(name, target_text, given, json, trace, timeline, seed);
        if (!tuning_db.empty())
            apply_best(*g, tuning_db, target_text, given);
        Target target = Target::parse(target_text);
        if (function.empty())
            function = name;
        Kernel kernel = g->compile(target, function);
        for (const std::string &w : kernel.warnings)
            std::cerr << "warning: " << w << "\n";
        std::filesystem::create_directories(dir);
        const TargetBackend &backend = backend_of(target);
        std::stringstream kinds(emit);
        std::string kind;
        while (std::getline(kinds, kind, ',')) {
            std::filesystem::path base = std::filesystem::path(dir) / function;
            if (kind == "stmt") {
                write_file(base.string() + ".stmt", kernel.stmt_text());
                continue;
            }
            if (kind == "halide") {
                write_file(base.string() + ".halide.stmt", ir::to_string(kernel.halide_stmt));
                continue;
            }
            bool found = false;
            std::string known = "stmt, halide";
            for (const Source &source : backend.sources) {
                known += ", " + source.what;
                if (source.what != kind)
                    continue;
                write_file(base.string() + source.suffix,
                           source.emit(kernel, function, EmitOptions{}));
                found = true;
            }
            if (!found && kind == "static_library") {
                std::string sources;
                for (const Source &source : backend.sources)
                    sources += (sources.empty() ? "" : ",") + source.what;
                throw Error(
                    "-e static_library: Tandem writes the library's sources (-e " + sources +
                    ") and CMake compiles them: add_tandem_library (README, Writing a generator)");
            }
            if (!found)
                throw Error("-e " + kind + ": target " + target.name() + " emits " + known);
        }
    } catch (const Error &e) {
        std::cerr << "error: " << in_user_words(e.what()) << "\n";
        return 1;
    } catch (const std::exception &e) {
        // Tandem's or Halide's internal error: reported with what reproduces it, never an abort.
        std::string command;
        for (int i = 1; i < argc; i++)
            command += std::string(" ") + argv[i];
        std::cerr << "internal error: " << e.what() << "\n  while running" << command
                  << "\n  (a bug of Tandem, not of the generator: please report it with this "
                     "command)\n";
        return 1;
    }
    return 0;
}

} // namespace tandem
