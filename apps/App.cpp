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
    static const std::vector<App> apps = {gemm_app(), elementwise_app(), rmsnorm_app()};
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

const std::vector<std::string> &schedules_for(const App &app, const std::string &target) {
    if (target.rfind("hopper", 0) != 0) return app.schedules;
    if (app.hopper_schedules.empty()) throw Error("app " + app.name + " has no hopper schedule yet");
    return app.hopper_schedules;
}

Params with_defaults(const App &app, const Params &given, const std::string &target) {
    Params p(app.defaults);
    if (target.rfind("hopper", 0) == 0) {
        for (const auto &[k, v] : app.hopper_defaults) p.set(k, v);
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
