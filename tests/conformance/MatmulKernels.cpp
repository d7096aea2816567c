// Conformance: matrix multiplies as users write them (outside apps/, the public headers only): a
// linear layer with PyTorch's N x K weight (the "NT" GEMM) and a GEMM whose epilogue adds a bias or
// a residual, read from DRAM without staging (the compiler stages them). bf16 or f16 operands
// (in) with f32 accumulation, FP8 operands (e4m3, e5m2: uint8 tensors of their bits, read by
// tandem::from_e4m3 / from_e5m2) with f32 accumulation and rowwise scales, as torch._scaled_mm
// takes them, or int8 operands with int32 accumulation; an f32 output, one rounded to bf16 or
// f16, or the int32 sums (out_type); one schedule for every target (schedule=: pipelined, or
// warp-specialized where the target has it).
#include "tandem/Generator.h"

#include <cmath>

using namespace tandem;

namespace {

/** A matmul's schedule=...: pipelined (one role copies and computes, a ring of stages),
 * ws_pingpong (a producer and two consumers taking tiles in turn) or ws_cooperative (Hopper: two
 * consumer warpgroups on each tile), as a user tunes one for a GPU. */
void pipeline(Func &out, const std::string &schedule) {
    if (schedule == "pipelined")
        return;
    out.warp_specialize();
    if (schedule == "ws_pingpong")
        out.ping_pong();
    else
        out.cooperative();
}

/** out(n, m) = sum_k x(k, m) * w(k, n) (+ bias(n)) (+ residual(n, m)) (epilogue scales: times
 * scale_x(m) * scale_w(n), the dequantization of FP8 or int8 operands); w is N x K with layout nt
 * (row n holds its K weights, as torch.nn.Linear's), K x N with layout nn; layouts tn and tt take
 * x transposed (K x M: row k holds the M values of column k, x(m, k)). */
class Linear : public Generator<Linear> {
public:
    GeneratorParam<int> M{"M", 256, 1, 1 << 20};
    GeneratorParam<int> N{"N", 256, 1, 1 << 20};
    GeneratorParam<int> K{"K", 256, 1, 1 << 20};
    GeneratorParam<int> TM{"TM", 128, 1, 4096, Tunable<int>{16, 64, 128}};
    GeneratorParam<int> TN{"TN", 128, 1, 4096, Tunable<int>{64, 128, 256}};
    // 0: 128 bytes of K (64 16-bit or 128 8-bit values)
    GeneratorParam<int> TK{"TK", 0, 0, 4096, Tunable<int>{0, 128, 256, 512}};
    GeneratorParam<std::string> layout{"layout", "nt", {"nt", "nn", "tn", "tt"}};
    GeneratorParam<std::string> epilogue{
        "epilogue", "bias", {"none", "bias", "residual", "scales"}};
    // the operands' type; e4m3 and e5m2 are FP8 (x e4m3 and w e5m2 with "e4m3_e5m2")
    GeneratorParam<std::string> in{
        "in", "bf16", {"bf16", "f16", "i8", "e4m3", "e5m2", "e4m3_e5m2"}};
    GeneratorParam<std::string> out_type{"out_type", "f32", {"f32", "bf16", "f16", "i32"}};
    // pipeline(): pipelined (a ring of `stages`), ws_pingpong or ws_cooperative (Hopper).
    GeneratorParam<std::string> pipelining{"schedule",
                                           "pipelined",
                                           {"pipelined", "ws_pingpong", "ws_cooperative"},
                                           Tunable<std::string>{}};
    GeneratorParam<int> stages{"stages", 2, 1, 16, Tunable<int>{2, 3, 4}};
    // Split-K (U > 1): K in U slices (the last one shorter where U does not divide K), rfactor
    // over them into partial sums part(n, m, u), a kernel of its own whose tiles are (n, m, u);
    // a second kernel sums the slices and applies the epilogue.
    GeneratorParam<int> U{"U", 1, 1, 1 << 10, Tunable<int>{1, 2, 4, 8, 16}};
    // runtime: M (the tokens of a step) is the buffers' at each call (M an estimate); N, K static.
    GeneratorParam<bool> runtime{"runtime", false};
    // cluster: neighbouring tiles of a row (which read the same rows of x) in clusters of that
    // many units, where the target takes cluster(n) (Hopper with warp-specialised schedules: x's
    // tile multicast; the ZPU's mesh columns: broadcast); one kernel of U = 1.
    GeneratorParam<int> cluster{"cluster", 1, 1, 8};
    Input<Buffer<void, 2>> x{"x"}, w{"w"};
    Input<Buffer<float, 1>> bias{"bias"};
    Input<Buffer<float, 2>> residual{"residual"};
    Input<Buffer<float, 1>> scale_x{"scale_x"}, scale_w{"scale_w"};
    Output<Buffer<void, 2>> out{"out"};

