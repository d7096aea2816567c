// The tandem command line: list, run, emit, fuzz, tune, demo. `./tandem <command> ...` forwards
// here (apps/main.cpp).
#include "Cli.h"

#include "App.h"
#include "Fuzz.h"
#include "GpuBundle.h"
#include "GpuTiming.h"
#include "Run.h"
#include "Tune.h"
#include "common/Backend.h"
#include "lower/Targets.h"
#include "tandem/AsyncIR.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace tandem;
using namespace tandem::apps;

namespace {

struct Args {
    std::string command, app, target = "zpu", schedule, what = "stmt", out_dir, trace, timeline,
                              name, db, rows;
    int drop_flag = -1;
    Params params, at;
    std::vector<std::string> generators; // fuzz: generator programs fuzzed beside the apps
    bool runtime_shapes = false;
    bool json = false, numerics = true, verbose = false, target_given = false, emit = true;
    double seconds = 60, tune_seconds = 0, timeout = 120; // tune_seconds 0: no time limit
    double lease = 60, idle_exit = 0;
    std::string device = "model";
    int64_t runs = -1;
    int jobs = 1, budget = 64, top = 1, bundle_top = 8;
    uint64_t seed = 1;
    bool resume = false;
};

/** The command line, parsed with CLI11: one subcommand per job. */
struct CommandLine {
    CLI::App app{"Tandem: asynchronous data movement for Hopper, the ZPU and Ascend, on their "
                 "machine models"};
    Args a;
    std::vector<std::string> params, at;

