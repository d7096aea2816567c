// The autotuner and its SQLite tuning database: records survive a killed tuner, --resume measures
// nothing twice, a seed makes the search repeatable, bad databases are clear errors.
#include "Tune.h"
#include "GpuBundle.h"
#include "GpuTiming.h"
#include "Run.h"
#include "TuningDb.h"
#include "tandem/Error.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

using namespace tandem;
using namespace tandem::apps;
namespace fs = std::filesystem;

fs::path temp_dir(const std::string &name) {
    fs::path d =
        fs::temp_directory_path() / ("tandem_tune_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

TuneOptions small_gemm(const fs::path &db, int budget) {
    TuneOptions o;
    o.app = "gemm";
    o.target = "zpu";
    o.fixed = Params({{"M", "96"}, {"N", "80"}, {"K", "64"}});
    o.db = "sqlite:" + db.string();
    o.budget = budget;
    o.seed = 7;
    return o;
}

TEST(TuningDb, RecordsAreKeptPerWorkloadInWalMode) {
    fs::path dir = temp_dir("db");
    auto db = TuningDb::open("sqlite:" + (dir / "sub" / "t.db").string()); // creates the directory
    TuningWorkload w{"gemm", "zpu", "test", {{"M", "8"}}},
        other{"gemm", "zpu", "test", {{"M", "9"}}};
    TuningRecord a{{{"TM", "16"}}, "ok", 100, 0.5, "zpu v9", "now", "", 1};
    TuningRecord b{{{"TM", "32"}}, "ok", 80, 0.6, "zpu v9", "now", "", 1};
    TuningRecord c{{{"TM", "64"}}, "user_error", 0, 0, "", "now", "over capacity", 1};
    db->add(w, a);
    db->add(w, b);
    db->add(w, c);
    db->add(other, a);
    EXPECT_TRUE(db->has(w, candidate_key(b.candidate)));
    EXPECT_FALSE(db->has(other, candidate_key(b.candidate)));
    ASSERT_EQ(db->records(w).size(), 3u);
    EXPECT_EQ(db->records(w)[2].message, "over capacity");
    ASSERT_TRUE(db->best(w));
    EXPECT_EQ(db->best(w)->candidate.at("TM"), "32");
    db.reset();
    // WAL mode: the write-ahead log sits beside the database while it is open.
    auto again = TuningDb::open("sqlite:" + (dir / "sub" / "t.db").string());
    EXPECT_EQ(again->records(w).size(), 3u);
    EXPECT_TRUE(fs::exists(dir / "sub" / "t.db-wal"));
}

TEST(TuningDb, BadDatabasesAreClearErrors) {
    fs::path dir = temp_dir("bad");
    auto message = [](const std::string &uri) {
        try {
            TuningDb::open(uri);
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message("mysql://x").find("unknown kind"), std::string::npos);
    EXPECT_NE(message("sqlite:").find("give a file path"), std::string::npos);
    EXPECT_NE(message("postgresql://127.0.0.1:1/t").find("cannot connect"), std::string::npos);
    std::ofstream(dir / "garbage.db") << std::string(4096, 'x');
    EXPECT_NE(message("sqlite:" + (dir / "garbage.db").string()).find("not a database"),
              std::string::npos);
    std::ofstream(dir / "file") << "x";
    EXPECT_NE(message("sqlite:" + (dir / "file" / "t.db").string()).find("cannot create"),
              std::string::npos);
}

TEST(TuningDb, TopExportAndImport) {
    fs::path dir = temp_dir("export");
    auto a = TuningDb::open("sqlite:" + (dir / "a.db").string());
    TuningWorkload w{"gemm", "zpu", "test", {{"M", "8"}}},
        v{"rmsnorm", "ascend", "test", {{"D", "7"}}};
    for (int i = 0; i < 5; i++)
        a->add(w, {{{"TM", std::to_string(16 * (i + 1))}},
                   "ok",
                   double(100 - 10 * i),
                   0.1,
                   "",
                   "",
                   "",
                   2});
    a->add(w, {{{"TM", "999"}}, "race", 0, 0, "", "", "a race", 2});
    a->add(v, {{{"RB", "4"}}, "ok", 55, 0.9, "", "", "", 3});
    std::vector<TuningRecord> top = a->top(w, 2);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0].cycles, 60);
    EXPECT_EQ(top[1].cycles, 70);
    auto b = TuningDb::open("sqlite:" + (dir / "b.db").string());
    EXPECT_EQ(b->import_json(a->export_json()), 7);
    EXPECT_EQ(b->records(w).size(), 6u);
    EXPECT_EQ(b->records(v).size(), 1u);
    EXPECT_EQ(b->records(w)[5].message, "a race");
    EXPECT_EQ(b->workloads().size(), 2u);
    EXPECT_THROW(b->import_json("{\"no\": 1}"), Error);
    EXPECT_THROW(b->import_json("not json"), Error);
}

TEST(TuningDb, GpuTimesAreAWorkloadOfTheirOwnRankedByTime) {
    fs::path dir = temp_dir("gpu");
    auto db = TuningDb::open("sqlite:" + (dir / "t.db").string());
    TuningWorkload model{"gemm", "hopper", "test", {{"M", "8"}}}, gpu = model;
    gpu.device = "gpu";
    EXPECT_NE(model.key(), gpu.key());
    db->add(model, {{{"TN", "128"}}, "ok", 100, 0.5, "hopper v6", "now", "", 1});
    // On the GPU the candidate with more model cycles is the faster one: the time decides.
    db->add(gpu, {{{"TN", "128"}}, "ok", 100, 0.5, "NVIDIA H100", "now", "", 1, 0.30});
    db->add(gpu, {{{"TN", "256"}}, "ok", 120, 0.4, "NVIDIA H100", "now", "", 1, 0.25});
    EXPECT_EQ(db->records(model).size(), 1u);
    ASSERT_EQ(db->records(gpu).size(), 2u);
    EXPECT_EQ(db->records(gpu)[1].time_ms, 0.25);
    ASSERT_TRUE(db->best(gpu));
    EXPECT_EQ(db->best(gpu)->candidate.at("TN"), "256");
    EXPECT_EQ(db->top(gpu, 2)[1].candidate.at("TN"), "128");
    // Export and import keep the device and the times.
    auto copy = TuningDb::open("sqlite:" + (dir / "copy.db").string());
    EXPECT_EQ(copy->import_json(db->export_json()), 3);
    ASSERT_EQ(copy->records(gpu).size(), 2u);
    EXPECT_EQ(copy->records(gpu)[1].time_ms, 0.25);
    EXPECT_EQ(copy->workloads().size(), 2u);
}

TEST(TuningDb, ADatabaseFromBeforeGpuTimingOpensWithItsRecords) {
    fs::path dir = temp_dir("old");
    const fs::path file = dir / "old.db";
    {
        // The schema before the workload's device and the record's time_ms.
        SQLite::Database old(file.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        old.exec("CREATE TABLE workload (id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, "
                 "generator TEXT, "
                 "target TEXT, compiler TEXT, fixed TEXT)");
        old.exec("CREATE TABLE record (workload INTEGER NOT NULL REFERENCES workload(id), "
                 "candidate TEXT NOT NULL, "
                 "params TEXT, status TEXT, cycles REAL, roofline_fraction REAL, device TEXT, date "
                 "TEXT, "
                 "seed INTEGER, message TEXT, added INTEGER, PRIMARY KEY (workload, candidate))");
        old.exec("INSERT INTO workload VALUES (1, 'gemm zpu test M=8', 'gemm', 'zpu', 'test', "
                 "'{\"M\":\"8\"}')");
        old.exec("INSERT INTO record VALUES (1, 'TM=16', '{\"TM\":\"16\"}', 'ok', 90, 0.5, 'zpu "
                 "v4', 'then', 1, '', 1)");
    }
    auto db = TuningDb::open("sqlite:" + file.string());
    const TuningWorkload w{"gemm", "zpu", "test", {{"M", "8"}}};
    ASSERT_EQ(db->records(w).size(), 1u);
    EXPECT_EQ(db->records(w)[0].cycles, 90);
    EXPECT_EQ(db->records(w)[0].time_ms, 0);
    db->add(w, {{{"TM", "32"}}, "ok", 80, 0.6, "zpu v4", "now", "", 1});
    EXPECT_EQ(db->best(w)->candidate.at("TM"), "32");
}

TEST(Tune, GpuTimingIsForHopperKernelsTheHarnessKnowsOnAMachineWithAGpu) {
    fs::path dir = temp_dir("gpu_errors");
    TuneOptions o = small_gemm(dir / "t.db", 2);
    o.device = "gpu";
    try {
        tune(o);
        FAIL() << "a zpu workload was timed on a GPU";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("--device gpu times Hopper kernels"),
                  std::string::npos)
            << e.what();
    }
    o.target = "hopper";
    o.app = "pointwise"; // the harness does not know it
    o.fixed = Params();
    try {
        tune(o);
        FAIL() << "pointwise was timed by a harness that does not check it";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("timed on the model only"), std::string::npos)
            << e.what();
    }
    o.device = "tpu";
    EXPECT_THROW(tune(o), Error);
    if (std::system("nvidia-smi -L > /dev/null 2>&1") == 0)
        return; // the GPU case runs where there is one
    o = small_gemm(dir / "t.db", 2);
    o.target = "hopper";
    o.device = "gpu";
    try {
        tune(o);
        FAIL() << "timed on a GPU this machine does not have";
    } catch (const Error &e) {
        const std::string what = e.what();
        EXPECT_TRUE(what.find("no GPU") != std::string::npos ||
                    what.find("nvcc") != std::string::npos)
            << what;
    }
    WorkerOptions w;
    w.db = o.db;
    w.device = "gpu";
    EXPECT_THROW(tune_worker(w), Error);
}

