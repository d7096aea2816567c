// GPU check and benchmark of Tandem's emitted Hopper kernels against cuBLAS / the copy bandwidth.
// Built by run.sh with the kernels emitted on the development machine (kernels/*.cu plus
// kernels/registry.inc: TANDEM_KERNEL(fn, app, schedule, M, N, K, out, in) for a kernel of static
// shapes, TANDEM_KERNEL_ANY(fn, app, schedule, M, N, K, out, in, count) for a runtime-shape one,
// run at M x N x K: its launcher takes `count` extents, each tensor's dims in argument order;
// TANDEM_KERNEL_BATCHED(fn, app, schedule, batch, M, N, K, out, in) for the conformance suite's
// batched_matmul (layout nt, against cuBLAS's strided batch); `out` is the output's type, "bf16",
// "f16" or "f32", `in` the operands', "bf16" or "f16").
//
//   harness NAME check   one kernel: fresh random inputs (never zeros), the output poisoned (NaN)
//                        before every launch, every element checked against the reference
//                        (cuBLAS in f32 for gemm, from the same bf16 or f16 operands, a plain CUDA
//                        kernel for elementwise and rmsnorm), then 5 more launches compared bit for
//                        bit with the first (a race shows as a difference)
//   harness NAME bench   the same check, then CUDA-event timing (5 warm-up launches, median of
//                        25) of the kernel's prepared launch (tensor maps encoded once, before:
//                        prepare_NAME / launch_prepared_NAME) and of the reference (cuBLAS
//                        writing the kernel's output type, f32 or 16 bits / a device-to-device
//                        copy) in the same process, both back to back; then 10
//                        more launches of the kernel, each compared bit for bit with the first
//                        (outside the timed events; their median is tandem_ms_checked)
//   harness --list       the kernel names
// One JSON row on stdout per run; run.sh runs each kernel as its own process under `timeout`,
// so a hang or a trap costs one kernel.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#define TANDEM_KERNEL(fn, app, schedule, M, N, K, out, in)                                         \
    extern "C" cudaError_t launch_##fn(void *const *, cudaStream_t);                               \
    extern "C" cudaError_t prepare_##fn(void *const *, void **);                                   \
    extern "C" cudaError_t launch_prepared_##fn(const void *, cudaStream_t);                       \
    extern "C" void release_##fn(void *);
#define TANDEM_KERNEL_ANY(fn, app, schedule, M, N, K, out, in, count)                              \
    extern "C" cudaError_t launch_##fn(void *const *, const int *, cudaStream_t);                  \
    extern "C" cudaError_t prepare_##fn(void *const *, const int *, void **);                      \
    extern "C" cudaError_t launch_prepared_##fn(const void *, cudaStream_t);                       \
    extern "C" void release_##fn(void *);
#define TANDEM_KERNEL_BATCHED(fn, app, schedule, batch, M, N, K, out, in)                          \
    TANDEM_KERNEL(fn, app, schedule, M, N, K, out, in)
#include "registry.inc"
#undef TANDEM_KERNEL
#undef TANDEM_KERNEL_ANY
#undef TANDEM_KERNEL_BATCHED