    CommandLine() {
        app.require_subcommand(1);
        app.add_subcommand("list", "the apps, their parameters and schedules");
        app.add_subcommand("demo",
                           "bf16 GEMM 2048^3 on the simulated ZPU: stages, numerics, a timeline");
        app.add_subcommand("help", "this text");
        CLI::App *run = app.add_subcommand(
            "run", "run an app on a target's machine model against the Halide reference");
        CLI::App *emit =
            app.add_subcommand("emit", "write a kernel's async Stmt, Halide Stmt or target code");
        for (CLI::App *c : {run, emit}) {
            CLI::Option *app_name = c->add_option("app", a.app, "the app (tandem list)");
            if (c == run)
                app_name->required();
            c->add_option("--target", a.target,
                          "zpu, hopper, ascend or a registered target, with overrides: "
                          "zpu:cores=4,file=m.json");
            c->add_option("--param", params, "a parameter, key=value (repeat)")
                ->allow_extra_args(false);
            c->add_option("--schedule", a.schedule,
                          "the schedule (default: the app's first for the target)");
        }
        run->add_option("--at", at,
                        "a runtime-shape kernel (--param shapes=runtime): run it at this extent, "
                        "key=value (repeat), instead of the one it was compiled for")
            ->allow_extra_args(false);
        run->add_flag("--json", a.json, "one JSON object");
        run->add_option("--trace", a.trace,
                        "a Chrome/Perfetto trace (.json) or a timeline picture (.svg)");
        run->add_option("--timeline", a.timeline, "an SVG picture of the overlap")
            ->check([](const std::string &f) {
                return f.size() >= 5 && f.compare(f.size() - 4, 4, ".svg") == 0
                           ? std::string()
                           : std::string("--timeline writes an SVG picture: give a file name "
                                         "ending in .svg");
            });
        run->add_flag("!--no-numerics", a.numerics, "timing and hazards only");
        run->add_option("--seed", a.seed, "the inputs' random seed");
        emit->add_option(
            "--what", a.what,
            "stmt, halide, or the target's code: code (zpu, ascend), cuda, ptx (hopper); passes: "
            "the target's pass list (no app needed)");
        emit->add_option("-o", a.out_dir, "the output directory (default: standard output)");
        emit->add_option("--name", a.name,
                         "file base name and C++ function name (default: the app)");
        emit->add_option("--drop-flag", a.drop_flag,
                         "ascend code: leave out flag pair N (mutation tests)")
            ->check(CLI::NonNegativeNumber);
        CLI::App *fuzz =
            app.add_subcommand("fuzz", "random shapes and schedules: one line per failure with the "
                                       "command that reproduces it, "
                                       "then a summary; exit status 1 if any run failed");
        CLI::Option *seconds = fuzz->add_option("--seconds", a.seconds, "how long");
        fuzz->add_option("--runs", a.runs, "how many runs (instead of --seconds)")
            ->excludes(seconds);
        fuzz->add_option("--seed", a.seed);
        fuzz->add_option("--jobs", a.jobs, "runs at once")->check(CLI::PositiveNumber);
        fuzz->add_option("--target", a.target, "only this target")
            ->each([this](const std::string &) { a.target_given = true; });
        fuzz->add_option("--app", a.app, "only this app (or a --generators program's generator)");
        fuzz->add_option("--generators", a.generators,
                         "also fuzz the generators of this generator program (a binary built "
                         "with add_tandem_generator; repeat for more): it runs its own --fuzz "
                         "beside the apps' with a share of the jobs and runs; not with "
                         "--runtime-shapes. ./tandem fuzz adds the conformance suite's")
            ->allow_extra_args(false);
        fuzz->add_option("--timeout", a.timeout, "seconds before a run counts as hung");
        fuzz->add_flag("!--no-emit", a.emit, "do not emit code");
        fuzz->add_flag("--verbose", a.verbose, "a line per run");
        fuzz->add_flag("--json", a.json, "the summary as JSON");
        fuzz->add_flag(
            "--runtime-shapes", a.runtime_shapes,
            "each run compiles one kernel with shapes=runtime and runs it at several shapes");
        CLI::App *tune =
            app.add_subcommand("tune", "autotune an app's schedule parameters on a target's "
                                       "machine model (hopper: or its GPU), "
                                       "recording every candidate in a tuning database");
        tune->add_option("app", a.app, "the app (tandem list)");
        CLI::App *best = tune->add_subcommand(
            "best", "the best recorded candidates of a workload (no measuring)");
        best->add_option("app", a.app, "the app")->required();
        best->add_option("--top", a.top, "how many, fastest first")->check(CLI::PositiveNumber);
        CLI::App *exported =
            tune->add_subcommand("export", "every workload and record of the database as JSON");
        exported->add_option("-o", a.out_dir, "the file (default: standard output)");
        CLI::App *imported =
            tune->add_subcommand("import", "add the records of an export to the database");
        imported->add_option("file", a.out_dir, "what `tandem tune export` wrote")->required();
        CLI::App *bundle = tune->add_subcommand(
            "gpu-bundle", "the best candidates of a hopper workload tuned on the model, as a "
                          "kernel set for benchmarks/gpu/run.sh on a GPU machine");
        bundle->add_option("app", a.app, "the app")->required();
        bundle->add_option("--top", a.bundle_top, "how many, fastest on the model first (8)")
            ->check(CLI::PositiveNumber);
        bundle->add_option("-o", a.out_dir, "the bundle's directory")->required();
        CLI::App *timed = tune->add_subcommand(
            "gpu-import", "record a GPU run of a bundle as its workload's GPU records");
        timed->add_option("bundle", a.out_dir, "what `tandem tune gpu-bundle` wrote")->required();
        timed->add_option("rows", a.rows, "run.sh gpu's gpu_hopper.rows.jsonl (or .json)")
            ->required();
        for (CLI::App *c : {tune, best, bundle}) {
            c->add_option("--target", a.target, "zpu, hopper or ascend");
            c->add_option("--param", params, "a fixed parameter, key=value (repeat): the workload")
                ->allow_extra_args(false);
            c->add_flag("!--no-numerics", a.numerics,
                        "timing and hazards only (records made without numerics)");
            c->add_flag("--json", a.json, "one JSON object");
        }
        CLI::App *worker = app.add_subcommand(
            "tune-worker",
            "measure the candidates any tuner queued in a shared tuning database (start one per "
            "machine, or many: see the README)");
        for (CLI::App *c : {tune, best, exported, imported, bundle, timed, worker})
            c->add_option("--db", a.db,
                          "sqlite:PATH or postgresql://user@host:port/database (default " +
                              default_tuning_db() + ")");
        for (CLI::App *c : {tune, worker}) {
            c->add_option("--lease", a.lease,
                          "seconds a worker holds a job between heartbeats' renewals")
                ->check(CLI::PositiveNumber);
        }
        tune->add_option("--jobs", a.jobs,
                         "candidates measured at once by this process (0: only queue them for "
                         "tune-workers)")
            ->check(CLI::NonNegativeNumber);
        worker->add_option("--jobs", a.jobs, "candidates measured at once")
            ->check(CLI::PositiveNumber);
        worker->add_option("--idle-exit", a.idle_exit,
                           "stop after this many seconds without a job (default: never)");
        for (CLI::App *c : {tune, best, worker}) {
            c->add_option("--device", a.device,
                          "what times the candidates: model (the target's machine model) or gpu "
                          "(hopper: this machine's GPU, after the model checked them)");
        }
        tune->add_option("--budget", a.budget, "candidates to measure")->check(CLI::PositiveNumber);
        tune->add_option("--seconds", a.tune_seconds, "stop after this long as well");
        tune->add_option("--seed", a.seed, "the search's seed (deterministic)");
        tune->add_flag("--resume", a.resume,
                       "continue the workload's last search (its seed); what it recorded is not "
                       "measured again");
        tune->add_option("--timeout", a.timeout,
                         "seconds a candidate may take (then it is recorded as a timeout)");
    }

