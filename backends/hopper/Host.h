#ifndef TANDEM_HOPPER_HOST_H
#define TANDEM_HOPPER_HOST_H

/** \file
 * The host side of a Hopper kernel's CUDA source (Emitter.h says what the file defines): the
 * launcher of one variant (prepare_<fn> checks the arguments and the runtime extents, encodes the
 * tensor maps and sizes the grid, launch_prepared_<fn> launches, release_<fn> frees, launch_<fn>
 * does all three), the dispatcher between a TMA variant and thread-copy variants, and the
 * library's call (emit_library). CodeGen.h prints the kernel; the plan (Plan.h) decided the
 * tensor maps, the launch checks and the shared memory.
 */

#include "Plan.h"

#include <string>
#include <vector>

namespace tandem::hopper_backend {

/** A parameter of the kernel, each a member of the prepared launch (`type` `name`) that
 * prepare_<fn> sets from `value`: a tensor map it encoded, a pointer thread copies use, a runtime
 * extent. `param` is the kernel's declaration of it. */
struct KernelParam {
    std::string param, type, name, value;
};
std::vector<KernelParam> kernel_params(const Kernel &kernel, const Plan &plan);

/** What the kernel's code fixes of its launch. */
struct LaunchShape {
    int threads = 0;            // per CTA
    int64_t dynamic_bytes = 0;  // dynamic shared memory, with the slack that aligns its base
    int64_t register_floor = 0; // > 0: the fewest registers per thread setmaxnreg needs
};

/** The launcher of the kernel `fn` (the plan's variant), whose parameters are `params`. */
std::string launcher(const Kernel &kernel, const std::string &fn, const Plan &plan,
                     const std::vector<KernelParam> &params, const LaunchShape &shape);

/** A variant a dispatcher launches: the launchers of `fn`, for the calls whose failing pitches
 * are `failing` (a bit set over pitch_classes of the TMA plan; 0: the TMA variant). */
struct StrideVariant {
    unsigned failing;
    std::string fn;
};

/** The launcher `fn` over `variants` (the TMA one first, the one that thread-copies every pitch
 * last): the variant for the pitches whose checks of the TMA plan `plan` (the global strides it
 * needs) fail at the call, else the last. */
std::string dispatcher(const Kernel &kernel, const std::string &fn, const Plan &plan,
                       const std::vector<StrideVariant> &variants);

/** The launcher `fn` of a pipeline of kernels (Kernel::stages), whose kernels' launchers are
 * `fns`: prepare allocates the intermediates (cudaMallocAsync on the legacy stream, from its
 * pool: a cudaMalloc and cudaFree per call would cost more than a decode-shape GEMM and
 * synchronize the device) and prepares each kernel, launch
 * launches them in turn on the stream (a kernel boundary orders them), release frees both. */
std::string pipeline_launcher(const Kernel &pipeline, const std::string &fn,
                              const std::vector<std::string> &fns);

} // namespace tandem::hopper_backend

#endif
