#ifndef TANDEM_EVALUATOR_H
#define TANDEM_EVALUATOR_H

/** \file
 * Evaluates the scalar control expressions and the element nests (vector-op bodies) of an async
 * Stmt on raw buffers: what every target's executor shares. Arithmetic is done in double and
 * rounded to the expression's type after each op (exact for f32 + - * / sqrt, and bf16 rounds to
 * nearest even), so results match compiled C++ without fused multiply-add bit for bit.
 *
 * An element nest's innermost loop is evaluated as one batch of lanes when lanes are independent
 * (an elementwise store), folded in order when it is a reduction into one element, and run lane by
 * lane otherwise.
 */

#include "Halide.h"
#include "sim/Common.h"

#include <functional>
#include <string>
#include <unordered_map>

namespace tandem {

/** The machine models' element type of a Halide type; tandem::Error for types they do not hold. */
sim::DType dtype_of(const Halide::Type &t);

struct BufferRef {
    void *data = nullptr;
    sim::DType type = sim::DType::F32;
    int64_t elements = 0;
    int id = -1;
};

class Evaluator {
public:
    using Lookup = std::function<const BufferRef &(const std::string &)>;
    /** `hook` evaluates target calls (core id, warpgroup id); it returns false for others. */
    using CallHook = std::function<bool(const Halide::Internal::Call *, double *)>;

    Evaluator(Lookup buffer, CallHook hook)
        : buffer(std::move(buffer)), call_hook(std::move(hook)) {}

    std::unordered_map<std::string, double> vars;

    double scalar(const Halide::Expr &e);
    /** Runs an element nest (For, LetStmt, IfThenElse, Block, Store). */
    void elements(const Halide::Internal::Stmt &s);

private:
    enum class StoreKind { Elementwise, Reduction, Sequential };
    Lookup buffer;
    CallHook call_hook;
    std::unordered_map<const Halide::Internal::Store *, StoreKind> store_kinds;
    std::string lane_var; // the lane variable of the batch being evaluated
    double lane_base = 0;

    StoreKind kind_of(const Halide::Internal::Store *st, const std::string &var);
    void batch(const std::string &var, int64_t min, int64_t extent,
               const Halide::Internal::Store *st);
    void store_lanes(const Halide::Internal::Store *st, int n);
    double load(const BufferRef &b, int64_t i);
    void store(const BufferRef &b, int64_t i, double v);
    template <typename F>
    void binary(const Halide::Expr &a, const Halide::Expr &b, const Halide::Type &t, double *out,
                int n, F f);
    void eval(const Halide::Expr &e, double *out, int n);
    void call(const Halide::Internal::Call *c, double *out, int n);
};

} // namespace tandem

#endif