    void parse(int argc, char **argv) {
        app.parse(argc, argv);
        CLI::App *command = app.get_subcommands().front();
        a.command = command->get_name();
        if (!command->get_subcommands().empty())
            a.command += " " + command->get_subcommands().front()->get_name();
        if (a.command == "tune" && a.app.empty())
            throw Error("tune: name the app to tune (tandem list), or best, export, import");
        for (const auto &[given, into, option] :
             {std::tuple(&params, &a.params, "--param"), std::tuple(&at, &a.at, "--at")}) {
            for (const std::string &kv : *given) {
                auto eq = kv.find('=');
                if (eq == std::string::npos)
                    throw Error(std::string(option) + " takes key=value, got '" + kv + "'");
                into->set(kv.substr(0, eq), kv.substr(eq + 1));
            }
        }
    }
};

void list() {
    for (const App &app : all_apps()) {
        std::cout << app.name << ": " << app.summary << "\n  params:";
        for (const auto &[k, v] : app.defaults)
            std::cout << " " << k << "=" << v;
        std::cout << "\n";
        for (const std::string &target : Target::names()) {
            const std::vector<std::string> &schedules = schedules_for(app, target);
            std::cout << "  " << target << " schedules:";
            for (const std::string &s : schedules)
                std::cout << " " << s;
            std::cout << " (default " << schedules.front() << ")\n";
        }
    }
    std::cout << "targets:";
    for (const std::string &name : Target::names()) {
        const Target target = Target::parse(name);
        std::cout << " " << name << " (model v" << target.machine.version() << "; emits";
        for (const Source &source : backend_of(target).sources)
            std::cout << " " << source.what;
        std::cout << ")";
    }
    std::cout << "\n";
}

void write_file(const std::filesystem::path &path, const std::string &text) {
    std::ofstream f(path);
    if (!f)
        throw Error("cannot write " + path.string());
    f << text;
    std::cout << "wrote " << path.string() << "\n";
}

/** PTX of an emitted CUDA file through nvcc (ptxas checks it for sm_90a as it goes). */
void ptx(const std::filesystem::path &cu, const std::filesystem::path &out) {
    const std::string nvcc = nvcc_path();
    std::string runtime = std::string(TANDEM_SOURCE_DIR) + "/backends/hopper/runtime";
    std::string flags = " -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I" + runtime + " ";
    std::filesystem::path cubin = out;
    cubin.replace_extension(".cubin");
    // The PTX, then ptxas on it for sm_90a (registers, spills).
    for (const std::string &cmd :
         {nvcc + flags + "--ptx " + cu.string() + " -o " + out.string() + " 2>&1",
          nvcc + flags + "-Xptxas -v -cubin " + cu.string() + " -o " + cubin.string() + " 2>&1"}) {
        std::cout << "$ " << cmd << "\n" << std::flush;
        if (std::system(cmd.c_str()) != 0)
            throw Error("nvcc failed on " + cu.string() + " (is nvcc installed?)");
    }
    std::cout << "wrote " << out.string() << " and " << cubin.string() << "\n";
}

void emit(const Args &a) {
    if (a.what == "passes") {
        // The target's pass list, in the order compile() runs it (dsl/lower/Targets.h).
        const Target target = Target::parse(a.target);
        std::cout << "// " << target.name() << ": Halide's lowering, then\n";
        for (const lower::Pass &p : lower::lowering_of(target).passes)
            std::cout << p.name << "\n";
        return;
    }
    if (a.app.empty())
        throw Error("emit needs an app (tandem list)");
    const App &app = find_app(a.app);
    if (a.out_dir.empty() && a.what == "ptx")
        throw Error("emit --what ptx needs -o dir");
    Params params = with_defaults(app, a.params, a.target);
    std::string schedule = a.schedule.empty() ? schedules_for(app, a.target).front() : a.schedule;
    auto t0 = std::chrono::steady_clock::now();
    Kernel k = compile_app(app, params, schedule, Target::parse(a.target));
    for (const std::string &w : k.warnings)
        std::cerr << "warning: " << w << "\n";
    const double compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!a.out_dir.empty())
        std::filesystem::create_directories(a.out_dir);
    std::filesystem::path dir(a.out_dir);
    // Without -o the text goes to standard output.
    auto output = [&](const std::filesystem::path &file, const std::string &text) {
        if (a.out_dir.empty())
            std::cout << text;
        else
            write_file(file, text);
    };
    std::string base = a.name.empty() ? app.name : a.name;
    if (a.drop_flag >= 0 && a.what != "code")
        throw Error("--drop-flag is for --what code on target ascend");
    if (a.what == "stmt")
        return output(dir / (base + ".stmt"), k.stmt_text());
    if (a.what == "halide")
        return output(dir / (base + ".halide.stmt"), k.halide_text());
    // The target's sources; ptx is its CUDA through nvcc.
    const TargetBackend &backend = backend_of(k.target);
    const std::string want = a.what == "ptx" ? "cuda" : a.what;
    std::string known = "stmt, halide";
    for (const Source &source : backend.sources) {
        known += ", " + source.what + (source.what == "cuda" ? ", ptx" : "");
        if (source.what != want)
            continue;
        std::filesystem::path file = dir / (base + source.suffix);
        t0 = std::chrono::steady_clock::now();
        const std::string text = source.emit(k, base, EmitOptions{a.drop_flag});
        const double emit_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        output(file, text);
        if (!a.out_dir.empty())
            std::printf("  compile %.1f ms (Halide lowering + Tandem's passes), emit %.1f ms\n",
                        compile_ms, emit_ms);
        if (a.what == "ptx")
            ptx(file, dir / (base + ".ptx"));
        return;
    }
    throw Error("--what for target " + k.target.name() + " is one of " + known + "; got '" +
                a.what + "'");
}

