#ifndef TANDEM_COMMON_BACKEND_H
#define TANDEM_COMMON_BACKEND_H

/** \file
 * Targets as plug-ins: what the tools (run, emit, fuzz, demo, tune, the generator main) need
 * from a target, behind one interface. Each target implements it in its own folder
 * (backends/<target>/Backend.cpp: its machine model, its roofline, the sources it emits); the
 * built-in ones are listed once in apps/Targets.cpp, any other program registers one with a
 * static RegisterBackend. The compiler's half (name, machine description, pass list,
 * capabilities) is dsl/lower/Targets.h.
 */

#include "common/Evaluator.h" // dtype_of
#include "sim/Common.h"       // DType, Report
#include "tandem/Kernel.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tandem {

/** A target's machine model running one kernel. */
class Model {
public:
    virtual ~Model() = default;
    /** A global tensor (DRAM, GM, HBM); its id for data() and execute(). */
    virtual int add_global(const std::string &name, sim::DType type, int64_t elements) = 0;
    /** The tensor's elements (nullptr without numerics). */
    virtual void *data(int id) = 0;
    /** Runs `kernel` with its arguments bound to global tensors by name, and its runtime extents
     * to `shapes` (Kernel::bind_shapes; empty for static shapes). */
    virtual void execute(const Kernel &kernel, const std::map<std::string, int> &arguments,
                         const Shapes &shapes) = 0;
    virtual sim::Report finish() = 0;
    /** A Chrome trace (.json) or the timeline picture (.svg) of the run. */
    virtual void write_trace(const std::string &path) const = 0;
};

/** Options of an emitter; a target refuses those it does not take. */
struct EmitOptions {
    int drop_flag = -1; // ascend code: leave out flag pair N (mutation tests)
};

/** A source the target emits: `what` (the name `tandem emit --what` takes), its file suffix. */
struct Source {
    std::string what, suffix;
    std::function<std::string(const Kernel &, const std::string &name, const EmitOptions &)> emit;
};

/** What a problem costs whatever its schedule, in the units a roofline takes (apps::Workload). */
struct RooflineWork {
    double macs = 0;          // tensor-core MACs over 16-bit operands
    double int8_macs = 0;     // over int8 operands
    double fp8_macs = 0;      // over FP8 operands
    double vector_ops = 0;    // in the target's vector throughput unit
    double bytes = 0;         // compulsory: every input read once, the output written once
    double written_bytes = 0; // of them, the output's
};

struct TargetBackend {
    std::string name;
    /** The machine model, built from the target's description. */
    std::function<std::unique_ptr<Model>(const Target &, bool numerics, bool trace)> model;
    /** The problem's own bound on this machine: the MACs of each operand type at their rate
     * (where the machine has it), the vector operations and the compulsory bytes, each at the
     * machine's peak over all its units, plus what every launch pays where the description
     * charges it: no run of the problem on the machine model is shorter. */
    std::function<double(const RooflineWork &, const Target &)> roofline;
    /** What the target emits; the fuzzer checks the first. */
    std::vector<Source> sources;
};

/** The backend of `target` (apps/Targets.cpp); Error for a target without one. */
const TargetBackend &backend_of(const Target &target);

/** Registers a backend; Error if its name is taken. */
void register_backend(TargetBackend backend);

/** `RegisterBackend r(...)` at namespace scope registers a backend when the program starts. */
struct RegisterBackend {
    explicit RegisterBackend(TargetBackend backend) { register_backend(std::move(backend)); }
};

/** The report of kernels run one after another (a pipeline of kernels, Kernel::stages): times
 * and busy cycles add up, races and deadlocks are every kernel's. */