TEST(Tune, GpuJobsWaitForGpuWorkers) {
    // A tuner with --jobs 0 only queues: a GPU workload's jobs are claimed by GPU workers only.
    fs::path dir = temp_dir("gpu_queue");
    TuneOptions o = small_gemm(dir / "t.db", 4);
    o.target = "hopper";
    o.device = "gpu";
    o.jobs = 0;
    o.seconds = 3;
    const TuningWorkload w = tuning_workload(o);
    std::thread tuner([&] { tune(o); });
    std::optional<TuningJob> job;
    try {
        auto db = TuningDb::open(o.db);
        for (int i = 0; i < 200 && db->jobs(w).pending == 0; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        EXPECT_GT(db->jobs(w).pending, 0);
        EXPECT_FALSE(db->claim("model-worker", compiler_version(), 60, {"gemm"}, "model"));
        job = db->claim("gpu-worker", compiler_version(), 60, {"gemm"}, "gpu");
    } catch (const std::exception &e) {
        ADD_FAILURE() << e.what();
    }
    tuner.join();
    ASSERT_TRUE(job);
    EXPECT_EQ(job->workload.device, "gpu");
    EXPECT_EQ(job->workload.key(), w.key());
    EXPECT_NE(job->spec.find("\"device\":\"gpu\""), std::string::npos) << job->spec;
}

TEST(Tune, GpuHarnessOfACandidateBuilds) {
    // What a GPU worker builds for each candidate: the kernel's CUDA with the harness, by nvcc.
    if (std::system("/usr/local/cuda/bin/nvcc --version > /dev/null 2>&1") != 0 &&
        std::system("nvcc --version > /dev/null 2>&1") != 0) {
        GTEST_SKIP() << "no nvcc here: the GPU harness build is not checked";
    }
    fs::path dir = temp_dir("gpu_build");
    const App &app = find_app("gemm");
    const Params p =
        with_defaults(app, Params({{"M", "200"}, {"N", "136"}, {"K", "72"}}), "hopper");
    write_gpu_harness_sources(app, p, "ws_cooperative", dir.string(), "candidate");
    const std::string command = gpu_harness_build_command(dir.string(), "candidate") + " > " +
                                (dir / "build.log").string() + " 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    EXPECT_TRUE(fs::exists(dir / "harness"));
    fs::remove_all(dir);
}

/** GPU tuning across two machines (issue 35): the best candidates on the model as a kernel set
 * for run.sh, its build by nvcc, and a GPU run's rows (the harness's format) imported as the GPU
 * workload's records, which a build takes first. */
TEST(Tune, GpuBundleRoundTrip) {
    fs::path dir = temp_dir("bundle");
    TuneOptions o = small_gemm(dir / "t.db", 6);
    o.target = "hopper";
    o.fixed = Params({{"M", "200"}, {"N", "136"}, {"K", "72"}});
    tune(o);
    auto db = TuningDb::open(o.db);
    const fs::path bundle = dir / "bundle";
    const int n = write_gpu_bundle(o, *db, 3, bundle.string());
    ASSERT_GE(n, 2);
    std::ifstream sets(bundle / "sets.txt");
    std::vector<std::string> names;
    for (std::string set, name; sets >> set >> name;) {
        EXPECT_EQ(set, "tune");
        EXPECT_TRUE(fs::exists(bundle / (name + ".cu"))) << name;
        names.push_back(name);
    }
    ASSERT_EQ(int(names.size()), n);
    std::ifstream registry(bundle / "registry.inc");
    std::string text((std::istreambuf_iterator<char>(registry)), {});
    EXPECT_NE(text.find("TANDEM_KERNEL(" + names[0] + ", \"gemm\""), std::string::npos) << text;
    if (std::system("/usr/local/cuda/bin/nvcc --version > /dev/null 2>&1") == 0) {
        const std::string build = std::string("TANDEM_GPU_KERNELS=") + bundle.string() +
                                  " bash " TANDEM_SOURCE_DIR "/benchmarks/gpu/run.sh build > " +
                                  (dir / "build.log").string() + " 2>&1";
        EXPECT_EQ(std::system(build.c_str()), 0) << build;
    }
    // The GPU run's rows: the second candidate the fastest, the third wrong, another kernel's row.
    std::ofstream(dir / "rows.jsonl")
        << R"({"name": ")" << names[0]
        << R"(", "correct": true, "tandem_ms": 0.03, "ratio_vs_cublas": 0.7, "device": "NVIDIA H200"})"
        << "\n"
        << R"({"name": ")" << names[1]
        << R"(", "correct": true, "tandem_ms": 0.01, "ratio_vs_cublas": 2.1, "device": "NVIDIA H200"})"
        << "\n"
        << (n > 2 ? R"x({"name": ")x" + names[2] +
                        R"x(", "correct": false, "failure": "timeout (hang)"})x"
                  : std::string("{}"))
        << "\n"
        << R"({"name": "someone_else", "correct": true, "tandem_ms": 0.001})"
        << "\n";
    EXPECT_EQ(import_gpu_timings(*db, bundle.string(), (dir / "rows.jsonl").string()),
              n > 2 ? 3 : 2);
    TuneOptions gpu = o;
    gpu.device = "gpu";
    const std::optional<TuningRecord> best = db->best(tuning_workload(gpu));
    ASSERT_TRUE(best);
    EXPECT_EQ(best->time_ms, 0.01);
    EXPECT_EQ(best->device, "NVIDIA H200");
    const std::vector<TuningRecord> model = db->top(tuning_workload(o), 3);
    ASSERT_GE(model.size(), 2u);
    EXPECT_EQ(candidate_key(best->candidate), candidate_key(model[1].candidate));
    if (n > 2) {
        int timeouts = 0;
        for (const TuningRecord &r : db->records(tuning_workload(gpu)))
            timeouts += r.status == "timeout";
        EXPECT_EQ(timeouts, 1);
    }
    EXPECT_THROW(import_gpu_timings(*db, (dir / "none").string(), (dir / "rows.jsonl").string()),
                 Error);
    fs::remove_all(dir);
}