/** A generator program fuzzing its own generators beside the apps (`fuzz --generators`): its
 * output (the failure lines, then its summary as JSON) goes to a file read when it ends. */
struct ProgramFuzz {
    std::string program;
    pid_t pid = -1;
    std::filesystem::path output;
};

ProgramFuzz start_program_fuzz(const std::string &program, const Args &a, int jobs, int64_t runs) {
    ProgramFuzz p;
    p.program = program;
    p.output = std::filesystem::temp_directory_path() /
               ("tandem-fuzz-" + std::to_string(getpid()) + "-" +
                std::filesystem::path(program).filename().string() + ".log");
    std::vector<std::string> args = {program,
                                     "--fuzz",
                                     std::to_string(std::max<int64_t>(runs, 0)),
                                     "--seconds",
                                     std::to_string(runs >= 0 ? 0 : a.seconds),
                                     "--jobs",
                                     std::to_string(jobs),
                                     "--seed",
                                     std::to_string(a.seed),
                                     "--timeout",
                                     std::to_string(a.timeout),
                                     "--json"};
    if (!a.app.empty())
        args.insert(args.end(), {"-g", a.app});
    if (a.target_given)
        args.push_back("target=" + a.target);
    if (a.verbose)
        args.push_back("--verbose");
    std::vector<char *> argv;
    for (std::string &s : args)
        argv.push_back(s.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    p.pid = fork();
    if (p.pid < 0)
        throw Error(std::string("fuzz: fork failed: ") + std::strerror(errno));
    if (p.pid == 0) {
        if (!std::freopen(p.output.c_str(), "w", stdout) || !std::freopen("/dev/null", "w", stderr))
            _exit(127);
        execv(argv[0], argv.data());
        std::printf("cannot run it: %s\n", std::strerror(errno));
        std::fflush(stdout);
        _exit(127);
    }
    return p;
}

/** Waits for the program, prints its failure lines and returns its summary; a program that ends
 * without one (it could not run, or crashed) is one failure. */
FuzzSummary finish_program_fuzz(const ProgramFuzz &p) {
    int status = 0;
    waitpid(p.pid, &status, 0);
    std::ifstream in(p.output);
    std::string line, last;
    FuzzSummary s;
    bool summarised = false;
    while (std::getline(in, line)) {
        if (line.rfind("{\"fuzz\"", 0) == 0) {
            s = FuzzSummary::from_json(line);
            summarised = true;
        } else if (line.rfind("FAIL ", 0) == 0 || line.rfind("pass ", 0) == 0) {
            std::printf("%s\n", line.c_str());
        } else if (!line.empty()) {
            last = line;
        }
    }
    std::filesystem::remove(p.output);
    if (!summarised) {
        s.runs = s.failures = 1;
        std::printf("FAIL crash %s --fuzz (exit status %d) # %s\n", p.program.c_str(),
                    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), last.c_str());
    }
    s.program = p.program;
    return s;
}

