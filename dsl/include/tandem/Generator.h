#ifndef TANDEM_GENERATOR_H
#define TANDEM_GENERATOR_H

/** \file
 * Generators, the way Halide writes them: a class with parameters, inputs and an output, the
 * algorithm in generate() and the schedule in schedule(), registered under a name.
 *
 *     class ScaleAdd : public tandem::Generator<ScaleAdd> {
 *     public:
 *         GeneratorParam<int> W{"W", 1024, 1, 1 << 20};
 *         GeneratorParam<std::string> schedule_kind{"schedule", "double_buffered",
 *                                                   {"double_buffered", "sync"}};
 *         Input<Buffer<float, 2>> a{"a"}, b{"b"};
 *         Output<Buffer<float, 2>> out{"out"};
 *
 *         void generate() {
 *             out(x, y) = a(x, y) * 2.0f + b(x, y);
 *             a.dim(0).set_bounds(0, W); ...           // shapes are static (set_bounds)
 *         }
 *         void schedule() {
 *             out.tile(x, y, xo, yo, xi, yi, 256, 16).fuse(xo, yo, t).map_to_cores(t);
 *             if (get_target().name() == "hopper") ...
 *         }
 *     };
 *     TANDEM_REGISTER_GENERATOR(ScaleAdd, scale_add)
 *
 * An Input is a Halide ImageParam and an Output a tandem::Func, so the algorithm and the schedule
 * read exactly as in Halide, with Tandem's directives (async_copy, multi_buffer, warp_specialize,
 * ping_pong, tile_mma, map_to_cores). GeneratorParams are set from text before build()
 * (set_param: "W=512"), checked against their range or choices; the generator's name, the
 * parameter and the reason are in every error. A generator instance builds once; the registry
 * makes a fresh one per use.
 */

#include "tandem/Fp8.h"
#include "tandem/Func.h"
#include "tandem/Kernel.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace tandem {

using Halide::bfloat16_t;

/** The element type and rank of a generator input or output: Buffer<bfloat16_t, 2>. */
template <class T, int D> struct Buffer {};

/** One parameter of a generator, as its tools see it (text in, text out). */
struct GeneratorParamInfo {
    std::string name;
    std::string kind;  // "int", "float", "bool" or "string"
    std::string value; // the current value (the default until set)
    std::string default_value;
    std::optional<double> min, max;   // int and float
    std::vector<std::string> choices; // a string with a fixed set of values
    std::vector<std::string> tunable; // the values the autotuner tries (none: not tuned)
};

/** The values of a GeneratorParam worth trying, for the autotuner (`tandem tune`, the generator
 * main's --tune): tile sizes, stage counts, a schedule. Only what schedules the algorithm is
 * tunable; a parameter that changes what is computed (an output type, an epilogue) is not.
 *
 *     GeneratorParam<int> TX{"TX", 256, 1, 4096, Tunable<int>{64, 128, 256, 512}};
 *     GeneratorParam<std::string> schedule{"schedule", "double_buffered",
 *                                          {"double_buffered", "sync"}, Tunable<std::string>{}};
 * (a string's empty Tunable: all its choices). */
template <class T> struct Tunable {
    Tunable(std::initializer_list<T> v = {}) : values(v) {}
    std::vector<T> values;
};

class GeneratorBase;
template <class T> class GeneratorParam;
/** Input<Buffer<T, D>> (below). A scalar input, Halide's Input<float> scale, is not supported
 * yet: the targets' kernels take buffers only. */
template <class B> class Input {
    static_assert(sizeof(B) == 0,
                  "Tandem's Input takes a Buffer<T, D>: a scalar input (Input<float>) is not "
                  "supported yet; use a GeneratorParam<float> or a one-element buffer");
};
template <class B> class Output;

