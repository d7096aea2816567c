#ifndef TANDEM_APPS_TUNINGDB_H
#define TANDEM_APPS_TUNINGDB_H

/** \file
 * The tuning database: what each measured schedule candidate of a workload gave, and the queue of
 * candidates waiting to be measured. One interface, backends chosen by URI:
 *   sqlite:PATH                 SQLiteCpp, WAL mode (one machine; several processes may share it)
 *   postgresql://user@host/db   libpqxx: any number of workers on any number of machines
 * Every record is committed as it is added, so a killed tuner or worker loses nothing.
 *
 * The queue: a tuner enqueues a generation of candidates as jobs; workers (the tuner's own
 * `--jobs` and `tandem tune-worker` processes) claim one job at a time with a lease they renew
 * while they measure (PostgreSQL: FOR UPDATE SKIP LOCKED), and complete it by adding its record and
 * marking it done in one transaction. A job whose lease ran out (its worker died) is claimed again.
 */

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tandem::apps {

/** What is tuned: a generator at fixed (non-tuned) parameters for a target, by a compiler, timed
 * on the target's machine model ("model") or on a GPU ("gpu": Hopper kernels, TuneOptions::device).
 */
struct TuningWorkload {
    std::string generator, target, compiler;
    std::map<std::string, std::string> fixed;
    std::string device = "model";
    /** One line naming all of it (the database's key). */
    std::string key() const;
};

/** One measured candidate. status: ok, user_error, wrong, race, deadlock, timeout or crash. */
struct TuningRecord {
    std::map<std::string, std::string> candidate; // the tunable parameters, schedule included
    std::string status;
    double cycles = 0;                 // on the target's machine model (ok only)
    double roofline_fraction = 0;      // the problem's roofline over cycles
    std::string device, date, message; // device: the model's name, or the GPU's
    unsigned long long seed = 0;
    double time_ms = 0; // a GPU workload: the median time of a launch on the GPU (ok only)
    /** What the search minimises: the GPU time where there is one, else the model's cycles. */
    double cost() const { return time_ms > 0 ? time_ms : cycles; }
};

/** Parameters as JSON text and back: how both backends store a candidate or a workload's fixed
 * parameters. */
std::string params_json(const std::map<std::string, std::string> &params);
std::map<std::string, std::string> params_from_json(const std::string &text);

/** "k=v,k=v" in key order: a candidate's identity. */
std::string candidate_key(const std::map<std::string, std::string> &candidate);

/** sqlite:$XDG_CACHE_HOME/tandem/tuning.db (~/.cache when XDG_CACHE_HOME is unset). */
std::string default_tuning_db();

/** A queued candidate, as a worker claims it. */
struct TuningJob {
    int64_t id = 0;
    TuningWorkload workload;
    std::map<std::string, std::string> candidate;
    std::string spec; // how to measure it: JSON written by the tuner (Tune.cpp)
};

/** The jobs of a workload by state; attempts counts every claim (a re-leased job claims twice). */
struct TuningJobCounts {
    int pending = 0, leased = 0, done = 0, attempts = 0;
};

class TuningDb {
public:
    /** Opens (creating) the database at `uri`; tandem::Error naming the URI and the reason when it
     * cannot (unknown scheme, a path that cannot be created, a file that is not a database). */
    static std::unique_ptr<TuningDb> open(const std::string &uri);
    /** The PostgreSQL backend (TuningDbPostgres.cpp); `uri` is a libpq connection URI. */
    static std::unique_ptr<TuningDb> open_postgresql(const std::string &uri);
    virtual ~TuningDb() = default;
    virtual bool has(const TuningWorkload &w, const std::string &candidate) = 0;
    /** Adds (or replaces) the record of its candidate, durably before returning. */
    virtual void add(const TuningWorkload &w, const TuningRecord &r) = 0;
    /** Every record of the workload, in the order they were added. */
    virtual std::vector<TuningRecord> records(const TuningWorkload &w) = 0;
    /** Every workload with a record. */
    virtual std::vector<TuningWorkload> workloads() = 0;

    /** Queues each candidate of `w` that is neither recorded nor queued, to be measured by a
     * worker of compiler `version` following `spec`. */
    virtual void enqueue(const TuningWorkload &w, const std::string &version,
                         const std::string &spec,
                         const std::vector<std::map<std::string, std::string>> &candidates) = 0;
    /** Leases to `worker` for `lease_seconds` the oldest job of compiler `version` that is pending
     * or whose lease ran out, of one of `generators` (those the worker can build), of a workload
     * timed on `device` (TuningWorkload::device) and of workload `only` when given; none when there
     * is none. */
    virtual std::optional<TuningJob> claim(const std::string &worker, const std::string &version,
                                           double lease_seconds,
                                           const std::vector<std::string> &generators,
                                           const std::string &device,
                                           const TuningWorkload *only = nullptr) = 0;
    /** Extends every lease `worker` holds to `lease_seconds` from now (its heartbeat). */
    virtual void renew(const std::string &worker, double lease_seconds) = 0;
    /** Adds the job's record and marks it done, in one transaction. A record already there (the
     * job was re-leased from a worker thought dead, which finished after all) is kept. */
    virtual void complete(const TuningJob &job, const TuningRecord &r) = 0;
    /** Drops the jobs of `w` no worker holds (a tuner stopping early). */
    virtual void cancel(const TuningWorkload &w) = 0;
    virtual TuningJobCounts jobs(const TuningWorkload &w) = 0;

    /** The fastest ok record, if any. */
    std::optional<TuningRecord> best(const TuningWorkload &w);
    /** The `k` fastest ok records, fastest first. */
    std::vector<TuningRecord> top(const TuningWorkload &w, size_t k);
    /** Every workload and its records as JSON text ({"workloads": [{..., "records": [...]}]}). */
    std::string export_json();
    /** Adds the records of an export (a record already there is replaced); returns how many. */
    int import_json(const std::string &text);
};

} // namespace tandem::apps

#endif
