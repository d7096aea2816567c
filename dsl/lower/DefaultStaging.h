#ifndef TANDEM_LOWER_DEFAULT_STAGING_H
#define TANDEM_LOWER_DEFAULT_STAGING_H

/** \file
 * Staging the user did not write, before Halide's lowering. The vector units of every target work
 * on chip, so an input that a Func's vector code reads straight from DRAM (a bias, a residual,
 * layernorm's gamma and beta) is staged for that Func, where the Func is computed: as if the user
 * had written
 *
 *     Func gamma_tile = Func::staged(gamma, out);
 *     gamma_tile.compute_at(out, t);            // out's map_to_cores loop, or out's compute_at
 *
 * with a note saying so. A copy the user staged (Func::staged, in()) is theirs and stays; an
 * input of a tile_mma or of an inlined Func is left to the passes that report it.
 *
 * Likewise the output's tails: a split of the output the user gave no TailStrategy is Halide's
 * ShiftInwards (Halide resolves Auto so as the split is written), whose last tile overlaps the one
 * before it (two cores writing the same elements: a race) or, where the tile exceeds a static
 * extent, starts before the tensor. Such splits are guarded instead (GuardWithIf), with a note:
 * tiles larger than the tensor shrink to it.
 *
 * And the storage of a copy read over a window: a staged input that a reduction with a where
 * clause reads along its reduction variables (a window of rows, a causal mask) has a region that
 * is empty for the tiles the window leaves nothing to read. Halide 14 allocates such a region with
 * a negative size (a "size greater than 2^31" error, or a crash in its simplifier), so those
 * dimensions are bound to the input's extent (Func::bound_storage): the most any tile reads.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

void stage_inputs_read_by_vector_code(const Func &output, const std::vector<ImageParam> &inputs,
                                      CompileContext &ctx);
void guard_output_tails(const Func &output, CompileContext &ctx);
void bound_windowed_copies(const Func &output, const std::vector<ImageParam> &inputs);

} // namespace tandem::lower

#endif
