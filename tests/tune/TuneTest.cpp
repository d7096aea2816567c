// The autotuner and its SQLite tuning database: records survive a killed tuner, --resume measures
// nothing twice, a seed makes the search repeatable, bad databases are clear errors.
#include "Tune.h"
#include "TuningDb.h"
#include "tandem/Error.h"

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
    fs::path d = fs::temp_directory_path() / ("tandem_tune_" + name + "_" + std::to_string(::getpid()));
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
    TuningWorkload w{"gemm", "zpu", "test", {{"M", "8"}}}, other{"gemm", "zpu", "test", {{"M", "9"}}};
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
    EXPECT_NE(message("sqlite:" + (dir / "garbage.db").string()).find("not a database"), std::string::npos);
    std::ofstream(dir / "file") << "x";
    EXPECT_NE(message("sqlite:" + (dir / "file" / "t.db").string()).find("cannot create"), std::string::npos);
}

TEST(TuningDb, TopExportAndImport) {
    fs::path dir = temp_dir("export");
    auto a = TuningDb::open("sqlite:" + (dir / "a.db").string());
    TuningWorkload w{"gemm", "zpu", "test", {{"M", "8"}}}, v{"rmsnorm", "ascend", "test", {{"D", "7"}}};
    for (int i = 0; i < 5; i++) a->add(w, {{{"TM", std::to_string(16 * (i + 1))}}, "ok", double(100 - 10 * i), 0.1, "", "", "", 2});
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

/** The command line: tune, then best, export and import through tandem-cli. */
TEST(Tune, CommandLine) {
    fs::path dir = temp_dir("cli");
    const std::string cli = TANDEM_CLI, db = "sqlite:" + (dir / "t.db").string(), shape =
        " --param M=96 --param N=80 --param K=64";
    auto run = [&](const std::string &args, const std::string &out) {
        return std::system((cli + " " + args + " > " + (dir / out).string() + " 2>&1").c_str());
    };
    EXPECT_EQ(run("tune gemm --target zpu" + shape + " --db " + db + " --budget 4 --json", "tune.json"), 0);
    EXPECT_EQ(run("tune best gemm --target zpu" + shape + " --db " + db + " --top 3 --json", "best.json"), 0);
    std::ifstream best(dir / "best.json");
    std::string text((std::istreambuf_iterator<char>(best)), {});
    EXPECT_NE(text.find("\"cycles\""), std::string::npos) << text;
    EXPECT_EQ(run("tune export --db " + db + " -o " + (dir / "export.json").string(), "export.out"), 0);
    EXPECT_EQ(run("tune import " + (dir / "export.json").string() + " --db sqlite:" + (dir / "copy.db").string(),
                  "import.out"),
              0);
    std::ifstream imported(dir / "import.out");
    std::string line((std::istreambuf_iterator<char>(imported)), {});
    EXPECT_NE(line.find("imported 4 records"), std::string::npos) << line;
    EXPECT_NE(run("tune best gemm --target zpu --param M=3 --db " + db, "none.out"), 0); // no record: status 1
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
        EXPECT_TRUE(std::set<std::string>({"ok", "user_error", "wrong", "race", "deadlock", "timeout", "crash"}).count(r.status))
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
        execl(TANDEM_CLI, TANDEM_CLI, "tune", "gemm", "--target", "zpu", "--param", "M=96", "--param", "N=80",
              "--param", "K=64", "--db", db.c_str(), "--budget", "400", "--seed", "7", "--lease", "2", (char *)nullptr);
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
