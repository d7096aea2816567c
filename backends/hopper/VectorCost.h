#ifndef TANDEM_HOPPER_VECTORCOST_H
#define TANDEM_HOPPER_VECTORCOST_H

/** \file
 * What the Hopper model charges a vector op beyond its arithmetic (the VectorOps pass's flops),
 * as the emitter runs it (ElementLoops.h: over wgmma fragments, elementwise, a reduction, one
 * thread):
 *  - the shared-memory wavefronts of its loads and stores, in the order its threads make them:
 *    32 banks of 4 bytes, so a warp's access takes as many wavefronts as the most distinct words
 *    it touches in one bank (a wgmma fragment's order puts 8 rows in one instruction: into an
 *    unswizzled f32 tile of 64 columns, an 8-way conflict);
 *  - a row's values (FragmentEpilogue::row_loads) and a row reduction's element once per row:
 *    the emitter loads and stores them once per thread and row;
 *  - the rounds it waits one after another: a shuffle reduction's 5 rounds per row (a warp per
 *    row takes its warp's rows in turn), a quad's 2, one thread's every access.
 * The GPU showed both (benchmarks/results/gpu_hopper_notes.md "Session 45": the online attention's
 * exps tile, 8-way conflicts, and its row sum, a warp per row, were a third of its time).
 */

#include "Plan.h"
#include "tandem/AsyncIR.h"

#include <functional>

namespace tandem::hopper_backend {

struct VectorCost {
    int64_t wavefronts = 0; // shared-memory wavefronts: one per cycle per SM
    int64_t rounds = 0;     // dependent round trips (a shuffle, a shared-memory load), in turn
};

/** The cost of vector op `v` (its element nest `nest`) run by a role of `threads` threads;
 * `evaluate` evaluates an expression of the tile loops' vars (the nest's own are taken at their
 * first iteration). */
VectorCost vector_cost(const Plan &plan, const ir::VectorOp &v, const Halide::Internal::Stmt &nest,
                       int threads, const std::function<int64_t(const Halide::Expr &)> &evaluate);

} // namespace tandem::hopper_backend

#endif
