// The scale_add generator as a hopper library (add_tandem_library TARGETS hopper: nvcc at build
// time), called with halide_buffer_t whose device fields hold cudaMalloc'd pointers. Built wherever
// nvcc is; it runs where a Hopper GPU is (exit 77, skipped, without one): results against a plain
// loop, and a misaligned device pointer is an error code with the output untouched.
#include "scale_add_hopper.h"

#include <HalideBuffer.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

namespace {

halide_buffer_t device_buffer(void *pointer, halide_dimension_t *dims) {
    halide_buffer_t b{};
    b.device = reinterpret_cast<uint64_t>(pointer);
    b.type = halide_type_t(halide_type_float, 32);
    b.dimensions = 2;
    b.dim = dims;
    return b;
}

} // namespace

int main() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("no GPU: skipped\n");
        return 77;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    if (prop.major != 9) {
        std::printf("%s is not a Hopper GPU: skipped\n", prop.name);
        return 77;
    }
    const int W = 33, H = 5, n = W * H;
    std::vector<float> a(n), b(n), out(n, -7.0f);
    for (int i = 0; i < n; i++) a[i] = float(i % 17) - 3.5f, b[i] = float(i % 5);
    float *da, *db, *dout;
    cudaMalloc(&da, n * 4), cudaMalloc(&db, n * 4), cudaMalloc(&dout, n * 4 + 16);
    cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dout, out.data(), n * 4, cudaMemcpyHostToDevice);
    halide_dimension_t dims[2] = {{0, W, 1, 0}, {0, H, W, 0}};
    halide_buffer_t ba = device_buffer(da, dims), bb = device_buffer(db, dims), bo = device_buffer(dout, dims);
    // A misaligned output pointer: an error, nothing written.
    halide_buffer_t skewed = device_buffer(reinterpret_cast<char *>(dout) + 4, dims);
    int bad = scale_add_hopper(&ba, &bb, &skewed);
    cudaMemcpy(out.data(), dout, n * 4, cudaMemcpyDeviceToHost);
    int touched = 0;
    for (float v : out) touched += v != -7.0f;
    int status = scale_add_hopper(&ba, &bb, &bo);
    cudaMemcpy(out.data(), dout, n * 4, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < n; i++) wrong += out[i] != a[i] * 2.0f + b[i];
    std::printf("%s: call %d, %d wrong of %d; misaligned output: error %d, %d elements written\n", prop.name, status,
                wrong, n, bad, touched);
    return status == 0 && wrong == 0 && bad != 0 && touched == 0 ? 0 : 1;
}
