// The Hopper library: inputs in device memory, pointers in the halide_buffer_t device fields.
// Exit 0 when right, 77 without a Hopper GPU.
#include "clamped_axpy_hopper.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

int main() {
    cudaDeviceProp prop;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
        cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major != 9) {
        std::printf("no Hopper GPU: skipped\n");
        return 77;
    }
    const int W = 100, H = 9, n = W * H;
    std::vector<float> x(n), y(n), out(n);
    for (int i = 0; i < n; i++)
        x[i] = 0.1f * float(i % W - 50), y[i] = 0.25f * float(i / W - 4);
    float *d[3];
    for (float *&p : d)
        cudaMalloc(&p, n * 4);
    cudaMemcpy(d[0], x.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d[1], y.data(), n * 4, cudaMemcpyHostToDevice);
    halide_dimension_t dims[2] = {{0, W, 1, 0}, {0, H, W, 0}};
    halide_buffer_t b[3] = {};
    for (int i = 0; i < 3; i++) {
        b[i].device = reinterpret_cast<uint64_t>(d[i]);
        b[i].type = halide_type_t(halide_type_float, 32);
        b[i].dimensions = 2;
        b[i].dim = dims;
    }
    int status = clamped_axpy_hopper(&b[0], &b[1], &b[2]);
    cudaMemcpy(out.data(), d[2], n * 4, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < n; i++)
        wrong += out[i] != std::min(std::max(1.5f * x[i] + y[i], -4.0f), 4.0f);
    std::printf("%s: call %d, %d wrong of %d\n", prop.name, status, wrong, n);
    return status == 0 && wrong == 0 ? 0 : 1;
}
