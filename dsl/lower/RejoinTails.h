#ifndef TANDEM_LOWER_REJOIN_TAILS_H
#define TANDEM_LOWER_REJOIN_TAILS_H

/** \file
 * Undoes Halide's loop partitioning of a loop with a runtime trip count: a loop and the tail loop
 * Halide split off it become one loop again, whose body is the tail's general one.
 *
 *     for (ko, 0, e1) {                                 for (ko, 0, max(c, e1)) {
 *       ... for (ki, 0, 512) ... }                 ->     ... for (ki, 0, min(K - ko*512, 512)) ...
 * } for (ko.rebased, 0, max(c - e1, 0)) {
 *       ... for (ki, 0, min(K - (e1 + ko.rebased)*512, 512)) ... }
 *
 * Why: a split loop is two loops, so the software pipeline restarts its prologue at the seam and
 * cannot run ahead from one tile into the next; with static shapes Halide turns the tail into
 * straight-line code or drops it, with runtime shapes (a GuardWithIf split of a runtime extent)
 * both loops stay.
 *
 * Soundness: iteration e1 + r of the joined loop runs the tail's iteration r exactly (its body is
 * the tail's with ko.rebased = ko - e1), so only the main loop's iterations need a proof: the two
 * bodies must be the same Stmt up to expressions proven equal for 0 <= ko < e1 (Halide's
 * simplifier, with the runtime extents >= 1, as bind_shapes requires). Where a proof fails the
 * pair stays split: correct, only slower. Nested pairs join inside out.
 *
 * Limits: only a loop named X followed at once by its tail X.rebased (Halide's RebaseLoopsToZero
 * names); prologue partitions (clamped starts) are left alone.
 */

#include "tandem/Kernel.h"

#include <set>
#include <string>

namespace tandem::lower {

Halide::Internal::Stmt rejoin_tails(const Halide::Internal::Stmt &s,
                                    const std::set<std::string> &runtime_extents);

} // namespace tandem::lower

#endif
