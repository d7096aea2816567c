#ifndef TANDEM_LOWER_RUNNING_MAX_H
#define TANDEM_LOWER_RUNNING_MAX_H

/** \file
 * The online softmax's exponentials taken against the running max (FlashAttention-2), not
 * against their own block's max. The rewrite (Stage::online_softmax) computes each key block
 * against its own max b and folds it into the state with two factors:
 *
 *     m' = max(m, b);  acc = acc * exp((m - m') t) + (P V) * exp((b - m') t);  likewise the sum
 *
 * which costs the vector code a second rescale per block: of the block's P V sums, per output
 * element. Here the block max starts from the running max instead of -inf (the state's max is
 * kept in the block max's units, Directives::running_max), so b >= m holds after the block
 * max's loop: m' = b, the block's factor is exp(0) = 1, and the state update becomes
 *
 *     f = exp((m - b) t);  m = b;  acc = acc * f + P V;  sum = sum * f + rowsum(P)
 *
 * Steps, in the block loop (Directives::running_max_loop):
 *  1. the block max's first store (-inf) loads the running max at the same row;
 *  2. after the block max is made, each expression is simplified with b >= m (max(m, b) = b,
 *     min(m - b, 0) = m - b, min(b - m, 0) = 0, ...; exp of a constant folded);
 *  3. a buffer of the block that now holds a constant everywhere (the block's factor, 1) is
 *     replaced by it;
 *  4. the running max's store and the stores that read the running max (the factor f) move to
 *     right after the block max, each in a copy of its row loop: the next block's max can then
 *     be made before this block's P V is folded in (Ascend's skewed mix kernels, Hopper's
 *     intra-warpgroup overlap) and still start from this block's running max.
 *
 * Soundness: the state is the same whatever value the block's exponentials are taken against,
 * as long as the factors use that value (the rewrite's algebra), and a block max that starts
 * from m is max(m, b). b >= m holds after the block max's loop until the end of the block (only
 * the moved store writes m, with b). The moved stores read only the running max, the block max,
 * constants and their loop's variable; nothing before their old place writes what they read or
 * reads what they write (checked), and nothing after their new place reads the running max.
 * Where a check fails the loop stays as it was, with a note.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt carry_running_max(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
