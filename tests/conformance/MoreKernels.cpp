// Conformance: more everyday user kernels, written as a user writes generators (public headers
// only): a bias add with ReLU (a row vector broadcast down the rows), rotary position embedding
// (pairs of columns rotated), quantization to int8 (round, clamp, cast; a float GeneratorParam),
// SwiGLU's elementwise half (two inputs), an outer product (vectors read from DRAM), a softmax
// down the columns and a row's log-sum-exp (a value per row).
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

/** silu(a) * b: two inputs, each staged per tile. */
class SiluMul : public Tiled<SiluMul> {
public:
    Input<Buffer<float, 2>> a{"a"}, b{"b"};
    Output<Buffer<float, 2>> out{"out"};
    void generate() override {
        out(x, y) = a(x, y) / (1.0f + Halide::exp(-a(x, y))) * b(x, y);
        dense(a, W, H);
        dense(b, W, H);
        dense(out, W, H);
    }
    void schedule() override { tiles(out, {&a, &b}); }
};
TANDEM_REGISTER_GENERATOR(SiluMul, silu_mul)

/** out(x, y) = a(x) * b(y): the vectors left in DRAM (the compiler stages them). */
class Outer : public Tiled<Outer> {
public:
    Input<Buffer<float, 1>> a{"a"}, b{"b"};
    Output<Buffer<float, 2>> out{"out"};
    void generate() override {
        out(x, y) = a(x) * b(y);
        a.dim(0).set_bounds(0, W);
        b.dim(0).set_bounds(0, H);
        dense(out, W, H);
    }
    void schedule() override { tiles(out, {}); }
};
TANDEM_REGISTER_GENERATOR(Outer, outer)

/** softmax(in) down each column: TX columns per tile, whole columns staged. With
 * rows_outside=true the rows loop runs outside the tiles (each row a pass over the tiles, the
 * column max and sum recomputed per row: legal, slow). */
class ColumnSoftmax : public Tiled<ColumnSoftmax> {
public:
    GeneratorParam<bool> rows_outside{"rows_outside", false};
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};
    void generate() override {
        RDom k(0, in.dim(1).extent());
        mx(x) = Halide::Float(32).min();
        mx(x) = Halide::max(mx(x), in(x, k));
        sum(x) = 0.0f;
        sum(x) += Halide::exp(in(x, k) - mx(x));
        out(x, y) = Halide::exp(in(x, y) - mx(x)) / sum(x);
        dense(in, W, H);
        dense(out, W, H);
    }
    void schedule() override {
        out.split(x, xo, xi, TX, TailStrategy::GuardWithIf);
        if (!rows_outside)
            out.reorder(xi, y, xo);
        out.map_to_cores(xo);
        Func::staged(in).compute_at(out, xo).async_copy().multi_buffer(2);
        mx.compute_at(out, xo);
        sum.compute_at(out, xo);
        out.async_copy();
    }

private:
    Func mx{"mx"}, sum{"sum"};
};
TANDEM_REGISTER_GENERATOR(ColumnSoftmax, column_softmax)

/** log(sum(exp(row))): one value per row, RB rows per tile. */
class LogSumExp : public Tiled<LogSumExp> {
public:
    GeneratorParam<int> RB{"RB", 4, 1, 256};
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 1>> out{"out"};
    void generate() override {
        RDom k(0, in.dim(0).extent());
        mx(y) = Halide::Float(32).min();
        mx(y) = Halide::max(mx(y), in(k, y));
        sum(y) = 0.0f;
        sum(y) += Halide::exp(in(k, y) - mx(y));
        out(y) = mx(y) + Halide::log(sum(y));
        dense(in, W, H);
        out.dim(0).set_bounds(0, H);
    }
    void schedule() override {
        out.split(y, yo, yi, RB, TailStrategy::GuardWithIf).map_to_cores(yo);
        Func::staged(in).compute_at(out, yo).async_copy().multi_buffer(2);
        mx.compute_at(out, yo);
        sum.compute_at(out, yo);
        out.async_copy();
    }

private:
    Func mx{"mx"}, sum{"sum"};
};
TANDEM_REGISTER_GENERATOR(LogSumExp, logsumexp)

} // namespace
