#include "TuningDb.h"

#include "tandem/Error.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace tandem::apps {

namespace {

std::string placeholders(size_t n) {
    std::string text;
    for (size_t i = 0; i < n; i++)
        text += i ? ", ?" : "?";
    return text;
}

// Seconds since the epoch, in SQLite's SQL.
#define NOW "((julianday('now') - 2440587.5) * 86400.0)"

/** sqlite:PATH. Tables: workload (one row per TuningWorkload::key), record (one row per measured
 * candidate of a workload) and job (the queue). */
class SqliteDb final : public TuningDb {
public:
    explicit SqliteDb(const std::string &path) : db_(open_file(path)) {
        try {
            retry_busy([&] { set_up(); });
        } catch (const SQLite::Exception &e) {
            throw Error("tuning database sqlite:" + path + ": " + e.what());
        }
    }

    /** The journal mode and the tables (a second connection opening a new file while the first
     * sets them up can be refused at once: retry_busy). */
    void set_up() {
        {
            // Set once, by the first to open it (asking again while another writes can be refused).
            if (db_.execAndGet("PRAGMA journal_mode").getString() != "wal")
                db_.exec("PRAGMA journal_mode=WAL");
            db_.exec("PRAGMA synchronous=NORMAL");
            db_.exec("CREATE TABLE IF NOT EXISTS workload (id INTEGER PRIMARY KEY, key TEXT UNIQUE "
                     "NOT NULL, "
                     "generator TEXT, target TEXT, compiler TEXT, fixed TEXT)");
            db_.exec("CREATE TABLE IF NOT EXISTS record (workload INTEGER NOT NULL REFERENCES "
                     "workload(id), "
                     "candidate TEXT NOT NULL, params TEXT, status TEXT, cycles REAL, "
                     "roofline_fraction REAL, "
                     "device TEXT, date TEXT, seed INTEGER, message TEXT, added INTEGER, "
                     "PRIMARY KEY (workload, candidate))");
            db_.exec(
                "CREATE TABLE IF NOT EXISTS job (id INTEGER PRIMARY KEY, workload INTEGER NOT NULL "
                "REFERENCES workload(id), candidate TEXT NOT NULL, params TEXT, version TEXT, spec "
                "TEXT, "
                "state TEXT NOT NULL DEFAULT 'pending', worker TEXT, lease_until REAL, "
                "attempts INTEGER NOT NULL DEFAULT 0, UNIQUE (workload, candidate))");
            // Added with GPU timing; a database from before gets them.
            add_column("workload", "device", "TEXT NOT NULL DEFAULT 'model'");
            add_column("record", "time_ms", "REAL NOT NULL DEFAULT 0");
        }
    }

    bool has(const TuningWorkload &w, const std::string &candidate) override {
        return guard([&] {
            SQLite::Statement q(db_, "SELECT 1 FROM record WHERE workload = ? AND candidate = ?");
            q.bind(1, workload_id(w));
            q.bind(2, candidate);
            return q.executeStep();
        });
    }

    void add(const TuningWorkload &w, const TuningRecord &r) override {
        guard([&] {
            const int64_t id = workload_id(w);
            // IMMEDIATE: the write lock at BEGIN, where the busy timeout waits for it (a deferred
            // transaction that reads and then writes after another connection committed fails
            // at once in WAL mode: "database is locked", seen with a tuner and a worker).
            SQLite::Transaction t(db_, SQLite::TransactionBehavior::IMMEDIATE);
            insert_record(id, r, "INSERT OR REPLACE");
            t.commit();
            return 0;
        });
    }

    std::vector<TuningRecord> records(const TuningWorkload &w) override {
        return guard([&] {
            std::vector<TuningRecord> out;
            SQLite::Statement q(
                db_,
                "SELECT params, status, cycles, roofline_fraction, device, date, seed, message, "
                "time_ms FROM record WHERE workload = ? ORDER BY added");
            q.bind(1, workload_id(w));
            while (q.executeStep()) {
                TuningRecord r;
                r.candidate = params_from_json(q.getColumn(0).getString());
                r.status = q.getColumn(1).getString();
                r.cycles = q.getColumn(2).getDouble();
                r.roofline_fraction = q.getColumn(3).getDouble();
                r.device = q.getColumn(4).getString();
                r.date = q.getColumn(5).getString();
                r.seed = (unsigned long long)q.getColumn(6).getInt64();
                r.message = q.getColumn(7).getString();
                r.time_ms = q.getColumn(8).getDouble();
                out.push_back(std::move(r));
            }
            return out;
        });
    }

