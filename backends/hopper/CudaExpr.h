#ifndef TANDEM_HOPPER_CUDAEXPR_H
#define TANDEM_HOPPER_CUDAEXPR_H

/** \file
 * CUDA's dialect of the shared C expression printer (common/CExpr.h), for the kernel and its
 * launcher: CUDA's integer types (int, int64_t, uint32_t, uint64_t), the runtime's
 * hopper::floor_div / floor_mod / min_of / max_of, bf16 values rounded by hopper::round_bf16,
 * CUDA's float math (sqrtf, fabsf, ...), infinities and NaN as bit patterns, a float modulo as
 * a - b * floorf(a / b), the bitwise intrinsics, hopper's c_name (Plan.h).
 *
 * What the element code loads and the kernel's own ids (blockIdx, the warpgroup) are the kernel
 * printer's (CodeGen.h derives from this class); on the host a load is an internal error.
 * Limits: a call other than the intrinsics above and CExpr's math is a user error naming it.
 */

#include "common/CExpr.h"

#include <set>
#include <string>

namespace tandem::hopper_backend {

class CudaExpr : public CExpr {
public:
    std::string type_name(const Halide::Type &t) const override;

    /** IR variables known to be >= 0 where they are read (ring counters, loops from 0): an int
     * divided by a positive constant, or taken modulo one, is then printed in unsigned
     * arithmetic, which is floor division without the sign fix-ups (a producer's ring slot and
     * parity: 3 instructions instead of some 15 per k-step). */
    std::set<std::string> nonnegative_vars;
    bool nonnegative(const Halide::Expr &e) const;

protected:
    const char *target() const override { return "hopper"; }
    std::string helper(Helper h) const override;
    std::string rounded(const Halide::Type &t, const std::string &v) const override;
    std::string name(const std::string &ir_name) const override;
    std::string load(const Halide::Internal::Load *l) override;
    std::string uint_literal(uint64_t value) const override;
    std::string float_literal(double value, const Halide::Type &t) const override;
    std::string div(const Halide::Internal::Div *d) override;
    std::string mod(const Halide::Internal::Mod *m) override;
    std::string cast(const Halide::Internal::Cast *c) override;
    std::string call(const Halide::Internal::Call *c) override;
    std::string math(const std::string &function, const std::string &argument,
                     const Halide::Type &t) const override;
    std::string unknown_call(const Halide::Internal::Call *c) override;
    std::string unsupported(const Halide::Expr &e) override;
};

/** The CUDA type a buffer of element type `t` is stored as (shared tiles, global pointers); a
 * user error for a type the emitter has no storage for. */
std::string storage_type(const Halide::Type &t);

} // namespace tandem::hopper_backend

#endif