namespace {

struct Entry {
    const char *fn, *app, *schedule;
    int M, N, K;         // gemm: M x N x K; elementwise: W x H; rmsnorm: D x R
    const char *out;     // the output's type: "bf16", "f16" or "f32"
    const char *in;      // gemm: the operands' type, "bf16" or "f16"
    int runtime_extents; // 0: static shapes; else the count the launcher takes
    int batch;           // batched_matmul: the batch count (x B x M x K, w B x N x K); else 1
    cudaError_t (*launch)(void *const *, cudaStream_t);
    cudaError_t (*prepare)(void *const *, void **);
    cudaError_t (*launch_any)(void *const *, const int *, cudaStream_t);
    cudaError_t (*prepare_any)(void *const *, const int *, void **);
    cudaError_t (*launch_prepared)(const void *, cudaStream_t);
    void (*release)(void *);
};

const Entry entries[] = {
#define TANDEM_KERNEL(fn, app, schedule, M, N, K, out, in)                                         \
    {#fn,         app,          schedule, M,       N,                                              \
     K,           out,          in,       0,       1,                                              \
     launch_##fn, prepare_##fn, nullptr,  nullptr, launch_prepared_##fn,                           \
     release_##fn},
#define TANDEM_KERNEL_ANY(fn, app, schedule, M, N, K, out, in, count)                              \
    {#fn,                                                                                          \
     app,                                                                                          \
     schedule,                                                                                     \
     M,                                                                                            \
     N,                                                                                            \
     K,                                                                                            \
     out,                                                                                          \
     in,                                                                                           \
     count,                                                                                        \
     1,                                                                                            \
     nullptr,                                                                                      \
     nullptr,                                                                                      \
     launch_##fn,                                                                                  \
     prepare_##fn,                                                                                 \
     launch_prepared_##fn,                                                                         \
     release_##fn},
#define TANDEM_KERNEL_BATCHED(fn, app, schedule, batch, M, N, K, out, in)                          \
    {#fn,         app,          schedule, M,       N,                                              \
     K,           out,          in,       0,       batch,                                          \
     launch_##fn, prepare_##fn, nullptr,  nullptr, launch_prepared_##fn,                           \
     release_##fn},
#include "registry.inc"
#undef TANDEM_KERNEL
#undef TANDEM_KERNEL_ANY
#undef TANDEM_KERNEL_BATCHED
};

/** Rows of B past K in the call of a runtime-shape gemm whose name ends in "_tallb": a legal call
 * (B may have more rows than A's K) whose extra rows hold NaN; the kernel must not bring them into
 * its last K tile's padding (its tensor map ends at the K rows the algorithm reads). */
int extra_b_rows(const Entry &e) {
    const std::string name = e.fn, suffix = "_tallb";
    const bool tall = name.size() > suffix.size() &&
                      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    return e.runtime_extents && std::string(e.app) == "gemm" && tall ? 5 : 0;
}

/** The runtime extents of a runtime-shape kernel's call, each tensor's dims (innermost first) in
 * argument order: gemm A (K, M), B (N, K), C (N, M); attention_scores Q's, K's and S's runtime
 * dims (Lq; Lk; Lk, Lq: D is static); elementwise a, b, c, out (W, H); rmsnorm in (D, R), w (D),
 * out (D, R). Exits when the kernel takes another count. */
std::vector<int> extents_of(const Entry &e) {
    if (e.runtime_extents == 0)
        return {};
    std::vector<int> v;
    const std::string app = e.app;
    if (app == "gemm")
        v = {e.K, e.M, e.N, e.K + extra_b_rows(e), e.N, e.M};
    else if (app == "attention_scores")
        v = {e.M, e.N, e.N, e.M}; // Q, K, S's rows (D is static)
    else if (app == "elementwise")
        v = {e.M, e.N, e.M, e.N, e.M, e.N, e.M, e.N};
    else
        v = {e.M, e.N, e.M, e.M, e.N};
    if (int(v.size()) != e.runtime_extents) {
        std::fprintf(stderr, "%s takes %d runtime extents; the harness knows %zu for %s\n", e.fn,
                     e.runtime_extents, v.size(), e.app);
        std::exit(2);
    }
    return v;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                        \
                         cudaGetErrorString(e_));                                                  \
            std::exit(3);                                                                          \
        }                                                                                          \
    } while (0)

#define CUBLAS_CHECK(x)                                                                            \
    do {                                                                                           \
        cublasStatus_t s_ = (x);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x,          \
                         int(s_));                                                                 \
            std::exit(3);                                                                          \
        }                                                                                          \
    } while (0)

/** Times of the last median_ms call, sorted (for the spread). */
std::vector<float> last_times;

/** The median of `reps` timed calls of `run` (each between two events), after `warmup` untimed
 * ones; `after` runs after each timed call, outside its events (a bitwise check). */
template <typename F>
double median_ms(F &&run, const std::function<void()> &after = nullptr, int warmup = 5,
                 int reps = 25) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; i++)
        run();
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CHECK(cudaEventRecord(a));
        run();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
        if (after)
            after();
    }
    CHECK(cudaGetLastError());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    last_times = t;
    return t[t.size() / 2];
}

