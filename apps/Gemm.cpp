// gemm: C(j, i) = sum_k A(k, i) * B(j, k), bf16 or f16 inputs, f32 accumulation, bf16 or f32
// output.
// A is M x K (row i holds K values), B is K x N, C is M x N; dims[0] is the innermost.
#include "App.h"

#include <algorithm>

namespace tandem::apps {

namespace {

class Gemm : public Generator<Gemm> {
public:
    GeneratorParam<int> M{"M", 2048, 1, 1 << 20};
    GeneratorParam<int> N{"N", 2048, 1, 1 << 20};
    GeneratorParam<int> K{"K", 2048, 1, 1 << 20};
    GeneratorParam<int> TM{"TM", 256, 1, 4096};
    GeneratorParam<int> TN{"TN", 256, 1, 4096};
    GeneratorParam<int> TK{"TK", 512, 1, 4096};
    GeneratorParam<int> stages{"stages", 0, 0, 16}; // 0: the most that fit (fitting_stages)
    // Tile order: groups of tile rows walked column by column inside a group (1: row-major), so
    // that the tiles running at once share B's column panels in L2. The group is the largest
    // divisor of the number of tile rows not above `group`: groups without holes.
    GeneratorParam<int> group{"group", 1, 1, 1 << 16};
    // Clusters of 2 or 4 units on neighbouring tiles (Hopper's thread-block clusters, the ZPU's
    // mesh columns; warp-specialised schedules on a target that takes cluster(n); others ignore
    // them, and the tuner leaves them out): cluster_m = c groups c tile rows (they share B's tile:
    // multicast, broadcast), cluster_n = c tile columns (they share A's). Clusters follow the tile
    // order: cluster_m walks tile rows innermost (groups of a multiple of c rows), cluster_n tile
    // columns (row-major); a count of tiles along the cluster that c does not divide leaves the
    // last cluster's last units without a tile of their own.
    GeneratorParam<int> cluster_m{"cluster_m", 1, 1, 4};
    GeneratorParam<int> cluster_n{"cluster_n", 1, 1, 4};
    GeneratorParam<std::string> in{"in", "bf16", {"bf16", "f16"}}; // the operands' type
    GeneratorParam<std::string> out{"out", "bf16", {"bf16", "f16", "f32"}};
    GeneratorParam<std::string> epilogue{"epilogue", "none", {"none", "bias_relu"}};
    // runtime: M, N and K are estimates, the kernel takes any (tiles stay TM x TN x TK, tails
    // guarded).
    GeneratorParam<std::string> shapes{"shapes", "static", {"static", "runtime"}};
    GeneratorParam<std::string> pipelining{
        "schedule", "ws_pingpong", {"ws_pingpong", "ws_cooperative", "ws", "pipelined", "sync"}};
    Input<Buffer<void, 2>> A{"A"}, B{"B"}; // bf16 or f16 (parameter in)
    Input<Buffer<float, 1>> bias{"bias"};  // read with epilogue bias_relu only
    Output<Buffer<void, 2>> C{"C"};        // bf16 or f32 (parameter out)

    void generate() override {
        const bool runtime = shapes.value() == "runtime";
        for (Input<Buffer<void, 2>> *operand : {&A, &B})
            operand->set_type(in.value() == "f16" ? Halide::Float(16) : Halide::BFloat(16));
        RDom r(0, runtime ? A.dim(0).extent() : Halide::Expr(int(K)), "r");
        acc(j, i) = 0.0f;
        acc(j, i) += Halide::cast<float>(A(r, i)) * Halide::cast<float>(B(j, r));
        Halide::Expr result = acc(j, i);
        if (epilogue.value() == "bias_relu")
            result = Halide::max(result + bias(j), 0.0f);
        C(j, i) = Halide::cast(out.value() == "bf16"  ? Halide::BFloat(16)
                               : out.value() == "f16" ? Halide::Float(16)
                                                      : Halide::Float(32),
                               result);
        set_shape(bias, {N}, shapes);
        set_shape(A, {K, M}, shapes);
        set_shape(B, {N, K}, shapes);
        set_shape(C.output_buffer(), {N, M}, shapes);
        r_k = r.x;
    }

