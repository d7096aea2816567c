// rmsnorm: out(x, r) = in(x, r) * w(x) / sqrt(mean_x(in(x, r)^2) + eps), rows of D f32 values.
#include "App.h"

#include <algorithm>

namespace tandem::apps {

namespace {

Built build_rmsnorm(const Params &p, const std::string &schedule) {
    const int D = p.get_int("D"), R = p.get_int("R");
    if (D < 1 || R < 1) throw Error("rmsnorm: D and R must be positive");

    // ---- the algorithm, written once ----
    ImageParam in(Halide::Float(32), 2, "in"), w(Halide::Float(32), 1, "w");
    Var x("x"), row("row");
    RDom k(0, D, "k");
    Func sum_sq("sum_sq"), out("out");
    sum_sq(row) = 0.0f;
    sum_sq(row) += in(k, row) * in(k, row);
    out(x, row) = in(x, row) * w(x) / Halide::sqrt(sum_sq(row) / float(D) + 1e-5f);
    in.dim(0).set_bounds(0, D);
    in.dim(1).set_bounds(0, R).set_stride(D);
    w.dim(0).set_bounds(0, D);
    out.output_buffer().dim(0).set_bounds(0, D);
    out.output_buffer().dim(1).set_bounds(0, R).set_stride(D);

    // ---- schedules ----
    if (schedule == "reference") {
        Var ro("ro"), ri("ri");
        out.halide().split(row, ro, ri, 4, TailStrategy::GuardWithIf).parallel(ro).vectorize(x, 8, TailStrategy::GuardWithIf);
        sum_sq.halide().compute_at(out.halide(), ri);
        return {{in, w}, out};
    }
    const int RB = std::min(p.get_int("RB"), R), stages = p.get_int("stages");
    Var ro("ro"), ri("ri");
    out.split(row, ro, ri, RB, TailStrategy::GuardWithIf).map_to_cores(ro);
    Func in_tile = Func::staged(in), w_tile = Func::staged(w);
    in_tile.compute_at(out, ro);
    sum_sq.compute_at(out, ro);
    w_tile.compute_root(); // every core stages the weights once
    if (schedule == "sync") return {{in, w}, out};
    if (schedule != "double_buffered" && schedule != "single_buffered") {
        throw Error("rmsnorm: unknown schedule '" + schedule + "' (known: double_buffered, single_buffered, sync)");
    }
    int versions = schedule == "double_buffered" ? stages : 1;
    in_tile.async_copy().multi_buffer(versions);
    out.async_copy().multi_buffer(versions);
    return {{in, w}, out};
}

} // namespace

const App &rmsnorm_app() {
    static const App app{
        "rmsnorm",
        "RMS normalisation of R rows of D f32 values, scaled by weights w",
        {{"D", "4096"}, {"R", "1024"}, {"RB", "16"}, {"stages", "2"}},
        {"double_buffered", "single_buffered", "sync"},
        {{"hopper", {{"RB", "2"}}}, {"ascend", {{"RB", "2"}}}},
        {{"hopper", {"double_buffered", "single_buffered", "sync"}},
         {"ascend", {"double_buffered", "single_buffered", "sync"}}},
        build_rmsnorm,
        [](const Params &p) {
            double n = double(p.get_int("D")) * p.get_int("R");
            return Workload{0, 5 * n, 8 * n + 4.0 * p.get_int("D")};
        },
        [](const Params &) { return 1e-5; },
        {{"D", "", 200000}, {"R", "RB", 300}},
        {{"RB", {"1", "2", "3", "4", "8", "16"}}, {"stages", {"1", "2", "3"}}},
        4e5,
    };
    return app;
}

} // namespace tandem::apps