    std::vector<TuningWorkload> workloads() override {
        return guard([&] {
            std::vector<TuningWorkload> out;
            SQLite::Statement q(
                db_,
                "SELECT generator, target, compiler, fixed, device FROM workload w WHERE EXISTS "
                "(SELECT 1 FROM record r WHERE r.workload = w.id) ORDER BY id");
            while (q.executeStep()) {
                out.push_back({q.getColumn(0).getString(), q.getColumn(1).getString(),
                               q.getColumn(2).getString(),
                               params_from_json(q.getColumn(3).getString()),
                               q.getColumn(4).getString()});
            }
            return out;
        });
    }

    void enqueue(const TuningWorkload &w, const std::string &version, const std::string &spec,
                 const std::vector<std::map<std::string, std::string>> &candidates) override {
        guard([&] {
            const int64_t id = workload_id(w);
            SQLite::Transaction t(db_, SQLite::TransactionBehavior::IMMEDIATE);
            for (const auto &c : candidates) {
                SQLite::Statement q(
                    db_, "INSERT OR IGNORE INTO job (workload, candidate, params, version, spec) "
                         "SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS "
                         "(SELECT 1 FROM record WHERE workload = ? AND candidate = ?)");
                q.bind(1, id);
                q.bind(2, candidate_key(c));
                q.bind(3, params_json(c));
                q.bind(4, version);
                q.bind(5, spec);
                q.bind(6, id);
                q.bind(7, candidate_key(c));
                q.exec();
            }
            t.commit();
            return 0;
        });
    }

    std::optional<TuningJob> claim(const std::string &worker, const std::string &version,
                                   double lease_seconds, const std::vector<std::string> &generators,
                                   const std::string &device, const TuningWorkload *only) override {
        if (generators.empty())
            return std::nullopt;
        return guard([&]() -> std::optional<TuningJob> {
            const int64_t workload = only ? workload_id(*only) : -1;
            SQLite::Transaction t(db_,
                                  SQLite::TransactionBehavior::IMMEDIATE); // one claimer at a time
            SQLite::Statement q(
                db_,
                std::string(
                    "SELECT j.id, j.params, j.spec, w.generator, w.target, w.compiler, w.fixed, "
                    "w.device FROM job j JOIN workload w ON w.id = j.workload WHERE j.version = ? "
                    "AND "
                    "(j.state = 'pending' OR (j.state = 'leased' AND j.lease_until < " NOW ")) "
                    "AND (? < 0 OR j.workload = ?) AND w.device = ? AND w.generator IN (") +
                    placeholders(generators.size()) + ") ORDER BY j.id LIMIT 1");
            q.bind(1, version);
            q.bind(2, workload);
            q.bind(3, workload);
            q.bind(4, device);
            for (size_t i = 0; i < generators.size(); i++)
                q.bind(int(5 + i), generators[i]);
            if (!q.executeStep())
                return std::nullopt;
            TuningJob job;
            job.id = q.getColumn(0).getInt64();
            job.candidate = params_from_json(q.getColumn(1).getString());
            job.spec = q.getColumn(2).getString();
            job.workload = {
                q.getColumn(3).getString(), q.getColumn(4).getString(), q.getColumn(5).getString(),
                params_from_json(q.getColumn(6).getString()), q.getColumn(7).getString()};
            SQLite::Statement lease(
                db_, "UPDATE job SET state = 'leased', worker = ?, lease_until = " NOW " + ?, "
                     "attempts = attempts + 1 WHERE id = ?");
            lease.bind(1, worker);
            lease.bind(2, lease_seconds);
            lease.bind(3, job.id);
            lease.exec();
            t.commit();
            return job;
        });
    }

    void renew(const std::string &worker, double lease_seconds) override {
        guard([&] {
            SQLite::Statement q(db_, "UPDATE job SET lease_until = " NOW
                                     " + ? WHERE worker = ? AND state = 'leased'");
            q.bind(1, lease_seconds);
            q.bind(2, worker);
            return q.exec();
        });
    }

    void complete(const TuningJob &job, const TuningRecord &r) override {
        guard([&] {
            const int64_t id = workload_id(job.workload);
            SQLite::Transaction t(db_, SQLite::TransactionBehavior::IMMEDIATE);
            insert_record(id, r, "INSERT OR IGNORE");
            SQLite::Statement done(db_, "UPDATE job SET state = 'done' WHERE id = ?");
            done.bind(1, job.id);
            done.exec();
            t.commit();
            return 0;
        });
    }

    void cancel(const TuningWorkload &w) override {
        guard([&] {
            SQLite::Statement q(db_, "DELETE FROM job WHERE workload = ? AND (state = 'pending' OR "
                                     "(state = 'leased' AND lease_until < " NOW "))");
            q.bind(1, workload_id(w));
            return q.exec();
        });
    }

