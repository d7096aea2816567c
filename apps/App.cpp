#include "App.h"

namespace tandem::apps {

int Params::get_int(const std::string &key) const {
    std::string v = get(key);
    try {
        size_t used = 0;
        int r = std::stoi(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
        return r;
    } catch (const std::exception &) {
        throw Error("parameter " + key + " needs an integer, got '" + v + "'");
    }
}

std::string Params::get(const std::string &key) const {
    auto it = values_.find(key);
    if (it == values_.end()) throw Error("parameter " + key + " is missing");
    return it->second;
}

const std::vector<App> &all_apps() {
    static const std::vector<App> apps = {gemm_app(), elementwise_app(), rmsnorm_app(), attention_scores_app(), pointwise_app()};
    return apps;
}

const App &find_app(const std::string &name) {
    std::string known;
    for (const App &a : all_apps()) {
        if (a.name == name) return a;
        known += (known.empty() ? "" : ", ") + a.name;
    }
    throw Error("unknown app '" + name + "' (known: " + known + ")");
}

namespace {

std::string arch_of(const std::string &target) { return target.substr(0, target.find(':')); }

} // namespace

const std::vector<std::string> &schedules_for(const App &app, const std::string &target) {
    std::string arch = arch_of(target);
    if (arch == "zpu") return app.schedules;
    auto it = app.target_schedules.find(arch);
    if (it == app.target_schedules.end()) throw Error("app " + app.name + " has no " + arch + " schedule yet");
    return it->second;
}

Params with_defaults(const App &app, const Params &given, const std::string &target) {
    Params p(app.defaults);
    auto it = app.target_defaults.find(arch_of(target));
    if (it != app.target_defaults.end()) {
        for (const auto &[k, v] : it->second) p.set(k, v);
    }
    for (const auto &[k, v] : given.values()) {
        if (!app.defaults.count(k)) {
            std::string known;
            for (const auto &[dk, dv] : app.defaults) known += (known.empty() ? "" : ", ") + dk;
            throw Error("app " + app.name + " has no parameter '" + k + "' (known: " + known + ")");
        }
        p.set(k, v);
    }
    return p;
}

} // namespace tandem::apps
