#!/usr/bin/env bash
# Issue 32 item 8: the bandwidth-bound user kernels of the conformance suite (tests/conformance:
# softmax, log-softmax, layernorm, rmsnorm, x - mean(row), transpose, column sums) at a large size
# with their default schedule (only the shape given) on every target's machine model, against the
# roofline of their algorithm (apps/Workload.cpp: compulsory bytes and the vector work of the
# Funcs' definitions, weighed by the target's vector costs). Each row: cycles, roofline cycles,
# fraction, the roofline term that bounds (memory, vector, matrix) and the engines' busy cycles.
# Writes results/user_kernels.json and the raw log results/user_kernels.log.
source "$(dirname "$0")/setup.sh"
source "$root/benchmarks/conformance_rows.sh"
begin_rows user_kernels
kernels=("softmax C=4096 R=1024" "log_softmax C=4096 R=1024" "layernorm C=4096 R=1024"
         "user_rmsnorm C=4096 R=1024" "subtract_mean C=4096 R=1024" "transpose W=4096 H=1024"
         "column_reduce W=4096 H=1024")
for target in zpu ascend hopper; do
    for k in "${kernels[@]}"; do
        set -- $k
        run_case "$1" $target "$@"
    done
done
write_rows "$out/user_kernels.json" \
    "roofline = max(bytes / memory bandwidth, vector work / vector rate, MACs / MAC rate), all cores; vector work from the algorithm (apps/Workload.cpp, docs/design/testing.md 'Speed')"
rm -f "$rows"
