// GPU check and benchmark of Tandem's emitted Hopper kernels against cuBLAS / a copy roofline.
// Built by run.sh on the GPU machine with the kernels emitted on the development machine
// (kernels/*.cu plus kernels/registry.inc: TANDEM_KERNEL(fn, app, schedule, M, N, K)).
// For every kernel: fresh random inputs (never zeros), the output poisoned before each run,
// ||out - ref|| / ||ref|| against cuBLAS (gemm) or a plain CUDA reference (elementwise,
// rmsnorm), then CUDA-event timing (warm-up, median of >= 20) of the kernel and of the reference
// library in the same run. One JSON row per kernel on stdout.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define TANDEM_KERNEL(fn, app, schedule, M, N, K) extern "C" cudaError_t launch_##fn(void *const *, cudaStream_t);
#include "registry.inc"
#undef TANDEM_KERNEL

namespace {

struct Entry {
    const char *fn, *app, *schedule;
    int M, N, K; // gemm: M x N x K; elementwise: W x H; rmsnorm: D x R
    cudaError_t (*launch)(void *const *, cudaStream_t);
};

const Entry entries[] = {
#define TANDEM_KERNEL(fn, app, schedule, M, N, K) {#fn, app, schedule, M, N, K, launch_##fn},
#include "registry.inc"
#undef TANDEM_KERNEL
};

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

template<typename F>
double median_ms(F &&run, int warmup = 5, int reps = 25) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; i++) run();
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CHECK(cudaEventRecord(a));
        run();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<__nv_bfloat16> v(n);
    for (auto &x : v) x = __float2bfloat16(u(rng));
    return v;
}

std::vector<float> random_f32(size_t n, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto &x : v) x = u(rng);
    return v;
}

