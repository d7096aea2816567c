#ifndef TANDEM_MACHINE_H
#define TANDEM_MACHINE_H

/** \file
 * Machine descriptions as data: every parameter of a target (capacities, alignments, rates,
 * latencies, cost weights) with its unit and its public source, in machines/<target>.json. The
 * files are compiled into the library, so a tool carries its defaults wherever it runs. The
 * compiler reads capacities and rules from the description; each backend builds its machine
 * model from it (e.g. zpu_backend::machine_params). A target string overrides parameters:
 *
 *     Target::parse("zpu:cores=4,rsram_bytes=1048576");
 *     Target::parse("zpu:file=my_zpu.json");   // {"params": {"cores": 4}} or the full format
 */

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tandem {

struct MachineParam {
    double value = 0;
    double min = 0; // the least legal value (1 for counts, sizes and rates)
    std::string unit, source;
};

/** `text`, all of it, as a finite number; nullopt if it is not one ("12x", "", "inf"). Shared by
 * machine description overrides and generator parameters. */
std::optional<double> parse_number(const std::string &text);

class MachineDescription {
public:
    /** The built-in description of `target` ("zpu", "hopper", "ascend"); Error if none. */
    static MachineDescription builtin(const std::string &target);

    const std::string &target() const { return target_; }
    /** The model's version: it changes whenever a figure the model gives would change (the
     * description's "changes" say how); recorded with every figure ("model": "zpu v2"). */
    int version() const { return version_; }
    const std::map<std::string, MachineParam> &params() const { return params_; }

    /** A parameter's value; Error naming the key if the description has none. */
    double number(const std::string &key) const;
    /** A parameter that must be an integer (a count, a size in bytes). */
    int64_t integer(const std::string &key) const;
    /** The parameter that plays `role` on this machine ("units": the parallel units a tile loop
     * is spread over; "vector_units": those of a kernel without a tile MMA where the machine has
     * separate vector cores; "vector_memory": the on-chip bytes vector work and staging share),
     * from the description's "roles"; Error if it names none. */
    const std::string &role(const std::string &role) const;
    bool has_role(const std::string &role) const { return roles_.count(role) != 0; }

    /** Overrides a known parameter (text: a number >= its min); Error for an unknown key. */
    void set(const std::string &key, const std::string &text);
    /** Overrides parameters from a JSON file: {"params": {key: value | {"value": v, ...}}}. */
    void merge_file(const std::string &path);

    /** The description as JSON, with every parameter's value, unit and source. */
    std::string json() const;

private:
    std::string target_, what_;
    int version_ = 0;
    std::map<std::string, MachineParam> params_;
    std::map<std::string, std::string> roles_;
    void merge_json(const std::string &text, const std::string &origin, bool define);
    void check(const std::string &key, const MachineParam &p, double value) const;
};

} // namespace tandem

#endif