int fuzz(const Args &a) {
    FuzzOptions o;
    o.seed = a.seed;
    o.seconds = a.runs >= 0 ? 0 : a.seconds;
    o.runs = a.runs;
    o.jobs = a.jobs;
    o.timeout = a.timeout;
    o.emit = a.emit;
    o.runtime_shapes = a.runtime_shapes;
    o.app = a.app;
    if (a.target_given)
        o.target = a.target;
    // The generator programs (none with --runtime-shapes, or with --app naming one of Tandem's
    // apps) take a share of the jobs and runs each; --app naming something else leaves the apps
    // out.
    const bool an_app = a.app.empty() || std::any_of(all_apps().begin(), all_apps().end(),
                                                     [&](const App &x) { return x.name == a.app; });
    std::vector<std::string> programs;
    if (!a.runtime_shapes && !(an_app && !a.app.empty()))
        programs = a.generators;
    // With no program to draw it from, an unknown --app is the apps' fuzzer's error.
    const bool apps_too = an_app || programs.empty();
    const int shares = int(programs.size()) + (apps_too ? 1 : 0);
    const int program_jobs = std::max(1, a.jobs / std::max(1, shares));
    const int64_t program_runs = a.runs >= 0 ? a.runs / std::max(1, shares) : -1;
    std::vector<ProgramFuzz> started;
    for (const std::string &program : programs) {
        if (program_runs != 0)
            started.push_back(start_program_fuzz(program, a, program_jobs, program_runs));
    }
    FuzzSummary s;
    if (apps_too) {
        o.jobs = std::max(1, a.jobs - program_jobs * int(started.size()));
        if (a.runs >= 0)
            o.runs = a.runs - program_runs * int(started.size());
        s = apps::fuzz(o, [&](const FuzzResult &r) {
            if (!r.failure() && !a.verbose)
                return;
            std::printf("%s\n", r.line().c_str());
            std::fflush(stdout);
        });
    }
    for (const ProgramFuzz &p : started) {
        s.programs.push_back(finish_program_fuzz(p));
        s.runs += s.programs.back().runs;
        s.failures += s.programs.back().failures;
        s.seconds = std::max(s.seconds, s.programs.back().seconds);
    }
    std::cout << (a.json ? s.json(a.seed) + "\n" : s.text(a.seed));
    return s.failures ? 1 : 0;
}