/** Random operands of 16 bits, bf16 or IEEE f16, in [-1, 1). */
std::vector<uint16_t> random_16bit(size_t n, bool f16, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<uint16_t> v(n);
    for (auto &x : v) {
        const float f = u(rng);
        if (f16) {
            const __half h = __float2half_rn(f);
            std::memcpy(&x, &h, 2);
        } else {
            const __nv_bfloat16 h = __float2bfloat16(f);
            std::memcpy(&x, &h, 2);
        }
    }
    return v;
}

std::vector<float> random_f32(size_t n, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto &x : v)
        x = u(rng);
    return v;
}

template <typename T> T *upload(const std::vector<T> &v) {
    T *d = nullptr;
    CHECK(cudaMalloc(&d, v.size() * sizeof(T)));
    CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

std::vector<unsigned char> bytes_of(const void *device, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    CHECK(cudaMemcpy(h.data(), device, bytes, cudaMemcpyDeviceToHost));
    return h;
}

/** The bytes of one element of "bf16", "f16" or "f32". */
size_t element_bytes(const std::string &type) {
    return type == "f32" ? 4 : 2;
}

/** Device output bytes of `type` ("bf16", "f16" or "f32") as floats. */
std::vector<float> to_float(const std::vector<unsigned char> &raw, const std::string &type) {
    size_t n = raw.size() / element_bytes(type);
    std::vector<float> out(n);
    if (type == "bf16") {
        const __nv_bfloat16 *h = reinterpret_cast<const __nv_bfloat16 *>(raw.data());
        for (size_t i = 0; i < n; i++)
            out[i] = __bfloat162float(h[i]);
    } else if (type == "f16") {
        const __half *h = reinterpret_cast<const __half *>(raw.data());
        for (size_t i = 0; i < n; i++)
            out[i] = __half2float(h[i]);
    } else {
        std::memcpy(out.data(), raw.data(), n * 4);
    }
    return out;
}

/** Per element: |out - ref| <= rel |ref| + abs (NaN never passes: the poison shows). */
struct Check {
    size_t mismatches = 0, first_bad = SIZE_MAX;
    double rel_fro = 0, max_rel_err = 0; // max |out - ref| / max |ref|
    bool correct() const { return mismatches == 0 && std::isfinite(rel_fro); }
};

Check check(const std::vector<float> &out, const std::vector<float> &ref, double rel, double abs) {
    Check c;
    double num = 0, den = 0, max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < out.size(); i++) {
        double d = std::fabs(double(out[i]) - ref[i]);
        bool ok = std::isfinite(out[i]) && d <= rel * std::fabs(ref[i]) + abs;
        if (!ok) {
            if (c.first_bad == SIZE_MAX)
                c.first_bad = i;
            c.mismatches++;
        }
        if (std::isfinite(d))
            max_diff = std::max(max_diff, d);
        else
            max_diff = INFINITY;
        max_ref = std::max(max_ref, std::fabs(double(ref[i])));
        num += d * d;
        den += double(ref[i]) * ref[i];
    }
    c.rel_fro = std::sqrt(num / std::max(den, 1e-30));
    c.max_rel_err = max_diff / std::max(max_ref, 1e-30);
    return c;
}

__global__ void elementwise_reference(const float *a, const float *b, const float *c, float *out,
                                      size_t n) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n)
        out[i] = __fadd_rn(__fmul_rn(a[i], b[i]), __fmul_rn(fmaxf(c[i], 0.0f), 0.5f));
}

__global__ void rmsnorm_reference(const float *in, const float *w, float *out, int D) {
    const float *row = in + size_t(blockIdx.x) * D;
    __shared__ double partial[256];
    double s = 0;
    for (int x = threadIdx.x; x < D; x += blockDim.x)
        s += double(row[x]) * row[x];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k)
            partial[threadIdx.x] += partial[threadIdx.x + k];
        __syncthreads();
    }
    double scale = 1.0 / sqrt(partial[0] / D + 1e-5);
    for (int x = threadIdx.x; x < D; x += blockDim.x)
        out[size_t(blockIdx.x) * D + x] = float(double(row[x]) * w[x] * scale);
}