/** The command line: tune, then best, export and import through tandem-cli. */
TEST(Tune, CommandLine) {
    fs::path dir = temp_dir("cli");
    const std::string cli = TANDEM_CLI, db = "sqlite:" + (dir / "t.db").string(),
                      shape = " --param M=96 --param N=80 --param K=64";
    auto run = [&](const std::string &args, const std::string &out) {
        return std::system((cli + " " + args + " > " + (dir / out).string() + " 2>&1").c_str());
    };
    EXPECT_EQ(
        run("tune gemm --target zpu" + shape + " --db " + db + " --budget 4 --json", "tune.json"),
        0);
    EXPECT_EQ(
        run("tune best gemm --target zpu" + shape + " --db " + db + " --top 3 --json", "best.json"),
        0);
    std::ifstream best(dir / "best.json");
    std::string text((std::istreambuf_iterator<char>(best)), {});
    EXPECT_NE(text.find("\"cycles\""), std::string::npos) << text;
    EXPECT_EQ(run("tune export --db " + db + " -o " + (dir / "export.json").string(), "export.out"),
              0);
    EXPECT_EQ(run("tune import " + (dir / "export.json").string() +
                      " --db sqlite:" + (dir / "copy.db").string(),
                  "import.out"),
              0);
    std::ifstream imported(dir / "import.out");
    std::string line((std::istreambuf_iterator<char>(imported)), {});
    EXPECT_NE(line.find("imported 4 records"), std::string::npos) << line;
    EXPECT_NE(run("tune best gemm --target zpu --param M=3 --db " + db, "none.out"),
              0); // no record: status 1
    EXPECT_NE(run("tune --db " + db, "noapp.out"), 0);
    // --seconds stops a search whose budget it would not reach.
    EXPECT_EQ(run("tune gemm --target zpu" + shape + " --db sqlite:" + (dir / "timed.db").string() +
                      " --budget 100000 --seconds 1",
                  "timed.out"),
              0);
    std::ifstream timed(dir / "timed.out");
    std::string summary((std::istreambuf_iterator<char>(timed)), {});
    EXPECT_EQ(summary.find("100000/100000"), std::string::npos) << summary;
}

