// Conformance: user kernels over 2-D tiles, written as a user writes generators (outside apps/,
// the public headers only): activations (GELU, SiLU, tanh, sigmoid), a transpose, a 3x3 stencil,
// and sums and maxima down the columns. Static shapes, or with runtime=true any shape at the call.
#include "tandem/Generator.h"

#include <cmath>

using namespace tandem;

namespace {

/** W x H floats in, tiles of TX x TY over the cores (0: the kernel's tiles for the target,
 * tiles()). */
template <class G> class GridKernel : public Generator<G> {
public:
    GeneratorParam<int> W{"W", 300, 1, 1 << 20};
    GeneratorParam<int> H{"H", 70, 1, 1 << 20};
    GeneratorParam<int> TX{"TX", 0, 0, 4096};
    GeneratorParam<int> TY{"TY", 0, 0, 4096};
    GeneratorParam<bool> runtime{"runtime", false};
    // How the tiles meet the edges: guard (GuardWithIf) or Halide's default (no tail strategy
    // written), with tiles that may exceed a static extent.
    GeneratorParam<std::string> tail{"tail", "guard", {"guard", "auto"}};

protected:
    Var x{"x"}, y{"y"}, xo{"xo"}, yo{"yo"}, xi{"xi"}, yi{"yi"}, t{"t"};

    /** The tiles a kernel takes where TX or TY is 0, as a user picks them for the target. */
    virtual std::pair<int, int> tiles() const { return {64, 8}; }
    int tx() const { return TX > 0 ? int(TX) : tiles().first; }
    int ty() const { return TY > 0 ? int(TY) : tiles().second; }

    /** A dense W x H (or any, with runtime) buffer. */
    template <class B> void shape(B &b, int w, int h) {
        if (runtime) {
            b.set_estimates({{0, w}, {0, h}});
        } else {
            b.dim(0).set_bounds(0, w);
            b.dim(1).set_bounds(0, h).set_stride(w);
        }
    }
    /** out in TX x TY tiles over the cores, `in` staged per tile and double-buffered. */
    void schedule_tiles(Func &out, ImageParam &in) {
        out.tile(x, y, xo, yo, xi, yi, tx(), ty(),
                 tail.value() == "guard" ? TailStrategy::GuardWithIf : TailStrategy::Auto)
            .fuse(xo, yo, t)
            .map_to_cores(t);
        Func tile = Func::staged(in, out);
        tile.compute_at(out, t).async_copy().multi_buffer(2);
        out.async_copy();
    }
};

class Activation : public GridKernel<Activation> {
public:
    GeneratorParam<std::string> act{"act", "gelu", {"gelu", "silu", "tanh", "sigmoid"}};
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        Expr v = in(x, y);
        const std::string a = act;
        if (a == "gelu") // the tanh form, as PyTorch's approximate="tanh"
            out(x, y) =
                0.5f * v *
                (1.0f + Halide::tanh(float(std::sqrt(2.0 / M_PI)) * (v + 0.044715f * v * v * v)));
        else if (a == "silu")
            out(x, y) = v / (1.0f + Halide::exp(-v));
        else if (a == "tanh")
            out(x, y) = Halide::tanh(v);
        else
            out(x, y) = 1.0f / (1.0f + Halide::exp(-v));
        shape(in, W, H);
        shape(out, W, H);
    }
    void schedule() override { schedule_tiles(out, in); }
};
TANDEM_REGISTER_GENERATOR(Activation, activation)

/** out(x, y) = in(y, x): in is H x W. */
class Transpose : public GridKernel<Transpose> {
public:
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        out(x, y) = in(y, x);
        shape(in, H, W);
        shape(out, W, H);
    }
    void schedule() override { schedule_tiles(out, in); }

protected:
    /** Square tiles of 64 (the staged tile is read down its columns: on hopper a 128B-swizzled
     * TMA tile, on ascend a Gather). */
    std::pair<int, int> tiles() const override { return {64, 64}; }
};
TANDEM_REGISTER_GENERATOR(Transpose, transpose)

/** A 3x3 blur with weights 1 2 1 / 2 4 2 / 1 2 1 over a (W + 2) x (H + 2) input. */
class Stencil : public GridKernel<Stencil> {
public:
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        Expr s = 0.0f;
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 3; i++)
                s += float((i == 1 ? 2 : 1) * (j == 1 ? 2 : 1)) * in(x + i, y + j);
        out(x, y) = s / 16.0f;
        shape(in, W + 2, H + 2);
        shape(out, W, H);
    }
    void schedule() override { schedule_tiles(out, in); }
};
TANDEM_REGISTER_GENERATOR(Stencil, stencil)

