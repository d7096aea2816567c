// attention_scores: S(j, i) = sum_d Q(d, i) * K(d, j), the Q K^T of attention (bf16 in, f32
// scores to a workspace). The founding request's kernel: Q resident on chip for a block of query
// rows, K tiles streamed (and transposed on the way into the cube), score tiles alternating
// accumulator slots. On Hopper (schedule ws_pingpong): GEMM-like tiles, Q and K tiles streamed
// through a ring by a producer warpgroup, K a K-major wgmma B operand (d innermost).
#include "App.h"

#include <algorithm>

namespace tandem::apps {

namespace {

class AttentionScores : public Generator<AttentionScores> {
public:
    GeneratorParam<int> Lq{"Lq", 1024, 1, 1 << 20};
    GeneratorParam<int> Lk{"Lk", 1024, 1, 1 << 20};
    GeneratorParam<int> D{"D", 128, 1, 1 << 16};
    GeneratorParam<int> TM{"TM", 128, 1, 4096};
    GeneratorParam<int> TN{"TN", 128, 1, 4096};
    GeneratorParam<int> TD{"TD", 0, 0, 4096}; // the MMA's K step; 0: up to 128 (Hopper: 64)
    GeneratorParam<int> stages{"stages", 0, 0,
                               8}; // Hopper: the Q and K ring's depth (0: the most that fit)
    // runtime: Lq and Lk are estimates, the kernel takes any; the head size D stays static (Q's
    // row block is resident on chip).
    GeneratorParam<std::string> shapes{"shapes", "static", {"static", "runtime"}};
    GeneratorParam<std::string> pipelining{"schedule", "resident", {"resident", "ws_pingpong"}};
    Input<Buffer<bfloat16_t, 2>> Q{"Q"}, K{"K"};
    Output<Buffer<float, 2>> S{"S"};

    void generate() override {
        RDom d(0, D, "d");
        acc(j, i) = 0.0f;
        acc(j, i) += Halide::cast<float>(Q(d, i)) * Halide::cast<float>(K(d, j));
        S(j, i) = acc(j, i);
        set_shape(Q, {D, Lq}, shapes, {true, false});
        set_shape(K, {D, Lk}, shapes, {true, false});
        set_shape(S.output_buffer(), {Lk, Lq}, shapes);
        d_x = d.x;
    }

    void schedule() override {
        const bool runtime = shapes.value() == "runtime"; // tiles stay, their tails guarded
        const int tm = runtime ? int(TM) : std::min<int>(TM, Lq),
                  tn = runtime ? int(TN) : std::min<int>(TN, Lk);
        if (pipelining.value() == "ws_pingpong")
            return warp_specialized(tm, tn);
        Var io("io"), jo("jo"), ii("ii"), ji("ji");
        RVar dk("dk"), di("di");
        S.split(i, io, ii, tm, TailStrategy::GuardWithIf)
            .split(j, jo, ji, tn, TailStrategy::GuardWithIf)
            .reorder(ji, ii, jo, io)
            .map_to_cores(io)
            .async_copy()
            .ping_pong();
        acc.compute_at(S, jo);
        // The MMA's K step: TD columns of Q and K at a time (default: up to 128, which keeps a
        // 128-row operand pair double-buffered in a 64 KB L0A/L0B).
        const int td = std::min<int>(TD > 0 ? int(TD) : 128, D);
        acc.update()
            .split(d_x, dk, di, td, TailStrategy::GuardWithIf)
            .reorder(j, i, di, dk)
            .tile_mma();
        Func Q_tile = Func::staged(Q, acc), K_tile = Func::staged(K, acc);
        Q_tile.compute_at(S, io);                                // resident for the row block
        K_tile.compute_at(acc, dk).async_copy().multi_buffer(2); // streamed
    }

    /** Hopper: a tile of scores per consumer warpgroup in turn (ping-pong), Q and K tiles of TD
     * columns in a ring of `stages` filled by a producer warpgroup. */
    void warp_specialized(int tm, int tn) {
        Var jo("jo"), io("io"), ji("ji"), ii("ii"), t("t");
        RVar dk("dk"), di("di");
        S.tile(j, i, jo, io, ji, ii, tn, tm, TailStrategy::GuardWithIf)
            .fuse(jo, io, t)
            .map_to_cores(t);
        acc.compute_at(S, t);
        const int td = std::min<int>(TD > 0 ? int(TD) : 64, D);
        const int n_stages = stages > 0
                                 ? int(stages)
                                 : fitting_stages(Lk, tm, tn, td, "f32", "none", "ws_pingpong",
                                                  get_target(), shapes.value() == "runtime");
        acc.update()
            .split(d_x, dk, di, td, TailStrategy::GuardWithIf)
            .reorder(j, i, di, dk)
            .tile_mma();
        Func Q_tile = Func::staged(Q, acc), K_tile = Func::staged(K, acc);
        Q_tile.compute_at(acc, dk).async_copy().multi_buffer(n_stages);
        K_tile.compute_at(acc, dk).async_copy().multi_buffer(n_stages);
        S.async_copy().warp_specialize().ping_pong();
    }

    void reference_schedule() override {
        Var io("io"), ii("ii");
        S.halide().split(i, io, ii, 8, TailStrategy::GuardWithIf).parallel(io);
        acc.halide().compute_at(S.halide(), io);
    }

private:
    Var j{"j"}, i{"i"};
    Func acc{"acc"};
    Halide::RVar d_x;
};

} // namespace

TANDEM_REGISTER_GENERATOR(AttentionScores, attention_scores)

const App &attention_scores_app() {
    static const App app{
        "attention_scores",
        "attention scores S = Q K^T (bf16 in, f32 out to a workspace), Q resident, K streamed",
        generator_defaults("attention_scores"),
        {"resident"},
        {{"hopper", {{"TM", "128"}, {"TN", "128"}, {"TD", "64"}}}},
        {{"ascend", {"resident"}}, {"hopper", {"ws_pingpong"}}},
        generator_build("attention_scores"),
        [](const Params &p) {
            double Lq = p.get_int("Lq"), Lk = p.get_int("Lk"), D = p.get_int("D");
            Workload w;
            w.macs = Lq * Lk * D;
            w.written_bytes = 4 * Lq * Lk;
            w.bytes = 2 * (Lq * D + Lk * D) + w.written_bytes;
            return w;
        },
        [](const Params &) { return 1e-3; },
        {{"Lq", "TM", 300}, {"Lk", "TN", 300}, {"D", "", 256}},
        {{"TM", {"16", "32", "64", "128", "256"}},
         {"TN", {"16", "32", "64", "128", "256"}},
         {"TD", {"0", "16", "32", "64", "100"}}},
        4e6,
        {},
    };
    return app;
}

} // namespace tandem::apps