nlohmann::json record_json(const TuningRecord &r) {
    return {{"params", r.candidate}, {"status", r.status},
            {"cycles", r.cycles},    {"roofline_fraction", r.roofline_fraction},
            {"time_ms", r.time_ms},  {"device", r.device},
            {"date", r.date},        {"message", r.message}};
}

/** A record's measurement: its GPU time where it has one, its model cycles. */
std::string cost_text(const TuningRecord &r) {
    char text[160];
    if (r.time_ms > 0) {
        std::snprintf(text, sizeof text, "%.4f ms on %s (model: %.0f cycles)", r.time_ms,
                      r.device.c_str(), r.cycles);
    } else {
        std::snprintf(text, sizeof text, "%.0f cycles, roofline fraction %.3f", r.cycles,
                      r.roofline_fraction);
    }
    return text;
}

int tune(const Args &a) {
    TuneOptions o;
    o.app = a.app;
    o.target = a.target;
    o.fixed = a.params;
    o.db = a.db.empty() ? default_tuning_db() : a.db;
    o.budget = a.budget;
    o.seconds = a.tune_seconds;
    o.seed = a.seed;
    o.resume = a.resume;
    o.numerics = a.numerics;
    o.timeout_seconds = a.timeout;
    o.jobs = a.jobs;
    o.lease_seconds = a.lease;
    o.device = a.device;
    const bool terminal = !a.json && isatty(STDOUT_FILENO);
    TuneResult r = apps::tune(o, [&](const TuneProgress &p) {
        if (a.json)
            return;
        const double rate = p.seconds > 0 ? p.done / p.seconds : 0;
        const std::string best = !p.best ? "none yet" : cost_text(*p.best);
        if (terminal) {
            const int width = 30, filled = p.total ? width * p.done / p.total : width;
            std::printf("\r[%s%s] %d/%d  best %s  %.1f/s  %.0f s left ",
                        std::string(size_t(filled), '#').c_str(),
                        std::string(size_t(width - filled), '.').c_str(), p.done, p.total,
                        best.c_str(), rate, rate > 0 ? (p.total - p.done) / rate : 0.0);
        } else {
            std::printf("%d/%d %s %s %s  best %s\n", p.done, p.total,
                        candidate_key(p.last->candidate).c_str(), p.last->status.c_str(),
                        p.last->status == "ok" ? cost_text(*p.last).c_str() : "", best.c_str());
        }
        std::fflush(stdout);
    });
    if (terminal)
        std::printf("\n");
    if (a.json) {
        nlohmann::json j = {{"workload",
                             {{"generator", r.workload.generator},
                              {"target", r.workload.target},
                              {"compiler", r.workload.compiler},
                              {"fixed", r.workload.fixed},
                              {"timed_on", r.workload.device}}},
                            {"db", o.db},
                            {"measured", r.measured},
                            {"reused", r.reused},
                            {"space", r.space}};
        if (r.best)
            j["best"] = record_json(*r.best);
        if (r.defaults)
            j["defaults"] = record_json(*r.defaults);
        if (r.best && r.defaults && r.defaults->status == "ok")
            j["speedup_over_defaults"] = r.defaults->cost() / r.best->cost();
        std::cout << j.dump(1) << "\n";
    } else {
        std::printf("tune %s on %s: %d measured, %d from the database (%s), a space of %d\n",
                    a.app.c_str(), a.target.c_str(), r.measured, r.reused, o.db.c_str(), r.space);
        if (r.defaults)
            std::printf("  defaults: %s %s %s\n", candidate_key(r.defaults->candidate).c_str(),
                        r.defaults->status.c_str(), cost_text(*r.defaults).c_str());
        if (r.best)
            std::printf("  best:     %s %s\n", candidate_key(r.best->candidate).c_str(),
                        cost_text(*r.best).c_str());
        else
            std::printf("  no candidate ran correctly\n");
    }
    return r.best ? 0 : 1;
}