    void generate() override {
        const bool nt = layout.value()[1] == 't', x_t = layout.value()[0] == 't';
        const bool int8 = in.value() == "i8";
        const bool fp8 = in.value()[0] == 'e'; // bits in uint8, read as FP8
        for (Input<Buffer<void, 2>> *operand : {&x, &w})
            operand->set_type(int8                  ? Halide::Int(8)
                              : fp8                 ? Halide::UInt(8)
                              : in.value() == "f16" ? Halide::Float(16)
                                                    : Halide::BFloat(16));
        // int8 operands multiply exactly into an int32 accumulator; the epilogue dequantizes
        // (to f32) where it adds a float bias or residual.
        const Halide::Type acc_type = int8 ? Halide::Int(32) : Halide::Float(32);
        if (out_type.value() == "i32" && !int8) {
            throw Error("linear: out_type=i32 holds the exact int32 sums of int8 operands (in=i8); "
                        "a float sum converted to int32 is undefined past its range");
        }
        RDom k(0, K);
        acc(n, m) = Halide::cast(acc_type, 0);
        const Expr xv = x_t ? x(m, k) : x(k, m), wv = nt ? w(k, n) : w(n, k);
        if (fp8) {
            const bool x_e4 = in.value() != "e5m2", w_e4 = in.value() == "e4m3";
            acc(n, m) +=
                (x_e4 ? from_e4m3(xv) : from_e5m2(xv)) * (w_e4 ? from_e4m3(wv) : from_e5m2(wv));
        } else {
            acc(n, m) += Halide::cast(acc_type, xv) * Halide::cast(acc_type, wv);
        }
        Expr v = acc(n, m);
        if (epilogue.value() == "bias")
            v = Halide::cast<float>(v) + bias(n);
        if (epilogue.value() == "residual")
            v = Halide::cast<float>(v) + residual(n, m);
        if (epilogue.value() == "scales")
            v = Halide::cast<float>(v) * scale_x(m) * scale_w(n);
        out(n, m) = out_type.value() == "i32"    ? Halide::cast<int32_t>(v)
                    : out_type.value() == "f32"  ? Halide::cast<float>(v)
                    : out_type.value() == "bf16" ? Halide::cast(Halide::BFloat(16), v)
                                                 : Halide::cast(Halide::Float(16), v);
        dense_shape(x, x_t ? std::vector<int>{M, K} : std::vector<int>{K, M}, runtime, {!x_t, x_t});
        dense_shape(w, nt ? std::vector<int>{K, N} : std::vector<int>{N, K});
        dense_shape(bias, {N});
        dense_shape(residual, {N, M}, runtime, {true, false});
        dense_shape(scale_x, {M}, runtime, {false});
        dense_shape(scale_w, {N});
        dense_shape(out.output_buffer(), {N, M}, runtime, {true, false});
        k_x = k.x;
    }

    void schedule() override {
        Var no("no"), mo("mo"), ni("ni"), mi("mi"), t("t");
        out.tile(n, m, no, mo, ni, mi, TN, TM, TailStrategy::GuardWithIf)
            .fuse(no, mo, t)
            .map_to_cores(t)
            .async_copy();
        acc.compute_at(out, t);
        if (U == 1) {
            tile_mma(acc, k_x);
            pipeline(out, pipelining);
            if (cluster > 1 && get_target().takes("cluster"))
                out.cluster(cluster);
            return;
        }
        // Split-K: the partial sums of each slice of K, then acc sums them (over `slice`).
        Var tu("tu");
        Func partial = split_k();
        acc.update().reorder(n, m, slice);
        Func part = partial.in();
        part.in(acc).compute_at(acc, slice).async_copy().multi_buffer(2);
        part.compute_root()
            .tile(n, m, no, mo, ni, mi, TN, TM, TailStrategy::GuardWithIf)
            .fuse(no, mo, t)
            .fuse(t, u, tu)
            .map_to_cores(tu)
            .async_copy();
        partial.compute_at(part, tu);
        tile_mma(partial, k_slice);
        pipeline(part, pipelining);
    }

    /** The reference sums in split-K's order (U > 1): each slice, then the slices (a sum of
     * floats in another order rounds otherwise, which the comparison tolerates, but not where an
     * output rounds to infinity or past int32's range on one side only). */
    void reference_schedule() override {
        if (U > 1)
            split_k();
    }

    /** acc's sum over K in U slices, rfactor'd into the Func of their partial sums. */
    Func split_k() {
        acc.update().split(k_x, slice, k_slice, (int(K) + U - 1) / U, TailStrategy::GuardWithIf);
        return acc.update().rfactor(slice, u);
    }

