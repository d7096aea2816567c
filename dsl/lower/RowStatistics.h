#ifndef TANDEM_LOWER_ROW_STATISTICS_H
#define TANDEM_LOWER_ROW_STATISTICS_H

/** \file
 * Row statistics held once per row. FlashAttention's online softmax (Stage::online_softmax) keeps
 * a Tuple per output element: the partial output, the running max and the running sum. The max
 * and the sum are the same for every column of a row (Halide 14 cannot keep them in a Func of
 * the rows alone: the state's one scan must update both), so on Halide's Stmt their buffers lose
 * the columns and their stores leave the column loops:
 *
 *     for (s, 0, 64) {                                    for (s, 0, 64) {
 *       for (n, 0, 128) {                                   for (n, 0, 128) {
 *         st.0[s*128 + n] = f(st.0[..], st.1[s*128 + n])      st.0[s*128 + n] = f(.., st.1[s])
 *         st.2[s*128 + n] = g(st.2[..], st.1[s*128 + n]) ->   }
 *         st.1[s*128 + n] = max(st.1[s*128 + n], m[s])        st.2[s] = g(st.2[s], st.1[s])
 *       }                                                     st.1[s] = max(st.1[s], m[s])
 *     }                                                     }
 *
 * (head dim 128, 64 query rows: 96 KB of state become 33 KB; the vector work of the max and the
 * sum falls by the head dim).
 *
 * Which buffers: the Tuple components after the first of a Func whose directives say
 * `row_statistics` = k (online_softmax sets it: those components read only themselves at the
 * same element and the rows' own Funcs, so they do not vary along the first k dimensions, the
 * columns). Their flat index i becomes i / P, P the product of the k column extents (constant):
 * the row. A store leaves the loops whose variables its index loses so (the columns); it runs
 * after them, at their first iteration, in the order the stores had.
 *
 * The values the columns' statements compute that are the same along their columns and call a
 * function (FlashAttention's rescale factors exp(m - m') and exp(m_block - m'), two per output
 * element) are computed once per row, into buffers of the rows' shape, in the rows' loop before
 * the running values are stored (in one loop with those stores where the columns then read the
 * running values only through the factors, else in a loop of their own).
 *
 * Soundness: every value stored in a row is the same (the directive), so one store per row
 * writes what each had. Moving a row's stores after its column loops keeps every read: each
 * statement that stays reads the old value (it came before the stores in its iteration, which
 * is checked), the moved stores read one another as before, and they read nothing the statements
 * that stay write (checked). A factor reads no variable bound inside the column loops and no
 * buffer they write, so its value is the one each column computed. A store's index must be the row
 * times P plus the moved loops' column (checked with the simplifier and the loops' bounds). Where a
 * check fails, or an extent is not constant, the buffers stay per element (correct, larger), with a
 * note.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt row_statistics(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