    TuningJobCounts jobs(const TuningWorkload &w) override {
        return guard([&] {
            TuningJobCounts n;
            SQLite::Statement q(
                db_,
                "SELECT state, count(*), sum(attempts) FROM job WHERE workload = ? GROUP BY state");
            q.bind(1, workload_id(w));
            while (q.executeStep()) {
                const std::string state = q.getColumn(0).getString();
                const int count = q.getColumn(1).getInt();
                (state == "pending" ? n.pending : state == "leased" ? n.leased : n.done) += count;
                n.attempts += q.getColumn(2).getInt();
            }
            return n;
        });
    }

private:
    SQLite::Database db_;

    /** Inserts a record; `verb` is INSERT OR REPLACE or INSERT OR IGNORE. */
    void insert_record(int64_t id, const TuningRecord &r, const std::string &verb) {
        SQLite::Statement q(
            db_, verb + " INTO record (workload, candidate, params, status, cycles, "
                        "roofline_fraction, device, date, seed, message, added, time_ms) VALUES "
                        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                        "(SELECT COALESCE(MAX(added), 0) + 1 FROM record WHERE workload = ?), ?)");
        q.bind(1, id);
        q.bind(2, candidate_key(r.candidate));
        q.bind(3, params_json(r.candidate));
        q.bind(4, r.status);
        q.bind(5, r.cycles);
        q.bind(6, r.roofline_fraction);
        q.bind(7, r.device);
        q.bind(8, r.date);
        q.bind(9, int64_t(r.seed));
        q.bind(10, r.message);
        q.bind(11, id);
        q.bind(12, r.time_ms);
        q.exec();
    }

