// Regions a tile leaves empty: a sum down the columns over a window of rows that ends C rows
// above each row (an RDom with a where clause), so the first tiles of rows read no row at all and
// Halide gives their staged copy's loop a negative extent, as a causal mask over fewer keys than
// queries does to whole query tiles. The ZPU and Hopper models run it against the Halide
// reference without hazards (it used to end in an internal error: a copy of negative extent).
// Not in the conformance suite yet: its fuzzing still finds failures (docs/design/open-items.md).
#include "App.h"
#include "Run.h"

#include <gtest/gtest.h>

using namespace tandem;
using namespace tandem::apps;

namespace {

class EmptyRegionWindowSum : public Generator<EmptyRegionWindowSum> {
public:
    GeneratorParam<int> W{"W", 40, 1, 1 << 20};
    GeneratorParam<int> H{"H", 70, 1, 1 << 20};
    GeneratorParam<int> TX{"TX", 16, 1, 4096};
    GeneratorParam<int> TY{"TY", 8, 1, 4096};
    GeneratorParam<int> C{"C", 20, 0, 1 << 20};
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        RDom k(0, in.dim(1).extent());
        k.where(k.x <= y - int(C));
        acc(x, y) = 0.0f;
        acc(x, y) += in(x, k);
        out(x, y) = acc(x, y);
        in.dim(0).set_bounds(0, W);
        in.dim(1).set_bounds(0, H).set_stride(W);
        out.dim(0).set_bounds(0, W);
        out.dim(1).set_bounds(0, H).set_stride(W);
    }
    void schedule() override {
        out.tile(x, y, xo, yo, xi, yi, TX, TY, TailStrategy::GuardWithIf)
            .fuse(xo, yo, t)
            .map_to_cores(t);
        acc.compute_at(out, t);
        Func::staged(in, acc).compute_at(out, t).async_copy();
        out.async_copy();
    }

private:
    Var x{"x"}, y{"y"}, xo{"xo"}, yo{"yo"}, xi{"xi"}, yi{"yi"}, t{"t"};
    Func acc{"acc"};
};
TANDEM_REGISTER_GENERATOR(EmptyRegionWindowSum, empty_region_window_sum)

TEST(EmptyRegions, TilesWithNothingToReadRunOnTheZpuAndHopper) {
    const std::vector<std::map<std::string, std::string>> shapes = {
        {{"W", "40"}, {"H", "70"}, {"TX", "16"}, {"TY", "8"}, {"C", "20"}}, // TMA on hopper
        {{"W", "17"}, {"H", "31"}, {"TX", "4"}, {"TY", "3"}, {"C", "7"}},   // thread copies
        {{"W", "1"}, {"H", "1"}, {"TX", "4"}, {"TY", "4"}, {"C", "0"}}};
    for (const std::string target : {"zpu", "hopper"}) {
        for (const auto &shape : shapes) {
            RunOptions o;
            o.params = Params(shape);
            o.target = target;
            RunResult r = run(generator_app("empty_region_window_sum"), o);
            const std::string what = target + " W=" + shape.at("W") + " C=" + shape.at("C");
            EXPECT_TRUE(r.checked) << what;
            EXPECT_TRUE(r.correct) << what << ": max_rel_err " << r.max_rel_err;
            EXPECT_EQ(r.report.race_count, 0)
                << what << ": " << (r.report.races.empty() ? "" : r.report.races[0].str());
            EXPECT_FALSE(r.report.deadlock) << what;
        }
    }
}

} // namespace
