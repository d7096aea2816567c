#include "App.h"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::apps {

int Params::get_int(const std::string &key) const {
    std::string v = get(key);
    try {
        size_t used = 0;
        int r = std::stoi(v, &used);
        if (used != v.size())
            throw std::invalid_argument(v);
        return r;
    } catch (const std::exception &) {
        throw Error("parameter " + key + " needs an integer, got '" + v + "'");
    }
}

std::string Params::get(const std::string &key) const {
    auto it = values_.find(key);
    if (it == values_.end())
        throw Error("parameter " + key + " is missing");
    return it->second;
}

std::map<std::string, std::string> generator_defaults(const std::string &name) {
    std::map<std::string, std::string> defaults;
    for (const GeneratorParamInfo &p : GeneratorRegistry::create(name)->params()) {
        if (p.name != "schedule")
            defaults[p.name] = p.default_value;
    }
    return defaults;
}

std::vector<std::string> generator_schedules(const std::string &name) {
    for (const GeneratorParamInfo &p : GeneratorRegistry::create(name)->params()) {
        if (p.name == "schedule") {
            // The default first.
            std::vector<std::string> all = {p.default_value};
            for (const std::string &c : p.choices) {
                if (c != p.default_value)
                    all.push_back(c);
            }
            return all;
        }
    }
    throw Error("generator " + name + " has no parameter 'schedule'");
}

std::function<Built(const Params &, const std::string &, const Target &)>
generator_build(const std::string &name) {
    return [name](const Params &p, const std::string &schedule, const Target &target) {
        std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create(name);
        for (const auto &[k, v] : p.values())
            g->set_param(k, v);
        if (schedule != "reference" && !schedule.empty())
            g->set_param("schedule", schedule);
        GeneratorBase::Pipeline built =
            schedule == "reference" ? g->build_reference() : g->build(target);
        // The instance owns nothing the pipeline needs: Funcs and ImageParams are shared handles.
        return Built{built.inputs, built.output};
    };
}

Params params_of(const GeneratorBase &g) {
    Params p;
    for (const GeneratorParamInfo &info : g.params())
        p.set(info.name, info.value);
    return p;
}

const std::vector<App> &all_apps() {
    static const std::vector<App> apps = {gemm_app(), elementwise_app(), rmsnorm_app(),
                                          attention_scores_app(), pointwise_app()};
    return apps;
}

App generator_app(const std::string &name) {
    std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create(name);
    App app;
    app.name = name;
    app.summary = "generator " + name;
    app.defaults = generator_defaults(name);
    bool has_schedule = false;
    for (const GeneratorParamInfo &p : g->params()) {
        has_schedule |= p.name == "schedule";
        if (p.name != "schedule" && !p.tunable.empty())
            app.choices[p.name] = p.tunable;
    }
    app.schedules = has_schedule ? generator_schedules(name) : std::vector<std::string>{"default"};
    auto build = generator_build(name);
    app.build = [build, has_schedule](const Params &p, const std::string &schedule,
                                      const Target &target) {
        return build(p, has_schedule || schedule == "reference" ? schedule : "", target);
    };
    app.workload = generator_workload(name);
    app.tolerance = [name](const Params &p) {
        std::unique_ptr<GeneratorBase> instance = GeneratorRegistry::create(name);
        for (const auto &[k, v] : p.values())
            instance->set_param(k, v);
        const GeneratorBase::Pipeline a = instance->build_algorithm();
        bool narrow = a.output.halide().output_types()[0].bits() < 32;
        for (const ImageParam &in : a.inputs)
            narrow |= in.type().bits() < 32;
        return narrow ? 1e-2 : 1e-3;
    };
    return app;
}

const App &find_app(const std::string &name) {
    std::string known;
    for (const App &a : all_apps()) {
        if (a.name == name)
            return a;
        known += (known.empty() ? "" : ", ") + a.name;
    }
    // A generator of this program (a user's, in a generator binary): an app made from it.
    static std::map<std::string, App> generators;
    const std::vector<std::string> names = GeneratorRegistry::names();
    if (std::find(names.begin(), names.end(), name) != names.end()) {
        auto it = generators.find(name);
        if (it == generators.end())
            it = generators.emplace(name, generator_app(name)).first;
        return it->second;
    }
    for (const std::string &n : names) {
        if (!std::count_if(all_apps().begin(), all_apps().end(),
                           [&](const App &a) { return a.name == n; }))
            known += ", " + n;
    }
    throw Error("unknown app '" + name + "' (known: " + known + ")");
}

