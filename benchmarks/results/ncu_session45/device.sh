#!/bin/bash
# Session 45's rerun on the GPU machine (carry benchmarks/gpu/kernels, made by `run.sh conformance`
# after the fix): the conformance suite's hopper libraries checked again, compute-sanitizer on the
# five that were wrong, and Nsight Compute on two fused attention kernels (0.025-0.066 of torch
# SDPA in the first run).
set -u
cd "$(dirname "$0")/../../.."
k=$(pwd)/benchmarks/gpu/kernels/conformance
gunzip -f "$k"/bin/*.gz "$k"/bench/*.gz 2> /dev/null
chmod +x "$k"/bin/* "$k"/bench/*
export PATH=/usr/local/cuda/bin:$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2> /dev/null | head -1)
rows=$OUT/conformance.jsonl
echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $OUT/log.txt
for runner in "$k"/bin/*_run; do
    c=$(basename "$runner" _hopper_run); c=${c#conformance_}
    said=$(timeout 30 "$runner" --check "$k/saved/$c" 2>&1); rc=$?
    printf '{"name": "conformance_%s", "app": "conformance", "correct": %s, "rc": %d, "output": %s}\n' "$c" \
        "$([ $rc -eq 0 ] && echo true || echo false)" $rc \
        "$(printf '%s' "$said" | head -c 400 | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" >> "$rows"
done
echo "conformance: $(grep -c '"correct": true' "$rows") of $(wc -l < "$rows") correct $(date +%T)" >> $OUT/log.txt
grep '"correct": false' "$rows" >> $OUT/log.txt
for c in matmul_chain_ones matmul_chain_column_tail attention_ones flash_attention_ones attention_online_ones; do
    for tool in racecheck memcheck; do
        echo "### $tool $c"
        timeout 60 compute-sanitizer --tool $tool --print-limit 5 "$k/bin/conformance_${c}_hopper_run" --check "$k/saved/$c" 2>&1 | tail -4
    done
done >> $OUT/log.txt
echo "sanitizers done $(date +%T)" >> $OUT/log.txt
for b in attention_online_d128 flash_attention_d128; do
    timeout 150 ncu --clock-control none --launch-count 1 --set full --import-source yes -o "$OUT/ncu_$b" \
        "$k/bench/conformance_bench_${b}_hopper_run" --iterations 1 > "$OUT/ncu_$b.out" 2>&1
    echo "ncu $b rc $? $(date +%T)" >> $OUT/log.txt
    ncu --import "$OUT/ncu_$b.ncu-rep" --page details --csv > "$OUT/ncu_$b.csv" 2>&1
    ncu --import "$OUT/ncu_$b.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${b}_sass.csv" 2>&1
done
ls -la $OUT >> $OUT/log.txt
