#include "GpuBundle.h"

#include "App.h"
#include "GpuTiming.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tandem::apps {

namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string &path, const std::string &what) {
    std::ifstream in(path);
    if (!in)
        throw Error("tune gpu-import: cannot read " + what + " " + path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

} // namespace

int write_gpu_bundle(const TuneOptions &o, TuningDb &db, int top, const std::string &dir) {
    const App &app = find_app(o.app);
    if (o.target != "hopper")
        throw Error("tune gpu-bundle: GPU timing is for hopper, not " + o.target);
    if (!gpu_harness_times(app))
        throw Error("tune gpu-bundle: the GPU harness does not time " + app.name);
    TuneOptions model = o, gpu = o;
    model.device = "model";
    gpu.device = "gpu";
    const TuningWorkload w = tuning_workload(model);
    const std::vector<TuningRecord> best = db.top(w, size_t(top));
    if (best.empty())
        throw Error("tune gpu-bundle: no ok record of " + w.key() +
                    ": tune it on the model first (" + "tandem tune " + app.name +
                    " --target hopper ...)");
    fs::create_directories(dir);
    std::ofstream registry(fs::path(dir) / "registry.inc"), sets(fs::path(dir) / "sets.txt");
    std::ofstream(fs::path(dir) / "commit") << compiler_version() << "\n";
    const TuningWorkload g = tuning_workload(gpu);
    nlohmann::json manifest = {{"workload",
                                {{"generator", g.generator},
                                 {"target", g.target},
                                 {"compiler", g.compiler},
                                 {"fixed", g.fixed},
                                 {"device", g.device}}},
                               {"kernels", nlohmann::json::object()}};
    for (size_t i = 0; i < best.size(); i++) {
        const TuningRecord &r = best[i];
        const std::string name = app.name + "_tune_" + std::to_string(i);
        Params params = o.fixed;
        for (const auto &[k, v] : r.candidate) {
            if (k != "schedule")
                params.set(k, v);
        }
        const std::string schedule = r.candidate.count("schedule") ? r.candidate.at("schedule")
                                     : o.fixed.has("schedule")
                                         ? o.fixed.get("schedule")
                                         : schedules_for(app, o.target).front();
        const GpuKernelSource source =
            gpu_kernel_source(app, with_defaults(app, params, o.target), schedule, name);
        std::ofstream(fs::path(dir) / (name + ".cu")) << source.cuda;
        registry << source.registry;
        sets << "tune " << name << "\n";
        manifest["kernels"][name] = {{"candidate", r.candidate}, {"model_cycles", r.cycles}};
    }
    std::ofstream(fs::path(dir) / "manifest.json") << manifest.dump(1) << "\n";
    return int(best.size());
}

int import_gpu_timings(TuningDb &db, const std::string &dir, const std::string &rows) {
    const nlohmann::json manifest = nlohmann::json::parse(
        read_file((fs::path(dir) / "manifest.json").string(), "the manifest"));
    TuningWorkload w;
    const nlohmann::json &mw = manifest.at("workload");
    w.generator = mw.at("generator");
    w.target = mw.at("target");
    w.compiler = mw.at("compiler");
    w.fixed = mw.at("fixed").get<std::map<std::string, std::string>>();
    w.device = mw.at("device");
    // Rows: one JSON object per line (gpu_hopper.rows.jsonl) or one array (gpu_hopper.json).
    const std::string text = read_file(rows, "the GPU rows");
    std::vector<nlohmann::json> all;
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '[') {
        for (const nlohmann::json &row : nlohmann::json::parse(text))
            all.push_back(row);
    } else {
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);) {
            if (line.find_first_not_of(" \t\r") != std::string::npos)
                all.push_back(nlohmann::json::parse(line));
        }
    }
    int added = 0;
    for (const nlohmann::json &row : all) {
        const std::string name = row.value("name", "");
        if (!manifest["kernels"].contains(name))
            continue;
        const nlohmann::json &k = manifest["kernels"][name];
        TuningRecord r;
        r.candidate = k.at("candidate").get<std::map<std::string, std::string>>();
        r.cycles = k.value("model_cycles", 0.0);
        r.device = row.value("device", "a GPU");
        r.date = now_utc();
        const double ms = row.contains("tandem_ms") && row["tandem_ms"].is_number()
                              ? row["tandem_ms"].get<double>()
                              : 0.0;
        if (row.value("correct", false) && ms > 0) {
            r.status = "ok";
            r.time_ms = ms;
            if (row.contains("ratio_vs_cublas") && row["ratio_vs_cublas"].is_number())
                r.message = std::to_string(row["ratio_vs_cublas"].get<double>()) + " of cuBLAS";
        } else {
            const std::string failure = row.value("failure", "");
            r.status = failure.find("timeout") != std::string::npos ? "timeout"
                       : failure.empty()                            ? "wrong"
                                                                    : "crash";
            r.message = failure.empty() ? "wrong on the GPU" : failure;
        }
        db.add(w, r);
        added++;
    }
    return added;
}

} // namespace tandem::apps
