#!/bin/bash
# Session 45's fourth call: every conformance hopper library after Plan::pad_rows (copy-free
# tiles an epilogue walks in fragment order get rows 32 bytes longer), racecheck on the small
# attention and chain ones, and the online attention timed again beside torch SDPA (the same four
# runners as device_inline.sh, now padded).
set -u
cd "$(dirname "$0")/../../.."
k=$(pwd)/benchmarks/gpu/kernels/conformance
gunzip -f "$k"/bin/*.gz "$k"/bench/*.gz 2> /dev/null
chmod +x "$k"/bin/* "$k"/bench/*
export PATH=/usr/local/cuda/bin:$PATH
log=$OUT/log.txt
rows=$OUT/conformance.jsonl
echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $log
for runner in "$k"/bin/*_run; do
    c=$(basename "$runner" _hopper_run); c=${c#conformance_}
    said=$(timeout 30 "$runner" --check "$k/saved/$c" 2>&1); rc=$?
    printf '{"name": "conformance_%s", "app": "conformance", "correct": %s, "rc": %d, "output": %s}\n' "$c" \
        "$([ $rc -eq 0 ] && echo true || echo false)" $rc \
        "$(printf '%s' "$said" | head -c 400 | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" >> "$rows"
done
echo "conformance: $(grep -c '"correct": true' "$rows") of $(wc -l < "$rows") correct $(date +%T)" >> $log
grep '"correct": false' "$rows" >> $log
for c in attention_online_primes attention_online_inline_primes attention_online_d128 flash_attention_primes matmul_chain_column_tail; do
    [ -x "$k/bin/conformance_${c}_hopper_run" ] || continue
    echo "### racecheck $c" >> $log
    timeout 60 compute-sanitizer --tool racecheck --print-limit 5 "$k/bin/conformance_${c}_hopper_run" --check "$k/saved/$c" 2>&1 | tail -2 >> $log
done
mkdir -p /tmp/bench4
for b in attention_online_d64 attention_online_inline_d64 attention_online_d128 attention_online_inline_d128; do
    cp "$k/bench/conformance_bench_${b}_hopper_run" /tmp/bench4/
done
python3 benchmarks/gpu/attention_vs_sdpa.py /tmp/bench4 > $OUT/sdpa.jsonl 2>> $log
echo "sdpa done $(date +%T)" >> $log
