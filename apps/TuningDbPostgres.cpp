// The tuning database on a PostgreSQL server (libpqxx): the tables of the SQLite backend, shared by
// tuners and workers on any number of machines. Workers claim jobs with FOR UPDATE SKIP LOCKED, so
// two never take the same one, and hold a lease (lease_until) their heartbeat renews.
#include "TuningDb.h"

#include "tandem/Error.h"

#include <pqxx/pqxx>

namespace tandem::apps {

namespace {

class PostgresDb final : public TuningDb {
public:
    explicit PostgresDb(const std::string &uri) : uri_(uri), conn_(connect(uri)) {
        guard([&] {
            pqxx::work t(*conn_);
            // Tuners and workers starting together create the tables once.
            t.exec("SELECT pg_advisory_xact_lock(724851113)");
            t.exec("CREATE TABLE IF NOT EXISTS workload (id BIGSERIAL PRIMARY KEY, key TEXT UNIQUE "
                   "NOT NULL, "
                   "generator TEXT, target TEXT, compiler TEXT, fixed TEXT)");
            t.exec("CREATE TABLE IF NOT EXISTS record (workload BIGINT NOT NULL REFERENCES "
                   "workload(id), "
                   "candidate TEXT NOT NULL, params TEXT, status TEXT, cycles DOUBLE PRECISION, "
                   "roofline_fraction DOUBLE PRECISION, device TEXT, date TEXT, seed BIGINT, "
                   "message TEXT, "
                   "added BIGSERIAL, PRIMARY KEY (workload, candidate))");
            t.exec("CREATE TABLE IF NOT EXISTS job (id BIGSERIAL PRIMARY KEY, workload BIGINT NOT "
                   "NULL "
                   "REFERENCES workload(id), candidate TEXT NOT NULL, params TEXT, version TEXT, "
                   "spec TEXT, "
                   "state TEXT NOT NULL DEFAULT 'pending', worker TEXT, lease_until TIMESTAMPTZ, "
                   "attempts INTEGER NOT NULL DEFAULT 0, UNIQUE (workload, candidate))");
            // Added with GPU timing; a database from before gets them.
            t.exec("ALTER TABLE workload ADD COLUMN IF NOT EXISTS device TEXT NOT NULL DEFAULT "
                   "'model'");
            t.exec("ALTER TABLE record ADD COLUMN IF NOT EXISTS time_ms DOUBLE PRECISION NOT NULL "
                   "DEFAULT 0");
            t.commit();
            return 0;
        });
    }

    bool has(const TuningWorkload &w, const std::string &candidate) override {
        return guard([&] {
            pqxx::work t(*conn_);
            return !t.exec_params("SELECT 1 FROM record WHERE workload = $1 AND candidate = $2",
                                  workload_id(t, w), candidate)
                        .empty();
        });
    }

    void add(const TuningWorkload &w, const TuningRecord &r) override {
        guard([&] {
            pqxx::work t(*conn_);
            insert_record(t, workload_id(t, w), r, /*replace=*/true);
            t.commit();
            return 0;
        });
    }

    std::vector<TuningRecord> records(const TuningWorkload &w) override {
        return guard([&] {
            pqxx::work t(*conn_);
            std::vector<TuningRecord> out;
            for (const auto &row : t.exec_params(
                     "SELECT params, status, cycles, roofline_fraction, device, date, "
                     "seed, message, time_ms FROM record WHERE workload = $1 ORDER BY added",
                     workload_id(t, w))) {
                TuningRecord r;
                r.candidate = params_from_json(row[0].c_str());
                r.status = row[1].c_str();
                r.cycles = row[2].as<double>();
                r.roofline_fraction = row[3].as<double>();
                r.device = row[4].c_str();
                r.date = row[5].c_str();
                r.seed = (unsigned long long)row[6].as<int64_t>();
                r.message = row[7].c_str();
                r.time_ms = row[8].as<double>();
                out.push_back(std::move(r));
            }
            return out;
        });
    }

    std::vector<TuningWorkload> workloads() override {
        return guard([&] {
            pqxx::work t(*conn_);
            std::vector<TuningWorkload> out;
            for (const auto &row :
                 t.exec("SELECT generator, target, compiler, fixed, device FROM workload w WHERE "
                        "EXISTS (SELECT 1 FROM record r WHERE r.workload = w.id) ORDER BY id")) {
                out.push_back({row[0].c_str(), row[1].c_str(), row[2].c_str(),
                               params_from_json(row[3].c_str()), row[4].c_str()});
            }
            return out;
        });
    }

