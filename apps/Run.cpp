#include "Run.h"

#include "common/Backend.h"
#include "common/Evaluator.h"
#include "tandem/AsyncIR.h"
#include "tandem/Fp8.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tandem::apps {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/** The extents of an input or output of a built app: its static extents, or else its estimates. */
std::vector<int> extents_of(const Halide::Internal::Parameter &p) {
    std::vector<int> extents;
    for (int d = 0; d < p.dimensions(); d++) {
        Halide::Expr e = p.extent_constraint(d).defined() ? p.extent_constraint(d)
                                                          : p.extent_constraint_estimate(d);
        const Halide::Internal::IntImm *i =
            e.defined() ? e.as<Halide::Internal::IntImm>() : nullptr;
        if (!i)
            throw Error(p.name() + ": dimension " + std::to_string(d) +
                        " has neither an extent nor an estimate, and a run takes a runtime "
                        "extent at its estimate: give one in generate() (" +
                        p.name() + ".set_estimates({{0, 1000}, ...}))");
        extents.push_back(int(i->value));
    }
    return extents;
}

/** Writes value v of element i into raw storage of sim type t. */
void put(void *data, sim::DType t, int64_t i, float v) {
    switch (t) {
    case sim::DType::BF16:
        static_cast<uint16_t *>(data)[i] = sim::float_to_bf16(v);
        break;
    case sim::DType::F16:
        static_cast<uint16_t *>(data)[i] = sim::float_to_f16(v);
        break;
    case sim::DType::F32:
        static_cast<float *>(data)[i] = v;
        break;
    case sim::DType::I32:
        static_cast<int32_t *>(data)[i] = int32_t(v * 100);
        break;
    case sim::DType::U8:
        static_cast<uint8_t *>(data)[i] = uint8_t(int(v * 100) & 0xff);
        break;
    case sim::DType::I8:
        static_cast<int8_t *>(data)[i] = int8_t(std::lround(v * 100) % 128);
        break;
    case sim::DType::E4M3:
    case sim::DType::E5M2:
        static_cast<uint8_t *>(data)[i] = sim::float_to_fp8(t, v);
        break;
    }
}

/** A figure with 6 significant digits, null when it is not finite. */
nlohmann::ordered_json figure(double v) {
    if (!std::isfinite(v))
        return nullptr;
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", v);
    return std::stod(text);
}

/** Writes the problem a run checked (RunOptions::save): each input and the expected output as
 * <name>.bin, and the tolerance. */
void save_problem(const std::string &dir, const Kernel &kernel,
                  const std::vector<Halide::Buffer<>> &inputs, const Halide::Buffer<> &expected,
                  double tolerance) {
    std::filesystem::create_directories(dir);
    auto write = [&](const std::string &name, const Halide::Buffer<> &b) {
        const std::string path = (std::filesystem::path(dir) / (name + ".bin")).string();
        std::ofstream f(path, std::ios::binary);
        f.write(static_cast<const char *>(b.data()), std::streamsize(b.size_in_bytes()));
        if (!f)
            throw Error("--save: cannot write " + path);
    };
    size_t input = 0;
    for (const KernelArg &a : kernel.args) // named as the library declares them (no $n)
        write(a.name.substr(0, a.name.find('$')), a.output ? expected : inputs.at(input++));
    std::ofstream(std::filesystem::path(dir) / "tolerance") << tolerance << "\n";
}

} // namespace

double element_value(const void *data, sim::DType t, int64_t i) {
    switch (t) {
    case sim::DType::BF16:
        return sim::bf16_to_float(static_cast<const uint16_t *>(data)[i]);
    case sim::DType::F16:
        return sim::f16_to_float(static_cast<const uint16_t *>(data)[i]);
    case sim::DType::F32:
        return static_cast<const float *>(data)[i];
    case sim::DType::I32:
        return static_cast<const int32_t *>(data)[i];
    case sim::DType::U8:
        return static_cast<const uint8_t *>(data)[i];
    case sim::DType::I8:
        return static_cast<const int8_t *>(data)[i];
    case sim::DType::E4M3:
    case sim::DType::E5M2:
        return sim::fp8_value(static_cast<const uint8_t *>(data)[i], t == sim::DType::E4M3);
    }
    return 0;
}

namespace {

RooflineWork roofline_work(const Workload &w, const Target &target) {
    RooflineWork r;
    r.macs = w.macs - w.int8_macs - w.fp8_macs;
    r.int8_macs = w.int8_macs;
    r.fp8_macs = w.fp8_macs;
    r.vector_ops = vector_work(w, target);
    r.bytes = w.bytes;
    r.written_bytes = w.written_bytes;
    return r;
}

} // namespace

