// Tuning across processes on a real PostgreSQL server (Debian's postgresql package), started on a
// free loopback port in a temporary directory and stopped after: three tune-workers measure every
// candidate of a search exactly once, a worker killed with SIGKILL loses nothing (its job is
// re-leased), and the best record equals a SQLite run with the same seed.
#include "Tune.h"
#include "TuningDb.h"
#include "tandem/Error.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <pwd.h>
#include <set>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

using namespace tandem;
using namespace tandem::apps;
namespace fs = std::filesystem;

/** Runs argv (as the postgres user when we are root: the server refuses root); its exit status. */
int run(std::vector<std::string> argv, const fs::path &log, bool as_postgres) {
    if (as_postgres)
        argv.insert(argv.begin(), {"runuser", "-u", "postgres", "--"});
    const pid_t pid = fork();
    if (pid == 0) {
        FILE *out = std::fopen(log.c_str(), "a");
        if (out) {
            dup2(fileno(out), 1);
            dup2(fileno(out), 2);
        }
        std::vector<char *> args;
        for (std::string &a : argv)
            args.push_back(a.data());
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int free_port() {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a);
    socklen_t n = sizeof a;
    getsockname(s, reinterpret_cast<sockaddr *>(&a), &n);
    close(s);
    return ntohs(a.sin_port);
}

/** A PostgreSQL server of its own for one test. */
class Server {
public:
    Server() {
        for (const auto &version : fs::directory_iterator("/usr/lib/postgresql", ec_)) {
            if (fs::exists(version.path() / "bin" / "initdb"))
                bin_ = version.path() / "bin";
        }
        if (bin_.empty()) {
            error_ = "no PostgreSQL server under /usr/lib/postgresql (./tandem installs Debian's "
                     "postgresql)";
            return;
        }
        dir_ = fs::temp_directory_path() /
               ("tandem_pg_" + std::to_string(getpid()) + "_" + std::to_string(counter()++));
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        as_postgres_ = geteuid() == 0;
        if (as_postgres_) {
            const passwd *pw = getpwnam("postgres");
            if (!pw) {
                error_ = "running as root and there is no postgres user to run the server as";
                return;
            }
            if (chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
                error_ = "cannot hand " + dir_.string() + " to the postgres user";
                return;
            }
        }
        log_ = dir_ / "server.log";
        port_ = free_port();
        if (run({(bin_ / "initdb").string(), "-D", (dir_ / "data").string(), "-U", "tandem", "-A",
                 "trust", "--no-sync", "-E", "UTF8"},
                dir_ / "initdb.log", as_postgres_) != 0) {
            error_ = "initdb failed: see " + (dir_ / "initdb.log").string();
            return;
        }
        const std::string options =
            "-p " + std::to_string(port_) + " -k " + dir_.string() +
            " -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50";
        if (run({(bin_ / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-l", log_.string(),
                 "-w", "-t", "60", "-o", options, "start"},
                dir_ / "pg_ctl.log", as_postgres_) != 0) {
            error_ = "the server did not start: see " + log_.string();
            return;
        }
        started_ = true;
    }

    ~Server() {
        if (started_)
            run({(bin_ / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-m", "immediate",
                 "-w", "stop"},
                dir_ / "pg_ctl.log", as_postgres_);
        if (!dir_.empty())
            fs::remove_all(dir_, ec_);
    }

    const std::string &error() const { return error_; }
    std::string uri() const {
        return "postgresql://tandem@127.0.0.1:" + std::to_string(port_) + "/postgres";
    }

private:
    static int &counter() {
        static int n = 0;
        return n;
    }
    std::error_code ec_;
    fs::path bin_, dir_, log_;
    int port_ = 0;
    bool as_postgres_ = false, started_ = false;
    std::string error_;
};

/** A tandem tune-worker process, its output in `log`. */
pid_t start_worker(const std::string &uri, const fs::path &log, const std::string &lease = "30") {
    const pid_t pid = fork();
    if (pid == 0) {
        FILE *out = std::fopen(log.c_str(), "w");
        if (out)
            dup2(fileno(out), 1);
        execl(TANDEM_CLI, TANDEM_CLI, "tune-worker", "--db", uri.c_str(), "--idle-exit", "4",
              "--lease", lease.c_str(), (char *)nullptr);
        _exit(127);
    }
    return pid;
}

int wait_exit(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int lines(const fs::path &file, const std::string &containing) {
    std::ifstream in(file);
    int n = 0;
    for (std::string line; std::getline(in, line);)
        n += line.find(containing) != std::string::npos;
    return n;
}

TuneOptions small_gemm(const std::string &db, int budget) {
    TuneOptions o;
    o.app = "gemm";
    o.target = "zpu";
    o.fixed = Params({{"M", "96"}, {"N", "80"}, {"K", "64"}});
    o.db = db;
    o.budget = budget;
    o.seed = 11;
    o.jobs = 0; // only queue: the workers measure
    return o;
}

fs::path temp_dir(const std::string &name) {
    fs::path d =
        fs::temp_directory_path() / ("tandem_pgtune_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

TEST(Postgres, ThreeWorkersMeasureEveryCandidateOnceAndAgreeWithSqlite) {
    Server server;
    ASSERT_EQ(server.error(), "");
    const fs::path dir = temp_dir("three");
    std::vector<pid_t> workers;
    for (int i = 0; i < 3; i++)
        workers.push_back(start_worker(server.uri(), dir / ("w" + std::to_string(i))));
    const int budget = 30;
    TuneResult shared = tune(small_gemm(server.uri(), budget));
    int measured_by_workers = 0;
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ(wait_exit(workers[size_t(i)]), 0);
        measured_by_workers += lines(dir / ("w" + std::to_string(i)), "gemm ");
    }
    EXPECT_EQ(shared.measured, budget);
    EXPECT_EQ(measured_by_workers, budget);
    auto db = TuningDb::open(server.uri());
    const std::vector<TuningRecord> records = db->records(shared.workload);
    std::set<std::string> distinct;
    for (const TuningRecord &r : records)
        distinct.insert(candidate_key(r.candidate));
    EXPECT_EQ(records.size(), size_t(budget));
    EXPECT_EQ(distinct.size(), size_t(budget));
    const TuningJobCounts jobs = db->jobs(shared.workload);
    EXPECT_EQ(jobs.done, budget);
    EXPECT_EQ(jobs.attempts, budget); // each claimed once: measured exactly once

    // The same search on SQLite, measured by this process: the same best.
    TuneOptions local = small_gemm("sqlite:" + (dir / "t.db").string(), budget);
    local.jobs = 2;
    TuneResult alone = tune(local);
    ASSERT_TRUE(shared.best && alone.best);
    EXPECT_EQ(candidate_key(shared.best->candidate), candidate_key(alone.best->candidate));
    EXPECT_EQ(shared.best->cycles, alone.best->cycles);
    fs::remove_all(dir);
}

TEST(Postgres, AKilledWorkersJobIsLeasedAgain) {
    Server server;
    ASSERT_EQ(server.error(), "");
    const fs::path dir = temp_dir("kill");
    const int budget = 12;
    TuneOptions o = small_gemm(server.uri(), budget);
    o.lease_seconds = 2;
    const TuningWorkload w = tuning_workload(o);
    std::thread tuner([&] { tune(o); });
    // A worker with a short lease, killed while it holds a job.
    const pid_t doomed = start_worker(server.uri(), dir / "doomed", "2");
    auto db = TuningDb::open(server.uri());
    TuningJobCounts seen;
    for (int i = 0; i < 600; i++) {
        seen = db->jobs(w);
        if (seen.done >= 2 && seen.leased == 1)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(doomed, SIGKILL);
    wait_exit(doomed);
    EXPECT_EQ(seen.leased, 1) << "the worker never held a job";
    const pid_t rescuer = start_worker(server.uri(), dir / "rescuer", "2");
    tuner.join();
    EXPECT_EQ(wait_exit(rescuer), 0);
    const TuningJobCounts after = db->jobs(w);
    EXPECT_EQ(after.done, budget);
    EXPECT_EQ(db->records(w).size(), size_t(budget));
    EXPECT_GE(lines(dir / "rescuer", "gemm "), 1);
    // The killed one's job was claimed again: one attempt more than jobs, unless it had finished
    // the job between the look and the kill.
    EXPECT_GE(after.attempts, budget);
    EXPECT_LE(after.attempts, budget + 1);
    fs::remove_all(dir);
}

} // namespace
