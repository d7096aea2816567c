// A generator written outside Tandem: out = clamp(alpha * x + y, -limit, limit) over W x H f32,
// tiles of 32 x 4 spread over the cores, the inputs copied asynchronously and double-buffered.
#include "tandem/Generator.h"

#include <algorithm>
#include <vector>

using namespace tandem;

class ClampedAxpy : public Generator<ClampedAxpy> {
public:
    GeneratorParam<int> W{"W", 256, 1, 1 << 16};
    GeneratorParam<int> H{"H", 16, 1, 1 << 16};
    GeneratorParam<double> alpha{"alpha", 2.0};
    GeneratorParam<double> limit{"limit", 1.0};
    Input<Buffer<float, 2>> x{"x"}, y{"y"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        Expr a = Halide::cast<float>(Expr(alpha.value())),
             l = Halide::cast<float>(Expr(limit.value()));
        out(i, j) = Halide::clamp(a * x(i, j) + y(i, j), -l, l);
        for (Input<Buffer<float, 2>> *in : {&x, &y}) {
            in->dim(0).set_bounds(0, W);
            in->dim(1).set_bounds(0, H).set_stride(W);
        }
        // As in Halide: the Output forwards its buffer's dims.
        out.dim(0).set_bounds(0, W);
        out.dim(1).set_bounds(0, H).set_stride(W);
    }

    void schedule() override {
        Var io("io"), jo("jo"), ii("ii"), ji("ji"), t("t");
        std::vector<Var> args = out.args(); // i, j
        out.tile(args[0], args[1], io, jo, ii, ji, std::min<int>(32, W), std::min<int>(4, H),
                 TailStrategy::GuardWithIf)
            .fuse(io, jo, t)
            .map_to_cores(t);
        for (Input<Buffer<float, 2>> *in : {&x, &y})
            Func::staged(*in, out).compute_at(out, t).async_copy().multi_buffer(2);
        out.async_copy();
    }

private:
    Var i{"i"}, j{"j"};
};
TANDEM_REGISTER_GENERATOR(ClampedAxpy, clamped_axpy)