    /** The tile MMA of `f`'s update over `k` (the staged operands in a ring of `stages`). */
    void tile_mma(Func &f, const Halide::RVar &k) {
        RVar ko("ko"), ki("ki");
        const bool eight_bit = in.value() != "bf16" && in.value() != "f16";
        f.update()
            .split(k, ko, ki,
                   TK > 0      ? int(TK)
                   : eight_bit ? 128
                               : 64,
                   TailStrategy::GuardWithIf)
            .reorder(n, m, ki, ko)
            .tile_mma();
        for (Input<Buffer<void, 2>> *operand : {&x, &w}) {
            Func staged = Func::staged(*operand, f);
            staged.compute_at(f, ko).async_copy().multi_buffer(stages);
        }
    }

private:
    Var n{"n"}, m{"m"}, u{"u"};
    RVar slice{"slice"}, k_slice{"k_slice"};
    Func acc{"acc"};
    Halide::RVar k_x;
};
TANDEM_REGISTER_GENERATOR(Linear, linear)

/** A batched matmul, as attention heads and grouped experts write it: out(n, m, b) =
 * sum_k x(k, m, b) * w(k, n, b) (layout nt: w's rows are N rows of K, as torch.bmm(x, w^T)),
 * w(n, k, b) with layout nn; B batches of M x N x K, the batch a third dimension of every
 * tensor (runtime: a count known at the call only); f32 accumulation and output. Tiles of every
 * batch spread over the cores together. */
class BatchedMatmul : public Generator<BatchedMatmul> {
public:
    GeneratorParam<int> B{"B", 4, 1, 1 << 16};
    GeneratorParam<int> M{"M", 128, 1, 1 << 20};
    GeneratorParam<int> N{"N", 128, 1, 1 << 20};
    GeneratorParam<int> K{"K", 64, 1, 1 << 20};
    GeneratorParam<int> TM{"TM", 128, 1, 4096};
    GeneratorParam<int> TN{"TN", 128, 1, 4096};
    GeneratorParam<int> TK{"TK", 64, 1, 4096};
    GeneratorParam<std::string> layout{"layout", "nt", {"nt", "nn"}};
    // runtime: the batch count is the buffers' at each call (B an estimate); M, N, K static.
    GeneratorParam<bool> runtime{"runtime", false};
    // pipeline(): pipelined (a ring of `stages`), ws_pingpong or ws_cooperative (Hopper).
    GeneratorParam<std::string> pipelining{
        "schedule", "pipelined", {"pipelined", "ws_pingpong", "ws_cooperative"}};
    GeneratorParam<int> stages{"stages", 2, 1, 16};
    Input<Buffer<bfloat16_t, 3>> x{"x"}, w{"w"};
    Output<Buffer<float, 3>> out{"out"};

    void generate() override {
        const bool nt = layout.value() == "nt";
        RDom k(0, K);
        acc(n, m, b) = 0.0f;
        acc(n, m, b) +=
            Halide::cast<float>(x(k, m, b)) * Halide::cast<float>(nt ? w(k, n, b) : w(n, k, b));
        out(n, m, b) = acc(n, m, b);
        const std::vector<bool> matrix = {true, true, false}; // static but for the batch
        dense_shape(x, {K, M, B}, runtime, matrix);
        dense_shape(w, nt ? std::vector<int>{K, N, B} : std::vector<int>{N, K, B}, runtime, matrix);
        dense_shape(out.output_buffer(), {N, M, B}, runtime, matrix);
        k_x = k.x;
    }

    void schedule() override {
        Var no("no"), mo("mo"), ni("ni"), mi("mi"), t("t"), tb("tb");
        RVar ko("ko"), ki("ki");
        out.tile(n, m, no, mo, ni, mi, TN, TM, TailStrategy::GuardWithIf)
            .fuse(no, mo, t)
            .fuse(t, b, tb)
            .map_to_cores(tb)
            .async_copy();
        acc.compute_at(out, tb);
        acc.update()
            .split(k_x, ko, ki, TK, TailStrategy::GuardWithIf)
            .reorder(n, m, ki, ko)
            .tile_mma();
        for (Input<Buffer<bfloat16_t, 3>> *operand : {&x, &w}) {
            Func tile = Func::staged(*operand, acc);
            tile.compute_at(acc, ko).async_copy().multi_buffer(stages);
        }
        pipeline(out, pipelining);
    }

private:
    Var n{"n"}, m{"m"}, b{"b"};
    Func acc{"acc"};
    Halide::RVar k_x;
};
TANDEM_REGISTER_GENERATOR(BatchedMatmul, batched_matmul)

/** Split-K written by hand, as a user can today in two kernels: the first computes the partial
 * sums of out(n, m) = sum_k x(k, m) * w(k, n) (layout nt) over U slices of K, part(n, m, u) =
 * sum over the K / U values of k in slice u (U must divide K), each (tile, slice) on a core of
 * its own, as batched_matmul spreads its batches; the second sums the slices (column_sum over U
 * rows of N * M values). benchmarks/split_k_bound.sh times the pair against linear. */
class SplitKPartials : public Generator<SplitKPartials> {
public:
    GeneratorParam<int> M{"M", 16, 1, 1 << 20};
    GeneratorParam<int> N{"N", 256, 1, 1 << 20};
    GeneratorParam<int> K{"K", 256, 1, 1 << 20};
    GeneratorParam<int> U{"U", 4, 1, 1 << 10}; // the slices of K
    GeneratorParam<int> TM{"TM", 64, 1, 4096};
    GeneratorParam<int> TN{"TN", 128, 1, 4096};
    GeneratorParam<int> TK{"TK", 64, 1, 4096};
    // pipeline(): pipelined (a ring of `stages`), ws_pingpong or ws_cooperative (Hopper).
    GeneratorParam<std::string> pipelining{
        "schedule", "pipelined", {"pipelined", "ws_pingpong", "ws_cooperative"}};
    GeneratorParam<int> stages{"stages", 2, 1, 16};
    Input<Buffer<bfloat16_t, 2>> x{"x"}, w{"w"};
    Output<Buffer<float, 3>> part{"part"};

