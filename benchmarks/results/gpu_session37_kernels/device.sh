#!/bin/bash
# Session 37's second device script: set v25 (the release barrier experiment)
# Nsight Compute on attention at 8192 and the cuBLAS kernel writing f32.
set -u
cd "$(dirname "$0")/../../../.."
k=$(pwd)/benchmarks/gpu/kernels/v25
gunzip -f $k/bin/*.gz; chmod +x $k/bin/harness*
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | head -1)
TANDEM_GPU_KERNELS=$k TANDEM_GPU_DEADLINE=0 bash benchmarks/gpu/run.sh gpu > $OUT/run.out 2>&1
tail -12 $OUT/run.out
tail -14 $OUT/run.out
