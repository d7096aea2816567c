// attention_scores: S(j, i) = sum_d Q(d, i) * K(d, j), the Q K^T of attention (bf16 in, f32
// scores to a workspace). The founding request's kernel: Q resident on chip for a block of query
// rows, K tiles streamed (and transposed on the way into the cube), score tiles alternating
// accumulator slots.
#include "App.h"

#include <algorithm>

namespace tandem::apps {

namespace {

Built build_attention(const Params &p, const std::string &schedule, const Target &) {
    const int Lq = p.get_int("Lq"), Lk = p.get_int("Lk"), D = p.get_int("D");
    if (Lq < 1 || Lk < 1 || D < 1) throw Error("attention_scores: Lq, Lk and D must be positive");

    // ---- the algorithm, written once ----
    ImageParam Q(Halide::BFloat(16), 2, "Q"), K(Halide::BFloat(16), 2, "K");
    Var j("j"), i("i");
    RDom d(0, D, "d");
    Func acc("acc"), S("S");
    acc(j, i) = 0.0f;
    acc(j, i) += Halide::cast<float>(Q(d, i)) * Halide::cast<float>(K(d, j));
    S(j, i) = acc(j, i);
    Q.dim(0).set_bounds(0, D);
    Q.dim(1).set_bounds(0, Lq).set_stride(D);
    K.dim(0).set_bounds(0, D);
    K.dim(1).set_bounds(0, Lk).set_stride(D);
    S.output_buffer().dim(0).set_bounds(0, Lk);
    S.output_buffer().dim(1).set_bounds(0, Lq).set_stride(Lk);

    // ---- schedules ----
    if (schedule == "reference") {
        Var io("io"), ii("ii");
        S.halide().split(i, io, ii, 8, TailStrategy::GuardWithIf).parallel(io);
        acc.halide().compute_at(S.halide(), io);
        return {{Q, K}, S};
    }
    if (schedule != "resident") throw Error("attention_scores: unknown schedule '" + schedule + "' (known: resident)");
    const int TM = std::min(p.get_int("TM"), Lq), TN = std::min(p.get_int("TN"), Lk);
    Var io("io"), jo("jo"), ii("ii"), ji("ji");
    RVar dk("dk"), di("di");
    S.split(i, io, ii, TM, TailStrategy::GuardWithIf)
        .split(j, jo, ji, TN, TailStrategy::GuardWithIf)
        .reorder(ji, ii, jo, io)
        .map_to_cores(io)
        .async_copy()
        .ping_pong();
    acc.compute_at(S, jo);
    // The MMA's K step: TD columns of Q and K at a time (default: up to 128, which keeps a
    // 128-row operand pair double-buffered in a 64 KB L0A/L0B).
    const int TD = std::min(p.get_int("TD") > 0 ? p.get_int("TD") : 128, D);
    acc.update().split(d.x, dk, di, TD, TailStrategy::GuardWithIf).reorder(j, i, di, dk).tile_mma();
    Func Q_tile = Func::staged(Q, acc), K_tile = Func::staged(K, acc);
    Q_tile.compute_at(S, io);                               // resident for the row block
    K_tile.compute_at(acc, dk).async_copy().multi_buffer(2); // streamed
    return {{Q, K}, S};
}

} // namespace

const App &attention_scores_app() {
    static const App app{
        "attention_scores",
        "attention scores S = Q K^T (bf16 in, f32 out to a workspace), Q resident, K streamed",
        {{"Lq", "1024"}, {"Lk", "1024"}, {"D", "128"}, {"TM", "128"}, {"TN", "128"}, {"TD", "0"}},
        {"resident"},
        {},
        {{"ascend", {"resident"}}},
        build_attention,
        [](const Params &p) {
            double Lq = p.get_int("Lq"), Lk = p.get_int("Lk"), D = p.get_int("D");
            return Workload{Lq * Lk * D, 0, 2 * (Lq * D + Lk * D) + 4 * Lq * Lk};
        },
        [](const Params &) { return 1e-3; },
        {{"Lq", "TM", 300}, {"Lk", "TN", 300}, {"D", "", 256}},
        {{"TM", {"16", "32", "64", "128", "256"}}, {"TN", {"16", "32", "64", "128", "256"}},
         {"TD", {"0", "16", "32", "64", "100"}}},
        4e6,
        {},
    };
    return app;
}

} // namespace tandem::apps
