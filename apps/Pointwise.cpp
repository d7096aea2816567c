// pointwise: out = f(a, b, c), a random expression tree over three W x H f32 tensors, drawn from
// the parameter `expr` (a seed): the user-written pointwise algorithms the fuzzer must cover
// (arithmetic, min/max, abs, comparisons and selects, square roots, constants).
#include "App.h"

#include <algorithm>
#include <random>

namespace tandem::apps {

namespace {

/** A random expression of depth at most `depth` over the leaves. */
Halide::Expr random_expr(std::mt19937 &rng, const std::vector<Halide::Expr> &leaves, int depth) {
    auto pick = [&](int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
    if (depth == 0 || pick(4) == 0) {
        if (pick(5) == 0)
            return Halide::Expr(float(pick(9) - 4) * 0.5f); // -2 .. 2
        return leaves[size_t(pick(int(leaves.size())))];
    }
    Halide::Expr x = random_expr(rng, leaves, depth - 1), y = random_expr(rng, leaves, depth - 1);
    switch (pick(9)) {
    case 0:
        return x + y;
    case 1:
        return x - y;
    case 2:
        return x * y;
    case 3:
        return Halide::min(x, y);
    case 4:
        return Halide::max(x, y);
    case 5:
        return Halide::abs(x);
    case 6:
        return Halide::select(x < y, x, y * 0.5f);
    case 7:
        return Halide::sqrt(Halide::abs(x) + 1.0f);
    default:
        return x * 0.25f + y;
    }
}

class Pointwise : public Generator<Pointwise> {
public:
    GeneratorParam<int> W{"W", 1024, 1, 1 << 20};
    GeneratorParam<int> H{"H", 256, 1, 1 << 20};
    GeneratorParam<int> TX{"TX", 256, 1, 1 << 16};
    GeneratorParam<int> TY{"TY", 16, 1, 1 << 16};
    GeneratorParam<int> stages{"stages", 2, 1, 16};
    GeneratorParam<int> expr{"expr", 1, 0, 1 << 30}; // the seed of the expression
    GeneratorParam<std::string> pipelining{
        "schedule", "double_buffered", {"double_buffered", "single_buffered", "sync"}};
    Input<Buffer<float, 2>> a{"a"}, b{"b"}, c{"c"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        std::mt19937 rng(uint32_t(expr.value()));
        out(x, y) = random_expr(rng, {a(x, y), b(x, y), c(x, y)}, 4);
        for (ImageParam *in : {&a, &b, &c}) {
            in->dim(0).set_bounds(0, W);
            in->dim(1).set_bounds(0, H).set_stride(W);
        }
        out.output_buffer().dim(0).set_bounds(0, W);
        out.output_buffer().dim(1).set_bounds(0, H).set_stride(W);
    }

    void schedule() override {
        schedule_pointwise(out, {a, b, c}, params_of(*this), pipelining, "pointwise");
    }

private:
    Var x{"x"}, y{"y"};
};

} // namespace

TANDEM_REGISTER_GENERATOR(Pointwise, pointwise)

const App &pointwise_app() {
    static const App app{
        "pointwise",
        "a random pointwise expression out = f(a, b, c) (parameter expr: its seed) over W x H f32 "
        "tensors",
        generator_defaults("pointwise"),
        generator_schedules("pointwise"),
        {},
        {{"hopper", generator_schedules("pointwise")},
         {"ascend", generator_schedules("pointwise")}},
        generator_build("pointwise"),
        generator_workload("pointwise"),
        [](const Params &) { return 1e-5; },
        {{"W", "TX", 3000}, {"H", "TY", 600}},
        {{"TX", {"1", "2", "7", "32", "64", "128", "256", "1024"}},
         {"TY", {"1", "2", "3", "8", "16", "32"}},
         {"stages", {"1", "2", "3", "4"}},
         {"expr",
          {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"}}},
        4e5,
        {"expr"},
    };
    return app;
}

} // namespace tandem::apps
