#!/usr/bin/env bash
# Issue 33 item 6: the tuner chooses split-K (U) with the tiles, stages and schedule, per target,
# on skinny (decode) shapes: M = 1, 16, 64, N = K = 4096, bf16 operands, f32 out. For each
# (target, M) the generator main's --tune tries 40 candidates of linear's Tunable parameters
# (TM, TN, TK, stages, schedule, U; seed 52) on the machine model, then --run --json runs the best
# for the record. Writes results/split_k_tuned.json and the raw log results/split_k_tuned.log.
source "$(dirname "$0")/setup.sh"
source "$root/benchmarks/conformance_rows.sh"
begin_rows split_k_tuned
problem="in=bf16 epilogue=none layout=nt N=4096 K=4096"
for target in zpu ascend hopper; do
    for M in 1 16 64; do
        db=$(mktemp -u --suffix=.db)
        echo "\$ conformance_gen -g linear --tune target=$target $problem M=$M --budget 40 --seed 52" >> "$log"
        "$gen" -g linear --tune "target=$target" $problem M=$M --budget 40 --jobs 2 --seed 52 \
            --db "sqlite:$db" >> "$log" 2>&1 || true
        best=$(grep -E "^  best: " "$log" | tail -1 | sed -E 's/^  best: ([^ ]*) .*/\1/' | tr ',' ' ')
        rm -f "$db"
        run_case "tuned_m$M" $target linear $problem M=$M $best --no-numerics
    done
done
write_rows "$out/split_k_tuned.json" \
    "the best of 40 tuned candidates per (target, M) (U = 1: no split-K); roofline = max(bytes / memory bandwidth, vector work / vector rate, MACs / MAC rate), all cores; from the algorithm (apps/Workload.cpp)"
rm -f "$rows"
