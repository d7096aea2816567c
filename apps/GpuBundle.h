#ifndef TANDEM_APPS_GPU_BUNDLE_H
#define TANDEM_APPS_GPU_BUNDLE_H

/** \file
 * GPU tuning across two machines (issue 35): the GPU machines have nvcc and cuBLAS but no Halide,
 * so the tuner cannot run there. On the development machine the best candidates of a Hopper
 * workload tuned on the model are written as a kernel set (`tandem tune gpu-bundle`): each
 * candidate's CUDA, the GPU harness's registry.inc, sets.txt and manifest.json (the workload and
 * each kernel's candidate). `benchmarks/gpu/run.sh build` and `run.sh gpu` with
 * TANDEM_GPU_KERNELS=<bundle> time them on the GPU against cuBLAS, one row per kernel; back here,
 * `tandem tune gpu-import <bundle> <rows>` records each row as the workload's GPU record, which
 * the builds of a TUNING_DB take before the model's records.
 */

#include "Tune.h"
#include "TuningDb.h"

#include <string>

namespace tandem::apps {

/** Writes the `top` best ok records of `o`'s workload on the model (o.device is ignored) into
 * `dir` as a kernel set for the GPU harness; returns the kernels written. tandem::Error where the
 * workload has no ok record or the harness does not time the app. */
int write_gpu_bundle(const TuneOptions &o, TuningDb &db, int top, const std::string &dir);

/** Records the rows of a GPU run of the bundle in `dir` (run.sh's gpu_hopper.rows.jsonl, one JSON
 * object per line, or its gpu_hopper.json array: name, correct, tandem_ms, device) as records of
 * the bundle's GPU workload; rows of other kernels are skipped. Returns the records added. */
int import_gpu_timings(TuningDb &db, const std::string &dir, const std::string &rows);

} // namespace tandem::apps

#endif
