#ifndef TANDEM_TESTS_ASCEND_KERNELS_H
#define TANDEM_TESTS_ASCEND_KERNELS_H

// The AscendC kernels emitted at build time (tests/ascend/CMakeLists.txt), compiled against
// backends/ascend/runtime/kernel_operator.h, behind launchers that need no Halide.
#include "sim/Ascend.h"

#include <vector>

namespace ascend_test {

struct EmittedKernel {
    const char *name, *app, *schedule, *params;
    int dropped_pair; // -1: the kernel as emitted; N: flag pair N left out (a mutant)
    /** Runs the kernel on every cube core (kind 0: AIC_MODE), vector core (1: AIV_MODE) or both
     * (2: MIX_MODE) of the machine, as the host's KernelMode says; `gm` are the GM buffers in
     * argument order (a mix kernel's workspace last). */
    void (*launch)(tandem::sim::ascend::Machine &machine, const std::vector<int> &gm, int kind);
};

const std::vector<EmittedKernel> &emitted_kernels();
const std::vector<EmittedKernel> &mutant_kernels();

} // namespace ascend_test

#endif
