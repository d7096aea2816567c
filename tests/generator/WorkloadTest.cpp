// A generator's workload counted from its algorithm (apps/Workload.cpp) against hand counts: a
// user's softmax (a transcendental, a division, two row reductions), the rmsnorm app (a row's
// value inside an element's definition counts once per row), the elementwise app and a linear layer
// (its multiply-accumulate is MACs); and the vector work each target's roofline weighs them with.
#include "App.h"
#include "Run.h"

#include <gtest/gtest.h>

using namespace tandem;

namespace {

class TinySoftmax : public Generator<TinySoftmax> {
public:
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        RDom k(0, in.dim(0).extent());
        mx(r) = Halide::Float(32).min();
        mx(r) = Halide::max(mx(r), in(k, r));
        e(c, r) = Halide::exp(in(c, r) - mx(r));
        sum(r) = 0.0f;
        sum(r) += e(k, r);
        out(c, r) = e(c, r) / sum(r);
        in.dim(0).set_bounds(0, 48);
        in.dim(1).set_bounds(0, 5).set_stride(48);
        out.dim(0).set_bounds(0, 48);
        out.dim(1).set_bounds(0, 5).set_stride(48);
    }

private:
    Var c{"c"}, r{"r"};
    Func mx{"mx"}, e{"e"}, sum{"sum"};
};
TANDEM_REGISTER_GENERATOR(TinySoftmax, workload_tiny_softmax)

TEST(Workload, SoftmaxCountsEachDefinitionOverItsDomain) {
    const apps::Workload w = apps::generator_workload("workload_tiny_softmax")(apps::Params());
    const double n = 48 * 5;
    // max per element (mx), sub and exp (e), add (sum), divide (out); the inits are constants.
    EXPECT_EQ(w.vector_flops, 5 * n);
    EXPECT_EQ(w.vector_transcendentals, n);
    EXPECT_EQ(w.vector_div_sqrt, n);
    EXPECT_EQ(w.vector_first_loads, n);
    EXPECT_EQ(w.vector_loads, 0);
    EXPECT_EQ(w.vector_stores, n);
    EXPECT_EQ(w.bytes, 8 * n);
    EXPECT_EQ(w.written_bytes, 4 * n); // of them, the output's
    EXPECT_EQ(w.macs, 0);
    // The ZPU charges exp 3, each first load and store 5: 3 arith + 3 + 1 + 5 + 5 per element.
    EXPECT_EQ(apps::vector_work(w, Target::parse("zpu")), 17 * n);
    // Ascend: exp and division at half rate (2 each); the roofline takes f32 (4 bytes) per unit.
    EXPECT_EQ(apps::vector_work(w, Target::parse("ascend")), 7 * n);
    // Hopper: exp and division at the SFU's 16 per clock against 128 FP32 lanes (8 each).
    EXPECT_EQ(apps::vector_work(w, Target::parse("hopper")), 19 * n);
    EXPECT_EQ(apps::roofline_bound(w, Target::parse("zpu")), "vector");
}

/** A linear layer with a bias: out(n, m) = sum_k x(k, m) * w(k, n) + bias(n), 24 x 16 x 40. */
class TinyLinear : public Generator<TinyLinear> {
public:
    Input<Buffer<float, 2>> x{"x"}, w{"w"};
    Input<Buffer<float, 1>> bias{"bias"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        RDom k(0, 40);
        acc(n, m) = 0.0f;
        acc(n, m) += x(k, m) * w(k, n);
        out(n, m) = acc(n, m) + bias(n);
        x.dim(0).set_bounds(0, 40);
        x.dim(1).set_bounds(0, 16).set_stride(40);
        w.dim(0).set_bounds(0, 40);
        w.dim(1).set_bounds(0, 24).set_stride(40);
        bias.dim(0).set_bounds(0, 24);
        out.dim(0).set_bounds(0, 24);
        out.dim(1).set_bounds(0, 16).set_stride(24);
    }

private:
    Var n{"n"}, m{"m"};
    Func acc{"acc"};
};
TANDEM_REGISTER_GENERATOR(TinyLinear, workload_tiny_linear)

TEST(Workload, AMultiplyAccumulateIsMacsNotVectorWork) {
    const apps::Workload w = apps::generator_workload("workload_tiny_linear")(apps::Params());
    const double out = 24 * 16;
    EXPECT_EQ(w.macs, out * 40);
    EXPECT_EQ(w.vector_flops, out); // the bias add
    // The epilogue reads each accumulator element once (x and w go to the tensor core only) and
    // the bias; it stores each element of out.
    EXPECT_EQ(w.vector_first_loads, out);
    EXPECT_EQ(w.vector_loads, 24);
    EXPECT_EQ(w.vector_stores, out);
    EXPECT_EQ(w.bytes, 4 * (40 * 16 + 40 * 24 + 24 + out));
}

