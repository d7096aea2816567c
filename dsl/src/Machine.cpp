#include "tandem/Machine.h"
#include "tandem/Error.h"

#include "../lower/Targets.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

namespace tandem {

namespace detail {
const char *builtin_machine_json(const std::string &target); // generated from machines/*.json
}

std::optional<double> parse_number(const std::string &text) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception &) {
        return std::nullopt;
    }
    if (used != text.size() || !std::isfinite(v))
        return std::nullopt;
    return v;
}

MachineDescription MachineDescription::builtin(const std::string &target) {
    // A registered target brings its description; the built-in ones are compiled in.
    const lower::TargetLowering *registered = lower::find_target(target);
    const char *text = detail::builtin_machine_json(target);
    if (!registered) {
        std::string known;
        for (const std::string &name : lower::target_names())
            known += (known.empty() ? "" : ", ") + name;
        throw Error("unknown target '" + target + "' (known: " + known + ")");
    }
    MachineDescription d;
    d.target_ = target;
    if (!registered->machine_json.empty())
        d.merge_json(registered->machine_json, "the description registered for " + target, true);
    else if (text)
        d.merge_json(text, "machines/" + target + ".json", true);
    else
        throw Error("target " + target + " has no machine description (machines/" + target +
                    ".json, or TargetLowering::machine_json)");
    return d;
}

double MachineDescription::number(const std::string &key) const {
    auto it = params_.find(key);
    if (it == params_.end())
        throw Error("target " + target_ + ": the machine description has no parameter '" + key +
                    "'");
    return it->second.value;
}

int64_t MachineDescription::integer(const std::string &key) const {
    double v = number(key);
    if (v != std::floor(v))
        throw Error("target " + target_ + ": parameter '" + key + "' must be an integer, it is " +
                    std::to_string(v));
    return int64_t(v);
}

const std::string &MachineDescription::role(const std::string &role) const {
    auto it = roles_.find(role);
    if (it == roles_.end())
        throw Error("target " + target_ + ": the machine description names no parameter for '" +
                    role + "' (its \"roles\")");
    return it->second;
}

void MachineDescription::set(const std::string &key, const std::string &text) {
    auto it = params_.find(key);
    if (it == params_.end()) {
        std::string known;
        for (const auto &[name, p] : params_)
            known += (known.empty() ? "" : ", ") + name;
        throw Error("target " + target_ + ": unknown parameter '" + key + "' (known: " + known +
                    ")");
    }
    std::optional<double> number = parse_number(text);
    if (!number)
        throw Error("target " + target_ + ": parameter '" + key + "' needs a number, got '" + text +
                    "'");
    const double v = *number;
    check(key, it->second, v);
    it->second.value = v;
    it->second.source = "set by the target string";
}

void MachineDescription::merge_file(const std::string &path) {
    std::ifstream in(path);
    if (!in)
        throw Error("target " + target_ + ": cannot read the machine description file '" + path +
                    "'");
    std::stringstream s;
    s << in.rdbuf();
    merge_json(s.str(), path, false);
}

void MachineDescription::merge_json(const std::string &text, const std::string &origin,
                                    bool define) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception &e) {
        throw Error("machine description " + origin + ": " + e.what());
    }
    if (!j.is_object() || !j.contains("params") || !j["params"].is_object())
        throw Error("machine description " + origin + ": needs an object \"params\"");
    if (j.contains("target") && j["target"] != target_)
        throw Error("machine description " + origin + " is for target " + j["target"].dump() +
                    ", not " + target_);
    if (define && j.contains("what"))
        what_ = j["what"].get<std::string>();
    if (define && j.contains("version"))
        version_ = j["version"].get<int>();
    if (define && j.contains("roles"))
        roles_ = j["roles"].get<std::map<std::string, std::string>>();
    for (const auto &[key, item] : j["params"].items()) {
        if (!define && !params_.count(key)) {
            set(key, "0"); // Error naming the known parameters
        }
        MachineParam &p = params_[key];
        const nlohmann::json &value = item.is_object() ? item["value"] : item;
        if (!value.is_number())
            throw Error("machine description " + origin + ": parameter '" + key +
                        "' needs a number");
        if (item.is_object() && item.contains("min"))
            p.min = item["min"].get<double>();
        check(key, p, value.get<double>());
        p.value = value.get<double>();
        if (item.is_object() && item.contains("unit"))
            p.unit = item["unit"].get<std::string>();
        p.source = item.is_object() && item.contains("source") ? item["source"].get<std::string>()
                                                               : origin;
    }
}

void MachineDescription::check(const std::string &key, const MachineParam &p, double v) const {
    if (v < p.min) {
        std::ostringstream s;
        s << "target " << target_ << ": parameter '" << key << "' must be at least " << p.min
          << ", got " << v;
        throw Error(s.str());
    }
}

std::string MachineDescription::json() const {
    nlohmann::json j;
    j["target"] = target_;
    j["version"] = version_;
    j["what"] = what_;
    for (const auto &[key, p] : params_)
        j["params"][key] = {
            {"value", p.value}, {"min", p.min}, {"unit", p.unit}, {"source", p.source}};
    return j.dump(2);
}

} // namespace tandem
