// rmsnorm: out(x, r) = in(x, r) * w(x) / sqrt(mean_x(in(x, r)^2) + eps), rows of D f32 values.
#include "App.h"

#include <algorithm>
#include <cmath>

namespace tandem::apps {

namespace {

/** The row chunk: `given` if set (> 0), else the whole row when a block of RB rows (input and
 * output tiles, `versions` each) and the weights fit in half the target's vector memory, else the
 * largest power of two that does. */
int row_chunk(int given, int D, int RB, int versions, const Target &target) {
    if (given > 0)
        return given;
    const int64_t budget = target.vector_memory_bytes() / 2;
    auto bytes = [&](int64_t chunk) {
        return 4 * chunk * (2 * int64_t(RB) * versions + versions + 1);
    };
    if (bytes(D) <= budget)
        return D;
    int chunk = 1 << 16;
    while (chunk > 1 && bytes(chunk) > budget)
        chunk /= 2;
    return chunk;
}

class Rmsnorm : public Generator<Rmsnorm> {
public:
    GeneratorParam<int> D{"D", 4096, 1, 1 << 24};
    GeneratorParam<int> R{"R", 1024, 1, 1 << 20};
    GeneratorParam<int> RB{
        "RB", 16, 0, 1 << 16}; // rows per tile; 0: 2 (4 where 2 rows are not 16-byte multiples)
    GeneratorParam<int> TD{"TD", 0, 0,
                           1 << 24}; // row chunk; 0: whole rows where they fit (row_chunk)
    GeneratorParam<int> stages{"stages", 2, 1, 16};
    // Hopper, double_buffered: a persistent grid of this many CTAs per SM, each looping over row
    // tiles with its ring (0: a CTA per tile).
    GeneratorParam<int> ctas_per_sm{"ctas_per_sm", 0, 0, 32};
    // Hopper: warpgroups running each CTA's software pipeline (2: cooperative(), the vector ops
    // strided over 256 threads; the Hopper default: measured on an H100, D = 8192 0.94 of the copy
    // bandwidth with 2, 0.81 with 1; D = 2048 0.99 and 0.89; gpu_hopper_notes.md v12).
    GeneratorParam<int> warpgroups{"warpgroups", 1, 1, 2};
    // runtime: D and R are estimates, the kernel takes any (rows always in chunks of TD, or of
    // the chunk the estimate D would get).
    GeneratorParam<std::string> shapes{"shapes", "static", {"static", "runtime"}};
    GeneratorParam<std::string> pipelining{
        "schedule", "double_buffered", {"double_buffered", "single_buffered", "sync"}};
    Input<Buffer<float, 2>> in{"in"};
    Input<Buffer<float, 1>> w{"w"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() override {
        const bool runtime = shapes.value() == "runtime";
        Halide::Expr d = runtime ? in.dim(0).extent() : Halide::Expr(int(D));
        RDom k(0, d, "k");
        sum_sq(row) = 0.0f;
        sum_sq(row) += in(k, row) * in(k, row);
        out(x, row) =
            in(x, row) * w(x) / Halide::sqrt(sum_sq(row) / Halide::cast<float>(d) + 1e-5f);
        set_shape(in, {D, R}, shapes);
        set_shape(w, {D}, shapes);
        set_shape(out.output_buffer(), {D, R}, shapes);
        k_x = k.x;
    }

    void schedule() override {
        const std::string schedule = pipelining;
        const int d = D;
        // RB = 0 (auto, the hopper default): about 16 KB of rows per tile (4096 / D rows, at least
        // one), times the fewest rows (1, 2 or 4) whose D f32 make a multiple of 16 bytes (a TMA
        // store of a tile in the middle of out must be). Measured on an H100 (a CTA per tile,
        // benchmarks/results/gpu_hopper_notes.md, v10): D = 1024 0.91 of the copy bandwidth with 4
        // rows (0.66 with 1), D = 2048 0.90 with 2 (0.83), D = 4096 0.98 with 1.
        const bool hopper = get_target().name() == "hopper";
        const int versions = schedule == "double_buffered" ? int(stages) : 1;
        // Hopper, double_buffered: persistent CTAs (ctas_per_sm) that stage w once and loop over
        // row tiles through a ring. Otherwise a CTA per tile: whole rows are loaded once per CTA,
        // so their tiles need one version, and the GPU overlaps CTAs instead.
        const int ctas = hopper && schedule == "double_buffered" ? int(ctas_per_sm) : 0;
        const bool cta_per_tile = hopper && ctas == 0;
        const int row_versions = cta_per_tile ? 1 : versions;
        const bool runtime = shapes.value() == "runtime";
        const int aligned_rows = d % 4 == 0 ? 1 : (2 * d) % 4 == 0 ? 2 : 4;
        // Runtime shapes: rows of any length, in chunks (below): 2 rows of chunks by default.
        const int rb_wanted = RB > 0    ? int(RB)
                              : runtime ? 2
                                        : std::max(1, 4096 / (d * aligned_rows)) * aligned_rows;
        const int rb = runtime ? rb_wanted : std::min<int>(rb_wanted, R);
        // Whole rows where a CTA's tiles (in and out, RB rows and the ring's versions each, and the
        // weights) fit its share of the shared memory (a CTA per tile: half, so that two CTAs
        // share an SM); else chunks (two passes over in).
        const int64_t share = ctas > 0 ? get_target().vector_memory_bytes() / ctas - 4096
                                       : get_target().vector_memory_bytes() / 2;
        const bool whole_rows_fit =
            hopper && TD == 0 && 4 * int64_t(d) * (2 * int64_t(rb) * row_versions + 1) <= share;
        // Chunks on Hopper: 2048 values unless given (measured at D = 16384: 0.67 of the copy
        // bandwidth, 0.36 with the 4096 row_chunk picks).
        const int chunk = hopper && TD == 0 ? 2048 : int(TD);
        // Runtime shapes: rows of any length, so chunks as long as fit (not the estimate's rows).
        const int td = runtime ? row_chunk(chunk, 1 << 24, rb, versions, get_target())
                       : whole_rows_fit
                           ? d
                           : std::min(row_chunk(chunk, d, rb, row_versions, get_target()), d);
        Var ro("ro"), ri("ri");
        Func in_tile, w_tile;
        if (td == d && !runtime) {
            // Whole rows on chip: one read of each row.
            out.split(row, ro, ri, rb, TailStrategy::GuardWithIf).map_to_cores(ro);
            if (ctas > 0)
                out.persistent(ctas);
            in_tile = Func::staged(in);
            w_tile = Func::staged(w);
            in_tile.compute_at(out, ro);
            sum_sq.compute_at(out, ro);
            if (cta_per_tile) {
                // A CTA per tile loads w once anyway: with its tile, both loads in flight at once.
                w_tile.compute_at(out, ro);
                if (schedule != "sync")
                    w_tile.async_copy();
            } else {
                w_tile.compute_root(); // every core stages the weights once
            }
        } else {
            // Rows longer than the on-chip memory: chunks of TD values. The first pass sums the
            // squares chunk by chunk; the second reads each chunk again and writes it out.
            Var xo("xo"), xi("xi");
            RVar ko("ko"), ki("ki");
            out.split(row, ro, ri, rb, TailStrategy::GuardWithIf)
                .split(x, xo, xi, td, TailStrategy::GuardWithIf)
                .reorder(xi, ri, xo, ro)
                .map_to_cores(ro);
            if (ctas > 0)
                out.persistent(ctas);
            sum_sq.compute_at(out, ro);
            sum_sq.update().split(k_x, ko, ki, td, TailStrategy::GuardWithIf).reorder(ki, row, ko);
            Func in_sum = Func::staged(in, sum_sq);
            in_sum.compute_at(sum_sq, ko);
            in_tile = Func::staged(in, out);
            w_tile = Func::staged(w, out);
            in_tile.compute_at(out, xo);
            w_tile.compute_at(out, xo);
            if (schedule != "sync")
                in_sum.async_copy().multi_buffer(versions);
            if (schedule != "sync")
                w_tile.async_copy().multi_buffer(versions);
        }
        if (hopper && warpgroups == 2)
            out.cooperative();
        if (schedule == "sync")
            return;
        const int tile_versions =
            td == d && !runtime ? row_versions : versions; // chunks: a loop within the tile
        in_tile.async_copy().multi_buffer(tile_versions);
        out.async_copy().multi_buffer(tile_versions);
    }

    void reference_schedule() override {
        Var ro("ro"), ri("ri");
        out.halide()
            .split(row, ro, ri, 4, TailStrategy::GuardWithIf)
            .parallel(ro)
            .vectorize(x, 8, TailStrategy::GuardWithIf);
        sum_sq.halide().compute_at(out.halide(), ri);
    }

private:
    Var x{"x"}, row{"row"};
    Func sum_sq{"sum_sq"};
    Halide::RVar k_x;
};

} // namespace

TANDEM_REGISTER_GENERATOR(Rmsnorm, rmsnorm)

const App &rmsnorm_app() {
    static const App app{
        "rmsnorm",
        "RMS normalisation of R rows of D f32 values, scaled by weights w",
        generator_defaults("rmsnorm"),
        generator_schedules("rmsnorm"),
        {{"hopper", {{"RB", "0"}, {"warpgroups", "2"}}}, {"ascend", {{"RB", "2"}}}},
        {{"hopper", {"double_buffered", "single_buffered", "sync"}},
         {"ascend", {"double_buffered", "single_buffered", "sync"}}},
        generator_build("rmsnorm"),
        generator_workload("rmsnorm"),
        // The sum of squares in f32: its rounding error grows with the row length (about sqrt(D)
        // ulps for sums in another order than the reference's).
        [](const Params &p) { return 1e-5 + 4e-7 * std::sqrt(double(p.get_int("D"))); },
        {{"D", "TD", 200000}, {"R", "RB", 300}},
        {{"RB", {"0", "1", "2", "3", "4", "8", "16"}},
         {"TD", {"0", "0", "1", "7", "64", "1000", "4096"}},
         {"stages", {"1", "2", "3"}},
         {"ctas_per_sm", {"0", "0", "1", "2", "3"}},
         {"warpgroups", {"1", "1", "2"}}},
        4e5,
        {},
    };
    return app;
}

} // namespace tandem::apps
