#ifndef TANDEM_LOWER_REQUIRED_REGIONS_H
#define TANDEM_LOWER_REQUIRED_REGIONS_H

/** \file
 * What a call must pass: the region of each input the algorithm reads, from Halide's bounds of
 * the pure algorithm (not the schedule, whose tiles round regions up), as conditions on the
 * runtime extents. For gemm, C(j, i) = sum_r A(r, i) * B(j, r) with r over A's dim 0:
 *
 *     B.extent.1 >= A.extent.0,  A.extent.1 >= C.extent.1,  B.extent.0 >= C.extent.0
 *
 * A kernel with static shapes has none left (its constant extents decide them at compile time:
 * a static input too small for the output is a user error here). The models check them at each
 * call (Kernel::bind_shapes), the libraries before they touch a buffer, the Hopper launcher
 * before it encodes a tensor map (TMA would zero-fill a short input instead of failing).
 *
 * Limits: a read whose index the bounds cannot bound (data-dependent) is not checked.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

std::vector<CallCheck> required_regions(const CompileContext &ctx);

/** Each input's read extents (KernelArg::read_extents): where the region the algorithm reads in a
 * dim starts at 0, its extent in the runtime extents (B.extent.1 reads A.extent.0 rows). */
void set_read_extents(const CompileContext &ctx, std::vector<KernelArg> *args);

/** The region of `func` (a Func of the pipeline) the output needs, from the pure algorithm: per
 * dim an interval in the runtime extents (constants for static shapes); empty when the output
 * does not read it. */
Halide::Internal::Box required_box(const CompileContext &ctx, const std::string &func);

} // namespace tandem::lower

#endif