/** The sum (or the max) of each column of a W x H input: out(x). */
class ColumnReduce : public GridKernel<ColumnReduce> {
public:
    GeneratorParam<std::string> op{"op", "sum", {"sum", "max"}};
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 1>> out{"out"};

    void generate() override {
        RDom k(0, in.dim(1).extent());
        if (op.value() == "sum") {
            acc(x) = 0.0f;
            acc(x) += in(x, k);
        } else {
            acc(x) = Halide::Float(32).min();
            acc(x) = Halide::max(acc(x), in(x, k));
        }
        out(x) = acc(x);
        k_y = k.x;
        shape(in, W, H);
        if (runtime)
            out.set_estimates({{0, W}});
        else
            out.dim(0).set_bounds(0, W);
    }
    /** TX columns per tile over the cores; down them TY rows at a time, double-buffered. */
    void schedule() override {
        RVar ko("ko"), ki("ki");
        out.split(x, xo, xi, tx(), TailStrategy::GuardWithIf).map_to_cores(xo);
        acc.compute_at(out, xo);
        acc.update().split(k_y, ko, ki, ty(), TailStrategy::GuardWithIf).reorder(x, ki, ko);
        Func tile = Func::staged(in, acc);
        tile.compute_at(acc, ko).async_copy().multi_buffer(2);
        out.async_copy();
    }

protected:
    /** hopper: 16 columns (two CTAs per SM at 4096 columns, a thread per column) and chunks of
     * 256 rows; ascend: rows of 128 columns (512 bytes per vector op) and chunks of 32; zpu:
     * 256 x 32. */
    std::pair<int, int> tiles() const override {
        const std::string target = get_target().name();
        return target == "hopper"   ? std::pair{16, 256}
               : target == "ascend" ? std::pair{128, 32}
                                    : std::pair{256, 32};
    }

private:
    Func acc{"acc"};
    Halide::RVar k_y;
};
TANDEM_REGISTER_GENERATOR(ColumnReduce, column_reduce)

/** 2 x 2 max pooling: out(x, y) = the max of in over rows 2y, 2y + 1 and columns 2x, 2x + 1 of a
 * 2W x 2H input (reads at a stride of two elements). */
class MaxPool : public GridKernel<MaxPool> {
public:
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        out(x, y) = Halide::max(Halide::max(in(2 * x, 2 * y), in(2 * x + 1, 2 * y)),
                                Halide::max(in(2 * x, 2 * y + 1), in(2 * x + 1, 2 * y + 1)));
        shape(in, 2 * W, 2 * H);
        shape(out, W, H);
    }
    void schedule() override { schedule_tiles(out, in); }
};
TANDEM_REGISTER_GENERATOR(MaxPool, max_pool)

/** Sums down the columns over a window that ends C rows above each output row: out(x, y) = the
 * sum of in(x, k) over the rows k <= y - C, 0 where there are none. The first tiles of rows read
 * no row of `in` at all: their staged region is empty (Halide gives its loop a negative extent),
 * as a causal mask over fewer keys than queries leaves whole query tiles without a key. */
class WindowSum : public GridKernel<WindowSum> {
public:
    GeneratorParam<int> C{"C", 20, 0, 1 << 20};
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        RDom k(0, in.dim(1).extent());
        k.where(k.x <= y - int(C));
        acc(x, y) = 0.0f;
        acc(x, y) += in(x, k);
        out(x, y) = acc(x, y);
        shape(in, W, H);
        shape(out, W, H);
    }
    void schedule() override {
        out.tile(x, y, xo, yo, xi, yi, tx(), ty(),
                 tail.value() == "guard" ? TailStrategy::GuardWithIf : TailStrategy::Auto)
            .fuse(xo, yo, t)
            .map_to_cores(t);
        acc.compute_at(out, t);
        Func::staged(in, acc).compute_at(out, t).async_copy();
        out.async_copy();
    }

private:
    Func acc{"acc"};
};
TANDEM_REGISTER_GENERATOR(WindowSum, window_sum)

/** A generator that says nothing about its buffers, Halide's default: out(x, y) = 2 in(x, y) + 1
 * at any W x H the call brings (runtime extents, min 0, dense). */
class Undeclared : public Generator<Undeclared> {
public:
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override { out(x, y) = in(x, y) * 2.0f + 1.0f; }
    void schedule() override {
        out.tile(x, y, xo, yo, xi, yi, 32, 4).fuse(xo, yo, t).map_to_cores(t);
        Func::staged(in, out).compute_at(out, t).async_copy().multi_buffer(2);
        out.async_copy();
    }

private:
    Var x{"x"}, y{"y"}, xo{"xo"}, yo{"yo"}, xi{"xi"}, yi{"yi"}, t{"t"};
};
TANDEM_REGISTER_GENERATOR(Undeclared, undeclared)

} // namespace