double roofline_cycles(const Workload &w, const Target &target) {
    return backend_of(target).roofline(roofline_work(w, target), target);
}

std::string roofline_bound(const Workload &w, const Target &target) {
    const auto &roofline = backend_of(target).roofline;
    const RooflineWork all = roofline_work(w, target);
    RooflineWork matrix, vector, memory;
    matrix.macs = all.macs;
    matrix.int8_macs = all.int8_macs;
    matrix.fp8_macs = all.fp8_macs;
    vector.vector_ops = all.vector_ops;
    memory.bytes = all.bytes;
    memory.written_bytes = all.written_bytes;
    const double m = roofline(matrix, target), v = roofline(vector, target),
                 b = roofline(memory, target);
    return m >= v && m >= b ? "matrix" : v >= b ? "vector" : "memory";
}

std::vector<std::vector<int>> static_extents(const Kernel &kernel) {
    std::vector<std::vector<int>> extents;
    for (const KernelArg &a : kernel.args)
        extents.push_back(a.extents);
    return extents;
}

std::map<std::string, int> add_arguments(const Kernel &kernel, sim::Machine &machine, uint64_t seed,
                                         std::vector<Halide::Buffer<>> *inputs) {
    return add_arguments(
        kernel, static_extents(kernel),
        [&](const std::string &n, sim::DType t, int64_t e) { return machine.add_dram(n, t, e); },
        [&](int id) { return machine.data(id); }, machine.numerics(), seed, inputs);
}

std::map<std::string, int>
add_arguments(const Kernel &kernel, const std::vector<std::vector<int>> &extents,
              const std::function<int(const std::string &, sim::DType, int64_t)> &add,
              const std::function<void *(int)> &data_of, bool numerics, uint64_t seed,
              std::vector<Halide::Buffer<>> *inputs) {
    std::map<std::string, int> ids;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (size_t arg = 0; arg < kernel.args.size(); arg++) {
        const KernelArg &a = kernel.args[arg];
        sim::DType t = dtype_of(a.type);
        int64_t elements = 1;
        for (int e : extents[arg])
            elements *= e;
        int id = add(a.name, t, elements);
        ids[a.name] = id;
        if (!numerics)
            continue;
        void *data = data_of(id);
        if (a.output) {
            for (int64_t i = 0; i < elements; i++)
                put(data, t, i, NAN);
            continue;
        }
        for (int64_t i = 0; i < elements; i++)
            put(data, t, i, uniform(rng));
        if (inputs) {
            Halide::Buffer<> buf(fp8::storage(a.type), extents[arg]);
            std::memcpy(buf.data(), data, elements * sim::bytes_of(t));
            inputs->push_back(buf);
        }
    }
    return ids;
}

Kernel compile_app(const App &app, const Params &params, const std::string &schedule,
                   const Target &target) {
    Built built = app.build(params, schedule, target);
    return compile(built.output, built.inputs, target, app.name);
}

Halide::Target reference_target() {
    // Halide 14 takes any CPU with AVX512-BF16 for a Sapphire Rapids, whose FP16 instructions
    // (vmovw) an AMD Zen 4 does not have: the JIT'd reference then dies of SIGILL on bf16 loads.
    // Each float op rounds as written (no fused multiply-add), as the targets' element math does;
    // a contraction the kernel does not make shows up where terms cancel (fuzz: elementwise W=1
    // H=1, a * b + max(c, 0) * 0.5 near 0). StrictFloat says so, but LLVM 14 then takes a minute
    // or more on a softmax or a layernorm of 1000 x 64 (so does DisableLLVMLoopOpt), so the
    // reference leaves out the instructions that contract instead: FMA, and AVX2 and AVX-512,
    // for which Halide asks LLVM for a CPU that has FMA (haswell, skylake-avx512).
    // LLVM 14 fully unrolls a reference's short loops of constant extent (a generator's RDoms)
    // and its DAG combiner then takes minutes over the unrolled blocks (fuzz: flash_attention
    // D=130 TJ=2 TK=1 B=24 H=4 past the 120 s limit; at B=1 4.4 s, 0.77 s without unrolling:
    // benchmarks/results/session59_registers_and_reference.log). Halide reads HL_LLVM_ARGS once,
    // when it first starts LLVM (the first reference: Tandem's own lowering never reaches LLVM); a
    // caller's own setting stays.
    static const bool no_unrolling = setenv("HL_LLVM_ARGS", "-unroll-threshold=0", 0) == 0;
    (void)no_unrolling;
    Halide::Target host = Halide::get_jit_target_from_environment().without_feature(
        Halide::Target::AVX512_SapphireRapids);
    for (Halide::Target::Feature f :
         {Halide::Target::FMA, Halide::Target::FMA4, Halide::Target::AVX2, Halide::Target::AVX512,
          Halide::Target::AVX512_KNL, Halide::Target::AVX512_Skylake,
          Halide::Target::AVX512_Cannonlake}) {
        host = host.without_feature(f);
    }
    return host;
}

