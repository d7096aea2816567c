#ifndef TANDEM_APPS_GPU_TIMING_H
#define TANDEM_APPS_GPU_TIMING_H

/** \file
 * A Hopper kernel timed on this machine's GPU, for the tuner (`tandem tune --device gpu`): the
 * kernel's CUDA is emitted, built with nvcc together with the GPU harness (benchmarks/gpu/
 * harness.cu: fresh random inputs, every element checked against cuBLAS or a plain CUDA
 * reference, every timed launch compared bit for bit with the first, median of 25 prepared
 * launches), and run in its own process under a time limit; builds run in parallel, timings one
 * at a time per machine (a lock file), so several jobs or workers never share the GPU while timed.
 *
 * Limits: the apps the harness knows (gemm, attention_scores, elementwise, rmsnorm); static shapes;
 * nvcc from TANDEM_NVCC, /usr/local/cuda/bin or PATH; a GPU of compute capability 9.0 (sm_90a).
 */

#include "App.h"

#include <string>

namespace tandem::apps {

struct GpuTiming {
    bool correct = false;
    double time_ms = 0;      // median of the kernel's timed launches
    double reference_ms = 0; // cuBLAS (gemm) or a device-to-device copy (streaming), same run
    double max_rel_err = 0;
    std::string device;  // the GPU's name
    std::string failure; // set when nothing was measured: the build or the run failed (why)
};

/** nvcc: TANDEM_NVCC, else /usr/local/cuda/bin/nvcc, else the one on PATH. */
std::string nvcc_path();

/** Whether the harness checks and times `app`'s kernels. */
bool gpu_harness_times(const App &app);

/** tandem::Error saying what is missing when this machine cannot time kernels on a GPU (nvcc, a
 * GPU). */
void require_gpu();

/** Builds and runs the kernel of `app` at `params` with `schedule` on the GPU; the run is killed
 * after timeout_seconds (then `failure` says so). */
GpuTiming time_on_gpu(const App &app, const Params &params, const std::string &schedule,
                      double timeout_seconds);

/** The nvcc command that builds a harness of the kernel `name` (its CUDA in `dir`, with
 * registry.inc) into dir/harness; what time_on_gpu runs (exposed for the build test). */
std::string gpu_harness_build_command(const std::string &dir, const std::string &name);

/** A kernel as the GPU harness takes it: its CUDA (functions named `name`) and its line of the
 * harness's registry.inc (TANDEM_KERNEL: app, schedule, extents, output and input types). */
struct GpuKernelSource {
    std::string cuda, registry;
};
GpuKernelSource gpu_kernel_source(const App &app, const Params &params, const std::string &schedule,
                                  const std::string &name);

/** Writes the kernel's CUDA and the harness registry into `dir` under `name`. */
void write_gpu_harness_sources(const App &app, const Params &params, const std::string &schedule,
                               const std::string &dir, const std::string &name);

} // namespace tandem::apps

#endif