namespace detail {
/** The generator whose members are being constructed (they register with it); Error naming
 * `what` when there is none (a GeneratorParam, Input or Output outside a generator). */
GeneratorBase &generator_under_construction(const char *what);
void set_generator_under_construction(GeneratorBase *g);
GeneratorBase *&current();

struct ParamSlot {
    GeneratorParamInfo info;
    std::function<void(const std::string &)> set; // parses and checks; throws Error
    std::function<std::string()> get;
};

template <class T> std::string to_text(const T &v) {
    if constexpr (std::is_same_v<T, std::string>) {
        return v;
    } else if constexpr (std::is_same_v<T, bool>) {
        return v ? "true" : "false";
    } else {
        std::ostringstream os;
        os << v;
        return os.str();
    }
}
} // namespace detail

class GeneratorBase {
public:
    GeneratorBase(const GeneratorBase &) = delete;
    GeneratorBase &operator=(const GeneratorBase &) = delete;
    virtual ~GeneratorBase();

    /** The name it was registered under (or created with). */
    const std::string &name() const { return name_; }
    /** Its parameters, in declaration order. */
    std::vector<GeneratorParamInfo> params() const;
    /** Sets a parameter from text; Error naming the generator, the parameter and the reason
     * (unknown name, not a number, out of range, not one of the choices), or after build(). */
    void set_param(const std::string &name, const std::string &value);
    /** The target build() is building for. */
    const Target &get_target() const { return target_; }

    /** The generator's inputs (in declaration order; an input the algorithm does not read, e.g.
     * a bias a parameter turned off, is left out) and output, the algorithm defined by
     * generate() and scheduled by schedule() for `target`. Once per instance. */
    struct Pipeline {
        std::vector<ImageParam> inputs;
        Func output;
    };
    Pipeline build(const Target &target);
    /** The algorithm alone (generate(), no schedule()). */
    Pipeline build_algorithm();
    /** The algorithm with reference_schedule(): what the tools check a kernel against on the CPU.
     */
    Pipeline build_reference();
    /** build(), then compile the kernel (named after the generator unless `name` is given). */
    Kernel compile(const Target &target, const std::string &name = "");

    // Used by GeneratorParam, Input and Output as they are constructed.
    void add_param(detail::ParamSlot slot);
    void add_input(ImageParam *input, const std::string &name, Halide::Type type, int rank);
    void add_output(Func *output, const std::string &name, Halide::Type type, int rank);

protected:
    GeneratorBase();
    virtual void generate() = 0;
    virtual void schedule() {}
    /** A Halide CPU schedule for the reference the tools compare kernels with (JIT on the host);
     * none by default (Halide's: everything inline), and a reduction it leaves unscheduled is
     * computed at the root (Halide's default would recompute it per element of its consumer). */
    virtual void reference_schedule() {}

private:
    friend class GeneratorRegistry;
    std::string name_ = "generator";
    Target target_;
    bool built_ = false;
    std::vector<detail::ParamSlot> params_;
    struct Io {
        void *object;
        std::string name; // as declared (Halide may rename a Func whose name is taken)
        Halide::Type type;
        int rank;
    };
    std::vector<Io> inputs_, outputs_;
};

/** CRTP base, as in Halide: class MyGen : public tandem::Generator<MyGen>. */
template <class T> class Generator : public GeneratorBase {
protected:
    template <class P> using GeneratorParam = ::tandem::GeneratorParam<P>;
    template <class B> using Input = ::tandem::Input<B>;
    template <class B> using Output = ::tandem::Output<B>;
    template <class E, int D> using Buffer = ::tandem::Buffer<E, D>;
};

/** A parameter of type int, float, double, bool or std::string, with a default, and a range
 * (numbers) or a set of choices (strings). */
