// elementwise: out = a * b + max(c, 0) * 0.5, a fused pointwise expression over W x H f32 tensors.
#include "App.h"

#include <algorithm>

namespace tandem::apps {

namespace {

Built build_elementwise(const Params &p, const std::string &schedule, const Target &) {
    const int W = p.get_int("W"), H = p.get_int("H");
    if (W < 1 || H < 1) throw Error("elementwise: W and H must be positive");

    // ---- the algorithm, written once ----
    ImageParam a(Halide::Float(32), 2, "a"), b(Halide::Float(32), 2, "b"), c(Halide::Float(32), 2, "c");
    Var x("x"), y("y");
    Func out("out");
    out(x, y) = a(x, y) * b(x, y) + Halide::max(c(x, y), 0.0f) * 0.5f;
    for (ImageParam *in : {&a, &b, &c}) {
        in->dim(0).set_bounds(0, W);
        in->dim(1).set_bounds(0, H).set_stride(W);
    }
    out.output_buffer().dim(0).set_bounds(0, W);
    out.output_buffer().dim(1).set_bounds(0, H).set_stride(W);

    // ---- schedules ----
    if (schedule == "reference") {
        Var yo("yo"), yi("yi");
        out.halide().split(y, yo, yi, 16, TailStrategy::GuardWithIf).parallel(yo).vectorize(x, 8, TailStrategy::GuardWithIf);
        return {{a, b, c}, out};
    }
    schedule_pointwise(out, {a, b, c}, p, schedule, "elementwise");
    return {{a, b, c}, out};
}

} // namespace

const App &elementwise_app() {
    static const App app{
        "elementwise",
        "fused pointwise out = a * b + max(c, 0) * 0.5 over W x H f32 tensors",
        {{"W", "2048"}, {"H", "2048"}, {"TX", "1024"}, {"TY", "32"}, {"stages", "2"}},
        {"double_buffered", "single_buffered", "sync"},
        {{"hopper", {{"TX", "256"}, {"TY", "16"}}}, {"ascend", {{"TX", "256"}, {"TY", "16"}}}},
        {{"hopper", {"double_buffered", "single_buffered", "sync"}},
         {"ascend", {"double_buffered", "single_buffered", "sync"}}},
        build_elementwise,
        [](const Params &p) {
            double n = double(p.get_int("W")) * p.get_int("H");
            return Workload{0, 4 * n, 16 * n};
        },
        [](const Params &) { return 1e-6; },
        {{"W", "TX", 3000}, {"H", "TY", 600}},
        {{"TX", {"1", "2", "7", "32", "64", "128", "256", "1024"}},
         {"TY", {"1", "2", "3", "8", "16", "32"}},
         {"stages", {"1", "2", "3", "4"}}},
        4e5,
        {},
    };
    return app;
}

} // namespace tandem::apps
