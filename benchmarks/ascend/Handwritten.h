#ifndef TANDEM_BENCHMARKS_ASCEND_HANDWRITTEN_H
#define TANDEM_BENCHMARKS_ASCEND_HANDWRITTEN_H

/** The hand-written AscendC anchor kernels (benchmarks/ascend/Handwritten*.cpp), compiled
 * against Tandem's CPU runtime of the AscendC API. */
#include "kernel_operator.h"

#include <array>

/** C = A * B, bf16, M, N, K multiples of 128; tiling: int32 {M, N, K} in GM. */
extern "C" __global__ __aicore__ void handwritten_gemm(GM_ADDR a, GM_ADDR b, GM_ADDR c,
                                                       GM_ADDR tiling);

/** out = a * b + max(c, 0) * 0.5, f32, n elements in tiles of `tile` (n a multiple of it);
 * tiling: int32 {n, tile} in GM. Double-buffered on the vector cores. */
extern "C" __global__ __aicore__ void handwritten_elementwise(GM_ADDR a, GM_ADDR b, GM_ADDR c,
                                                              GM_ADDR out, GM_ADDR tiling);

/** out = softmax(q k^T / sqrt(D)) v, q (S x D), k and v (L x D) bf16, out f32; S a multiple of TM
 * (64 or 128), L of TJ (64 or 128), D 64 or 128; tiling: int32 {S, L, D, TM, TJ} in GM; workspace:
 * 2 * GetBlockNum() * (TM * TJ * 6 + TM * D * 4) bytes. A mix kernel (KERNEL_TYPE_MIX_AIC_1_2). */
extern "C" __global__ __aicore__ void handwritten_attention(GM_ADDR q, GM_ADDR k, GM_ADDR v,
                                                            GM_ADDR out, GM_ADDR tiling,
                                                            GM_ADDR workspace);

/** Runs handwritten_attention on `machine` (its cube cores' count sizes the workspace): buffers
 * {q, k, v, out} already added, shape {S, L, D, TM, TJ}; adds the tiling and the workspace. */
tandem::sim::Report run_handwritten_attention(tandem::sim::ascend::Machine &machine,
                                              const std::array<int, 4> &buffers,
                                              const std::array<int32_t, 5> &shape);

/** The largest difference of out from softmax(q k^T / sqrt(D)) v computed in double, on every
 * `every`-th query row, relative to the largest output (P goes to the second matmul in bf16:
 * these are the errors of its rounding). */
double handwritten_attention_error(tandem::sim::ascend::Machine &machine,
                                   const std::array<int, 4> &buffers,
                                   const std::array<int32_t, 5> &shape, int32_t every);

#endif
