#ifndef TANDEM_LOWER_ASCEND_ROW_SPLIT_H
#define TANDEM_LOWER_ASCEND_ROW_SPLIT_H

/** \file
 * The two AIVs of a cube core sharing one tile of a mix kernel's vector code by rows, as
 * hand-written AscendC attention does: AIV 2i + sub (AscendC's GetSubBlockIdx()) takes rows
 * [sub * R / 2, (sub + 1) * R / 2) of every buffer the tile's vector code touches, so that both
 * work on every tile the cube hands over instead of taking tiles in turn (where the cube waits for
 * the vector side at every key block, as attention's P round trip makes it, one AIV idled).
 *
 * It applies where the tile's code works row by row, proved from its index expressions: every
 * vector op's nest has the rows as its outermost loop (the same bound R everywhere), and each of
 * its loads and stores indexes row r of its buffer (r * pitch + what stays inside one row, the
 * pitch one per buffer); every copy moves whole rows of such a buffer (a dim whose on-chip stride
 * is the pitch, or contiguous rows); there are no loads or stores outside vector ops. Each AIV's
 * rows start on a 32-byte block in every buffer (R / 2 * pitch * bytes a multiple of 32), as
 * AscendC's vector instructions need. Anything else keeps the tile whole (the AIVs take turns).
 *
 * R is the row loops' constant bound (a tail's runtime count splits by it, as the instructions
 * cover the bound anyway), so both halves are R / 2 rows. Each AIV holds only its half of the
 * tile's constant-size buffers, its rows rebased to 0 (half the UB); copies to and from GM keep
 * the rows' places.
 */

#include "Halide.h"

#include <string>

namespace tandem::lower {

/** `tile` (the vector side's code for one tile, both AIVs running it) with its rows split between
 * the two AIVs, `sub` the AIV's index in its cube core; undefined where the code is not row by row,
 * `why` then saying what is not. */
Halide::Internal::Stmt split_rows_between_aivs(const Halide::Internal::Stmt &tile,
                                               const Halide::Expr &sub, std::string *why);

} // namespace tandem::lower

#endif
