#ifndef TANDEM_LOWER_SKIP_MASKED_BLOCKS_H
#define TANDEM_LOWER_SKIP_MASKED_BLOCKS_H

/** \file
 * The online softmax's key blocks that its mask hides whole are not computed (FlashAttention's
 * causal blocks above the diagonal). In the rewrite (Stage::online_softmax) a block whose every
 * key is masked for every row of the tile has a block max of -inf: its exponentials are
 * multiplied by 0, its rescale factors are exp(m - m) = 1 and exp(-inf) = 0 (or 0 and 0 before
 * any key was seen, when the state is still 0), so it leaves the running output, max and sum as
 * they were, exactly. The rewrite records that on the block max's Func (Directives::
 * masked_block_max: the block loop's name); this pass finds the block max's update in that loop,
 *
 *     for (c, 0, n) { ... bmax[s] = max(bmax[s], select(seen(c, s, j), x, -inf)) over s, j ... }
 *
 * takes the condition under which every (s, j) of its nest is masked (Halide's
 * and_condition_over_domain: a sufficient one) and solves it for c. Where it holds from some c0
 * on (a causal mask: the blocks after the tile's last row's diagonal), the loop ends at c0:
 *
 *     for (c, 0, min(n, max(c0, 0)))
 *
 * Where the solver finds no such bound the loop stays as it was (every block computed, the
 * masked ones to no effect).
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt skip_masked_blocks(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
