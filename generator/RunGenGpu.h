#ifndef TANDEM_RUNGEN_GPU_H
#define TANDEM_RUNGEN_GPU_H

/** \file
 * The runner of a hopper library (header-only: it needs CUDA's runtime, which Tandem's own
 * libraries do not link): every argument in device memory at the kernel's extents, the inputs
 * random, the call timed with CUDA events (5 warm-up calls, median of --iterations, at least 20).
 * add_tandem_library(... TARGETS hopper) builds `<lib>_run` with it.
 */

#include "RunGen.h"

#include <HalideBuffer.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace tandem {

inline int run_generated_on_gpu(int argc, char **argv, const halide_filter_metadata_t *m,
                                int (*call)(void **args)) {
    RunOptions o;
    if (int status = parse_run_options(argc, argv, m, &o); status >= 0)
        return status;
    if (o.describe) {
        describe_arguments(m);
        return 0;
    }
    std::vector<Halide::Runtime::Buffer<void>> host;
    host.reserve(
        size_t(m->num_arguments)); // the device buffers share the host ones' shapes: no moves
    std::vector<halide_buffer_t> device(size_t(m->num_arguments));
    std::vector<void *> args;
    for (int i = 0; i < m->num_arguments; i++) {
        const halide_filter_argument_t &a = m->arguments[i];
        std::vector<int> extents;
        for (int d = 0; d < a.dimensions; d++)
            extents.push_back(int(*a.buffer_estimates[2 * d + 1]));
        host.emplace_back(a.type, extents);
        if (a.kind == halide_argument_kind_input_buffer)
            fill_random(host.back().raw_buffer(), o.seed + unsigned(i));
        void *pointer = nullptr;
        if (cudaMalloc(&pointer, host.back().size_in_bytes()) != cudaSuccess ||
            cudaMemcpy(pointer, host.back().data(), host.back().size_in_bytes(),
                       cudaMemcpyHostToDevice) != cudaSuccess) {
            std::fprintf(stderr, "%s: no device memory for %s\n", m->name, a.name);
            return 1;
        }
        device[size_t(i)] = *host.back().raw_buffer();
        device[size_t(i)].host = nullptr;
        device[size_t(i)].device = reinterpret_cast<uint64_t>(pointer);
        args.push_back(&device[size_t(i)]);
    }
    for (int i = 0; i < 5; i++) {
        if (int error = call(args.data())) {
            std::fprintf(stderr, "%s failed: %d\n", m->name, error);
            return 1;
        }
    }
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<float> ms;
    for (int it = 0; it < std::max(o.iterations, 20); it++) {
        cudaEventRecord(start);
        if (int error = call(args.data())) {
            std::fprintf(stderr, "%s failed: %d\n", m->name, error);
            return 1;
        }
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float t = 0;
        cudaEventElapsedTime(&t, start, stop);
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s on %s: %.4f ms per call on the GPU (median of %zu, each call synchronises)\n",
                m->name, m->target, ms[ms.size() / 2], ms.size());
    for (halide_buffer_t &b : device)
        cudaFree(reinterpret_cast<void *>(b.device));
    return 0;
}

} // namespace tandem

#endif