    void schedule() override {
        const Target &target = get_target();
        const std::string schedule = pipelining;
        // Tiles larger than static matrices shrink to them (Halide's bounds need a tile within the
        // matrix); with runtime shapes they stay, their tails guarded.
        const bool runtime = shapes.value() == "runtime";
        const int tm = runtime ? int(TM) : std::min<int>(TM, M),
                  tn = runtime ? int(TN) : std::min<int>(TN, N),
                  tk = runtime ? int(TK) : std::min<int>(TK, K);
        const int n_stages =
            stages > 0 ? int(stages)
                       : fitting_stages(N, tm, tn, tk, out, epilogue, schedule, target, runtime);
        Var jo("jo"), io("io"), ji("ji"), ii("ii"), t("t"), iog("iog"), iob("iob"),
            t_in_group("t_in_group");
        RVar ko("ko"), ki("ki");
        C.tile(j, i, jo, io, ji, ii, tn, tm, TailStrategy::GuardWithIf);
        // Clusters for the warp-specialised schedules (Hopper: their rings' empty barriers make one
        // CTA writing another's shared memory safe); elsewhere the parameters do nothing.
        const bool clusters = target.takes("cluster") && schedule.rfind("ws", 0) == 0;
        const int cluster_m = clusters ? int(this->cluster_m) : 1,
                  cluster_n = clusters ? int(this->cluster_n) : 1;
        if (cluster_m > 1 && cluster_n > 1) {
            throw Error("gemm: cluster_m = " + std::to_string(cluster_m) +
                        " and cluster_n = " + std::to_string(cluster_n) +
                        ": a cluster groups tiles along one dim (c x 1 or 1 x c)");
        }
        const int row_tiles = runtime ? 1 << 30 : (int(M) + tm - 1) / tm;
        // Groups of `group` tile rows (with runtime shapes the last one guarded: its missing rows
        // are empty tiles). cluster_m = c groups neighbouring tile rows: groups of a multiple of c
        // rows, walked rows innermost (the last group short, its missing rows guarded, where c
        // does not divide the rows); cluster_n = c groups neighbouring tile columns: row-major (c
        // columns at a time, the last group short where c does not divide the columns).
        int rows_per_group =
            cluster_n > 1 ? 1 : std::min<int>(std::max<int>(group, cluster_m), row_tiles);
        bool guarded = runtime;
        if (cluster_m > 1) {
            rows_per_group = (rows_per_group + cluster_m - 1) / cluster_m * cluster_m;
            while (!runtime && rows_per_group > cluster_m && row_tiles % rows_per_group != 0)
                rows_per_group -= cluster_m;
            guarded = guarded || row_tiles % rows_per_group != 0;
        }
        while (!guarded && rows_per_group > 1 && row_tiles % rows_per_group != 0)
            rows_per_group--;
        const int col_tiles = runtime ? 1 << 30 : (int(N) + tn - 1) / tn;
        if (cluster_m > 1 && !guarded && rows_per_group == row_tiles) {
            C.fuse(io, jo, t); // one group of every row: column by column
        } else if (cluster_n > 1 && (runtime || col_tiles % cluster_n != 0)) {
            // Row-major in groups of cluster_n tile columns, the last group short (guarded).
            Var jop("jop"), jor("jor"), jt("jt");
            C.split(jo, jop, jor, cluster_n, TailStrategy::GuardWithIf)
                .reorder(ji, ii, jor, jop, io)
                .fuse(jor, jop, jt)
                .fuse(jt, io, t);
        } else if (rows_per_group > 1 && (rows_per_group < row_tiles || guarded)) {
            C.split(io, iog, iob, rows_per_group,
                    guarded ? TailStrategy::GuardWithIf : TailStrategy::Auto)
                .reorder(ji, ii, iob, jo, iog)
                .fuse(iob, jo, t_in_group)
                .fuse(t_in_group, iog, t);
        } else {
            C.fuse(jo, io, t);
        }
        C.map_to_cores(t);
        if (cluster_m * cluster_n > 1)
            C.cluster(cluster_m * cluster_n);
        acc.compute_at(C, t);
        acc.update()
            .split(r_k, ko, ki, tk, TailStrategy::GuardWithIf)
            .reorder(j, i, ki, ko)
            .tile_mma();
        Func A_tile = Func::staged(A, acc), B_tile = Func::staged(B, acc);
        A_tile.compute_at(acc, ko);
        B_tile.compute_at(acc, ko);
        if (epilogue.value() == "bias_relu")
            Func::staged(bias, C).compute_at(C, t); // the tile's TN biases
        if (schedule == "sync")
            return;
        A_tile.async_copy().multi_buffer(n_stages);
        B_tile.async_copy().multi_buffer(n_stages);
        C.async_copy();
        if (schedule == "pipelined")
            return;
        C.warp_specialize();
        if (schedule == "ws_pingpong")
            C.ping_pong();
        if (schedule == "ws_cooperative")
            C.cooperative();
    }

