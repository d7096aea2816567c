#ifndef TANDEM_ZPU_EXECUTOR_H
#define TANDEM_ZPU_EXECUTOR_H

/** \file
 * Runs a kernel's async Stmt directly on the ZPU machine model, through the same runtime API the
 * emitted C++ calls (runtime.h). It is how `tandem run` and the autotuner execute a schedule
 * without compiling C++; tests check that it and the compiled emitted kernel agree bit for bit
 * and cycle for cycle.
 *
 * Control code is interpreted per statement; a vector op's innermost loop is evaluated as one
 * batch of lanes (sequentially when lanes would depend on each other, e.g. a reduction).
 */

#include "common/Evaluator.h"
#include "sim/Zpu.h"
#include "tandem/Kernel.h"

#include <map>
#include <string>

namespace tandem::zpu_backend {

/** `arguments` maps each kernel argument name to its DRAM buffer id in `machine`. */
void execute(const Kernel &kernel, sim::Machine &machine,
             const std::map<std::string, int> &arguments, const Shapes &shapes = {});

} // namespace tandem::zpu_backend

#endif
