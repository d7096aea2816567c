#ifndef TANDEM_APPS_APP_H
#define TANDEM_APPS_APP_H

/** \file
 * Generator-style apps: each writes its algorithm once and gives a schedule per target (plus the
 * CPU schedule of the Halide reference it is checked against).
 */

#include "tandem/Generator.h"
#include "tandem/Kernel.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tandem::apps {

/** Generator parameters, key=value. */
class Params {
public:
    Params() = default;
    Params(std::map<std::string, std::string> values) : values_(std::move(values)) {}
    void set(const std::string &key, const std::string &value) { values_[key] = value; }
    bool has(const std::string &key) const { return values_.count(key) > 0; }
    int get_int(const std::string &key) const;
    std::string get(const std::string &key) const;
    const std::map<std::string, std::string> &values() const { return values_; }

private:
    std::map<std::string, std::string> values_;
};

/** One instance of an app's algorithm with a schedule applied. */
struct Built {
    std::vector<ImageParam> inputs;
    Func output;
};

/** What the problem itself costs, whatever the schedule (for the roofline). The vector work is
 * counted by class so that each target weighs it with its own vector costs (vector_work()). */
struct Workload {
    double macs = 0;          // tensor-core multiply-accumulates
    double int8_macs = 0;     // of them, over int8 operands (an int32 accumulator)
    double fp8_macs = 0;      // of them, over FP8 operands (tandem::from_e4m3, from_e5m2)
    double vector_flops = 0;  // element operations on the vector core, each 1 (all classes)
    double bytes = 0;         // compulsory DRAM traffic: inputs read once, output written once
    double written_bytes = 0; // of bytes, the output's
    // Of vector_flops: exp, log, tanh; float divisions and square roots.
    double vector_transcendentals = 0, vector_div_sqrt = 0;
    // Elements every vector unit must load and store at least once (the largest input's elements
    // in `first_loads`, the other inputs' in `loads`, the output's in `stores`): what a target
    // whose vector costs charge loads and stores (the ZPU) spends however the kernel is written.
    double vector_first_loads = 0, vector_loads = 0, vector_stores = 0;
};

/** A generator's workload from its algorithm (the Funcs' definitions, no schedule): each
 * operation of a definition counted once per point of the domain it depends on (a definition's
 * pure domain is what its consumers read of it, an update's adds its reduction domain; a row's
 * value inside an element's definition counts once per row); index arithmetic and calls of Funcs
 * and inputs count nothing; an update acc = acc + a * b over a reduction domain is one MAC per
 * point of its domain, and its inputs are not vector loads. Bytes are the static (or estimated)
 * extents of the inputs and the output. docs/design/testing.md, "Speed". */
Workload algorithm_workload(const GeneratorBase::Pipeline &algorithm);
/** App::workload of the generator `name`: algorithm_workload of its algorithm at the params. */
std::function<Workload(const Params &)> generator_workload(const std::string &name);
/** The workload's vector work in the units the target's roofline takes (its vector throughput's,
 * one f32 operation = 1 on Ascend): each class weighted by the target's description
 * (tandem/VectorWeights.h: exp on the ZPU costs 3, division 2 on Ascend; loads and stores only
 * where the description charges them). */
double vector_work(const Workload &w, const Target &target);

/** An extent of the problem and the tile parameter that splits it ("" if none). */
struct Extent {
    std::string name, tile;
    int max = 1; // the largest value the fuzzer draws
};

