#ifndef TANDEM_BENCHMARKS_ASCEND_HANDWRITTEN_H
#define TANDEM_BENCHMARKS_ASCEND_HANDWRITTEN_H

/** The hand-written AscendC anchor kernels (benchmarks/ascend/Handwritten*.cpp), compiled
 * against Tandem's CPU runtime of the AscendC API. */
#include "kernel_operator.h"

/** C = A * B, bf16, M, N, K multiples of 128; tiling: int32 {M, N, K} in GM. */
extern "C" __global__ __aicore__ void handwritten_gemm(GM_ADDR a, GM_ADDR b, GM_ADDR c,
                                                       GM_ADDR tiling);

/** out = a * b + max(c, 0) * 0.5, f32, n elements in tiles of `tile` (n a multiple of it);
 * tiling: int32 {n, tile} in GM. Double-buffered on the vector cores. */
extern "C" __global__ __aicore__ void handwritten_elementwise(GM_ADDR a, GM_ADDR b, GM_ADDR c,
                                                              GM_ADDR out, GM_ADDR tiling);

#endif
