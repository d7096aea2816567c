// Conformance: user kernels over rows, written as a user writes generators (outside apps/, the
// public headers only, Halide's API): softmax, log-softmax, layernorm, rmsnorm, a row's mean
// subtracted (a value of the row broadcast along it). Each takes static shapes (set_bounds) or,
// with runtime=true, any number of rows at the call: an estimate only, as Halide generators do by
// default.
#include "tandem/Generator.h"

#include <algorithm>

using namespace tandem;

namespace {

/** What every row kernel shares: R rows of C floats in, the same out, RB rows per tile spread
 * over the cores, the input tile double-buffered and the output stored asynchronously. */
template <class G> class RowKernel : public Generator<G> {
public:
    GeneratorParam<int> C{"C", 1000, 1, 1 << 20};
    GeneratorParam<int> R{"R", 64, 1, 1 << 20};
    GeneratorParam<int> RB{"RB", 4, 1, 256};
    // hopper: CTAs per SM that loop over the row tiles (.persistent), so that the next tile's
    // copy overlaps this one's work; 0: a CTA per tile.
    GeneratorParam<int> ctas_per_sm{"ctas_per_sm", 2, 0, 8};
    GeneratorParam<bool> runtime{"runtime", false};
    Input<Buffer<float, 2>> in{"in"};
    Output<Buffer<float, 2>> out{"out"};

protected:
    Var c{"c"}, r{"r"}, ro{"ro"}, ri{"ri"};

    /** The shapes: static bounds, or with runtime any number of rows (an estimate only, a
     * runtime extent) of C values: a tile holds whole rows, so their length is static. */
    void shape() {
        if (runtime) {
            in.dim(0).set_bounds(0, C);
            in.set_estimates({{0, C}, {0, R}});
            out.dim(0).set_bounds(0, C);
            out.set_estimates({{0, C}, {0, R}});
        } else {
            in.dim(0).set_bounds(0, C);
            in.dim(1).set_bounds(0, R).set_stride(C);
            out.dim(0).set_bounds(0, C);
            out.dim(1).set_bounds(0, R).set_stride(C);
        }
    }
    /** Tiles of RB rows over the cores (fewer where RB rows would not fit: a tile's input in two
     * versions, the output tile and a row-sized temporary, each about RB rows, must fit the vector
     * memory with room to spare); the row's input staged per tile; `per_row` (reductions and row
     * values) computed per tile. */
    void schedule_rows(std::initializer_list<Func *> per_row) {
        const int64_t row_bytes = 4 * int64_t(C);
        const int fit = int(this->get_target().vector_memory_bytes() / (8 * row_bytes));
        const int rows = std::max(1, std::min(int(RB), fit));
        out.split(r, ro, ri, rows, TailStrategy::GuardWithIf).map_to_cores(ro);
        if (this->get_target().name() == "hopper" && ctas_per_sm > 0)
            out.persistent(ctas_per_sm);
        Func tile = Func::staged(in);
        tile.compute_at(out, ro).async_copy().multi_buffer(2);
        for (Func *f : per_row)
            f->compute_at(out, ro);
        out.async_copy();
    }
};

class Softmax : public RowKernel<Softmax> {
public:
    void generate() override {
        RDom k(0, in.dim(0).extent());
        mx(r) = Halide::Float(32).min(); // -infinity: the max's identity
        mx(r) = Halide::max(mx(r), in(k, r));
        e(c, r) = Halide::exp(in(c, r) - mx(r));
        sum(r) = 0.0f;
        sum(r) += e(k, r);
        out(c, r) = e(c, r) / sum(r);
        shape();
    }
    void schedule() override { schedule_rows({&mx, &e, &sum}); }

private:
    Func mx{"mx"}, e{"e"}, sum{"sum"};
};
TANDEM_REGISTER_GENERATOR(Softmax, softmax)

class LogSoftmax : public RowKernel<LogSoftmax> {
public:
    void generate() override {
        RDom k(0, in.dim(0).extent());
        mx(r) = Halide::Float(32).min();
        mx(r) = Halide::max(mx(r), in(k, r));
        sum(r) = 0.0f;
        sum(r) += Halide::exp(in(k, r) - mx(r));
        out(c, r) = in(c, r) - mx(r) - Halide::log(sum(r));
        shape();
    }
    void schedule() override { schedule_rows({&mx, &sum}); }

private:
    Func mx{"mx"}, sum{"sum"};
};
TANDEM_REGISTER_GENERATOR(LogSoftmax, log_softmax)

class Layernorm : public RowKernel<Layernorm> {
public:
    Input<Buffer<float, 1>> gamma{"gamma"}, beta{"beta"};

