#!/bin/bash
# Session 45's third call: the online attention with its exponentials inline (exps=inline: the
# row sum and P straight from the scores' fragments) against the same with an exps tile in shared
# memory, beside torch SDPA in one run; its correctness at prime shapes; ncu on the inline d128.
set -u
cd "$(dirname "$0")/../../.."
k=$(pwd)/benchmarks/gpu/kernels/s45b
gunzip -f "$k"/bin/*.gz "$k"/bench/*.gz; chmod +x "$k"/bin/* "$k"/bench/*
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2> /dev/null | head -1)
log=$OUT/log.txt
echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $log
r=$k/bin/conformance_attention_online_inline_primes_hopper_run
timeout 30 $r --check $k/saved/attention_online_inline_primes >> $log 2>&1; echo "check rc $?" >> $log
timeout 60 compute-sanitizer --tool racecheck --print-limit 5 $r --check $k/saved/attention_online_inline_primes 2>&1 | tail -2 >> $log
timeout 60 compute-sanitizer --tool memcheck --print-limit 5 $r --check $k/saved/attention_online_inline_primes 2>&1 | tail -2 >> $log
python3 benchmarks/gpu/attention_vs_sdpa.py "$k/bench" > $OUT/sdpa.jsonl 2>> $log
echo "sdpa done $(date +%T)" >> $log
b=attention_online_inline_d128
timeout 120 ncu --clock-control none --launch-count 1 --set full -o "$OUT/ncu_$b" "$k/bench/conformance_bench_${b}_hopper_run" --iterations 1 > /dev/null 2>&1
ncu --import "$OUT/ncu_$b.ncu-rep" --page details --csv > "$OUT/ncu_$b.csv" 2>&1
ncu --import "$OUT/ncu_$b.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${b}_sass.csv" 2>&1
rm -f "$OUT/ncu_$b.ncu-rep"
echo "ncu done $(date +%T)" >> $log