struct App {
    std::string name;
    std::string summary;
    std::map<std::string, std::string> defaults; // every parameter and its default
    std::vector<std::string> schedules;          // the first is the default
    /** Per target where they differ: parameters whose default differs there, and the schedules
     * it has (a target not listed takes `schedules`). */
    std::map<std::string, std::map<std::string, std::string>> target_defaults;
    std::map<std::string, std::vector<std::string>> target_schedules;
    /** The algorithm with `schedule` for `target` applied ("reference" = the CPU schedule for
     * Halide's JIT; the target is then ignored). */
    std::function<Built(const Params &, const std::string &schedule, const Target &target)> build;
    std::function<Workload(const Params &)> workload;
    /** Largest acceptable max |out - ref| / max |ref|. */
    std::function<double(const Params &)> tolerance;
    /** The problem's extents, for the fuzzer (and the tuner). */
    std::vector<Extent> extents;
    /** Values worth trying for each schedule parameter (tiles, stages, types). */
    std::map<std::string, std::vector<std::string>> choices;
    /** The fuzzer keeps the product of the extents at most this (run time on the models). */
    double max_problem = 1e7;
    /** Parameters that choose a variant of the algorithm (output type, expression), not the
     * schedule: the fuzzer draws them at default parameters too. */
    std::vector<std::string> variants;
    /** Choices that only set a directive some targets take (gemm's cluster_m: "cluster"): the
     * tuner leaves them out of the space of a target that does not take it (Target::takes). */
    std::map<std::string, std::string> choice_directives = {};
};

/** An app written as a generator (registered under the app's name): its parameters' defaults
 * (all but "schedule"), and the schedules its "schedule" parameter chooses from. */
std::map<std::string, std::string> generator_defaults(const std::string &name);
std::vector<std::string> generator_schedules(const std::string &name);
/** App::build for a generator: a fresh instance, the parameters and the schedule set, built for
 * the target ("reference": the algorithm with its reference_schedule()). */
std::function<Built(const Params &, const std::string &, const Target &)>
generator_build(const std::string &name);
/** The generator's parameters as Params (for helpers shared by apps, e.g. schedule_pointwise). */
Params params_of(const GeneratorBase &g);

/** An app made from any registered generator (a user's): its parameters and their defaults, its
 * "schedule" choices (or one schedule, "default"), the values its GeneratorParams mark Tunable as
 * the choices, its reference_schedule() as the reference, its algorithm's workload
 * (algorithm_workload: bytes and vector work), a tolerance of 1e-2 with a narrow type in or
 * out (1e-3 otherwise). */
App generator_app(const std::string &name);

const std::vector<App> &all_apps();
/** Tandem's app `name`, or else the app of this program's generator `name`; Error listing both
 * when there is neither. */
const App &find_app(const std::string &name);

/** The app's defaults for `target` overridden by `given`; unknown keys are an error naming the
 * known ones. */
Params with_defaults(const App &app, const Params &given, const std::string &target = "zpu");
/** The schedules of the app on `target` (the first is the default); Error if it has none. */
const std::vector<std::string> &schedules_for(const App &app, const std::string &target);

/** Gives a tensor of the app a dense shape starting at 0 (dims[0] innermost): with `shapes`
 * "static" the extents are set (set_bounds), with "runtime" they are the buffer's at each call
 * and `extents` are only estimates, but for the dims `fixed` marks (e.g. attention's head size). */
void set_shape(Halide::OutputImageParam tensor, const std::vector<int> &extents,
               const std::string &shapes, const std::vector<bool> &fixed = {});

/** The schedule of a pointwise Func out(x, y) over W x H (parameters W, H, TX, TY, stages):
 * TX x TY tiles spread over the cores, each input its simplified definition reads staged per tile;
 * "double_buffered" / "single_buffered" copy the tiles and store the output asynchronously with
 * `stages` / 1 versions, "sync" synchronously. `app` names the app in errors. */
void schedule_pointwise(Func &out, const std::vector<ImageParam> &inputs, const Params &p,
                        const std::string &schedule, const std::string &app);

const App &gemm_app();
const App &elementwise_app();
const App &rmsnorm_app();
const App &attention_scores_app();
const App &pointwise_app();

/** The most operand stages (up to 4 on Hopper, 3 elsewhere) of a tiled MMA with TM x TN x TK
 * tiles of an N-column output that fit on chip with the output staging, the accumulator and a
 * bias tile (the target's arithmetic: tandem::fitting_stages); with runtime shapes, in both of the
 * Hopper kernel's variants. */
int fitting_stages(int N, int TM, int TN, int TK, const std::string &out,
                   const std::string &epilogue, const std::string &schedule, const Target &target,
                   bool runtime_shapes);

} // namespace tandem::apps

#endif