    void generate() override {
        if (K % U != 0) {
            throw Error("split_k_partials: U = " + std::to_string(int(U)) +
                        " slices must divide K = " + std::to_string(int(K)));
        }
        const int slice = K / U;
        RDom k(0, slice);
        acc(n, m, u) = 0.0f;
        acc(n, m, u) +=
            Halide::cast<float>(x(u * slice + k, m)) * Halide::cast<float>(w(u * slice + k, n));
        part(n, m, u) = acc(n, m, u);
        dense_shape(x, {K, M});
        dense_shape(w, {K, N});
        dense_shape(part.output_buffer(), {N, M, U});
        k_x = k.x;
    }

    void schedule() override {
        Var no("no"), mo("mo"), ni("ni"), mi("mi"), t("t"), tu("tu");
        RVar ko("ko"), ki("ki");
        part.tile(n, m, no, mo, ni, mi, TN, TM, TailStrategy::GuardWithIf)
            .fuse(no, mo, t)
            .fuse(t, u, tu)
            .map_to_cores(tu)
            .async_copy();
        acc.compute_at(part, tu);
        acc.update()
            .split(k_x, ko, ki, TK, TailStrategy::GuardWithIf)
            .reorder(n, m, ki, ko)
            .tile_mma();
        for (Input<Buffer<bfloat16_t, 2>> *operand : {&x, &w}) {
            Func tile = Func::staged(*operand, acc);
            tile.compute_at(acc, ko).async_copy().multi_buffer(stages);
        }
        pipeline(part, pipelining);
    }

private:
    Var n{"n"}, m{"m"}, u{"u"};
    Func acc{"acc"};
    Halide::RVar k_x;
};
TANDEM_REGISTER_GENERATOR(SplitKPartials, split_k_partials)

/** SwiGLU, the gated feed-forward layer of LLaMA-style models: out(n, m) =
 * silu(sum_k x(k, m) * w1(k, n)) * sum_k x(k, m) * w3(k, n), with w1 and w3 N x K (PyTorch's
 * linear weights); two matmuls over the same x whose accumulators meet in one epilogue. */
class SwiGLU : public Generator<SwiGLU> {
public:
    GeneratorParam<int> M{"M", 128, 1, 1 << 20};
    GeneratorParam<int> N{"N", 128, 1, 1 << 20};
    GeneratorParam<int> K{"K", 128, 1, 1 << 20};
    GeneratorParam<int> TM{"TM", 64, 1, 4096};
    GeneratorParam<int> TN{"TN", 64, 1, 4096};
    GeneratorParam<int> TK{"TK", 64, 1, 4096};
    // pipeline(): pipelined, ws_pingpong or ws_cooperative (Hopper).
    GeneratorParam<std::string> pipelining{
        "schedule", "pipelined", {"pipelined", "ws_pingpong", "ws_cooperative"}};
    // One K loop for both matmuls (Halide's compute_with), x staged once for both, instead of a
    // K loop and a copy of x each.
    GeneratorParam<bool> share{"share", false};
    Input<Buffer<bfloat16_t, 2>> x{"x"}, w1{"w1"}, w3{"w3"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        RDom k(0, K);
        gate(n, m) = 0.0f;
        gate(n, m) += Halide::cast<float>(x(k, m)) * Halide::cast<float>(w1(k, n));
        up(n, m) = 0.0f;
        up(n, m) += Halide::cast<float>(x(k, m)) * Halide::cast<float>(w3(k, n));
        Expr g = gate(n, m);
        out(n, m) = g / (1.0f + Halide::exp(-g)) * up(n, m);
        dense_shape(x, {K, M});
        dense_shape(w1, {K, N});
        dense_shape(w3, {K, N});
        out.dim(0).set_bounds(0, N);
        out.dim(1).set_bounds(0, M).set_stride(N);
        k_x = k.x;
    }

