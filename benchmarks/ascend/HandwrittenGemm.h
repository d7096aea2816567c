#ifndef TANDEM_BENCHMARKS_ASCEND_HANDWRITTEN_GEMM_H
#define TANDEM_BENCHMARKS_ASCEND_HANDWRITTEN_GEMM_H

/** The hand-written AscendC anchor kernels (benchmarks/ascend/Handwritten*.cpp), compiled
 * against Tandem's CPU runtime of the AscendC API. */
#include "kernel_operator.h"

/** C = A * B, bf16, M, N, K multiples of 128; tiling: int32 {M, N, K} in GM. */
extern "C" __global__ __aicore__ void handwritten_gemm(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR tiling);

#endif
