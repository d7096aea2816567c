#!/bin/bash
# Session 37's second device script: set v24 (f32 outputs against cuBLAS writing f32), then
# Nsight Compute on attention at 8192 and the cuBLAS kernel writing f32.
set -u
cd "$(dirname "$0")/../../../.."
k=$(pwd)/benchmarks/gpu/kernels/v24
gunzip -f $k/bin/*.gz; chmod +x $k/bin/harness*
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | head -1)
TANDEM_GPU_KERNELS=$k TANDEM_GPU_DEADLINE=0 bash benchmarks/gpu/run.sh gpu > $OUT/run.out 2>&1
m="--metrics gpu__time_duration.sum,dram__bytes_write.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum"
n=attention_8192x8192x128_v24
timeout 60 ncu --clock-control none -k "regex:$n" --launch-skip 3 --launch-count 1 $m --csv --page details $k/bin/harness $n bench > $OUT/ncu_tandem.csv 2>&1
timeout 60 ncu --clock-control none -k "regex:^(?!.*$n)" --launch-skip 6 --launch-count 2 $m --csv --page details $k/bin/harness $n bench > $OUT/ncu_cublas.csv 2>&1
tail -12 $OUT/run.out