    void schedule() override {
        Var no("no"), mo("mo"), ni("ni"), mi("mi"), t("t");
        out.tile(n, m, no, mo, ni, mi, TN, TM, TailStrategy::GuardWithIf)
            .fuse(no, mo, t)
            .map_to_cores(t)
            .async_copy();
        RVar ko("ko"), ki("ki");
        for (auto [acc, w] :
             {std::pair<Func *, Input<Buffer<bfloat16_t, 2>> *>{&gate, &w1}, {&up, &w3}}) {
            acc->compute_at(out, t);
            acc->update()
                .split(k_x, ko, ki, TK, TailStrategy::GuardWithIf)
                .reorder(n, m, ki, ko)
                .tile_mma();
            Func::staged(*w, *acc).compute_at(share ? gate : *acc, ko).async_copy().multi_buffer(2);
            if (!share)
                Func::staged(x, *acc).compute_at(*acc, ko).async_copy().multi_buffer(2);
        }
        if (share) {
            up.update().halide().compute_with(gate.update().halide(), ko);
            Halide::ImageParam xp = x;
            Func(xp.in({gate.halide(), up.halide()}))
                .compute_at(gate, ko)
                .async_copy()
                .multi_buffer(2);
        }
        pipeline(out, pipelining);
    }

private:
    Var n{"n"}, m{"m"};
    Func gate{"gate"}, up{"up"};
    Halide::RVar k_x;
};
TANDEM_REGISTER_GENERATOR(SwiGLU, swiglu)

/** Two chained matmuls, a feed-forward layer in one kernel: out(n, m) = sum_j act(h(j, m)) *
 * w2(n, j), h(j, m) = sum_k x(k, m) * w1(k, j); the second matmul's operand is made on chip from
 * the first's accumulator, one block of TJ hidden units at a time (attention's structure, without
 * the softmax). */
class MatmulChain : public Generator<MatmulChain> {
public:
    GeneratorParam<int> M{"M", 64, 1, 1 << 20};
    GeneratorParam<int> N{"N", 64, 1, 1 << 20};
    GeneratorParam<int> J{"J", 128, 1, 1 << 20};
    GeneratorParam<int> K{"K", 64, 1, 1 << 20};
    GeneratorParam<int> TM{"TM", 64, 1, 4096};
    GeneratorParam<int> TN{"TN", 64, 1, 4096};
    GeneratorParam<int> TJ{"TJ", 64, 1, 4096};
    GeneratorParam<int> TK{"TK", 64, 1, 4096};
    GeneratorParam<std::string> act{"act", "relu", {"relu", "none"}};
    // pipeline(): pipelined, ws_pingpong or ws_cooperative (Hopper).
    GeneratorParam<std::string> pipelining{
        "schedule", "pipelined", {"pipelined", "ws_pingpong", "ws_cooperative"}};
    Input<Buffer<bfloat16_t, 2>> x{"x"}, w1{"w1"}, w2{"w2"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        RDom k(0, K), j(0, J);
        h(jj, m) = 0.0f;
        h(jj, m) += Halide::cast<float>(x(k, m)) * Halide::cast<float>(w1(k, jj));
        Expr v = h(jj, m);
        p(jj, m) =
            Halide::cast(Halide::BFloat(16), act.value() == "relu" ? Halide::max(v, 0.0f) : v);
        acc(n, m) = 0.0f;
        acc(n, m) += Halide::cast<float>(p(j, m)) * Halide::cast<float>(w2(n, j));
        out(n, m) = acc(n, m);
        dense_shape(x, {K, M});
        dense_shape(w1, {K, J});
        dense_shape(w2, {N, J});
        out.dim(0).set_bounds(0, N);
        out.dim(1).set_bounds(0, M).set_stride(N);
        k_x = k.x;
        j_x = j.x;
    }

