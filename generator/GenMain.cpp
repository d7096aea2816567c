#include "GenMain.h"

#include "Fuzz.h"
#include "Run.h"
#include "Tune.h"
#include "TuningDb.h"
#include "common/Backend.h"
#include "tandem/AsyncIR.h"
#include "tandem/Generator.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
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
             bool json, const std::string &trace, const std::string &timeline,
             const std::string &save, uint64_t seed, bool numerics) {
    apps::RunOptions o;
    o.save = save;
    o.numerics = numerics;
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

/** The fuzzer over this program's own generators (apps::fuzz with FuzzOptions::program): each
 * case in a child process, a failure (with --verbose, every case) printed as a line with the
 * command that repeats it, then
 * the summary; exit 1 on a failure. */
int fuzz_main(const apps::FuzzOptions &o, bool json, bool verbose) {
    const apps::FuzzSummary s = apps::fuzz(o, [verbose](const apps::FuzzResult &r) {
        if (r.failure() || verbose)
            std::cout << r.line() << std::endl;
    });
    std::cout << (json ? s.json(o.seed) + "\n" : s.text(o.seed));
    return s.failures ? 1 : 0;
}

} // namespace

int generator_main(int argc, char **argv) {
    CLI::App app{
        "Tandem generator: builds a registered generator for a target and writes its outputs"};
    app.set_help_flag("-h,--help",
                      "the generators and their parameters, then the flags (also -help)");
    std::string name, dir, function, emit = "stmt,code";
    std::vector<std::string> assignments;
    bool tune = false, tune_worker = false, run = false, json = false, verbose = false;
    bool no_numerics = false;
    int fuzz_runs = -1;
    double timeout = 120;
    std::string trace, timeline, save;
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
    app.add_flag("--json", json, "--run: the report as one JSON object; --fuzz: the summary");
    app.add_flag("--no-numerics", no_numerics,
                 "--run: timing and hazards only (no data, no reference): shapes too large to "
                 "check on the CPU");
    app.add_flag("--verbose", verbose, "--fuzz: a line per case, each refusal with its reason too");
    app.add_option("--trace", trace, "--run: a Chrome/Perfetto trace of the run");
    app.add_option("--timeline", timeline, "--run: an SVG picture of the overlap");
    app.add_option("--save", save,
                   "--run: write the inputs and the reference's output into this directory, for "
                   "the library's runner to check the same problem on its hardware "
                   "(<lib>_run --check DIR)");
    app.add_option("--fuzz", fuzz_runs,
                   "run this many random cases (0: as many as --seconds allows, default 60 s) of "
                   "this binary's generators (-g: of one; target=T: on one target) on random "
                   "targets and parameters against their references, each in a child process "
                   "(--jobs at once, --timeout); a line for each wrong result, race, deadlock, "
                   "crash, hang or internal error (a user error is a refusal), then the summary "
                   "(--json: as JSON); exit 1 on any")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--timeout", timeout, "--fuzz: seconds before a case counts as hung")
        ->check(CLI::PositiveNumber);
    app.add_flag("--tune-worker", tune_worker,
                 "measure the candidates of this program's generators that tuners "
                 "queued in the shared database (--db)");
    app.add_option("--db", db,
                   "the tuning database: sqlite:PATH or postgresql://user@host:port/database");
    app.add_option("--budget", budget, "--tune: candidates to try")->check(CLI::PositiveNumber);
    app.add_option("--jobs", jobs, "candidates measured (--fuzz: cases run) at once")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--seconds", seconds, "--tune, --fuzz: stop after this long as well");
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
        if (fuzz_runs >= 0) {
            apps::FuzzOptions o;
            o.program = argv[0];
            o.runs = fuzz_runs > 0 ? fuzz_runs : -1;
            o.seconds = seconds > 0 || fuzz_runs > 0 ? seconds : 60;
            o.jobs = std::max(1, jobs);
            o.timeout = timeout;
            o.seed = seed;
            o.app = name;
            for (const std::string &a : assignments) {
                if (a.rfind("target=", 0) == 0)
                    o.target = a.substr(7);
                else
                    throw Error("--fuzz draws the parameters; it takes target=T only, not '" + a +
                                "'");
            }
            return fuzz_main(o, json, verbose);
        }
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
            return run_main(name, target_text, given, json, trace, timeline, save, seed,
                            !no_numerics);
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
                write_file(base.string() + ".halide.stmt", kernel.halide_text());
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
        std::cerr << "error: " << e.what() << "\n";
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
