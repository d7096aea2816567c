#!/bin/bash
# Session 37: Nsight Compute on Tandem's kernel and cuBLAS's in the same process, where the GPU
# still loses (attention scores at 8192, misaligned rows, skinny) and at 4096^3 (the 1.05x mark).
set -u
cd "$(dirname "$0")/../../.."
k=$(pwd)/benchmarks/gpu/kernels
for f in $k/bin/harness.gz $k/v23/bin/harness.gz; do [ -f "$f" ] && gunzip -f "$f"; done
chmod +x $k/bin/harness $k/v23/bin/harness
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | head -1)
which ncu > $OUT/which.txt 2>&1; ncu --version >> $OUT/which.txt 2>&1
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats"
metrics="--metrics dram__bytes_write.sum,dram__bytes_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum,lts__t_requests_op_write.sum,lts__t_requests_op_read.sum,sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,smsp__inst_executed.sum"
prof() { # harness kernel
    local bin=$1 name=$2
    echo "== $name (Tandem) $(date +%T)"
    timeout 60 ncu --clock-control none -k "regex:$name" --launch-skip 3 --launch-count 1 $sections $metrics \
        --csv --page details "$bin" "$name" bench > $OUT/ncu_$name.csv 2> $OUT/ncu_$name.err
    echo "rc $?"
    echo "== $name (cuBLAS) $(date +%T)"
    timeout 60 ncu --clock-control none -k "regex:^(?!.*$name)" --launch-skip 6 --launch-count 2 $sections $metrics \
        --csv --page details "$bin" "$name" bench > $OUT/ncu_${name}_cublas.csv 2> $OUT/ncu_${name}_cublas.err
    echo "rc $?"
}
prof $k/v23/bin/harness attention_8192x8192x128_v23
prof $k/bin/harness gemm_mis_3000x5000x2000
prof $k/bin/harness gemm_coop_4096_v22
for f in $OUT/*.csv; do echo "$f $(wc -c < $f)"; grep -o '"Kernel Name","[^"]*"' $f | head -0; done
