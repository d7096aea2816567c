#ifndef TANDEM_TESTS_MUTATION_MUTANTS_H
#define TANDEM_TESTS_MUTATION_MUTANTS_H

/** \file
 * Protocol mutants of a kernel's async Stmt: each changes ONE synchronisation op, found by a
 * deterministic walk of the Stmt (program order, every occurrence counted).
 *
 *   delete   each tandem_wait, tandem_arrive, tandem_expect, tandem_fence_proxy_async,
 *            tandem_advance (a ring or turn counter), tandem_sync (a ZPU engine sync),
 *            tandem_mma_wait (a Hopper wgmma.wait_group) and tandem_cross_core_wait / _set (an
 *            Ascend mix kernel's flags between its cube and vector cores)
 *   pending  each tandem_mma_wait(acc, n) -> n + 1: one more MMA group left in flight
 *            and each ZPU mesh barrier tandem_mesh_barrier
 *   local    each cluster arrival tandem_arrive(b, s, n) -> an arrival on its own CTA's only
 *   parity   each explicit wait parity p -> 1 - p (Hopper rings)
 *   slot     each version index of a buffer with several: slot -> (slot + 1) % slots, in the
 *            barrier slot of a tandem_copy, tandem_wait, tandem_arrive or tandem_expect, where the
 *            target reads that slot (a Hopper TMA store and its drain wait name no mbarrier)
 *
 * Mutant n of a kernel is the n-th (op, mutation) pair of the walk; mutants(k) lists them all.
 */

#include "tandem/Kernel.h"

#include <string>
#include <vector>

namespace tandem::mutation {

struct Mutant {
    enum class Kind { Delete, FlipParity, ShiftSlot, Weaken } kind;
    std::string op;                 // the intrinsic: "tandem_wait", "tandem_copy", ...
    std::string barrier;            // of a wait, copy, arrive or expect
    int role = -1;                  // the warpgroup whose branch holds it (-1: every one)
    std::vector<std::string> loops; // enclosing loops, outermost first
    std::string text;               // "delete tandem_wait(...) [warpgroup 1] in loop ..."
    int cross_flag = -1;            // a cross-core flag's id, without its slot's parity
};

/** The mutants of `kernel`, in walk order. */
std::vector<Mutant> mutants(const Kernel &kernel);

/** `kernel` with mutant `index` applied to its body. */
Kernel mutate(const Kernel &kernel, int index);

} // namespace tandem::mutation

#endif
