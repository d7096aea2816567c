#ifndef TANDEM_HOPPER_TAIL_PROOF_H
#define TANDEM_HOPPER_TAIL_PROOF_H

/** Proves at compile time what hopper::check_tail would check at run time for one copy and one
 * dim of its tensor's copy view: that where the copy is shorter than its box, the box's part past
 * the copy lies past the tensor's edge.
 *
 * The copy's extent along the dim must be a clamp to a constant box, min(a, R) or
 * max(min(a, R), 0), and its coordinate c (what the check computes from the flat offset:
 * offset / stride, modulo the extent unless the dim is the view's outermost) must be found among
 * the offset's terms: the terms that are multiples of the dim's stride, divided by it; no other
 * term below them (dim 0: stride 1), the terms of the outer dims multiples of the next stride,
 * which is the stride times the extent. Then 0 <= c < edge by the enclosing loops' bounds
 * (`scope`), the terms below stay below the stride (each coordinate below its edge), and
 * c + a >= edge, where the edge is the view's extent or, for an MMA operand whose tensor map ends
 * where the algorithm's reads do, that read extent (KernelArg::read_extents). A K loop split
 * GuardWithIf gives a = K - c, which is the case of a runtime-shape GEMM's operands: its producer
 * then issues no check along K.
 *
 * Limits: dims other than 0 and the outermost keep their run-time check, as does anything the
 * simplifier and interval bounds cannot show (tile coordinates of another tensor's extents). */

#include "Halide.h"

#include "tandem/Kernel.h"

namespace tandem::hopper_backend {

/** The box reach R the tail along view dim `d` is proven for (the copy's extent is clamped to R),
 * or 0 where it is not proven. `offset` and `extent` are the copy's global offset and its extent
 * along `d`, with the grid's variables as the scope bounds them. `edges`: per view dim, where the
 * tensor's data ends for the copy (the view's extent, or the extent the algorithm reads, which a
 * call check keeps within it): the tail must reach edges[d], and the coordinates below `d` stay
 * below their edges. `facts`: what the simplifier may assume of the kernel's runtime extents
 * (each >= 1, as at every call; Halide's bounds of x % y do not know y > 0 otherwise). */
int64_t proven_tail_reach(const Halide::Expr &offset, const std::vector<KernelArg::Dim> &view,
                          size_t d, const Halide::Expr &extent,
                          const Halide::Internal::Scope<Halide::Internal::Interval> &scope,
                          const std::vector<Halide::Expr> &edges,
                          const Halide::Internal::Scope<Halide::Internal::Interval> &facts);

} // namespace tandem::hopper_backend

#endif
