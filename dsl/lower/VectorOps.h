#ifndef TANDEM_LOWER_VECTOR_OPS_H
#define TANDEM_LOWER_VECTOR_OPS_H

/** \file
 * Vector-op formation. Every element nest left after copy and MMA recognition (initialisations,
 * epilogues, reductions, pointwise math) runs on the vector core as one op. The op records its
 * work (flops = arithmetic nodes per element x trip count) and the region of every buffer it
 * touches, so that the simulator can time it and check it for races.
 *
 *     for (i, 0, 128) { for (j, 0, 128) { C_stage[j + i*128] = bfloat16(acc[j + i*128]) } }
 * becomes
 *     let tandem.vector_op.3 = tandem_vector_op("C_stage", 16384, "C_stage", 0, 16384, 1,
 *                                               "acc", 0, 16384, 0)
 *     for (i, 0, 128) { ... unchanged ... }
 *
 * Limits (user errors): the vector core reads and writes on-chip buffers only; an input read
 * directly from DRAM must be staged first (A.in(consumer)).
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt form_vector_ops(const Halide::Internal::Stmt &s, CompileContext &ctx);

} // namespace tandem::lower

#endif
