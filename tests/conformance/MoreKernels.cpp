// Conformance: more everyday user kernels, written as a user writes generators (public headers
// only): a bias add with ReLU (a row vector broadcast down the rows), rotary position embedding
// (pairs of columns rotated), quantization to int8 (round, clamp, cast; a float GeneratorParam).
#include "tandem/Generator.h"

#include <algorithm>

using namespace tandem;

namespace {

/** W x H floats, tiles of TX x TY over the cores, the input staged per tile. */
template <class G> class Tiled : public Generator<G> {
public:
    GeneratorParam<int> W{"W", 300, 1, 1 << 20};
    GeneratorParam<int> H{"H", 70, 1, 1 << 20};
    GeneratorParam<int> TX{"TX", 64, 1, 4096};
    GeneratorParam<int> TY{"TY", 8, 1, 4096};

protected:
    Var x{"x"}, y{"y"}, xo{"xo"}, yo{"yo"}, xi{"xi"}, yi{"yi"}, t{"t"};

    template <class B> void dense(B &b, int w, int h) {
        b.dim(0).set_bounds(0, w);
        b.dim(1).set_bounds(0, h).set_stride(w);
    }
    void tiles(Func out, std::initializer_list<ImageParam *> staged) {
        out.tile(x, y, xo, yo, xi, yi, TX, TY, TailStrategy::GuardWithIf)
            .fuse(xo, yo, t)
            .map_to_cores(t);
        for (ImageParam *in : staged)
            Func::staged(*in, out).compute_at(out, t).async_copy().multi_buffer(2);
        out.async_copy();
    }
};

/** out = max(in + b(x), 0): a bias per column, broadcast down the rows. */
class BiasRelu : public Tiled<BiasRelu> {
public:
    Input<Buffer<float, 2>> in{"in"};
    Input<Buffer<float, 1>> b{"b"};
    Output<Buffer<float, 2>> out{"out"};
    void generate() override {
        out(x, y) = Halide::max(in(x, y) + b(x), 0.0f);
        dense(in, W, H);
        dense(out, W, H);
        b.dim(0).set_bounds(0, W);
    }
    void schedule() override { tiles(out, {&in}); }
};
TANDEM_REGISTER_GENERATOR(BiasRelu, bias_relu)

/** Rotary position embedding: columns 2i and 2i + 1 rotated by the angle of (i, y), W pairs of
 * columns (2 W values) in each of H rows. */
class Rope : public Tiled<Rope> {
public:
    Input<Buffer<float, 2>> in{"in"};
    Input<Buffer<float, 2>> cos_t{"cos_t"}, sin_t{"sin_t"};
    Output<Buffer<float, 2>> out{"out"};
    void generate() override {
        Expr i = x / 2, even = x % 2 == 0;
        Expr a = in(2 * i, y), b = in(2 * i + 1, y), c = cos_t(i, y), s = sin_t(i, y);
        out(x, y) = Halide::select(even, a * c - b * s, a * s + b * c);
        dense(in, 2 * W, H);
        dense(out, 2 * W, H);
        for (Input<Buffer<float, 2>> *p : {&cos_t, &sin_t})
            dense(*p, W, H);
    }
    void schedule() override { tiles(out, {&in, &cos_t, &sin_t}); }
};
TANDEM_REGISTER_GENERATOR(Rope, rope)

/** out = clamp(round(in / scale), -128, 127) as int8. */
class Quantize : public Tiled<Quantize> {
public:
    Input<Buffer<float, 2>> in{"in"};
    GeneratorParam<float> scale{"scale", 0.05f};
    Output<Buffer<int8_t, 2>> out{"out"};
    void generate() override {
        out(x, y) = Halide::cast<int8_t>(
            Halide::clamp(Halide::round(in(x, y) / float(scale)), -128.0f, 127.0f));
        dense(in, W, H);
        dense(out, W, H);
    }
    void schedule() override { tiles(out, {&in}); }
};
TANDEM_REGISTER_GENERATOR(Quantize, quantize)

} // namespace
