// A generator as a user writes one (outside apps/): used by the generator tests and built into a
// generator binary with the generator main (tests/generator/CMakeLists.txt).
#include "tandem/Generator.h"

#include <algorithm>

using namespace tandem;

namespace {

/** out(x, y) = a(x, y) * scale + b(x, y), tiles spread over the cores, inputs double-buffered. */
class ScaleAdd : public Generator<ScaleAdd> {
public:
    GeneratorParam<int> W{"W", 300, 1, 1 << 16};
    GeneratorParam<int> H{"H", 70, 1, 1 << 16};
    // The tile and the pipelining are what the autotuner may change (--tune, tuning_db=).
    GeneratorParam<int> TX{"TX", 64, 1, 1024, Tunable<int>{16, 32, 64, 128}};
    GeneratorParam<int> TY{"TY", 8, 1, 256, Tunable<int>{1, 2, 4, 8}};
    GeneratorParam<double> scale{"scale", 2.0};
    GeneratorParam<std::string> pipelining{
        "pipelining", "double_buffered", {"double_buffered", "sync"}, Tunable<std::string>{}};
    // runtime: W and H are estimates; the kernel takes any extents (no set_bounds, only min 0 and
    // dense strides), as Halide generators do by default.
    GeneratorParam<bool> runtime_shapes{"runtime_shapes", false};
    Input<Buffer<float, 2>> a{"a"}, b{"b"};
    Output<Buffer<float, 2>> out{"out"};

    Var x{"x"}, y{"y"}, xo{"xo"}, yo{"yo"}, xi{"xi"}, yi{"yi"}, t{"t"};

    void generate() override {
        out(x, y) = a(x, y) * Halide::cast<float>(Expr(scale.value())) + b(x, y);
        for (Halide::OutputImageParam p :
             {Halide::OutputImageParam(a), Halide::OutputImageParam(b), out.output_buffer()}) {
            if (runtime_shapes) {
                p.dim(0).set_min(0).set_estimate(0, W);
                p.dim(1).set_min(0).set_estimate(0, H).set_stride(p.dim(0).extent());
            } else {
                p.dim(0).set_bounds(0, W);
                p.dim(1).set_bounds(0, H).set_stride(W);
            }
        }
    }

    void schedule() override {
        const int tx = runtime_shapes ? int(TX) : std::min<int>(TX, W),
                  ty = runtime_shapes ? int(TY) : std::min<int>(TY, H);
        out.tile(x, y, xo, yo, xi, yi, tx, ty, TailStrategy::GuardWithIf)
            .fuse(xo, yo, t)
            .map_to_cores(t);
        for (Input<Buffer<float, 2>> *in : {&a, &b}) {
            Func staged = Func::staged(*in, out);
            staged.compute_at(out, t);
            if (pipelining.value() == "double_buffered")
                staged.async_copy().multi_buffer(2);
        }
        if (pipelining.value() == "double_buffered")
            out.async_copy();
    }
};
TANDEM_REGISTER_GENERATOR(ScaleAdd, scale_add)

} // namespace
