// The scale_add generator as a hopper library (add_tandem_library TARGETS hopper: nvcc at build
// time), called with halide_buffer_t whose device fields hold cudaMalloc'd pointers. Built wherever
// nvcc is; it runs where a Hopper GPU is (exit 77, skipped, without one): results against a plain
// loop, and a misaligned device pointer is an error code with the output untouched. The
// runtime-shape library (scale_add_any_hopper) runs at another shape than its estimate and refuses
// rows TMA cannot step (33 f32: 132 bytes) with an error code, writing nothing.
#include "scale_add_any_hopper.h"
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
    for (int i = 0; i < n; i++)
        a[i] = float(i % 17) - 3.5f, b[i] = float(i % 5);
    float *da, *db, *dout;
    cudaMalloc(&da, n * 4), cudaMalloc(&db, n * 4), cudaMalloc(&dout, n * 4 + 16);
    cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dout, out.data(), n * 4, cudaMemcpyHostToDevice);
    halide_dimension_t dims[2] = {{0, W, 1, 0}, {0, H, W, 0}};
    halide_buffer_t ba = device_buffer(da, dims), bb = device_buffer(db, dims),
                    bo = device_buffer(dout, dims);
    // A misaligned output pointer: an error, nothing written.
    halide_buffer_t skewed = device_buffer(reinterpret_cast<char *>(dout) + 4, dims);
    int bad = scale_add_hopper(&ba, &bb, &skewed);
    cudaMemcpy(out.data(), dout, n * 4, cudaMemcpyDeviceToHost);
    int touched = 0;
    for (float v : out)
        touched += v != -7.0f;
    int status = scale_add_hopper(&ba, &bb, &bo);
    cudaMemcpy(out.data(), dout, n * 4, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < n; i++)
        wrong += out[i] != a[i] * 2.0f + b[i];
    std::printf("%s: call %d, %d wrong of %d; misaligned output: error %d, %d elements written\n",
                prop.name, status, wrong, n, bad, touched);

    // The runtime-shape kernel: 33 x 5 is refused (rows of 132 bytes), 24 x 6 runs.
    cudaMemset(dout, 0, n * 4);
    const int refused = scale_add_any_hopper(&ba, &bb, &bo);
    cudaMemcpy(out.data(), dout, n * 4, cudaMemcpyDeviceToHost);
    int written = 0;
    for (float v : out)
        written += v != 0.0f;
    const int W2 = 24, H2 = 6;
    halide_dimension_t dims2[2] = {{0, W2, 1, 0}, {0, H2, W2, 0}};
    halide_buffer_t a2 = device_buffer(da, dims2), b2 = device_buffer(db, dims2),
                    o2 = device_buffer(dout, dims2);
    const int any = scale_add_any_hopper(&a2, &b2, &o2);
    cudaMemcpy(out.data(), dout, W2 * H2 * 4, cudaMemcpyDeviceToHost);
    int wrong_any = 0;
    for (int i = 0; i < W2 * H2; i++)
        wrong_any += out[i] != a[i] * 2.0f + b[i];
    std::printf("runtime shapes: 33 x 5 error %d (%d elements written), 24 x 6 call %d, %d wrong\n",
                refused, written, any, wrong_any);
    return status == 0 && wrong == 0 && bad != 0 && touched == 0 && refused != 0 && written == 0 &&
                   any == 0 && wrong_any == 0
               ? 0
               : 1;
}