    void generate() override {
        RDom k(0, in.dim(0).extent());
        Expr n = Halide::cast<float>(in.dim(0).extent());
        sum(r) = 0.0f;
        sum(r) += in(k, r);
        mean(r) = sum(r) / n;
        var(r) = 0.0f;
        var(r) += (in(k, r) - mean(r)) * (in(k, r) - mean(r));
        out(c, r) = (in(c, r) - mean(r)) / Halide::sqrt(var(r) / n + 1e-5f) * gamma(c) + beta(c);
        shape();
        for (Input<Buffer<float, 1>> *p : {&gamma, &beta})
            p->dim(0).set_bounds(0, C);
    }
    void schedule() override { schedule_rows({&sum, &mean, &var}); }

private:
    Func sum{"sum"}, mean{"mean"}, var{"var"};
};
TANDEM_REGISTER_GENERATOR(Layernorm, layernorm)

class UserRmsnorm : public RowKernel<UserRmsnorm> {
public:
    Input<Buffer<float, 1>> w{"w"};

    void generate() override {
        RDom k(0, in.dim(0).extent());
        ss(r) = 0.0f;
        ss(r) += in(k, r) * in(k, r);
        out(c, r) =
            in(c, r) * w(c) / Halide::sqrt(ss(r) / Halide::cast<float>(in.dim(0).extent()) + 1e-6f);
        shape();
        w.dim(0).set_bounds(0, C);
    }
    void schedule() override { schedule_rows({&ss}); }

private:
    Func ss{"ss"};
};
TANDEM_REGISTER_GENERATOR(UserRmsnorm, user_rmsnorm)

/** x - mean(row): a value of each row broadcast along it. */
class SubtractMean : public RowKernel<SubtractMean> {
public:
    void generate() override {
        RDom k(0, in.dim(0).extent());
        sum(r) = 0.0f;
        sum(r) += in(k, r);
        out(c, r) = in(c, r) - sum(r) / Halide::cast<float>(in.dim(0).extent());
        shape();
    }
    void schedule() override { schedule_rows({&sum}); }

private:
    Func sum{"sum"};
};
TANDEM_REGISTER_GENERATOR(SubtractMean, subtract_mean)

/** The running sum along each row (a prefix sum, as torch.cumsum(x, dim=-1)): a recurrence,
 * each element the one before plus its input. */
class RowScan : public RowKernel<RowScan> {
public:
    void generate() override {
        RDom k(1, in.dim(0).extent() - 1);
        scan(c, r) = in(c, r);
        scan(k, r) = scan(k - 1, r) + in(k, r);
        out(c, r) = scan(c, r);
        shape();
    }
    void schedule() override { schedule_rows({&scan}); }

private:
    Func scan{"scan"};
};
TANDEM_REGISTER_GENERATOR(RowScan, row_scan)

/** A matrix-vector product on the vector units (no tile_mma): out(r) = sum_k in(k, r) * w(k),
 * each of R rows of C values against the vector w, RB rows per tile. */
class Gemv : public Generator<Gemv> {
public:
    GeneratorParam<int> C{"C", 1000, 1, 1 << 20};
    GeneratorParam<int> R{"R", 64, 1, 1 << 20};
    GeneratorParam<int> RB{"RB", 8, 1, 256};
    Input<Buffer<float, 2>> in{"in"};
    Input<Buffer<float, 1>> w{"w"};
    Output<Buffer<float, 1>> out{"out"};

    void generate() override {
        RDom k(0, in.dim(0).extent());
        dot(r) = 0.0f;
        dot(r) += in(k, r) * w(k);
        out(r) = dot(r);
        in.dim(0).set_bounds(0, C);
        in.dim(1).set_bounds(0, R).set_stride(C);
        w.dim(0).set_bounds(0, C);
        out.dim(0).set_bounds(0, R);
    }
    void schedule() override {
        out.split(r, ro, ri, RB, TailStrategy::GuardWithIf).map_to_cores(ro);
        Func::staged(in).compute_at(out, ro).async_copy().multi_buffer(2);
        dot.compute_at(out, ro);
        out.async_copy();
    }

private:
    Var r{"r"}, ro{"ro"}, ri{"ri"};
    Func dot{"dot"};
};
TANDEM_REGISTER_GENERATOR(Gemv, gemv)

} // namespace
