// gemm: C(j, i) = sum_k A(k, i) * B(j, k), bf16 inputs, f32 accumulation, bf16 or f32 output.
// A is M x K (row i holds K values), B is K x N, C is M x N; dims[0] is the innermost.
#include "App.h"

#include <algorithm>

namespace tandem::apps {

namespace {

/** stages = 0 (auto): the most stages (up to 4 on Hopper, 3 elsewhere) that fit on chip with the
 * output staging and the accumulator (two versions each with ping-pong) and the bias tile. Hopper:
 * the operand ring and the output staging share the CTA's shared memory, tiles rounded up to
 * wgmma's 64. ZPU: A's versions, the accumulator and the staging share RSRAM (A goes through RSRAM
 * on its way to ASRAM), B's versions fill WSRAM. Ascend: 3. */
int fitting_stages(int TM, int TN, int TK, const std::string &out, const std::string &epilogue,
                   const std::string &schedule, const Target &target) {
    const int64_t out_bytes = out == "bf16" ? 2 : 4, versions = schedule == "ws_pingpong" ? 2 : 1;
    const int64_t bias = epilogue == "bias_relu" ? 2 * 4 * int64_t(TN) : 0;
    if (target.arch == Target::Arch::Hopper) {
        auto up = [](int64_t v) { return (v + 63) / 64 * 64; };
        const int64_t per_stage = (up(TM) * up(TK) + up(TK) * up(TN)) * 2;
        const int64_t staging = versions * up(TM) * up(TN) * out_bytes;
        const int64_t free = target.machine.integer("smem_bytes") - staging - bias - 4096; // barriers, alignment
        return int(std::clamp<int64_t>(free / per_stage, 1, 4));
    }
    if (target.arch == Target::Arch::ZPU) {
        const int64_t tile = int64_t(TM) * TN;
        const int64_t rsram = target.machine.integer("rsram_bytes") - versions * tile * (4 + out_bytes) - bias;
        const int64_t by_a = rsram / (int64_t(TM) * TK * 2);
        const int64_t by_b = target.machine.integer("wsram_bytes") / (int64_t(TK) * TN * 2);
        return int(std::clamp<int64_t>(std::min(by_a, by_b), 1, 3));
    }
    return 3;
}

Built build_gemm(const Params &p, const std::string &schedule, const Target &target) {
    const int M = p.get_int("M"), N = p.get_int("N"), K = p.get_int("K");
    const std::string out = p.get("out"), epilogue = p.get("epilogue");
    if (epilogue != "none" && epilogue != "bias_relu") {
        throw Error("gemm: parameter epilogue is none or bias_relu, got '" + epilogue + "'");
    }
    if (M < 1 || N < 1 || K < 1) throw Error("gemm: M, N and K must be positive");
    if (out != "bf16" && out != "f32") throw Error("gemm: parameter out is bf16 or f32, got '" + out + "'");

    // ---- the algorithm, written once ----
    ImageParam A(Halide::BFloat(16), 2, "A"), B(Halide::BFloat(16), 2, "B"), bias(Halide::Float(32), 1, "bias");
    Var j("j"), i("i");
    RDom r(0, K, "r");
    Func acc("acc"), C("C");
    acc(j, i) = 0.0f;
    acc(j, i) += Halide::cast<float>(A(r, i)) * Halide::cast<float>(B(j, r));
    Halide::Expr result = acc(j, i);
    if (epilogue == "bias_relu") result = Halide::max(result + bias(j), 0.0f);
    C(j, i) = Halide::cast(out == "bf16" ? Halide::BFloat(16) : Halide::Float(32), result);
    std::vector<ImageParam> inputs = {A, B};
    if (epilogue == "bias_relu") {
        bias.dim(0).set_bounds(0, N);
        inputs.push_back(bias);
    }

    A.dim(0).set_bounds(0, K);
    A.dim(1).set_bounds(0, M).set_stride(K);
    B.dim(0).set_bounds(0, N);
    B.dim(1).set_bounds(0, K).set_stride(N);
    C.output_buffer().dim(0).set_bounds(0, N);
    C.output_buffer().dim(1).set_bounds(0, M).set_stride(N);

    // ---- schedules ----
    if (schedule == "reference") {
        Var k("k"), io("io"), ii("ii");
        Halide::Func Af("Af"), Bf("Bf"), accf("accf"), Cr("Cr");
        Af(k, i) = Halide::cast<float>(A(k, i));
        Bf(j, k) = Halide::cast<float>(B(j, k));
        accf(j, i) = 0.0f;
        accf(j, i) += Af(r, i) * Bf(j, r);
        Halide::Expr ref = accf(j, i);
        if (epilogue == "bias_relu") ref = Halide::max(ref + bias(j), 0.0f);
        Cr(j, i) = Halide::cast(C.halide().output_types()[0], ref);
        Af.compute_root().parallel(i);
        Bf.compute_root().parallel(k);
        Cr.split(i, io, ii, 8, TailStrategy::GuardWithIf).parallel(io);
        accf.compute_at(Cr, io).vectorize(j, 16, TailStrategy::GuardWithIf);
        accf.update().reorder(j, i, r).vectorize(j, 16, TailStrategy::GuardWithIf);
        return {inputs, Func(Cr)};
    }
    // Tiles larger than the matrices shrink to them (Halide's bounds need a tile within the matrix).
    const int TM = std::min(p.get_int("TM"), M), TN = std::min(p.get_int("TN"), N), TK = std::min(p.get_int("TK"), K);
    const int stages = p.get_int("stages") > 0 ? p.get_int("stages") : fitting_stages(TM, TN, TK, out, epilogue, schedule, target);
    Var jo("jo"), io("io"), ji("ji"), ii("ii"), t("t");
    RVar ko("ko"), ki("ki");
    C.tile(j, i, jo, io, ji, ii, TN, TM, TailStrategy::GuardWithIf).fuse(jo, io, t).map_to_cores(t);
    acc.compute_at(C, t);
    acc.update().split(r.x, ko, ki, TK, TailStrategy::GuardWithIf).reorder(j, i, ki, ko).tile_mma();
    Func A_tile = Func::staged(A, acc), B_tile = Func::staged(B, acc);
    A_tile.compute_at(acc, ko);
    B_tile.compute_at(acc, ko);
    if (epilogue == "bias_relu") Func::staged(bias, C).compute_at(C, t); // the tile's TN biases
    if (schedule == "sync") return {inputs, C};
    A_tile.async_copy().multi_buffer(stages);
    B_tile.async_copy().multi_buffer(stages);
    C.async_copy();
    if (schedule == "pipelined") return {inputs, C};
    C.warp_specialize();
    if (schedule == "ws") return {inputs, C};
    if (schedule == "ws_pingpong") {
        C.ping_pong();
        return {inputs, C};
    }
    throw Error("gemm: unknown schedule '" + schedule + "' (known: ws_pingpong, ws, pipelined, sync)");
}

} // namespace

const App &gemm_app() {
    static const App app{
        "gemm",
        "bf16 GEMM with f32 accumulation: C = A x B (M x K times K x N)",
        {{"M", "2048"}, {"N", "2048"}, {"K", "2048"}, {"stages", "0"}, {"TM", "256"}, {"TN", "256"},
         {"TK", "512"}, {"out", "bf16"}, {"epilogue", "none"}},
        {"ws_pingpong", "ws", "pipelined", "sync"},
        {{"hopper", {{"TM", "128"}, {"TN", "128"}, {"TK", "64"}, {"stages", "0"}}},
         {"ascend", {{"TM", "128"}, {"TN", "128"}, {"TK", "128"}, {"stages", "2"}}}},
        {{"hopper", {"ws_pingpong", "ws", "pipelined"}}, {"ascend", {"ws_pingpong", "pipelined"}}},
        build_gemm,
        [](const Params &p) {
            double M = p.get_int("M"), N = p.get_int("N"), K = p.get_int("K");
            double out_bytes = p.get("out") == "bf16" ? 2 : 4;
            bool bias = p.get("epilogue") == "bias_relu";
            return Workload{M * N * K, (bias ? 3 : 1) * M * N, 2 * (M * K + K * N) + out_bytes * M * N + (bias ? 4 * N : 0)};
        },
        [](const Params &p) { return p.get("out") == "bf16" ? 1e-2 : 1e-3; },
        {{"M", "TM", 320}, {"N", "TN", 320}, {"K", "TK", 320}},
        {{"TM", {"16", "32", "48", "64", "128", "256"}},
         {"TN", {"16", "32", "48", "64", "128", "256"}},
         {"TK", {"16", "32", "64", "128", "256", "512"}},
         {"stages", {"0", "1", "2", "3", "4", "5"}},
         {"out", {"bf16", "f32"}},
         {"epilogue", {"none", "bias_relu"}}},
        4e6,
        {"out"},
    };
    return app;
}

} // namespace tandem::apps
