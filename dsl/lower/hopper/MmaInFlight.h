#ifndef TANDEM_LOWER_MMA_IN_FLIGHT_H
#define TANDEM_LOWER_MMA_IN_FLIGHT_H

/** \file
 * Hopper: when an MMA group is waited for. A wgmma runs asynchronously; `tandem_mma_wait(acc, n)`
 * (wgmma.wait_group n) retires all but n of the warpgroup's groups. Waiting for each step's MMA
 * before releasing its operands (n = 0) drains the tensor pipe at every K step. In a consumer's
 * K loop that releases its ring versions, one group is kept in flight instead (CUTLASS's
 * K_PIPE_MMAS = 1): step k issues its MMA, waits until only that one is pending, then releases
 * the versions step k-1 read; the last step's versions are released after the loop.
 *
 *     for (ko, 0, n) {                     for (ko, 0, n) {
 *       let slot = ring % S                  let slot = ring % S
 *       wait(full, slot)                     wait(full, slot)
 *       mma(acc, A[slot], B[slot])    ->     mma(acc, A[slot], B[slot]); mma_wait(acc, 1)
 *       arrive(empty, slot)                  if (ko > 0) arrive(empty, (ring - 1) % S)
 *       advance(ring) }                      advance(ring) }
 *                                          if (n > 0) { mma_wait(acc, 0); arrive(empty, (ring - 1)
 * % S) }
 *
 * Every other MMA is waited for at once (n = 0). The machine model checks the result: a version
 * released while an MMA may still read it is a race there.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

Halide::Internal::Stmt keep_mmas_in_flight(const Halide::Internal::Stmt &s);

} // namespace tandem::lower

#endif