template <class T> class GeneratorParam {
    static_assert(std::is_same_v<T, int> || std::is_same_v<T, float> || std::is_same_v<T, double> ||
                      std::is_same_v<T, bool> || std::is_same_v<T, std::string>,
                  "GeneratorParam takes int, float, double, bool or std::string");

public:
    GeneratorParam(const std::string &name, T value) : value_(std::move(value)) {
        attach(name, {}, {}, {});
    }
    GeneratorParam(const std::string &name, T value, T min, T max) : value_(std::move(value)) {
        static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                      "a range needs a number");
        attach(name, double(min), double(max), {});
    }
    GeneratorParam(const std::string &name, T value, std::vector<std::string> choices)
        : value_(std::move(value)) {
        static_assert(std::is_same_v<T, std::string>, "choices are for string parameters");
        attach(name, {}, {}, std::move(choices));
    }
    GeneratorParam(const std::string &name, T value, T min, T max, Tunable<T> tunable)
        : value_(std::move(value)) {
        static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                      "a range needs a number");
        attach(name, double(min), double(max), {}, texts(tunable.values));
    }
    GeneratorParam(const std::string &name, T value, std::vector<std::string> choices,
                   Tunable<T> tunable)
        : value_(std::move(value)) {
        static_assert(std::is_same_v<T, std::string>, "choices are for string parameters");
        std::vector<std::string> values = tunable.values.empty() ? choices : texts(tunable.values);
        attach(name, {}, {}, std::move(choices), std::move(values));
    }

    const T &value() const { return value_; }
    operator const T &() const { return value_; }
    template <class U = T, class = std::enable_if_t<std::is_arithmetic_v<U>>>
    operator Expr() const {
        return Expr(value_);
    }

private:
    T value_;

    void attach(const std::string &name, std::optional<double> min, std::optional<double> max,
                std::vector<std::string> choices, std::vector<std::string> tunable = {});
    static std::vector<std::string> texts(const std::vector<T> &values) {
        std::vector<std::string> out;
        for (const T &v : values)
            out.push_back(detail::to_text(v));
        return out;
    }
};

/** A generator input: a Halide ImageParam of element type T and rank D (dim(), dimensions(),
 * set_estimates() are the ImageParam's). A dimension generate() does not constrain is Halide's
 * default: any extent at the call (a runtime extent), starting at 0, dense. */
template <class T, int D> class Input<Buffer<T, D>> : public ImageParam {
public:
    explicit Input(const std::string &name) : ImageParam(Halide::type_of<T>(), D, name) {
        detail::generator_under_construction("Input").add_input(this, name, Halide::type_of<T>(),
                                                                D);
    }
    /** The pure variables of the input seen as a Func, as Halide's Input<Buffer>::args(). */
    std::vector<Var> args() const { return Halide::Func(*this).args(); }
};

/** A generator input whose element type generate() chooses from a parameter (Halide's
 * Input<Buffer<>> with its `type`): set_type() before generate() first uses it.
 *
 *     GeneratorParam<std::string> in{"in", "bf16", {"bf16", "f16"}};
 *     Input<Buffer<void, 2>> A{"A"};
 *     void generate() override { A.set_type(in.value() == "f16" ? Float(16) : BFloat(16)); ... }
 */
template <int D> class Input<Buffer<void, D>> : public ImageParam {
public:
    explicit Input(const std::string &name) : ImageParam(Halide::Float(32), D, name) {
        detail::generator_under_construction("Input").add_input(this, name, Halide::Type(), D);
    }
    /** The element type: a fresh ImageParam of the same name and rank (call it before any use). */
    void set_type(const Halide::Type &type) {
        ImageParam::operator=(ImageParam(type, D, ImageParam::name()));
    }
    std::vector<Var> args() const { return Halide::Func(*this).args(); }
};

/** The generator output: a tandem::Func whose values are of type T over D dimensions
 * (Buffer<void, D>: a type generate() chooses, e.g. from a parameter). As Halide's
 * Output<Buffer>, it forwards its buffer's dim(), dimensions() and set_estimates() once
 * generate() has defined it (out.dim(0).set_bounds(0, W)), and args() to the Func. */
template <class T, int D> class Output<Buffer<T, D>> : public Func {
public:
    explicit Output(const std::string &name) : Func(name) {
        Halide::Type type;
        if constexpr (!std::is_void_v<T>)
            type = Halide::type_of<T>();
        detail::generator_under_construction("Output").add_output(this, name, type, D);
    }
    Halide::Internal::Dimension dim(int d) const { return buffer("dim()").dim(d); }
    int dimensions() const { return D; }
    std::vector<Var> args() const { return halide().args(); }
    Output &set_estimates(const Halide::Region &estimates) {
        buffer("set_estimates()").set_estimates(estimates);
        return *this;
    }

private:
    Halide::OutputImageParam buffer(const char *what) const {
        if (!halide().defined())
            throw Error("Output " + name() + ": " + what + " before generate() defines it");
        return output_buffer();
    }
};

