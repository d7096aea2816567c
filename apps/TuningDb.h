#ifndef TANDEM_APPS_TUNINGDB_H
#define TANDEM_APPS_TUNINGDB_H

/** \file
 * The tuning database: what each measured schedule candidate of a workload gave. One interface,
 * backends chosen by URI: `sqlite:PATH` (SQLiteCpp, WAL mode; every record committed as it is
 * added, so a killed tuner loses nothing). PostgreSQL (`postgresql://...`, shared by workers on
 * many machines) is issue 13's next step: open() says so.
 */

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tandem::apps {

/** What is tuned: a generator at fixed (non-tuned) parameters for a target, by a compiler. */
struct TuningWorkload {
    std::string generator, target, compiler;
    std::map<std::string, std::string> fixed;
    /** One line naming all of it (the database's key). */
    std::string key() const;
};

/** One measured candidate. status: ok, user_error, wrong, race, deadlock, timeout or crash. */
struct TuningRecord {
    std::map<std::string, std::string> candidate; // the tunable parameters, schedule included
    std::string status;
    double cycles = 0;            // on the target's machine model (ok only)
    double roofline_fraction = 0; // the problem's roofline over cycles
    std::string device, date, message;
    unsigned long long seed = 0;
};

/** "k=v,k=v" in key order: a candidate's identity. */
std::string candidate_key(const std::map<std::string, std::string> &candidate);

/** sqlite:$XDG_CACHE_HOME/tandem/tuning.db (~/.cache when XDG_CACHE_HOME is unset). */
std::string default_tuning_db();

class TuningDb {
public:
    /** Opens (creating) the database at `uri`; tandem::Error naming the URI and the reason when it
     * cannot (unknown scheme, a path that cannot be created, a file that is not a database). */
    static std::unique_ptr<TuningDb> open(const std::string &uri);
    virtual ~TuningDb() = default;
    virtual bool has(const TuningWorkload &w, const std::string &candidate) = 0;
    /** Adds (or replaces) the record of its candidate, durably before returning. */
    virtual void add(const TuningWorkload &w, const TuningRecord &r) = 0;
    /** Every record of the workload, in the order they were added. */
    virtual std::vector<TuningRecord> records(const TuningWorkload &w) = 0;
    /** Every workload with a record. */
    virtual std::vector<TuningWorkload> workloads() = 0;
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