    void reference_schedule() override {
        // The algorithm again with f32 operands, tiled rows in parallel and vectorized columns.
        Var io("io"), ii("ii");
        acc.halide().compute_at(C.halide(), io).vectorize(j, 16, TailStrategy::GuardWithIf);
        acc.halide().update().reorder(j, i, r_k).vectorize(j, 16, TailStrategy::GuardWithIf);
        C.halide().split(i, io, ii, 8, TailStrategy::GuardWithIf).parallel(io);
    }

private:
    Var j{"j"}, i{"i"};
    Func acc{"acc"};
    Halide::RVar r_k;
};

} // namespace

TANDEM_REGISTER_GENERATOR(Gemm, gemm)

const App &gemm_app() {
    static const App app{
        "gemm",
        "bf16 (or f16: in=f16) GEMM with f32 accumulation: C = A x B (M x K times K x N)",
        generator_defaults("gemm"),
        generator_schedules("gemm"),
        {{"hopper", {{"TM", "128"}, {"TN", "128"}, {"TK", "64"}, {"stages", "0"}, {"group", "8"}}},
         // ascend: tile rows in pairs (group 2) measured best at 1024^3, 2048^3 and 4096^3 (the
         // 24 cube cores then share B's column panels in L2; results/ascend_anchor.log's sweep).
         {"ascend",
          {{"TM", "128"}, {"TN", "128"}, {"TK", "128"}, {"stages", "2"}, {"group", "2"}}}},
        {{"zpu", {"ws_pingpong", "ws", "pipelined", "sync"}},
         {"hopper", {"ws_pingpong", "ws_cooperative", "ws", "pipelined"}},
         {"ascend", {"ws_pingpong", "pipelined"}}},
        generator_build("gemm"),
        [](const Params &p) {
            double M = p.get_int("M"), N = p.get_int("N"), K = p.get_int("K");
            double out_bytes = p.get("out") == "f32" ? 4 : 2;
            bool bias = p.get("epilogue") == "bias_relu";
            Workload w;
            w.macs = M * N * K;
            w.vector_flops = (bias ? 3 : 1) * M * N;
            w.written_bytes = out_bytes * M * N;
            w.bytes = 2 * (M * K + K * N) + w.written_bytes + (bias ? 4 * N : 0);
            return w;
        },
        [](const Params &p) { return p.get("out") == "f32" ? 1e-3 : 1e-2; },
        {{"M", "TM", 320}, {"N", "TN", 320}, {"K", "TK", 320}},
        {{"TM", {"16", "32", "48", "64", "128", "256"}},
         {"TN", {"16", "32", "48", "64", "128", "256"}},
         {"TK", {"16", "32", "64", "128", "256", "512"}},
         {"stages", {"0", "1", "2", "3", "4", "5"}},
         {"group", {"1", "1", "2", "3", "8"}},
         {"cluster_m", {"1", "1", "2", "4"}},
         {"cluster_n", {"1", "1", "2", "4"}},
         {"in", {"bf16", "f16"}},
         {"out", {"bf16", "f16", "f32"}},
         {"epilogue", {"none", "bias_relu"}}},
        4e6,
        {"in", "out"},
        {{"cluster_m", "cluster"}, {"cluster_n", "cluster"}},
    };
    return app;
}

} // namespace tandem::apps