    void enqueue(const TuningWorkload &w, const std::string &version, const std::string &spec,
                 const std::vector<std::map<std::string, std::string>> &candidates) override {
        guard([&] {
            pqxx::work t(*conn_);
            const int64_t id = workload_id(t, w);
            for (const auto &c : candidates) {
                t.exec_params("INSERT INTO job (workload, candidate, params, version, spec) SELECT "
                              "$1, $2, $3, $4, $5 "
                              "WHERE NOT EXISTS (SELECT 1 FROM record WHERE workload = $1 AND "
                              "candidate = $2) "
                              "ON CONFLICT (workload, candidate) DO NOTHING",
                              id, candidate_key(c), params_json(c), version, spec);
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
            pqxx::work t(*conn_);
            const int64_t workload = only ? workload_id(t, *only) : -1;
            std::string names;
            for (const std::string &g : generators)
                names += (names.empty() ? "" : ", ") + t.quote(g);
            const pqxx::result r =
                t.exec_params("UPDATE job SET state = 'leased', worker = $1, lease_until = now() + "
                              "make_interval(secs => $2), "
                              "attempts = attempts + 1 WHERE id = (SELECT id FROM job WHERE "
                              "version = $3 AND (state = 'pending' "
                              "OR (state = 'leased' AND lease_until < now())) AND ($4 < 0 OR "
                              "workload = $4) AND workload IN (SELECT id "
                              "FROM workload WHERE device = $5 AND generator IN (" +
                                  names +
                                  ")) ORDER BY id LIMIT 1 FOR UPDATE "
                                  "SKIP LOCKED) RETURNING id, params, spec, workload",
                              worker, lease_seconds, version, workload, device);
            if (r.empty()) {
                t.commit();
                return std::nullopt;
            }
            TuningJob job;
            job.id = r[0][0].as<int64_t>();
            job.candidate = params_from_json(r[0][1].c_str());
            job.spec = r[0][2].c_str();
            const pqxx::row w =
                t.exec_params1("SELECT generator, target, compiler, fixed, device FROM workload "
                               "WHERE id = $1",
                               r[0][3].as<int64_t>());
            job.workload = {w[0].c_str(), w[1].c_str(), w[2].c_str(),
                            params_from_json(w[3].c_str()), w[4].c_str()};
            t.commit();
            return job;
        });
    }

    void renew(const std::string &worker, double lease_seconds) override {
        guard([&] {
            pqxx::work t(*conn_);
            t.exec_params("UPDATE job SET lease_until = now() + make_interval(secs => $1) WHERE "
                          "worker = $2 AND "
                          "state = 'leased'",
                          lease_seconds, worker);
            t.commit();
            return 0;
        });
    }

    void complete(const TuningJob &job, const TuningRecord &r) override {
        guard([&] {
            pqxx::work t(*conn_);
            insert_record(t, workload_id(t, job.workload), r, /*replace=*/false);
            t.exec_params("UPDATE job SET state = 'done' WHERE id = $1", job.id);
            t.commit();
            return 0;
        });
    }

    void cancel(const TuningWorkload &w) override {
        guard([&] {
            pqxx::work t(*conn_);
            t.exec_params("DELETE FROM job WHERE workload = $1 AND (state = 'pending' OR (state = "
                          "'leased' AND "
                          "lease_until < now()))",
                          workload_id(t, w));
            t.commit();
            return 0;
        });
    }

    TuningJobCounts jobs(const TuningWorkload &w) override {
        return guard([&] {
            pqxx::work t(*conn_);
            TuningJobCounts n;
            for (const auto &row :
                 t.exec_params("SELECT state, count(*), sum(attempts) FROM job WHERE workload = $1 "
                               "GROUP BY state",
                               workload_id(t, w))) {
                const std::string state = row[0].c_str();
                const int count = row[1].as<int>();
                (state == "pending" ? n.pending : state == "leased" ? n.leased : n.done) += count;
                n.attempts += row[2].as<int>();
            }
            return n;
        });
    }

private:
    std::string uri_;
    std::unique_ptr<pqxx::connection> conn_;

    static std::unique_ptr<pqxx::connection> connect(const std::string &uri) {
        try {
            return std::make_unique<pqxx::connection>(uri);
        } catch (const std::exception &e) {
            throw Error("tuning database " + uri + ": cannot connect: " + e.what());
        }
    }

    template <class F> auto guard(F f) -> decltype(f()) {
        try {
            return f();
        } catch (const pqxx::broken_connection &e) {
            throw Error("tuning database " + uri_ + ": lost the connection: " + e.what());
        } catch (const pqxx::sql_error &e) {
            throw Error("tuning database " + uri_ + ": " + e.what());
        }
    }

    static int64_t workload_id(pqxx::work &t, const TuningWorkload &w) {
        const std::string key = w.key();
        t.exec_params("INSERT INTO workload (key, generator, target, compiler, fixed, device) "
                      "VALUES ($1, $2, $3, $4, "
                      "$5, $6) ON CONFLICT (key) DO NOTHING",
                      key, w.generator, w.target, w.compiler, params_json(w.fixed), w.device);
        return t.exec_params1("SELECT id FROM workload WHERE key = $1", key)[0].as<int64_t>();
    }

    static void insert_record(pqxx::work &t, int64_t id, const TuningRecord &r, bool replace) {
        t.exec_params(
            "INSERT INTO record (workload, candidate, params, status, cycles, roofline_fraction, "
            "device, "
            "date, seed, message, time_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
            "ON CONFLICT "
            "(workload, candidate) DO " +
                std::string(replace ? "UPDATE SET params = $3, status = $4, cycles = $5, "
                                      "roofline_fraction = $6, device = $7, date = $8, seed = $9, "
                                      "message = $10, time_ms = $11"
                                    : "NOTHING"),
            id, candidate_key(r.candidate), params_json(r.candidate), r.status, r.cycles,
            r.roofline_fraction, r.device, r.date, int64_t(r.seed), r.message, r.time_ms);
    }
};

} // namespace

std::unique_ptr<TuningDb> TuningDb::open_postgresql(const std::string &uri) {
    return std::make_unique<PostgresDb>(uri);
}

} // namespace tandem::apps
