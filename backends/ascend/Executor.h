#ifndef TANDEM_ASCEND_EXECUTOR_H
#define TANDEM_ASCEND_EXECUTOR_H

/** \file
 * Runs an Ascend kernel's async Stmt on the Ascend machine model: for each AI core, the scalar
 * stream is interpreted once, recording every op on its pipe (DataCopy on MTE2/MTE3, vector ops
 * on V, SetFlag/WaitFlag), then the core's program is ended; machine.finish() simulates every
 * core's pipes together. A vector op's numerics run when the model executes it, on the loop
 * variables it saw when it was recorded.
 */

#include "sim/Ascend.h"
#include "tandem/Kernel.h"

#include <map>
#include <string>

namespace tandem::ascend_backend {

/** `arguments` maps each kernel argument name to its GM buffer id in `machine`. */
void execute(const Kernel &kernel, sim::ascend::Machine &machine,
             const std::map<std::string, int> &arguments, const Shapes &shapes = {});

} // namespace tandem::ascend_backend

#endif