RunResult run(const App &app, const RunOptions &options) {
    Target target = Target::parse(options.target);
    const Params params = with_defaults(app, options.params, options.target);
    const std::string schedule =
        options.schedule.empty() ? schedules_for(app, options.target).front() : options.schedule;
    auto t0 = std::chrono::steady_clock::now();
    Kernel kernel = compile_app(app, params, schedule, target);
    const double compile_ms = ms_since(t0);
    Params call = params;
    for (const auto &[k, v] : options.at.values()) {
        if (!params.has(k))
            throw Error("--at: app " + app.name + " has no parameter '" + k + "'");
        call.set(k, v);
    }
    RunResult r = run_kernel(app, kernel, call, schedule, options);
    r.compile_ms = compile_ms;
    return r;
}

namespace {

/** kernel_steps' walk: loops multiply, ops and element stores count one each. */
class StepCounter {
public:
    StepCounter(const Shapes &shapes, int grid)
        : eval(
              [](const std::string &name) -> const BufferRef & {
                  throw Error("kernel_steps: the extent reads buffer " + name);
              },
              [grid](const Halide::Internal::Call *c, double *v) {
                  // The first core (CTA, AI core) of the launch's grid (a persistent tile loop's
                  // trip count divides by it: without it the loop counted once).
                  *v = ir::is_grid_size(Halide::Expr(c)) ? grid : 0;
                  return ir::is_core_id(c) || ir::is_vector_core(c) ||
                         ir::is_grid_size(Halide::Expr(c));
              }) {
        for (const auto &[name, value] : shapes)
            eval.vars[name] = double(value);
    }

    double steps(const Halide::Internal::Stmt &s) {
        using namespace Halide::Internal;
        if (!s.defined())
            return 0;
        if (const For *f = s.as<For>()) {
            const double min = value(f->min, 0), extent = std::max(0.0, value(f->extent, 1));
            eval.vars[f->name] = min;
            const double body = steps(f->body);
            eval.vars.erase(f->name);
            return std::min(extent * body, 1e18);
        }
        if (const LetStmt *l = s.as<LetStmt>()) {
            try {
                eval.vars[l->name] = eval.scalar(l->value);
            } catch (...) {
                eval.vars.erase(l->name);
            }
            return steps(l->body);
        }
        Stmt cube, vector;
        if (ir::as_mix(s, &cube, &vector)) // a mix kernel: two AIVs per AIC run the vector side
            return steps(cube) + 2 * steps(vector);
        if (const Block *b = s.as<Block>())
            return steps(b->first) + steps(b->rest);
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>())
            return steps(pc->body);
        if (const IfThenElse *i = s.as<IfThenElse>())
            return std::max(steps(i->then_case), steps(i->else_case));
        if (const Allocate *a = s.as<Allocate>())
            return steps(a->body);
        if (const Realize *r = s.as<Realize>())
            return steps(r->body);
        if (const Acquire *a = s.as<Acquire>())
            return steps(a->body);
        if (const Fork *f = s.as<Fork>())
            return steps(f->first) + steps(f->rest);
        // An element of an element nest: the models batch them, but each costs the evaluator
        // (Expr trees interpreted per element) a share of an op: flash_attention on zpu (B = 21,
        // H = 49, D = 170, TJ = 5) took 72 s for 4.7M steps counted at 1/16 (15 us a step, past
        // the fuzzer's timeout beside a second job: fuzz_session51).
        if (s.as<Halide::Internal::Store>())
            return 1.0 / 4;
        return 1; // an op (Evaluate), an assertion
    }

private:
    Evaluator eval;

    double value(const Halide::Expr &e, double otherwise) {
        try {
            return eval.scalar(e);
        } catch (...) {
            return otherwise;
        }
    }
};

} // namespace

int64_t kernel_steps(const Kernel &kernel, const Shapes &shapes) {
    if (kernel.is_pipeline()) {
        int64_t steps = 0;
        for (const Kernel &k : kernel.stages)
            steps = std::min<int64_t>(steps + kernel_steps(k, kernel.with_intermediates(shapes)),
                                      int64_t(1e18));
        return steps;
    }
    // Each core (CTA, AI core) runs the body: its tile loop starts at the core's own tile.
    return int64_t(std::min(StepCounter(shapes, std::max(1, kernel.grid)).steps(kernel.body) *
                                std::max(1, kernel.grid),
                            1e18));
}