    void schedule() override {
        Var no("no"), mo("mo"), ni("ni"), mi("mi"), t("t");
        RVar jo("jo"), ji("ji"), ko("ko"), ki("ki");
        out.tile(n, m, no, mo, ni, mi, TN, TM, TailStrategy::GuardWithIf)
            .fuse(no, mo, t)
            .map_to_cores(t)
            .async_copy();
        acc.compute_at(out, t);
        acc.update()
            .split(j_x, jo, ji, TJ, TailStrategy::GuardWithIf)
            .reorder(n, m, ji, jo)
            .tile_mma();
        Func::staged(w2, acc).compute_at(acc, jo).async_copy().multi_buffer(2);
        p.compute_at(acc, jo);
        h.compute_at(acc, jo);
        h.update()
            .split(k_x, ko, ki, TK, TailStrategy::GuardWithIf)
            .reorder(jj, m, ki, ko)
            .tile_mma();
        for (Input<Buffer<bfloat16_t, 2>> *operand : {&x, &w1})
            Func::staged(*operand, h).compute_at(h, ko).async_copy().multi_buffer(2);
        pipeline(out, pipelining);
    }

private:
    Var n{"n"}, m{"m"}, jj{"jj"};
    Func h{"h"}, p{"p"}, acc{"acc"};
    Halide::RVar k_x, j_x;
};
TANDEM_REGISTER_GENERATOR(MatmulChain, matmul_chain)

/** What attention's generators share: q (S x D per head), k and v (L x D per key-value head), bf16,
 * for B batches of H query heads sharing H / KV key-value heads (grouped-query); f32 out; query
 * tiles of TM rows, Q K^T in K tiles of TK. */
template <class G> class AttentionKernel : public Generator<G> {
public:
    GeneratorParam<int> S{"S", 128, 1, 1 << 20}; // query rows
    GeneratorParam<int> L{"L", 128, 1, 1 << 20}; // keys
    GeneratorParam<int> D{"D", 64, 1, 1 << 20};  // head dim
    GeneratorParam<int> H{"H", 1, 1, 1 << 10};   // query heads
    GeneratorParam<int> KV{"KV", 1, 1, 1 << 10}; // key-value heads (dividing H)
    GeneratorParam<int> B{"B", 1, 1, 1 << 16};   // batches
    GeneratorParam<int> TM{"TM", 64, 1, 4096};
    GeneratorParam<int> TK{"TK", 64, 1, 4096}; // the head dim's K tiles of Q K^T
    // causal: query s sees keys j <= s + L - S (the last query row sees every key)
    GeneratorParam<bool> causal{"causal", false};
    Input<Buffer<bfloat16_t, 4>> q{"q"}, k{"k"}, v{"v"};
    Output<Buffer<float, 4>> out{"out"};

protected:
    void check_shape(const std::string &generator) {
        if (int(H) % int(KV) != 0)
            throw Error(generator + ": H = " + std::to_string(int(H)) +
                        " query heads do not share KV = " + std::to_string(int(KV)) +
                        " key-value heads evenly");
        // (The mask is aligned at the bottom right: query s sees keys j <= s + L - S.)
        if (causal && int(L) < int(S))
            throw Error(generator + ": causal attention over L = " + std::to_string(int(L)) +
                        " keys for S = " + std::to_string(int(S)) + " queries leaves the first " +
                        std::to_string(int(S) - int(L)) +
                        " query rows no key to attend to (a softmax over nothing); give L >= S");
    }
};

/** Attention as the textbook writes it: out(n, s, h, b) = sum_j P(j, s, h, b) * v(n, j, h / G, b)
 * with P = softmax over the keys j of scale * sum_d q(d, s, h, b) * k(d, j, h / G, b) (the row's
 * max subtracted before exp), for B batches of H query heads sharing H / G key-value heads
 * (grouped-query attention: G = H / KV query heads per key-value head); q is S x D per head, k
 * and v L x D (rows of D), bf16; P rounded to bf16 for the second matmul, f32 out. The schedule
 * keeps a query tile's whole row of keys on chip (TJ = L: one block), so softmax needs no
 * rewrite; FlashAttention's online softmax (issue 34) is what lets the keys come in blocks. */
class Attention : public AttentionKernel<Attention> {
public:
    // TJ > 0: the keys in blocks of TJ by the online softmax (FlashAttention, issue 34); 0: a
    // query tile's whole row of keys on chip
    GeneratorParam<int> TJ{"TJ", 0, 0, 1 << 20};
    // runtime: the query rows and the batch count are the buffers' at each call (S and B
    // estimates); L, D and H static
    GeneratorParam<bool> runtime{"runtime", false};
    GeneratorParam<std::string> pipelining{
        "schedule", "pipelined", {"pipelined", "ws_pingpong", "ws_cooperative"}};
    // With TJ: where the online softmax's exponentials live. "block": computed once per key
    // block into a tile of their own (one exp per element: the NPUs' choice); "inline":
    // recomputed where the block's row sum and P read them (two exps per element, but on hopper
    // both stay in the scores' wgmma fragments, with no tile in shared memory between them)
    GeneratorParam<std::string> exps{"exps", "block", {"block", "inline"}};
    // With TJ: where the query tile's copy lives. "block": staged with each key block's K chunks
    // (loaded again per block); "tile": staged once per query tile (FlashAttention's Q, loaded
    // once), the K chunks of the head dim read from it
    GeneratorParam<std::string> q_at{"q_at", "block", {"block", "tile"}};