/** Gives a tensor a dense shape starting at 0 (extents[0] innermost, each stride the product of
 * the extents inside it). Static: each extent is set (set_bounds). Runtime: the extents are the
 * buffer's at each call and `extents` their estimates, but for the dimensions `fixed` marks (e.g.
 * attention's head size), which stay static. The helper the apps use:
 *
 *     dense_shape(in, {W, H});                  // W x H, static
 *     dense_shape(out.output_buffer(), {W, H}, runtime_shapes);
 */
void dense_shape(Halide::OutputImageParam tensor, const std::vector<int> &extents,
                 bool runtime = false, const std::vector<bool> &fixed = {});

/** Generators by name. */
class GeneratorRegistry {
public:
    using Factory = std::function<std::unique_ptr<GeneratorBase>()>;
    /** Registers `name`; Error if it is taken. Returns true (for static registration). */
    static bool add(const std::string &name, Factory factory);
    /** A fresh instance; Error listing the known generators when `name` is unknown. */
    static std::unique_ptr<GeneratorBase> create(const std::string &name);
    static std::vector<std::string> names();
};

/** Registers generator class CLASS under NAME (an identifier), at static initialisation. */
#define TANDEM_REGISTER_GENERATOR(CLASS, NAME)                                                     \
    static const bool tandem_generator_registered_##NAME = ::tandem::GeneratorRegistry::add(       \
        #NAME, [] { return std::unique_ptr<::tandem::GeneratorBase>(new CLASS()); });

// ---- implementation of the templates ----

template <class T>
void GeneratorParam<T>::attach(const std::string &name, std::optional<double> min,
                               std::optional<double> max, std::vector<std::string> choices,
                               std::vector<std::string> tunable) {
    detail::ParamSlot slot;
    slot.info.name = name;
    slot.info.kind = std::is_same_v<T, int>                                  ? "int"
                     : std::is_same_v<T, double> || std::is_same_v<T, float> ? "float"
                     : std::is_same_v<T, bool>                               ? "bool"
                                                                             : "string";
    slot.info.value = slot.info.default_value = detail::to_text(value_);
    slot.info.min = min;
    slot.info.max = max;
    slot.info.choices = std::move(choices);
    slot.info.tunable = std::move(tunable);
    slot.get = [this] { return detail::to_text(value_); };
    slot.set = [this, name, min, max, choices = slot.info.choices](const std::string &text) {
        auto bad = [&](const std::string &why) { throw Error("parameter " + name + ": " + why); };
        if constexpr (std::is_same_v<T, std::string>) {
            if (!choices.empty() &&
                std::find(choices.begin(), choices.end(), text) == choices.end()) {
                std::string known;
                for (const std::string &c : choices)
                    known += (known.empty() ? "" : ", ") + c;
                bad("'" + text + "' is not one of " + known);
            }
            value_ = text;
        } else if constexpr (std::is_same_v<T, bool>) {
            if (text != "true" && text != "false" && text != "1" && text != "0")
                bad("'" + text + "' is not true or false");
            value_ = text == "true" || text == "1";
        } else {
            std::optional<double> number = parse_number(text);
            if (!number)
                bad("'" + text + "' is not a number");
            const double v = *number;
            if (std::is_same_v<T, int> && v != double(int64_t(v)))
                bad("'" + text + "' is not an integer");
            if ((min && v < *min) || (max && v > *max)) {
                bad(text + " is outside [" + detail::to_text(T(*min)) + ", " +
                    detail::to_text(T(*max)) + "]");
            }
            value_ = T(v);
        }
    };
    GeneratorBase &g = detail::generator_under_construction("GeneratorParam");
    const T given = value_;
    for (const std::string &v : slot.info.tunable) {
        try {
            slot.set(v); // each tunable value must be one the parameter takes
        } catch (const Error &e) {
            throw Error(std::string("generator parameter ") + name + ": tunable value " + v + ": " +
                        e.what());
        }
    }
    value_ = given;
    g.add_param(std::move(slot));
}

} // namespace tandem

#endif