/** Partial sums over 4 slices of K = 40: part(n, m, u) = sum over the slice of x(10 u + k, m) *
 * w(10 u + k, n). Halide's CSE makes the shared index a let of the definition. */
class SlicedLinear : public Generator<SlicedLinear> {
public:
    Input<Buffer<float, 2>> x{"x"}, w{"w"};
    Output<Buffer<float, 3>> part{"part"};

    void generate() override {
        RDom k(0, 10);
        acc(n, m, u) = 0.0f;
        acc(n, m, u) += x(u * 10 + k, m) * w(u * 10 + k, n);
        part(n, m, u) = acc(n, m, u);
        dense_shape(x, {40, 16});
        dense_shape(w, {40, 24});
        dense_shape(part.output_buffer(), {24, 16, 4});
    }

private:
    Var n{"n"}, m{"m"}, u{"u"};
    Func acc{"acc"};
};
TANDEM_REGISTER_GENERATOR(SlicedLinear, workload_sliced_linear)

TEST(Workload, AMultiplyAccumulateSharingAnIndexIsMacs) {
    const apps::Workload w = apps::generator_workload("workload_sliced_linear")(apps::Params());
    EXPECT_EQ(w.macs, 24 * 16 * 40);
    EXPECT_EQ(w.vector_flops, 0);
}

TEST(Workload, RmsnormCountsARowsValueOncePerRow) {
    apps::Params p;
    p.set("D", "64");
    p.set("R", "8");
    const apps::Workload w = apps::find_app("rmsnorm").workload(p);
    const double n = 64 * 8;
    // sum_sq: mul + add per element; out: x * w and the division per element, and per row
    // sum_sq / D, + eps and the square root (D is a constant).
    EXPECT_EQ(w.vector_flops, 4 * n + 3 * 8);
    EXPECT_EQ(w.vector_div_sqrt, n + 2 * 8);
    EXPECT_EQ(w.vector_first_loads, n);
    EXPECT_EQ(w.vector_loads, 64);
    EXPECT_EQ(w.bytes, 8 * n + 4 * 64);
}

TEST(Workload, ElementwiseCountsItsFourOperations) {
    apps::Params p;
    p.set("W", "32");
    p.set("H", "4");
    const apps::Workload w = apps::find_app("elementwise").workload(p);
    EXPECT_EQ(w.vector_flops, 4 * 128); // a * b + max(c, 0) * 0.5
    EXPECT_EQ(w.vector_loads, 2 * 128);
    EXPECT_EQ(w.bytes, 16 * 128);
}

// The apps' own counts name their fields: Workload grew int8_macs after macs, and positional
// initialisers had shifted gemm's and attention scores' bytes into their vector work.
TEST(Workload, GemmCountsMacsItsEpilogueAndItsBytes) {
    apps::Params p;
    p.set("M", "16");
    p.set("N", "64");
    p.set("K", "32");
    p.set("out", "bf16");
    p.set("epilogue", "none");
    const apps::Workload w = apps::find_app("gemm").workload(p);
    EXPECT_EQ(w.macs, 16 * 64 * 32);
    EXPECT_EQ(w.int8_macs, 0);
    EXPECT_EQ(w.vector_flops, 16 * 64); // the cast of the accumulator
    EXPECT_EQ(w.bytes, 2 * (16 * 32 + 32 * 64) + 2 * 16 * 64);
    EXPECT_EQ(w.written_bytes, 2 * 16 * 64);
}

TEST(Workload, AttentionScoresCountsMacsAndBytesOnly) {
    apps::Params p;
    p.set("Lq", "8");
    p.set("Lk", "16");
    p.set("D", "4");
    const apps::Workload w = apps::find_app("attention_scores").workload(p);
    EXPECT_EQ(w.macs, 8 * 16 * 4);
    EXPECT_EQ(w.int8_macs, 0);
    EXPECT_EQ(w.vector_flops, 0);
    EXPECT_EQ(w.bytes, 2 * (8 * 4 + 16 * 4) + 4 * 8 * 16);
    EXPECT_EQ(w.written_bytes, 4 * 8 * 16);
}

} // namespace