/** A JSON number, or null for NaN and infinities (an unwritten, poisoned output). */
std::string number(double v) {
    if (!std::isfinite(v))
        return "null";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.3g", v);
    return buffer;
}

struct Run {
    const Entry &e;
    const char *device;
    bool bench;
    void *out;
    size_t out_bytes;
    std::vector<void *> args;
    void *prepared = nullptr; // the tensor maps encoded once, for the timed launches
    std::vector<int> extents = extents_of(e); // a runtime-shape kernel's call

    cudaError_t launch(cudaStream_t stream) {
        return e.runtime_extents ? e.launch_any(args.data(), extents.data(), stream)
                                 : e.launch(args.data(), stream);
    }
    cudaError_t prepare(void **out) {
        return e.runtime_extents ? e.prepare_any(args.data(), extents.data(), out)
                                 : e.prepare(args.data(), out);
    }

    /** Times the prepared launch back to back, as the reference is timed (median, fastest and
     * slowest of 25 in `last_times`); then 10 more launches, each followed by a bitwise
     * comparison of the output with `first` (counted in *differing), whose median is returned in
     * *checked_ms. Session 36 found that timing with the comparison between launches (the
     * harness's method from session 34 to 35) let the GPU idle while the output was copied and
     * cost the kernel 5-15% against a reference timed back to back
     * (gpu_hopper_session36_timing_h200). */
    double time_kernel(const std::vector<unsigned char> &first, int *differing,
                       double *checked_ms) {
        CHECK(prepare(&prepared));
        auto launch = [&] { CHECK(e.launch_prepared(prepared, 0)); };
        double ms = median_ms(launch);
        const std::vector<float> times = last_times;
        *checked_ms = median_ms(
            launch, [&] { *differing += bytes_of(out, out_bytes) != first; }, 0, 10);
        last_times = times;
        e.release(prepared);
        prepared = nullptr;
        return ms;
    }

    /** Launch with the output poisoned first (0xFF bytes: NaN in f32, bf16 and f16). */
    std::vector<unsigned char> launch_checked() {
        CHECK(cudaMemset(out, 0xFF, out_bytes));
        CHECK(launch(0));
        CHECK(cudaDeviceSynchronize());
        return bytes_of(out, out_bytes);
    }

    /** Launches that differ bit for bit from the first result. */
    int differing(const std::vector<unsigned char> &first, int launches) {
        int bad = 0;
        for (int i = 0; i < launches; i++)
            bad += launch_checked() != first;
        return bad;
    }

    void print(const Check &c, int width, int differing_launches, const std::string &timing) {
        long row = c.first_bad == SIZE_MAX ? -1 : long(c.first_bad / width);
        long col = c.first_bad == SIZE_MAX ? -1 : long(c.first_bad % width);
        std::printf("{\"name\": \"%s\", \"app\": \"%s\", \"schedule\": \"%s\", \"device\": \"%s\", "
                    "\"M\": %d, "
                    "\"N\": %d, \"K\": %d, \"correct\": %s, \"mismatches\": %zu, \"first_bad\": "
                    "[%ld, %ld], "
                    "\"rel_fro\": %s, \"max_rel_err\": %s, \"launches_differing\": %d, "
                    "\"runtime_shapes\": %s, \"batch\": %d%s}\n",
                    e.fn, e.app, e.schedule, device, e.M, e.N, e.K,
                    c.correct() && differing_launches == 0 ? "true" : "false", c.mismatches, row,
                    col, number(c.rel_fro).c_str(), number(c.max_rel_err).c_str(),
                    differing_launches, e.runtime_extents ? "true" : "false", e.batch,
                    timing.c_str());
        std::fflush(stdout);
    }
};