int tune_worker(const Args &a) {
    WorkerOptions o;
    o.device = a.device;
    o.db = a.db.empty() ? default_tuning_db() : a.db;
    o.jobs = a.jobs;
    o.lease_seconds = a.lease;
    o.idle_exit = a.idle_exit;
    const int done = apps::tune_worker(o, [](const TuningJob &job, const TuningRecord &r) {
        std::printf("%s %s: %s %s\n", job.workload.generator.c_str(),
                    candidate_key(r.candidate).c_str(), r.status.c_str(),
                    r.status == "ok" ? cost_text(r).c_str() : r.message.c_str());
        std::fflush(stdout);
    });
    std::printf("tune-worker: %d job(s) measured, idle for %.0f s: done\n", done, a.idle_exit);
    return 0;
}

int tune_database(const Args &a) {
    std::unique_ptr<TuningDb> db = TuningDb::open(a.db.empty() ? default_tuning_db() : a.db);
    if (a.command == "tune export") {
        const std::string text = db->export_json();
        if (a.out_dir.empty()) {
            std::cout << text << "\n";
        } else {
            std::ofstream(a.out_dir) << text << "\n";
        }
        return 0;
    }
    if (a.command == "tune gpu-bundle") {
        TuneOptions o;
        o.app = a.app;
        o.target = a.target;
        o.fixed = a.params;
        o.numerics = a.numerics;
        const int n = write_gpu_bundle(o, *db, a.bundle_top, a.out_dir);
        std::printf("%d kernels in %s: on the GPU machine, TANDEM_GPU_KERNELS=%s "
                    "benchmarks/gpu/run.sh gpu; then tandem tune gpu-import %s "
                    "<gpu_hopper.rows.jsonl>\n",
                    n, a.out_dir.c_str(), a.out_dir.c_str(), a.out_dir.c_str());
        return 0;
    }
    if (a.command == "tune gpu-import") {
        std::printf("imported %d GPU records\n", import_gpu_timings(*db, a.out_dir, a.rows));
        return 0;
    }
    if (a.command == "tune import") {
        std::ifstream in(a.out_dir);
        if (!in)
            throw Error("tune import: cannot read " + a.out_dir);
        std::stringstream text;
        text << in.rdbuf();
        std::printf("imported %d records\n", db->import_json(text.str()));
        return 0;
    }
    TuneOptions o;
    o.app = a.app;
    o.target = a.target;
    o.fixed = a.params;
    o.numerics = a.numerics;
    o.device = a.device;
    const TuningWorkload w = tuning_workload(o);
    const std::vector<TuningRecord> top = db->top(w, size_t(a.top));
    if (a.json) {
        nlohmann::json rows = nlohmann::json::array();
        for (const TuningRecord &r : top)
            rows.push_back(record_json(r));
        std::cout << nlohmann::json({{"workload", w.key()}, {"best", rows}}).dump(1) << "\n";
    } else if (top.empty()) {
        std::printf("no ok record for %s\n", w.key().c_str());
    } else {
        for (const TuningRecord &r : top)
            std::printf("%s  %s\n", cost_text(r).c_str(), candidate_key(r.candidate).c_str());
    }
    return top.empty() ? 1 : 0;
}