RunResult run_kernel(const App &app, const Kernel &kernel, const Params &params,
                     const std::string &schedule, const RunOptions &options, Built *reference) {
    RunResult r;
    r.app = app.name;
    Target target = Target::parse(options.target);
    r.params = params;
    r.schedule = schedule;
    r.target = target.name();
    r.model = target.name() + " v" + std::to_string(target.machine.version());
    r.kernel = kernel;
    // What runs on the model emits: a kernel the target's emitter refuses is refused here, before
    // the model runs it.
    if (const auto &sources = backend_of(target).sources; !sources.empty()) {
        try {
            sources.front().emit(kernel, kernel.name, EmitOptions{});
        } catch (const Error &e) {
            throw Error("not supported on " + target.name() +
                        " (its code cannot be emitted): " + e.what());
        }
    }

    // The problem at `params`: the reference's inputs and output have its extents (static, or the
    // estimates of a runtime shape), which the kernel takes at this call.
    Built ref = app.build(r.params, "reference", target);
    std::vector<std::vector<int>> extents;
    for (const ImageParam &in : ref.inputs)
        extents.push_back(extents_of(in.parameter()));
    extents.push_back(extents_of(ref.output.output_buffer().parameter()));
    const Shapes shapes = kernel.bind_shapes(extents);
    if (options.max_steps > 0) {
        const int64_t steps = kernel_steps(kernel, shapes);
        if (steps > options.max_steps)
            throw TooLarge("the model would take about " + std::to_string(steps) +
                           " steps to run this kernel, more than the " +
                           std::to_string(options.max_steps) + " allowed");
    }

    std::vector<Halide::Buffer<>> reference_inputs;
    std::map<std::string, int> ids;
    std::function<const void *(int)> data_of;
    // The target's machine model runs the kernel; its report and output buffer are what we keep.
    std::unique_ptr<Model> model = backend_of(target).model(
        target, options.numerics, !options.trace.empty() || !options.timeline.empty());
    auto t0 = std::chrono::steady_clock::now();
    ids = add_arguments(
        kernel, extents,
        [&](const std::string &n, sim::DType t, int64_t e) { return model->add_global(n, t, e); },
        [&](int id) { return model->data(id); }, options.numerics, options.seed, &reference_inputs);
    model->execute(kernel, ids, shapes);
    r.report = model->finish();
    if (!options.trace.empty())
        model->write_trace(options.trace);
    if (!options.timeline.empty())
        model->write_trace(options.timeline);
    data_of = [&](int id) { return model->data(id); };
    r.simulate_ms = ms_since(t0);
    const Workload workload = app.workload(r.params);
    r.roofline_cycles = roofline_cycles(workload, target);
    r.roofline_bound = roofline_bound(workload, target);

    const KernelArg &out = kernel.args.back();
    Halide::Buffer<> expected;
    double relative_to_reference = 1; // the error's scale over the reference's largest output
    if (options.numerics) {
        t0 = std::chrono::steady_clock::now();
        Built &checker = reference ? *reference : ref;
        for (size_t i = 0; i < checker.inputs.size(); i++)
            checker.inputs[i].set(reference_inputs[i]);
        expected = Halide::Buffer<>(out.type, extents.back());
        checker.output.halide().realize(expected, reference_target());
        r.reference_ms = ms_since(t0);
        sim::DType t = dtype_of(out.type);
        const void *got = data_of(ids[out.name]);
        const double largest = t == sim::DType::F16    ? 65504.0
                               : t == sim::DType::BF16 ? std::ldexp(2 - std::ldexp(1.0, -7), 127)
                                                       : double(std::numeric_limits<float>::max());
        double max_ref = 0, max_err = 0;
        bool finite = true; // every output finite, or the infinity (or NaN) the reference has
        for (int64_t i = 0; i < int64_t(expected.number_of_elements()); i++) {
            double want = element_value(expected.data(), t, i), have = element_value(got, t, i);
            if (!std::isfinite(have) || !std::isfinite(want)) { // e.g. a sum past f16's range
                // A value that rounds to the largest finite one on one side and past it on the
                // other (a sum in another order: split-K's) is a rounding, not an error.
                const bool edge = std::isinf(have) != std::isinf(want) &&
                                  std::fabs(std::isinf(have) ? want : have) == largest &&
                                  std::signbit(have) == std::signbit(want);
                finite = finite && (have == want || edge || (std::isnan(have) && std::isnan(want)));
                continue;
            }
            max_ref = std::max(max_ref, std::fabs(want));
            max_err = std::max(max_err, std::fabs(have - want));
        }
        // An output that its terms cancel (attention over one query and one dimension: a
        // weighted mean of v near 0) is far smaller than the rounding of a narrow float operand
        // it sums (bf16 P, 2^-9 of each |p v|): the error is measured against the largest of the
        // output and of those operands.
        double scale = max_ref;
        for (const Halide::Buffer<> &in : reference_inputs) {
            const Halide::Type type = in.type();
            if (!type.is_float() || type.bits() >= 32)
                continue;
            const sim::DType it = dtype_of(type);
            for (int64_t i = 0; i < int64_t(in.number_of_elements()); i++) {
                const double v = std::fabs(element_value(in.data(), it, i));
                if (std::isfinite(v))
                    scale = std::max(scale, v);
            }
        }
        r.checked = true;
        r.max_rel_err = finite ? max_err / std::max(scale, 1e-30) : INFINITY;
        relative_to_reference = std::max(scale, 1e-30) / std::max(max_ref, 1e-30);
        r.correct = finite && r.max_rel_err <= app.tolerance(r.params);
    }
    if (!options.save.empty()) {
        if (!options.numerics)
            throw Error("--save: the run computes no data without numerics");
        // (the runner measures against the reference's largest output: the same bound)
        save_problem(options.save, kernel, reference_inputs, expected,
                     app.tolerance(r.params) * relative_to_reference);
    }
    return r;
}

