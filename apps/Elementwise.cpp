// elementwise: out = a * b + max(c, 0) * 0.5, a fused pointwise expression over W x H f32 tensors.
#include "App.h"

#include <algorithm>

namespace tandem::apps {

namespace {

class Elementwise : public Generator<Elementwise> {
public:
    GeneratorParam<int> W{"W", 2048, 1, 1 << 20};
    GeneratorParam<int> H{"H", 2048, 1, 1 << 20};
    GeneratorParam<int> TX{"TX", 1024, 1, 1 << 16};
    GeneratorParam<int> TY{"TY", 32, 1, 1 << 16};
    GeneratorParam<int> stages{"stages", 2, 1, 16};
    // Hopper, double_buffered: a persistent grid of this many CTAs per SM, each looping over tiles
    // through its ring (0: a CTA per tile, the GPU overlapping CTAs instead).
    GeneratorParam<int> ctas_per_sm{"ctas_per_sm", 0, 0, 32};
    GeneratorParam<std::string> shapes{"shapes", "static", {"static", "runtime"}};
    GeneratorParam<std::string> pipelining{
        "schedule", "double_buffered", {"double_buffered", "single_buffered", "sync"}};
    Input<Buffer<float, 2>> a{"a"}, b{"b"}, c{"c"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        out(x, y) = a(x, y) * b(x, y) + Halide::max(c(x, y), 0.0f) * 0.5f;
        for (ImageParam *in : {&a, &b, &c})
            set_shape(*in, {W, H}, shapes);
        set_shape(out.output_buffer(), {W, H}, shapes);
    }

    void schedule() override {
        schedule_pointwise(out, {a, b, c}, params_of(*this), pipelining, "elementwise");
        if (get_target().name() == "hopper" && ctas_per_sm > 0 &&
            pipelining.value() == "double_buffered")
            out.persistent(ctas_per_sm);
    }

    void reference_schedule() override {
        Var yo("yo"), yi("yi");
        out.halide()
            .split(y, yo, yi, 16, TailStrategy::GuardWithIf)
            .parallel(yo)
            .vectorize(x, 8, TailStrategy::GuardWithIf);
    }

private:
    Var x{"x"}, y{"y"};
};

} // namespace

TANDEM_REGISTER_GENERATOR(Elementwise, elementwise)

const App &elementwise_app() {
    static const App app{
        "elementwise",
        "fused pointwise out = a * b + max(c, 0) * 0.5 over W x H f32 tensors",
        generator_defaults("elementwise"),
        generator_schedules("elementwise"),
        {{"hopper", {{"TX", "256"}, {"TY", "16"}}}, {"ascend", {{"TX", "256"}, {"TY", "16"}}}},
        {{"hopper", generator_schedules("elementwise")},
         {"ascend", generator_schedules("elementwise")}},
        generator_build("elementwise"),
        generator_workload("elementwise"),
        [](const Params &) { return 1e-6; },
        {{"W", "TX", 3000}, {"H", "TY", 600}},
        {{"TX", {"1", "2", "7", "32", "64", "128", "256", "1024"}},
         {"TY", {"1", "2", "3", "8", "16", "32"}},
         {"stages", {"1", "2", "3", "4"}},
         {"ctas_per_sm", {"0", "1", "2"}}},
        4e5,
        {},
    };
    return app;
}

} // namespace tandem::apps
