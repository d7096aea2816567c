#ifndef TANDEM_COMMON_CEXPR_H
#define TANDEM_COMMON_CEXPR_H

/** \file
 * The C expression printer the three emitters derive from (Halide's CodeGen_C is the model):
 * Halide expressions as C++ text with Halide's semantics. Every binary operation is
 * parenthesized, so the text composes without precedence rules; integer division and modulo
 * round towards negative infinity (the target runtime's floor_div / floor_mod); bf16 values are
 * held in floats and rounded after each operation; min and max are templates over the value
 * type.
 *
 * What differs per target is a hook: the value types, the bf16 rounding, the runtime's helper
 * functions, literals, casts, the math calls, how a call argument is printed, and what a load
 * or a target intrinsic (the core id, the warpgroup) reads. Each emitter's printer is a small
 * subclass:
 *
 *     zpu     ZpuExpr    (backends/zpu/Emitter.cpp)     zpu:: helpers, buffer_data[index]
 *     ascend  AscendExpr (backends/ascend/Emitter.cpp)  C++'s / and % where the operands are
 *                                                       provably >= 0, tensor.GetValue(index)
 *     hopper  CudaExpr   (backends/hopper/CudaExpr.h)   CUDA's types and math, hopper:: helpers;
 *                                                       the kernel's loads and ids in Emitter.cpp
 *
 * Limits: the expression nodes of the element code and control flow (immediates, variables,
 * arithmetic, comparisons, logic, select, casts, loads and calls); anything else (vectors,
 * lets inside expressions) is unsupported() and the target says how it fails.
 */

#include "tandem/AsyncIR.h" // Halide, and its internal_assert for the printers
#include "tandem/Kernel.h"

#include <string>

namespace tandem {

/** A C identifier for an IR name: every non-alphanumeric character becomes '_'. (A target may
 * reserve more names: hopper's c_name.) */
std::string c_name(const std::string &name);

class CExpr {
public:
    virtual ~CExpr() = default;

    /** `e` as C++ text. */
    std::string print(const Halide::Expr &e);
    std::string operator()(const Halide::Expr &e) { return print(e); }
    /** print() without the parentheses around the whole (arguments, indices, conditions). */
    std::string print_bare(const Halide::Expr &e) { return strip_parentheses(print(e)); }
    /** `s` without the parentheses around the whole, where one pair encloses all of it. */
    static std::string strip_parentheses(const std::string &s);
    /** Halide's own printing of `e` (comments, messages). */
    static std::string halide_text(const Halide::Expr &e);

    /** The C++ type a value of type `t` is held in (declarations, casts, min and max). Default:
     * bool, int64_t for every integer, double, and float for f32 and bf16 (bf16 values are held
     * exactly in a float). */
    virtual std::string type_name(const Halide::Type &t) const;

protected:
    /** The target runtime's helpers. */
    enum class Helper { FloorDiv, FloorMod, Min, Max };
    /** Default: floor_div, floor_mod, std::min, std::max. */
    virtual std::string helper(Helper h) const;

    /** The emitter's name in internal errors ("zpu" in "zpu emitter: ..."). */
    virtual const char *target() const = 0;
    /** `v`, a value of type `t`, rounded to what `t` holds: bf16 arithmetic rounds after each
     * operation, as the executor does. `v` is a parenthesized expression or a literal. */
    virtual std::string rounded(const Halide::Type &t, const std::string &v) const = 0;
    /** What a load of the element code reads. */
    virtual std::string load(const Halide::Internal::Load *l) = 0;

    /** The C identifier of a variable. Default: c_name. */
    virtual std::string name(const std::string &ir_name) const { return c_name(ir_name); }
    /** How an argument of a helper (floor_div, min, ...) prints. Default: print(). */
    virtual std::string argument(const Halide::Expr &e) { return print(e); }

    virtual std::string uint_literal(uint64_t value) const;
    /** Default: 9 significant digits of the float, always with '.' or an exponent, suffix f;
     * a bf16 literal rounded. */
    virtual std::string float_literal(double value, const Halide::Type &t) const;
    /** `(a op b)`, rounded to `t`, the result's type. */
    std::string binary(const Halide::Type &t, const Halide::Expr &a, const Halide::Expr &b,
                       const char *op);
    /** Default: C's `/` for floats, floor_div for integers. */
    virtual std::string div(const Halide::Internal::Div *d);
    /** Default: floor_mod for integers; a float modulo is an internal error. */
    virtual std::string mod(const Halide::Internal::Mod *m);
    /** Default: `(type)(value)`, rounded to the result's type. */
    virtual std::string cast(const Halide::Internal::Cast *c);
    /** Default: likely and promise_clamped print their value, abs and the f32 math calls
     * (sqrt_f32, exp_f32, log_f32, floor_f32, ceil_f32, tanh_f32) through math(), anything else
     * is unknown_call(). A target prints its own intrinsics first, then calls this. */
    virtual std::string call(const Halide::Internal::Call *c);
    /** A math call by its C name ("sqrt", "fabs") on its printed argument. Default:
     * std::<name>((float)<argument>); fabs: std::fabs(<argument>) rounded to `t`. */
    virtual std::string math(const std::string &function, const std::string &argument,
                             const Halide::Type &t) const;
    /** A call the target cannot print: throws the target's user error. */
    virtual std::string unknown_call(const Halide::Internal::Call *c) = 0;
    /** An expression node the printer does not know. Default: an internal error. */
    virtual std::string unsupported(const Halide::Expr &e);
};

} // namespace tandem

#endif
