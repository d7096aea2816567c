#ifndef TANDEM_HOPPER_EXECUTOR_H
#define TANDEM_HOPPER_EXECUTOR_H

/** \file
 * Runs a Hopper kernel's async Stmt on the Hopper machine model (backends/sim/Hopper.h): one CTA
 * after another, each warpgroup an agent running its role of the Stmt. A role is compiled into a
 * flat list of instructions (loops and ifs become jumps) so that an agent can stop at a wait and
 * resume there when the model wakes it.
 *
 * Intrinsics map to the model's ops: tandem_copy into shared memory = a TMA load completing on
 * its mbarrier; tandem_copy to the output = a TMA store in a bulk group; a copy of a tile TMA
 * cannot move (plan_kernel, Plan.h) = a thread load or store instead; tandem_wait on an
 * mbarrier = try_wait.parity with the agent's phase bit for that version (then flipped); a wait on
 * a store source's empty barrier = bulk wait_group.read 0; tandem_mma = wgmma fence, mma_async,
 * commit and wait_group 0; tandem_expect / tandem_arrive / tandem_fence_proxy_async /
 * tandem_setmaxnreg as named.
 */

#include "sim/Hopper.h"
#include "tandem/Kernel.h"

#include <map>
#include <string>

namespace tandem::hopper_backend {

struct Plan;

/** The CTAs of `kernel` an SM holds at once on the model (HopperParams::resident_ctas): the
 * launch's shared memory, the threads, and the registers: the setmaxnreg floor where the roles
 * set theirs (a warp-specialized kernel claims the register file), else the accumulators plus
 * params.thread_registers per thread. */
int resident_ctas(const Kernel &kernel, const Plan &plan, const sim::hopper::HopperParams &params);

/** `arguments` maps each kernel argument name to its global buffer id in `machine`. */
void execute(const Kernel &kernel, sim::hopper::Machine &machine,
             const std::map<std::string, int> &arguments, const Shapes &shapes = {});

} // namespace tandem::hopper_backend

#endif