inline void append_report(sim::Report &into, const sim::Report &next) {
    into.cycles += next.cycles;
    into.bound_cycles += next.bound_cycles;
    for (const sim::EngineBusy &b : next.busy) {
        auto same = std::find_if(into.busy.begin(), into.busy.end(),
                                 [&](const sim::EngineBusy &e) { return e.engine == b.engine; });
        if (same == into.busy.end())
            into.busy.push_back(b);
        else
            same->busy += b.busy;
    }
    into.core_cycles.resize(std::max(into.core_cycles.size(), next.core_cycles.size()), 0);
    for (size_t c = 0; c < next.core_cycles.size(); c++)
        into.core_cycles[c] += next.core_cycles[c];
    into.races.insert(into.races.end(), next.races.begin(), next.races.end());
    into.race_count += next.race_count;
    if (next.deadlock && !into.deadlock) {
        into.deadlock = true;
        into.deadlock_message = next.deadlock_message;
    }
}

/** A Model over a machine model class with add/data/finish/write_trace (the three models). A
 * pipeline of kernels runs each kernel but the last on a machine of its own (the kernel boundary
 * orders everything: no access of one kernel races with another's; each starts with a cold L2),
 * copying the tensors it reads in and the intermediate it writes out; the last runs on this
 * one, which the caller's tensors live in. The trace is the last kernel's. */
template <class Machine> class ModelOf : public Model {
public:
    using Make = std::function<std::unique_ptr<Machine>()>;
    using Add = std::function<int(Machine &, const std::string &, sim::DType, int64_t)>;
    using Execute = std::function<void(const Kernel &, Machine &,
                                       const std::map<std::string, int> &, const Shapes &)>;
    ModelOf(Make make, Add add, Execute execute)
        : make(std::move(make)), machine(this->make()), add(std::move(add)),
          run(std::move(execute)) {}
    int add_global(const std::string &name, sim::DType type, int64_t elements) override {
        return add(*machine, name, type, elements);
    }
    void *data(int id) override { return machine->data(id); }
    void execute(const Kernel &kernel, const std::map<std::string, int> &arguments,
                 const Shapes &shapes) override {
        if (!kernel.is_pipeline()) {
            run(kernel, *machine, arguments, shapes);
            return;
        }
        const Shapes all = kernel.with_intermediates(shapes);
        auto bytes = [&](const KernelArg &a) {
            return size_t(a.elements(all) * sim::bytes_of(dtype_of(a.type)));
        };
        std::map<std::string, int> ids = arguments;
        for (const KernelArg &w : kernel.intermediates)
            ids[w.name] = add(*machine, w.name, dtype_of(w.type), w.elements(all));
        for (size_t i = 0; i + 1 < kernel.stages.size(); i++) {
            const Kernel &stage = kernel.stages[i];
            std::unique_ptr<Machine> own = make();
            std::map<std::string, int> own_ids;
            for (const KernelArg &a : stage.args) {
                const int id = ids.at(a.name),
                          copy = add(*own, a.name, dtype_of(a.type), a.elements(all));
                own_ids[a.name] = copy;
                if (!a.output && machine->data(id))
                    std::memcpy(own->data(copy), machine->data(id), bytes(a));
            }
            run(stage, *own, own_ids, all);
            append_report(stages, own->finish());
            const KernelArg &out = stage.args.back();
            if (machine->data(ids.at(out.name)))
                std::memcpy(machine->data(ids.at(out.name)), own->data(own_ids.at(out.name)),
                            bytes(out));
        }
        run(kernel.stages.back(), *machine, ids, all);
    }
    sim::Report finish() override {
        sim::Report report = stages;
        append_report(report, machine->finish());
        return report;
    }
    void write_trace(const std::string &path) const override { machine->write_trace(path); }

private:
    Make make;
    std::unique_ptr<Machine> machine;
    Add add;
    Execute run;
    sim::Report stages; // the kernels of a pipeline before the last
};

/** Error for an emitter option a target's source does not take. */
inline void no_drop_flag(const EmitOptions &o, const std::string &target) {
    if (o.drop_flag >= 0)
        throw Error("--drop-flag is for --what code on target ascend, not " + target);
}

} // namespace tandem

#endif