TEST(Tune, TheSpaceHoldsOnlyWhatTheTargetTakes) {
    // gemm's cluster_m / cluster_n set cluster(n), which Hopper (thread-block clusters) and the
    // ZPU (mesh columns) take: on Ascend every value is the same kernel, so they are not searched.
    for (const std::string target : {"zpu", "hopper", "ascend"}) {
        TuneOptions o;
        o.app = "gemm";
        o.target = target;
        const auto space = search_space(find_app("gemm"), o);
        EXPECT_EQ(space.count("cluster_m"), target != "ascend" ? 1u : 0u) << target;
        EXPECT_EQ(space.count("cluster_n"), target != "ascend" ? 1u : 0u) << target;
        EXPECT_EQ(space.count("TM"), 1u) << target;
    }
}

TEST(Tune, FindsAtLeastTheDefaultsAndRepeatsForASeed) {
    fs::path dir = temp_dir("seed");
    TuneResult first = tune(small_gemm(dir / "a.db", 12));
    TuneResult second = tune(small_gemm(dir / "b.db", 12));
    EXPECT_EQ(first.measured, 12);
    ASSERT_TRUE(first.best && first.defaults);
    EXPECT_EQ(first.defaults->status, "ok");
    EXPECT_LE(first.best->cycles, first.defaults->cycles);
    ASSERT_TRUE(second.best);
    EXPECT_EQ(candidate_key(first.best->candidate), candidate_key(second.best->candidate));
    EXPECT_EQ(first.best->cycles, second.best->cycles);
    // Every record's status is one of the classes, and each candidate is recorded once.
    auto db = TuningDb::open("sqlite:" + (dir / "a.db").string());
    std::set<std::string> seen;
    for (const TuningRecord &r : db->records(first.workload)) {
        EXPECT_TRUE(seen.insert(candidate_key(r.candidate)).second);
        EXPECT_TRUE(std::set<std::string>(
                        {"ok", "user_error", "wrong", "race", "deadlock", "timeout", "crash"})
                        .count(r.status))
            << r.status;
    }
    EXPECT_EQ(seen.size(), 12u);
}

