#ifndef TANDEM_LOWER_ASCEND_MIX_H
#define TANDEM_LOWER_ASCEND_MIX_H

/** \file
 * Ascend mix kernels: a tile MMA whose accumulator feeds an epilogue beyond a cast (bias,
 * activation, scaling: anything the vector path computes). The cube cores cannot reach UB and the
 * vector cores cannot reach L0C, so the kernel becomes two sides that meet in GM, as AscendC's
 * KERNEL_TYPE_MIX_AIC_1_2 kernels do (catlass's matmul_epilogue):
 *
 *   cube side, AIC i, each tile n it computes:     vector side, AIV 2i + sub, each tile n of AIC i:
 *     the MMAs into acc (L0C)                        CrossCoreWaitFlag(n % 2)
 *     if n >= 2: CrossCoreWaitFlag(2 + n % 2)        if n % 2 == sub:
 *     Fixpipe acc -> workspace[i][n % 2]               DataCopy workspace[i][n % 2] -> acc.ub
 *     CrossCoreSetFlag<2, PIPE_FIX>(n % 2)             CrossCoreSetFlag<2, PIPE_MTE2>(2 + n % 2)
 *   at the end, the last two frees waited for         the epilogue on acc.ub, stored from UB
 *                                                    else: CrossCoreSetFlag<2, PIPE_MTE2>(2 + n %
 * 2)
 *
 * The two AIVs of a cube core take its tiles in turn, so each has two tiles' time for an epilogue
 * and the cube stores tile n + 1 while an AIV works on tile n (two workspace slots per AIC). Both
 * AIVs pass every wait, as an AIC's set counts up both their counters, and both answer, as the
 * AIC's counter moves only once both have set (mode 2; docs/ascendc_api_facts.md section 3).
 * The workspace keeps the accumulator's layout (Halide's pitch), so the epilogue reads acc.ub
 * where it read acc. Kernel::workspaces holds it (f32, two slots per AIC).
 *
 * A chain's second operand (p = act(h) read by a second MMA, h the first's accumulator) goes the
 * other way: the AIV whose turn h's tile was computes p in p.ub and copies it into its slot of
 * p.workspace (p's type, two slots per AIC); the cube takes it into L1 (Nd2Nz) where the second
 * MMA consumes p:
 *
 *   cube side, where p is consumed (q = n % 2):    vector side, where p is consumed:
 *     CrossCoreWaitFlag(4 + q)                       if n >= 2: CrossCoreWaitFlag(6 + q)
 *     DataCopy p.workspace[i][q] -> p (L1)           if q == sub: DataCopyPad p.ub -> slot q
 *     CrossCoreSetFlag<2, PIPE_MTE2>(6 + q)          CrossCoreSetFlag<2, PIPE_MTE3>(4 + q)
 *
 * Accumulators the vector code reads in different statements go in groups, each with its own
 * counter, workspace and flags (the stored / read pair 0 / 2, then 8 / 10, 12 / 14): attention
 * hands each key block's scores, takes P back, then hands the block's P V sums. The AIVs take
 * turns by the tiles of a state the vector code carries beyond a group's tile (attention's
 * running max, sum and output: by output tile), else by the first group's tiles; the one whose
 * turn it is not passes the same waits and answers the same flags, and does nothing else. Where
 * an operand goes back to the cube inside those tiles (the cube then waits for the vector side
 * at every block), the two AIVs share each tile by rows instead, when its code is row by row
 * (AscendRowSplit.h): both work on every block.
 *
 * The body is ir::make_mix(cube side, vector side); the passes after this one see both, and
 * Ascend's finish() joins the pipes of each side by itself.
 */

#include "tandem/Kernel.h"

#include <functional>

namespace tandem::lower {

/** The mix kernel of a matmul with an epilogue on Ascend (else `s` unchanged). */
Halide::Internal::Stmt split_mix_kernel(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
