// How many clusters of 2 CTAs the GPU keeps resident for a GEMM kernel's footprint (384 threads,
// 230400 bytes of dynamic shared memory, one CTA per SM), against how many lone CTAs: the
// persistent cluster kernels size their grid by cudaOccupancyMaxActiveClusters (issue 37: the
// cluster kernels lose 30-73% on an H200; is it the grid?).
//   cluster_occupancy
#include <cstdio>
#include <cuda_runtime.h>

__global__ void __launch_bounds__(384, 1) lone(int *out) {
    if (out)
        out[blockIdx.x] = 0;
}
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1) pair(int *out) {
    if (out)
        out[blockIdx.x] = 0;
}

int main() {
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    for (int smem : {0, 100000, 230400}) {
        cudaFuncSetAttribute(lone, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        cudaFuncSetAttribute(pair, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        int per_sm = 0;
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, lone, 384, smem);
        cudaLaunchConfig_t config = {};
        config.gridDim = dim3(2, 1, 1);
        config.blockDim = dim3(384, 1, 1);
        config.dynamicSmemBytes = smem;
        int clusters = 0;
        cudaError_t status = cudaOccupancyMaxActiveClusters(&clusters, (void *)pair, &config);
        std::printf("cluster_occupancy smem=%d: %d SMs, %d lone CTAs per SM (%d resident), "
                    "%d clusters of 2 resident (%d CTAs)%s%s\n",
                    smem, prop.multiProcessorCount, per_sm, per_sm * prop.multiProcessorCount,
                    clusters, 2 * clusters, status == cudaSuccess ? "" : ": ",
                    status == cudaSuccess ? "" : cudaGetErrorString(status));
    }
    return 0;
}