template<typename T>
T *upload(const std::vector<T> &v) {
    T *d = nullptr;
    CHECK(cudaMalloc(&d, v.size() * sizeof(T)));
    CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

double rel_error(const std::vector<float> &out, const std::vector<float> &ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < out.size(); i++) {
        double d = double(out[i]) - ref[i];
        if (!std::isfinite(out[i])) return INFINITY;
        num += d * d;
        den += double(ref[i]) * ref[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<float> to_float(const void *device, size_t n, bool bf16) {
    std::vector<float> out(n);
    if (bf16) {
        std::vector<__nv_bfloat16> h(n);
        CHECK(cudaMemcpy(h.data(), device, n * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) out[i] = __bfloat162float(h[i]);
    } else {
        CHECK(cudaMemcpy(out.data(), device, n * 4, cudaMemcpyDeviceToHost));
    }
    return out;
}

__global__ void elementwise_reference(const float *a, const float *b, const float *c, float *out, size_t n) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = a[i] * b[i] + fmaxf(c[i], 0.0f) * 0.5f;
}

__global__ void rmsnorm_reference(const float *in, const float *w, float *out, int D) {
    const float *row = in + size_t(blockIdx.x) * D;
    __shared__ float partial[256];
    float s = 0;
    for (int x = threadIdx.x; x < D; x += blockDim.x) s += row[x] * row[x];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
        __syncthreads();
    }
    float scale = 1.0f / sqrtf(partial[0] / D + 1e-5f);
    for (int x = threadIdx.x; x < D; x += blockDim.x) out[size_t(blockIdx.x) * D + x] = row[x] * w[x] * scale;
}

void gemm(const Entry &e, cublasHandle_t handle, const char *device) {
    std::mt19937 rng(e.M * 31 + e.N * 7 + e.K);
    size_t M = e.M, N = e.N, K = e.K;
    __nv_bfloat16 *A = upload(random_bf16(M * K, rng)), *B = upload(random_bf16(K * N, rng));
    __nv_bfloat16 *C = nullptr;
    float *ref = nullptr;
    CHECK(cudaMalloc(&C, M * N * 2));
    CHECK(cudaMalloc(&ref, M * N * 4));
    void *args[] = {A, B, C};
    CHECK(cudaMemset(C, 0xFF, M * N * 2)); // poison: NaN
    CHECK(e.launch(args, 0));
    CHECK(cudaDeviceSynchronize());
    // Row-major C = A x B is column-major C^T = B^T x A^T.
    const float one = 1, zero = 0;
    auto cublas = [&](void *out, cudaDataType type) {
        cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(M), int(K), &one, B, CUDA_R_16BF, int(N), A,
                     CUDA_R_16BF, int(K), &zero, out, type, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    cublas(ref, CUDA_R_32F);
    CHECK(cudaDeviceSynchronize());
    double err = rel_error(to_float(C, M * N, true), to_float(ref, M * N, false));
    double t_tandem = median_ms([&] { e.launch(args, 0); });
    double t_cublas = median_ms([&] { cublas(C, CUDA_R_16BF); });
    double flops = 2.0 * M * N * K;
    std::printf("{\"app\": \"gemm\", \"schedule\": \"%s\", \"device\": \"%s\", \"M\": %zu, \"N\": %zu, \"K\": %zu, "
                "\"rel_err\": %.3g, \"correct\": %s, \"tandem_ms\": %.4f, \"cublas_ms\": %.4f, \"tandem_tflops\": %.1f, "
                "\"cublas_tflops\": %.1f, \"ratio_vs_cublas\": %.3f}\n",
                e.schedule, device, M, N, K, err, err < 1e-2 ? "true" : "false", t_tandem, t_cublas,
                flops / t_tandem / 1e9, flops / t_cublas / 1e9, t_cublas / t_tandem);
    cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(ref);
}

void streaming(const Entry &e, const char *device) {
    std::mt19937 rng(e.M * 13 + e.N);
    size_t n = size_t(e.M) * e.N;
    bool rms = std::string(e.app) == "rmsnorm";
    float *a = upload(random_f32(n, rng)), *b = upload(random_f32(rms ? e.M : n, rng)),
          *c = rms ? nullptr : upload(random_f32(n, rng));
    float *out = nullptr, *ref = nullptr;
    CHECK(cudaMalloc(&out, n * 4));
    CHECK(cudaMalloc(&ref, n * 4));
    std::vector<void *> args = rms ? std::vector<void *>{a, b, out} : std::vector<void *>{a, b, c, out};
    CHECK(cudaMemset(out, 0xFF, n * 4));
    CHECK(e.launch(args.data(), 0));
    if (rms) rmsnorm_reference<<<e.N, 256>>>(a, b, ref, e.M);
    else elementwise_reference<<<unsigned((n + 255) / 256), 256>>>(a, b, c, ref, n);
    CHECK(cudaDeviceSynchronize());
    double err = rel_error(to_float(out, n, false), to_float(ref, n, false));
    double t = median_ms([&] { e.launch(args.data(), 0); });
    double t_copy = median_ms([&] { cudaMemcpyAsync(ref, a, n * 4, cudaMemcpyDeviceToDevice); });
    double bytes = rms ? 8.0 * n : 16.0 * n, copy_bw = 8.0 * n / t_copy / 1e6, bw = bytes / t / 1e6;
    std::printf("{\"app\": \"%s\", \"schedule\": \"%s\", \"device\": \"%s\", \"size\": [%d, %d], \"rel_err\": %.3g, "
                "\"correct\": %s, \"tandem_ms\": %.4f, \"tandem_GBps\": %.1f, \"copy_GBps\": %.1f, "
                "\"fraction_of_copy\": %.3f}\n",
                e.app, e.schedule, device, e.M, e.N, err, err < 1e-5 ? "true" : "false", t, bw, copy_bw, bw / copy_bw);
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(out), cudaFree(ref);
}

} // namespace

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    cublasHandle_t handle;
    cublasCreate(&handle);
    for (const Entry &e : entries) {
        if (std::string(e.app) == "gemm") gemm(e, handle, prop.name);
        else streaming(e, prop.name);
        std::fflush(stdout);
    }
    cublasDestroy(handle);
}