void gemm(const Entry &e, const char *device, bool bench) {
    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    std::mt19937 rng(std::random_device{}());
    size_t M = e.M, N = e.N, K = e.K, batch = e.batch;
    const bool f16 = std::string(e.in) == "f16";
    const cudaDataType operand = f16 ? CUDA_R_16F : CUDA_R_16BF;
    std::vector<uint16_t> b_rows = random_16bit(batch * K * N, f16, rng);
    b_rows.resize(batch * (K + extra_b_rows(e)) * N, f16 ? 0x7E00 : 0x7FC0); // NaN past K
    uint16_t *A = upload(random_16bit(batch * M * K, f16, rng)), *B = upload(b_rows);
    void *C = nullptr;
    __nv_bfloat16 *C_cublas = nullptr;
    float *ref = nullptr;
    const size_t out_bytes = batch * M * N * element_bytes(e.out);
    CHECK(cudaMalloc(&C, out_bytes));
    CHECK(cudaMalloc(&C_cublas, batch * M * N * 2));
    CHECK(cudaMalloc(&ref, batch * M * N * 4));
    Run run{e, device, bench, C, out_bytes, {A, B, C}};
    // Row-major C = A x B is column-major C^T = B^T x A^T. attention_scores and batched_matmul
    // (layout nt): B is N rows of K (S = Q K^T), so column-major it is taken transposed. A batched
    // matmul's matrices follow one another (cuBLAS's strided batch).
    const bool k_major_b =
        std::string(e.app) == "attention_scores" || std::string(e.app) == "batched_matmul";
    const float one = 1, zero = 0;
    auto cublas = [&](void *out, cudaDataType type) {
        const cublasOperation_t op_b = k_major_b ? CUBLAS_OP_T : CUBLAS_OP_N;
        const int ld_b = int(k_major_b ? K : N);
        if (batch > 1) {
            return cublasGemmStridedBatchedEx(
                handle, op_b, CUBLAS_OP_N, int(N), int(M), int(K), &one, B, operand, ld_b,
                (long long)(K * N), A, operand, int(K), (long long)(M * K), &zero, out, type,
                int(N), (long long)(M * N), int(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        }
        return cublasGemmEx(handle, op_b, CUBLAS_OP_N, int(N), int(M), int(K), &one, B, operand,
                            ld_b, A, operand, int(K), &zero, out, type, int(N), CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT);
    };
    CUBLAS_CHECK(cublas(ref, CUDA_R_32F));
    CHECK(cudaDeviceSynchronize());
    std::vector<float> reference = to_float(bytes_of(ref, batch * M * N * 4), "f32");
    std::vector<unsigned char> first = run.launch_checked();
    Check c = check(to_float(first, e.out), reference, 1.0 / 128, 1e-3 * std::sqrt(double(K)));
    int differing = run.differing(first, 5);
    std::string timing;
    if (bench) {
        double t_checked = 0;
        double t_tandem = run.time_kernel(first, &differing, &t_checked);
        const float fastest = last_times.front(), slowest = last_times.back();
        // cuBLAS writes what the kernel writes: f32, or 16 bits of the operands' type (it has no
        // f16 x f16 -> bf16 GEMM). Until session 37 it always wrote 16 bits, half the bytes of an
        // f32 output (attention scores, out=f32): those rows' ratios are low by the difference.
        const bool f32_out = std::string(e.out) == "f32";
        double t_cublas = median_ms([&] {
            CUBLAS_CHECK(f32_out ? cublas(ref, CUDA_R_32F)
                                 : cublas(C_cublas, f16 ? CUDA_R_16F : CUDA_R_16BF));
        });
        const float cublas_fastest = last_times.front();
        double flops = 2.0 * batch * M * N * K;
        char buffer[448];
        std::snprintf(buffer, sizeof buffer,
                      ", \"tandem_ms\": %.4f, \"tandem_ms_min\": %.4f, \"tandem_ms_max\": %.4f, "
                      "\"tandem_ms_checked\": %.4f, \"cublas_ms\": %.4f, \"cublas_ms_min\": %.4f, "
                      "\"cublas_out\": \"%s\", \"tandem_tflops\": %.1f, \"cublas_tflops\": %.1f, "
                      "\"ratio_vs_cublas\": %.3f",
                      t_tandem, fastest, slowest, t_checked, t_cublas, cublas_fastest,
                      f32_out ? "f32"
                      : f16   ? "f16"
                              : "bf16",
                      flops / t_tandem / 1e9, flops / t_cublas / 1e9, t_cublas / t_tandem);
        timing = buffer;
    }
    run.print(c, int(N), differing, timing);
    for (void *p : {(void *)A, (void *)B, C, (void *)C_cublas, (void *)ref})
        CHECK(cudaFree(p));
    CUBLAS_CHECK(cublasDestroy(handle));
}

void streaming(const Entry &e, const char *device, bool bench) {
    std::mt19937 rng(std::random_device{}());
    size_t n = size_t(e.M) * e.N;
    bool rms = std::string(e.app) == "rmsnorm";
    float *a = upload(random_f32(n, rng)), *b = upload(random_f32(rms ? e.M : n, rng)),
          *c = rms ? nullptr : upload(random_f32(n, rng));
    float *out = nullptr, *ref = nullptr;
    CHECK(cudaMalloc(&out, n * 4));
    CHECK(cudaMalloc(&ref, n * 4));
    Run run{e,   device, bench,
            out, n * 4,  rms ? std::vector<void *>{a, b, out} : std::vector<void *>{a, b, c, out}};
    if (rms)
        rmsnorm_reference<<<e.N, 256>>>(a, b, ref, e.M);
    else
        elementwise_reference<<<unsigned((n + 255) / 256), 256>>>(a, b, c, ref, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> reference = to_float(bytes_of(ref, n * 4), "f32");
    std::vector<unsigned char> first = run.launch_checked();
    Check chk = check(to_float(first, "f32"), reference, rms ? 1e-5 : 1e-6, 1e-6);
    int differing = run.differing(first, 5);
    std::string timing;
    if (bench) {
        double t_checked = 0;
        double t = run.time_kernel(first, &differing, &t_checked);
        double t_copy =
            median_ms([&] { CHECK(cudaMemcpyAsync(ref, a, n * 4, cudaMemcpyDeviceToDevice)); });
        // Bytes each must move: inputs read once, output written once (a copy: read + write).
        double bytes = rms ? 8.0 * n : 16.0 * n, copy_bw = 8.0 * n / t_copy / 1e6,
               bw = bytes / t / 1e6;
        char buffer[256];
        std::snprintf(buffer, sizeof buffer,
                      ", \"tandem_ms\": %.4f, \"tandem_ms_checked\": %.4f, \"copy_ms\": %.4f, "
                      "\"tandem_GBps\": %.1f, \"copy_GBps\": %.1f, \"fraction_of_copy\": %.3f",
                      t, t_checked, t_copy, bw, copy_bw, bw / copy_bw);
        timing = buffer;
    }
    run.print(chk, e.M, differing, timing);
    for (float *p : {a, b, c, out, ref})
        CHECK(cudaFree(p));
}

} // namespace

int main(int argc, char **argv) {
    if (argc == 2 && std::string(argv[1]) == "--list") {
        for (const Entry &e : entries)
            std::printf("%s\n", e.fn);
        return 0;
    }
    if (argc != 3 || (std::string(argv[2]) != "check" && std::string(argv[2]) != "bench")) {
        std::fprintf(stderr, "usage: %s NAME check|bench, or %s --list\n", argv[0], argv[0]);
        return 2;
    }
    const Entry *entry = nullptr;
    for (const Entry &e : entries)
        if (std::string(e.fn) == argv[1])
            entry = &e;
    if (!entry) {
        std::fprintf(stderr, "no kernel named %s\n", argv[1]);
        return 2;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    bool bench = std::string(argv[2]) == "bench";
    if (bench) { // clocks up before timing
        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
        float *x = nullptr;
        CHECK(cudaMalloc(&x, 256 << 20));
        while (std::chrono::steady_clock::now() < until) {
            CHECK(cudaMemsetAsync(x, 1, 256 << 20));
            CHECK(cudaDeviceSynchronize());
        }
        CHECK(cudaFree(x));
    }
    const std::string app = entry->app;
    if (app == "gemm" || app == "attention_scores" || app == "batched_matmul")
        gemm(*entry, prop.name, bench);
    else
        streaming(*entry, prop.name, bench);
    return 0;
}