    bool has_column(const std::string &table, const std::string &column) {
        SQLite::Statement q(db_, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
        q.bind(1, table);
        q.bind(2, column);
        return q.executeStep();
    }

    void add_column(const std::string &table, const std::string &column, const std::string &type) {
        if (has_column(table, column))
            return;
        SQLite::Transaction t(db_, SQLite::TransactionBehavior::IMMEDIATE);
        if (!has_column(table, column))
            db_.exec("ALTER TABLE " + table + " ADD COLUMN " + column + " " + type);
        t.commit();
    }

    static SQLite::Database open_file(const std::string &path) {
        namespace fs = std::filesystem;
        if (path.empty())
            throw Error("tuning database sqlite:: give a file path (sqlite:PATH)");
        std::error_code ec;
        const fs::path dir = fs::path(path).parent_path();
        if (!dir.empty())
            fs::create_directories(dir, ec);
        if (ec)
            throw Error("tuning database sqlite:" + path + ": cannot create " + dir.string() +
                        ": " + ec.message());
        try {
            SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
            // Processes opening a new database together wait for each other.
            db.setBusyTimeout(10000);
            // A file that is not a database fails here, not at the first query.
            db.exec("SELECT count(*) FROM sqlite_master");
            return db;
        } catch (const SQLite::Exception &e) {
            throw Error("tuning database sqlite:" + path + ": " + e.what());
        }
    }

    template <class F> auto guard(F f) -> decltype(f()) {
        try {
            return retry_busy(f);
        } catch (const SQLite::Exception &e) {
            throw Error(std::string("tuning database: ") + e.what());
        }
    }

    /** f(), again while SQLite answers "database is locked" without waiting for the busy timeout
     * (WAL: a read snapshot another connection's commit made stale, a journal mode being set); each
     * f is one transaction or one statement, rolled back when it throws. Up to about 10 s. */
    template <class F> static auto retry_busy(F f) -> decltype(f()) {
        for (int attempt = 0;; attempt++) {
            try {
                return f();
            } catch (const SQLite::Exception &e) {
                if ((e.getErrorCode() & 0xff) != SQLITE_BUSY || attempt >= 200)
                    throw;
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        }
    }

    int64_t workload_id(const TuningWorkload &w) {
        const std::string key = w.key();
        SQLite::Statement find(db_, "SELECT id FROM workload WHERE key = ?");
        find.bind(1, key);
        if (find.executeStep())
            return find.getColumn(0).getInt64();
        SQLite::Statement add(
            db_, "INSERT OR IGNORE INTO workload (key, generator, target, compiler, fixed, device) "
                 "VALUES (?, ?, ?, ?, ?, ?)");
        add.bind(1, key);
        add.bind(2, w.generator);
        add.bind(3, w.target);
        add.bind(4, w.compiler);
        add.bind(5, params_json(w.fixed));
        add.bind(6, w.device);
        add.exec();
        SQLite::Statement again(db_, "SELECT id FROM workload WHERE key = ?");
        again.bind(1, key);
        again.executeStep();
        return again.getColumn(0).getInt64();
    }
};

} // namespace

std::string TuningWorkload::key() const {
    // Model workloads keep the key they had before GPU timing.
    return generator + " " + target + " " + compiler + " " + candidate_key(fixed) +
           (device == "model" ? "" : " timed on " + device);
}

std::string params_json(const std::map<std::string, std::string> &params) {
    return nlohmann::json(params).dump();
}

std::map<std::string, std::string> params_from_json(const std::string &text) {
    return nlohmann::json::parse(text).get<std::map<std::string, std::string>>();
}

std::string candidate_key(const std::map<std::string, std::string> &candidate) {
    std::string key;
    for (const auto &[k, v] : candidate)
        key += (key.empty() ? "" : ",") + k + "=" + v;
    return key;
}

std::string default_tuning_db() {
    const char *xdg = std::getenv("XDG_CACHE_HOME"), *home = std::getenv("HOME");
    std::string base = xdg && *xdg ? xdg : std::string(home ? home : ".") + "/.cache";
    return "sqlite:" + base + "/tandem/tuning.db";
}

std::unique_ptr<TuningDb> TuningDb::open(const std::string &uri) {
    if (uri.rfind("sqlite:", 0) == 0)
        return std::make_unique<SqliteDb>(uri.substr(7));
    if (uri.rfind("postgresql://", 0) == 0 || uri.rfind("postgres://", 0) == 0) {
        return open_postgresql(uri);
    }
    throw Error("tuning database '" + uri +
                "': unknown kind; give sqlite:PATH or postgresql://user@host:port/database (the "
                "default is " +
                default_tuning_db() + ")");
}

std::vector<TuningRecord> TuningDb::top(const TuningWorkload &w, size_t k) {
    std::vector<TuningRecord> ok;
    for (TuningRecord &r : records(w)) {
        if (r.status == "ok")
            ok.push_back(std::move(r));
    }
    std::stable_sort(ok.begin(), ok.end(), [](const TuningRecord &a, const TuningRecord &b) {
        return a.cost() < b.cost();
    });
    if (ok.size() > k)
        ok.resize(k);
    return ok;
}

std::string TuningDb::export_json() {
    nlohmann::json all = nlohmann::json::array();
    for (const TuningWorkload &w : workloads()) {
        nlohmann::json records = nlohmann::json::array();
        for (const TuningRecord &r : this->records(w)) {
            records.push_back({{"candidate", r.candidate},
                               {"status", r.status},
                               {"cycles", r.cycles},
                               {"roofline_fraction", r.roofline_fraction},
                               {"time_ms", r.time_ms},
                               {"device", r.device},
                               {"date", r.date},
                               {"message", r.message},
                               {"seed", r.seed}});
        }
        all.push_back({{"generator", w.generator},
                       {"target", w.target},
                       {"compiler", w.compiler},
                       {"fixed", w.fixed},
                       {"timed_on", w.device},
                       {"records", records}});
    }
    return nlohmann::json({{"workloads", all}}).dump(1);
}

int TuningDb::import_json(const std::string &text) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception &e) {
        throw Error(std::string("tuning import: not JSON: ") + e.what());
    }
    if (!j.contains("workloads") || !j["workloads"].is_array())
        throw Error(
            "tuning import: expected {\"workloads\": [...]} (what `tandem tune export` writes)");
    int n = 0;
    try {
        for (const auto &jw : j["workloads"]) {
            TuningWorkload w{jw.at("generator"), jw.at("target"), jw.at("compiler"),
                             jw.at("fixed").get<std::map<std::string, std::string>>(),
                             jw.value("timed_on", "model")};
            for (const auto &jr : jw.at("records")) {
                TuningRecord r;
                r.candidate = jr.at("candidate").get<std::map<std::string, std::string>>();
                r.status = jr.at("status");
                r.cycles = jr.value("cycles", 0.0);
                r.roofline_fraction = jr.value("roofline_fraction", 0.0);
                r.time_ms = jr.value("time_ms", 0.0);
                r.device = jr.value("device", "");
                r.date = jr.value("date", "");
                r.message = jr.value("message", "");
                r.seed = jr.value("seed", 0ull);
                add(w, r);
                n++;
            }
        }
    } catch (const nlohmann::json::exception &e) {
        throw Error(std::string("tuning import: a workload or record lacks a field: ") + e.what());
    }
    return n;
}

std::optional<TuningRecord> TuningDb::best(const TuningWorkload &w) {
    std::optional<TuningRecord> best;
    for (TuningRecord &r : records(w)) {
        if (r.status == "ok" && (!best || r.cost() < best->cost()))
            best = std::move(r);
    }
    return best;
}

} // namespace tandem::apps