    void generate() override {
        check_shape("attention");
        RDom d(0, D), j(0, L);
        const float scale = 1.0f / std::sqrt(float(int(D)));
        const Expr kv = h / (int(H) / int(KV)); // the key-value head of query head h
        scores(jj, s, h, b) = 0.0f;
        scores(jj, s, h, b) +=
            Halide::cast<float>(q(d, s, h, b)) * Halide::cast<float>(k(d, jj, kv, b));
        // The scaled scores, -inf where a causal mask hides the key (exp of it is 0).
        auto scaled = [&](const Expr &key) {
            Expr x = scores(key, s, h, b) * scale;
            return causal ? Halide::select(key <= s + (int(L) - q.dim(1).extent()), x,
                                           Halide::Float(32).min())
                          : x;
        };
        row_max(s, h, b) = Halide::Float(32).min();
        row_max(s, h, b) = Halide::max(row_max(s, h, b), scaled(j));
        e(jj, s, h, b) = Halide::exp(scaled(jj) - row_max(s, h, b));
        row_sum(s, h, b) = 0.0f;
        row_sum(s, h, b) += e(j, s, h, b);
        p(jj, s, h, b) = Halide::cast(Halide::BFloat(16), e(jj, s, h, b) / row_sum(s, h, b));
        acc(n, s, h, b) = 0.0f;
        acc(n, s, h, b) += Halide::cast<float>(p(j, s, h, b)) * Halide::cast<float>(v(n, j, kv, b));
        out(n, s, h, b) = acc(n, s, h, b);
        const std::vector<bool> keys = {true, true, true, false},
                                queries = {true, false, true, false};
        dense_shape(q, {D, S, H, B}, runtime, queries);
        dense_shape(k, {D, L, KV, B}, runtime, keys);
        dense_shape(v, {D, L, KV, B}, runtime, keys);
        dense_shape(out.output_buffer(), {D, S, H, B}, runtime, queries);
        d_x = d.x;
        j_x = j.x;
    }

    void schedule() override {
        Var no("no"), mo("mo"), ni("ni"), mi("mi"), t("t"), th("th"), tb("tb");
        RVar jo("jo"), ji("ji"), ko("ko"), ki("ki");
        out.tile(n, s, no, mo, ni, mi, D, TM, TailStrategy::GuardWithIf)
            .fuse(no, mo, t)
            .fuse(t, h, th)
            .fuse(th, b, tb)
            .map_to_cores(tb)
            .async_copy();
        if (TJ > 0) {
            // FlashAttention: the same algorithm, the keys in blocks and the softmax online.
            OnlineSoftmax fa = acc.update().online_softmax(j_x, TJ, out);
            fa.state.compute_at(out, tb);
            for (Func f : fa.per_block()) {
                if (f.name() != fa.exps.name() || exps.value() == "block")
                    f.compute_at(fa.state, fa.block);
            }
            scores.compute_at(fa.state, fa.block);
            Func::staged(v, fa.block_acc)
                .compute_at(fa.state, fa.block)
                .async_copy()
                .multi_buffer(2);
        } else {
            acc.compute_at(out, tb);
            acc.update()
                .split(j_x, jo, ji, L, TailStrategy::GuardWithIf)
                .reorder(n, s, ji, jo)
                .tile_mma();
            Func::staged(v, acc).compute_at(acc, jo).async_copy().multi_buffer(2);
            for (Func f : {p, row_sum, e, row_max, scores})
                f.compute_at(acc, jo);
        }
        scores.update()
            .split(d_x, ko, ki, TK, TailStrategy::GuardWithIf)
            .reorder(jj, s, ki, ko)
            .tile_mma();
        Func::staged(k, scores).compute_at(scores, ko).async_copy().multi_buffer(2);
        if (TJ > 0 && q_at.value() == "tile")
            Func::staged(q, scores).compute_at(out, tb).async_copy();
        else
            Func::staged(q, scores).compute_at(scores, ko).async_copy().multi_buffer(2);
        pipeline(out, pipelining);
    }

private:
    Var n{"n"}, s{"s"}, jj{"jj"}, h{"h"}, b{"b"};
    Func scores{"scores"}, row_max{"row_max"}, e{"e"}, row_sum{"row_sum"}, p{"p"}, acc{"acc"};
    Halide::RVar d_x, j_x;
};
TANDEM_REGISTER_GENERATOR(Attention, attention)

/** Attention as FlashAttention computes it, written by hand with Halide's own tools: the keys in
 * blocks of TJ and an online softmax (the running max and sum, the partial output rescaled when
 * the max grows), the same math as `attention` (P rounded to bf16, f32 out). Per key block c:
 * the block's scores, their row max bmax, pb = exp(scaled - bmax),
 * its row sum and pv = bf16(pb) * v (the second matmul); then the state of each output element,
 * a Tuple (partial output, running max, running sum), takes the block: m' = max(m, bmax),
 * o' = o exp(m - m') + pv exp(bmax - m'), l' likewise (the running max and sum held once per
 * element: Halide 14 cannot fuse the scans of two Funcs one of which reads the other). A max of
 * -inf (a block or a start that a mask hides entirely) is subtracted as 0, FlashAttention's
 * guard. The last block starts at L - TJ, its keys that the block before took masked, so every
 * block is TJ keys inside the tensors (no tail). The schedule keeps one key block on chip. */
class FlashAttention : public AttentionKernel<FlashAttention> {
public:
    GeneratorParam<int> TJ{"TJ", 64, 1, 4096}; // keys per block