TEST(Tune, ResumeMeasuresNothingTwice) {
    fs::path dir = temp_dir("resume");
    TuneOptions o = small_gemm(dir / "t.db", 5);
    EXPECT_EQ(tune(o).measured, 5);
    o.budget = 12;
    o.resume = true;
    TuneResult r = tune(o);
    EXPECT_EQ(r.measured, 7); // the 5 before are reused
    EXPECT_EQ(TuningDb::open(o.db)->records(r.workload).size(), 12u);
    // The same best as one uninterrupted run of 12.
    TuneResult whole = tune(small_gemm(dir / "whole.db", 12));
    ASSERT_TRUE(r.best && whole.best);
    EXPECT_EQ(r.best->cycles, whole.best->cycles);
}

/** A tuner killed with SIGKILL mid-run: what it recorded is there, and --resume finishes the
 * budget without measuring anything twice. */
TEST(Tune, AKilledTunerResumes) {
    fs::path dir = temp_dir("kill");
    const std::string db = "sqlite:" + (dir / "t.db").string();
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        execl(TANDEM_CLI, TANDEM_CLI, "tune", "gemm", "--target", "zpu", "--param", "M=96",
              "--param", "N=80", "--param", "K=64", "--db", db.c_str(), "--budget", "400", "--seed",
              "7", "--lease", "2", (char *)nullptr);
        _exit(127);
    }
    TuneOptions o = small_gemm(dir / "t.db", 400);
    const TuningWorkload w = tuning_workload(o);
    size_t before = 0;
    for (int i = 0; i < 600 && before < 4; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        try {
            before = TuningDb::open(db)->records(w).size();
        } catch (const Error &) {
            before = 0; // not created yet
        }
    }
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the tuner finished before it was killed";
    const size_t kept = TuningDb::open(db)->records(w).size();
    ASSERT_GE(kept, 4u);
    o.budget = int(kept) + 3;
    o.resume = true;
    TuneResult r = tune(o);
    EXPECT_EQ(r.measured, 3);
    EXPECT_EQ(TuningDb::open(db)->records(w).size(), kept + 3);
}

} // namespace