void demo() {
    const App &gemm = find_app("gemm");
    std::cout << "Tandem demo: bf16 GEMM 2048 x 2048 x 2048 on the simulated ZPU (16 cores).\n"
              << "The same algorithm, scheduled with async_copy().multi_buffer(stages) on the A "
                 "and B tiles,\n"
              << "warp_specialize() and ping_pong() on C: stages = 1 has nothing to overlap.\n\n";
    std::printf("%-8s %12s %12s %11s %9s\n", "stages", "cycles", "bound", "efficiency", "roofline");
    RunResult best;
    int best_stages = 1;
    std::vector<RunResult> timing;
    for (int stages = 1; stages <= 4; stages++) {
        RunOptions o;
        o.params.set("stages", std::to_string(stages));
        o.numerics = false;
        RunResult r;
        try {
            r = run(gemm, o);
        } catch (const Error &e) {
            std::printf("%-8d does not fit: %s\n", stages, e.what());
            continue;
        }
        std::printf("%-8d %12lld %12lld %11.3f %9.3f\n", stages, (long long)r.report.cycles,
                    (long long)r.report.bound_cycles, r.efficiency(), r.roofline_fraction());
        timing.push_back(r);
        if (stages == 1 || r.report.cycles < best.report.cycles)
            best = r, best_stages = stages;
    }
    std::printf("\nChecking numerics against Halide's CPU JIT (stages 1 and %d)...\n", best_stages);
    std::filesystem::create_directories("out");
    for (int stages : {1, best_stages}) {
        RunOptions o;
        o.params.set("stages", std::to_string(stages));
        if (stages == best_stages) {
            o.trace = "out/demo_gemm.trace.json";
            o.timeline = "out/demo_gemm.timeline.svg";
        }
        RunResult r = run(gemm, o);
        std::printf("  stages %d: correct %s (max_rel_err %.2g), races %lld, deadlock %s, compile "
                    "%.0f ms\n",
                    stages, r.correct ? "yes" : "NO", r.max_rel_err, (long long)r.report.race_count,
                    r.report.deadlock ? "yes" : "no", r.compile_ms);
    }
    double speedup = double(timing[0].report.cycles) / double(best.report.cycles);
    std::printf("\nPipelining speedup: %.2fx (stages 1: %lld cycles -> stages %d: %lld cycles).\n",
                speedup, (long long)timing[0].report.cycles, best_stages,
                (long long)best.report.cycles);
    std::printf(
        "With %d stages the DRAM loads hide behind the tensor core: efficiency %.3f of the "
        "schedule's bound,\n"
        "%.3f of the problem's roofline. Trace (one track per engine, open in ui.perfetto.dev)\n"
        "and a picture of the overlap:\n"
        "  out/demo_gemm.trace.json\n"
        "  out/demo_gemm.timeline.svg\n",
        best_stages, best.efficiency(), best.roofline_fraction());
}

} // namespace

int tandem::apps::cli_main(int argc, char **argv) {
    CommandLine line;
    try {
        line.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return line.app.exit(e) == 0 ? 0 : 2;
    } catch (const tandem::Error &e) {
        std::cerr << "error: " << e.what() << "\n";
        return 2;
    }
    const Args &a = line.a;
    try {
        if (a.command == "list") {
            list();
        } else if (a.command == "run") {
            RunOptions o;
            o.params = a.params;
            o.at = a.at;
            o.schedule = a.schedule;
            o.target = a.target;
            o.numerics = a.numerics;
            o.trace = a.trace;
            o.timeline = a.timeline;
            o.seed = a.seed;
            RunResult r = run(find_app(a.app), o);
            for (const std::string &w : r.kernel.warnings)
                std::cerr << "warning: " << w << "\n";
            if (a.json)
                std::cout << r.json() << "\n";
            else
                std::cout << r.text();
            if (!a.trace.empty() && !a.json)
                std::cout << "  trace: " << a.trace << "\n";
            if (!a.timeline.empty() && !a.json)
                std::cout << "  timeline: " << a.timeline << "\n";
            return r.failed() ? 1 : 0;
        } else if (a.command == "emit") {
            emit(a);
        } else if (a.command == "fuzz") {
            return fuzz(a);
        } else if (a.command == "tune") {
            return tune(a);
        } else if (a.command == "tune-worker") {
            return tune_worker(a);
        } else if (a.command.rfind("tune ", 0) == 0) {
            return tune_database(a);
        } else if (a.command == "demo") {
            demo();
        } else {
            std::cout
                << CommandLine().app.help(); // the whole command line, not the help subcommand
        }
    } catch (const tandem::Error &e) {
        std::cerr << "error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception &e) {
        std::string command = "tandem";
        for (int i = 1; i < argc; i++)
            command += std::string(" ") + argv[i];
        std::cerr << "internal error: " << e.what() << "\n  while running " << command
                  << "\n  (a bug of Tandem: please report it with this command)\n";
        return 3;
    }
    return 0;
}
