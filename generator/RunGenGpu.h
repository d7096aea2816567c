#ifndef TANDEM_RUNGEN_GPU_H
#define TANDEM_RUNGEN_GPU_H

/** \file
 * The runner of a hopper library (header-only: it needs CUDA's runtime, which Tandem's own
 * libraries do not link): every argument in device memory at the kernel's extents, the inputs
 * random, the call timed with CUDA events (5 warm-up calls, median of --iterations, at least 20).
 * `--check DIR`: the inputs a generator's `--run --save DIR` wrote, the output poisoned (NaN),
 * one call compared with the saved reference, then 5 more compared bit for bit with the first (a
 * race shows as a difference); exit 1 when wrong or differing.
 * add_tandem_library(... TARGETS hopper) builds `<lib>_run` with it.
 */

#include "RunGen.h"

#include <HalideBuffer.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace tandem {

/** --check on the GPU: one call against the saved reference, then 5 compared bit for bit. */
inline int check_on_gpu(const std::string &dir, const halide_filter_metadata_t *m,
                        int (*call)(void **args), std::vector<void *> &args,
                        std::vector<Halide::Runtime::Buffer<void>> &host,
                        std::vector<halide_buffer_t> &device) {
    auto results = [&](std::vector<std::vector<unsigned char>> *out) {
        out->clear();
        for (int i = 0; i < m->num_arguments; i++) {
            if (m->arguments[i].kind != halide_argument_kind_output_buffer)
                continue;
            Halide::Runtime::Buffer<void> &h = host[size_t(i)];
            void *d = reinterpret_cast<void *>(device[size_t(i)].device);
            if (cudaMemset(d, 0xFF, h.size_in_bytes()) != cudaSuccess)
                return false;
        }
        if (int error = call(args.data())) {
            std::fprintf(stderr, "%s failed: %d\n", m->name, error);
            return false;
        }
        if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
            std::fprintf(stderr, "%s: %s\n", m->name, cudaGetErrorString(e));
            return false;
        }
        for (int i = 0; i < m->num_arguments; i++) {
            if (m->arguments[i].kind != halide_argument_kind_output_buffer)
                continue;
            Halide::Runtime::Buffer<void> &h = host[size_t(i)];
            if (cudaMemcpy(h.data(), reinterpret_cast<void *>(device[size_t(i)].device),
                           h.size_in_bytes(), cudaMemcpyDeviceToHost) != cudaSuccess)
                return false;
            const auto *bytes = static_cast<const unsigned char *>(h.data());
            out->emplace_back(bytes, bytes + h.size_in_bytes());
        }
        return true;
    };
    std::vector<std::vector<unsigned char>> first, again;
    if (!results(&first))
        return 1;
    bool correct = true;
    for (int i = 0; i < m->num_arguments; i++)
        if (m->arguments[i].kind == halide_argument_kind_output_buffer)
            correct &= check_saved(dir, m->arguments[i], host[size_t(i)].raw_buffer());
    int differing = 0;
    for (int r = 0; r < 5; r++) {
        if (!results(&again))
            return 1;
        differing += again != first;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    std::printf("%s on %s: %d of 5 more calls differ bit for bit from the first\n", m->name,
                prop.name, differing);
    for (halide_buffer_t &b : device)
        cudaFree(reinterpret_cast<void *>(b.device));
    return correct && differing == 0 ? 0 : 1;
}

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
        if (a.kind != halide_argument_kind_input_buffer)
            std::memset(host.back().data(), 0xFF, host.back().size_in_bytes()); // NaN
        else if (o.check.empty())
            fill_random(host.back().raw_buffer(), o.seed + unsigned(i));
        else if (!load_saved(o.check, a, host.back().raw_buffer()))
            return 1;
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
    if (!o.check.empty())
        return check_on_gpu(o.check, m, call, args, host, device);
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
    std::printf("%s on %s: %.4f ms per call on the GPU (median of %zu, min %.4f, max %.4f, each "
                "call synchronises)\n",
                m->name, m->target, ms[ms.size() / 2], ms.size(), ms.front(), ms.back());
    for (halide_buffer_t &b : device)
        cudaFree(reinterpret_cast<void *>(b.device));
    return 0;
}

} // namespace tandem

#endif