std::string RunResult::json() const {
    nlohmann::ordered_json j;
    j["app"] = app;
    j["target"] = target;
    j["model"] = model;
    j["schedule"] = schedule;
    nlohmann::ordered_json p = nlohmann::ordered_json::object();
    for (const auto &[k, v] : params.values()) {
        bool integer = !v.empty() && v.find_first_not_of("0123456789-") == std::string::npos;
        if (integer)
            p[k] = std::stoll(v);
        else
            p[k] = v;
    }
    j["params"] = p;
    j["correct"] = checked ? nlohmann::ordered_json(correct) : nlohmann::ordered_json(nullptr);
    j["max_rel_err"] = checked ? figure(max_rel_err) : nlohmann::ordered_json(nullptr);
    j["cycles"] = report.cycles;
    j["bound_cycles"] = report.bound_cycles;
    j["efficiency"] = figure(efficiency());
    j["roofline_cycles"] = figure(roofline_cycles);
    j["roofline_fraction"] = figure(roofline_fraction());
    j["roofline_bound"] = roofline_bound;
    nlohmann::ordered_json busy = nlohmann::ordered_json::object();
    for (const sim::EngineBusy &b : report.busy)
        busy[b.engine] = b.busy;
    j["busy"] = busy;
    j["races"] = report.race_count;
    j["race_details"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < report.races.size() && i < 10; i++)
        j["race_details"].push_back(report.races[i].str());
    j["deadlock"] = report.deadlock;
    if (report.deadlock)
        j["deadlock_message"] = report.deadlock_message;
    j["compile_ms"] = figure(compile_ms);
    j["simulate_ms"] = figure(simulate_ms);
    j["reference_ms"] = figure(reference_ms);
    return j.dump();
}

std::string RunResult::text() const {
    char line[256];
    std::string out;
    auto add = [&](const char *format, auto... values) {
        std::snprintf(line, sizeof line, format, values...);
        out += line;
    };
    add("%s on %s, schedule %s\n", app.c_str(), target.c_str(), schedule.c_str());
    if (checked)
        add("  correct: %s (max_rel_err %.3g)\n", correct ? "yes" : "NO", max_rel_err);
    add("  cycles %lld, bound %lld, efficiency %.3f, roofline %.0f (%s; fraction %.3f)\n",
        (long long)report.cycles, (long long)report.bound_cycles, efficiency(), roofline_cycles,
        roofline_bound.c_str(), roofline_fraction());
    for (const sim::EngineBusy &b : report.busy)
        add("  busy %-14s %lld\n", b.engine.c_str(), (long long)b.busy);
    add("  races %lld, deadlock %s\n", (long long)report.race_count,
        report.deadlock ? "YES" : "no");
    for (const sim::Race &race : report.races)
        out += "    " + race.str() + "\n";
    if (report.deadlock)
        out += "    " + report.deadlock_message + "\n";
    add("  compile %.0f ms, simulate %.0f ms, reference %.0f ms\n", compile_ms, simulate_ms,
        reference_ms);
    return out;
}

} // namespace tandem::apps