namespace {

/** The names of the Funcs and input images `e` calls. */
std::set<std::string> calls_in(const Halide::Expr &e) {
    class Find : public Halide::Internal::IRVisitor {
    public:
        std::set<std::string> names;
        using IRVisitor::visit;
        void visit(const Halide::Internal::Call *op) override {
            // An ImageParam is called through the Func that wraps it (a Halide call of its name).
            if (op->call_type == Halide::Internal::Call::Image ||
                op->call_type == Halide::Internal::Call::Halide) {
                names.insert(op->name);
            }
            IRVisitor::visit(op);
        }
    } find;
    e.accept(&find);
    return find.names;
}

} // namespace

void set_shape(Halide::OutputImageParam tensor, const std::vector<int> &extents,
               const std::string &shapes, const std::vector<bool> &fixed) {
    if (shapes != "static" && shapes != "runtime") {
        throw Error("shapes must be static or runtime, not '" + shapes + "'");
    }
    dense_shape(tensor, extents, shapes == "runtime", fixed);
}

void schedule_pointwise(Func &out, const std::vector<ImageParam> &inputs, const Params &p,
                        const std::string &schedule, const std::string &app) {
    if (schedule != "sync" && schedule != "double_buffered" && schedule != "single_buffered") {
        throw Error(app + ": unknown schedule '" + schedule +
                    "' (known: double_buffered, single_buffered, sync)");
    }
    // Tiles larger than a static tensor shrink to it (Halide's bounds need a tile within the
    // tensor); with runtime shapes they stay, their tails guarded.
    const bool runtime = p.has("shapes") && p.get("shapes") == "runtime";
    const int TX = runtime ? p.get_int("TX") : std::min(p.get_int("TX"), p.get_int("W"));
    const int TY = runtime ? p.get_int("TY") : std::min(p.get_int("TY"), p.get_int("H"));
    std::vector<Var> args = out.halide().args();
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), t("t");
    out.tile(args[0], args[1], xo, yo, xi, yi, TX, TY, TailStrategy::GuardWithIf)
        .fuse(xo, yo, t)
        .map_to_cores(t);
    // An input the definition does not read (after simplification: x - y - x reads no y) has
    // nothing to stage.
    std::set<std::string> read = calls_in(Halide::Internal::simplify(out.halide().value()));
    std::vector<Func> tiles;
    for (const ImageParam &in : inputs) {
        if (!read.count(Halide::Func(in).name()))
            continue;
        Func tile = Func::staged(in, out);
        tile.compute_at(out, t);
        tiles.push_back(tile);
    }
    if (schedule == "sync")
        return;
    int versions = schedule == "double_buffered" ? p.get_int("stages") : 1;
    for (Func &tile : tiles)
        tile.async_copy().multi_buffer(versions);
    out.async_copy().multi_buffer(versions);
}

namespace {

std::string arch_of(const std::string &target) {
    return target.substr(0, target.find(':'));
}

} // namespace

const std::vector<std::string> &schedules_for(const App &app, const std::string &target) {
    std::string arch = arch_of(target);
    auto it = app.target_schedules.find(arch);
    if (it == app.target_schedules.end())
        return app.schedules; // the generator's choices
    if (it->second.empty())
        throw Error("app " + app.name + " has no " + arch + " schedule yet");
    return it->second;
}

Params with_defaults(const App &app, const Params &given, const std::string &target) {
    Params p(app.defaults);
    auto it = app.target_defaults.find(arch_of(target));
    if (it != app.target_defaults.end()) {
        for (const auto &[k, v] : it->second)
            p.set(k, v);
    }
    for (const auto &[k, v] : given.values()) {
        if (!app.defaults.count(k)) {
            std::string known;
            for (const auto &[dk, dv] : app.defaults)
                known += (known.empty() ? "" : ", ") + dk;
            throw Error("app " + app.name + " has no parameter '" + k + "' (known: " + known + ")");
        }
        p.set(k, v);
    }
    return p;
}

/** stages = 0 (auto) of a tiled MMA (gemm, attention_scores): the target's own arithmetic
 * (tandem::fitting_stages) with the output staging and the accumulator (two versions each with
 * ping-pong) and the bias tile (f32, two versions). */
int fitting_stages(int N, int TM, int TN, int TK, const std::string &out,
                   const std::string &epilogue, const std::string &schedule, const Target &target,
                   bool runtime_shapes) {
    MmaTiles tiles;
    tiles.N = N;
    tiles.TM = TM, tiles.TN = TN, tiles.TK = TK;
    tiles.out_bytes = out == "bf16" ? 2 : 4;
    tiles.result_versions = schedule == "ws_pingpong" ? 2 : 1;
    tiles.bias_bytes = epilogue == "bias_relu" ? 2 * 4 * int64_t(TN) : 0;
    tiles.runtime_shapes = runtime_shapes;
    return tandem::fitting_stages(tiles, target);
}

} // namespace tandem::apps