    void generate() override {
        check_shape("flash_attention");
        const int tj = std::min(int(TJ), int(L)), blocks = (int(L) + tj - 1) / tj;
        RDom d(0, D), ji(0, tj), rc(0, blocks);
        const float scale = 1.0f / std::sqrt(float(int(D)));
        const Expr kv = h / (int(H) / int(KV));
        const Expr ninf = Halide::Float(32).min();
        // Block c's keys start at c TJ, the last block's at L - TJ (it overlaps the one before:
        // the keys that block took are masked here), so every block reads TJ keys inside L.
        auto start = [&](const Expr &block) { return Halide::min(block * tj, int(L) - tj); };
        scores(jj, s, h, b) = 0.0f;
        scores(jj, s, h, b) +=
            Halide::cast<float>(q(d, s, h, b)) * Halide::cast<float>(k(d, jj, kv, b));
        // Whether block `block` takes the key: not an earlier block's, and not hidden by the
        // causal mask.
        auto seen = [&](const Expr &key, const Expr &block) {
            Expr in = key >= block * tj;
            return causal ? in && key <= s + (int(L) - int(S)) : in;
        };
        auto scaled = [&](const Expr &key) { return scores(key, s, h, b) * scale; };
        auto finite = [&](const Expr &m) { return Halide::select(m == ninf, 0.0f, m); };
        bmax(s, c, h, b) = ninf;
        bmax(s, c, h, b) = Halide::max(
            bmax(s, c, h, b), Halide::select(seen(start(c) + ji, c), scaled(start(c) + ji), ninf));
        // The keys the block does not take are multiplied by 0, not selected out: Halide would
        // not compute the scores a select leaves out, and the block's matmul would not start at
        // its first key. Below the block's max, exp(min(x - max, 0)) is exp(x - max).
        pb(jj, s, c, h, b) = Halide::exp(Halide::min(scaled(jj) - finite(bmax(s, c, h, b)), 0.0f)) *
                             Halide::select(seen(jj, c), 1.0f, 0.0f);
        ph(jj, s, c, h, b) = Halide::cast(Halide::BFloat(16), pb(jj, s, c, h, b));
        rs(s, c, h, b) = 0.0f;
        rs(s, c, h, b) += pb(start(c) + ji, s, c, h, b);
        pv(n, s, c, h, b) = 0.0f;
        pv(n, s, c, h, b) += Halide::cast<float>(ph(start(c) + ji, s, c, h, b)) *
                             Halide::cast<float>(v(n, start(c) + ji, kv, b));
        state(n, s, h, b) = {0.0f, ninf, 0.0f};
        Expr m = state(n, s, h, b)[1], block_max = bmax(s, rc, h, b);
        Expr m_new = Halide::max(m, block_max);
        Expr old_scale = Halide::exp(m - finite(m_new)),
             block_scale = Halide::exp(block_max - finite(m_new));
        state(n, s, h, b) = {state(n, s, h, b)[0] * old_scale + pv(n, s, rc, h, b) * block_scale,
                             m_new,
                             state(n, s, h, b)[2] * old_scale + rs(s, rc, h, b) * block_scale};
        out(n, s, h, b) = state(n, s, h, b)[0] / state(n, s, h, b)[2];
        const std::vector<bool> queries = {true, false, true, false};
        dense_shape(q, {D, S, H, B}, false, queries);
        dense_shape(k, {D, L, KV, B}, false, queries);
        dense_shape(v, {D, L, KV, B}, false, queries);
        dense_shape(out.output_buffer(), {D, S, H, B}, false, queries);
        d_x = d.x;
        ji_x = ji.x;
        rc_x = rc.x;
    }

    void schedule() override {
        Var no("no"), mo("mo"), ni("ni"), mi("mi"), t("t"), th("th"), tb("tb");
        RVar ko("ko"), ki("ki");
        out.tile(n, s, no, mo, ni, mi, D, TM, TailStrategy::GuardWithIf)
            .fuse(no, mo, t)
            .fuse(t, h, th)
            .fuse(th, b, tb)
            .map_to_cores(tb)
            .async_copy();
        state.compute_at(out, tb);
        state.update().reorder(n, s, rc_x);
        for (Func f : {pv, rs, ph, pb, bmax, scores})
            f.compute_at(state, rc_x);
        pv.update().reorder(n, s, ji_x).tile_mma();
        Func::staged(v, pv).compute_at(state, rc_x).async_copy().multi_buffer(2);
        scores.update()
            .split(d_x, ko, ki, TK, TailStrategy::GuardWithIf)
            .reorder(jj, s, ki, ko)
            .tile_mma();
        for (Input<Buffer<bfloat16_t, 4>> *operand : {&q, &k})
            Func::staged(*operand, scores).compute_at(scores, ko).async_copy().multi_buffer(2);
    }

private:
    Var n{"n"}, s{"s"}, jj{"jj"}, c{"c"}, h{"h"}, b{"b"};
    Func scores{"scores"}, bmax{"bmax"}, pb{"pb"}, ph{"ph"}, rs{"rs"}, pv{"pv"}, state{"state"};
    Halide::RVar d_x, ji_x, rc_x;
};
TANDEM_REGISTER_GENERATOR(FlashAttention, flash_attention)

} // namespace
