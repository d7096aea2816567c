#!/usr/bin/env bash
# Issue 34: attention as the textbook writes it, unfused (a query tile's whole row of keys on
# chip) and fused by the schedule's online softmax (keys in blocks of TJ: FlashAttention), on the
# ZPU's, Hopper's and Ascend's machine models (Ascend since session 46: a mix kernel), with the
# hand-written online softmax (flash_attention) beside them, and warp-specialised (ws_pingpong).
# Single head, bf16 in, f32 out, query tiles of 64 rows; S = L = 256 (where the unfused form fits
# on chip) and 1024, 4096 (where only the fused one does; the unfused rows record the refusal);
# then head dim 128. Each row: cycles, the roofline
# of the algorithm (apps/Workload.cpp) and its fraction. No GPU figures: FlashAttention-3 and
# torch SDPA are compared on a GPU session (issue 37). Writes results/flash_attention.json and
# the raw log results/flash_attention.log.
source "$(dirname "$0")/setup.sh"
source "$root/benchmarks/conformance_rows.sh"
begin_rows flash_attention
for target in zpu hopper ascend; do
    for n in 256 1024 4096; do
        shape="S=$n L=$n D=64"
        run_case "textbook_$n" $target attention $shape
        for tj in 64 128; do
            run_case "online_tj${tj}_$n" $target attention TJ=$tj $shape
        done
        # FlashAttention-3's roles: a producer and two consumers taking query tiles in turn (each
        # consumer keeps its own state: key blocks of 128 do not fit Hopper's shared memory).
        run_case "online_tj64_pingpong_$n" $target attention TJ=64 schedule=ws_pingpong $shape
        run_case "by_hand_tj64_$n" $target flash_attention TJ=64 $shape
        run_case "online_causal_tj64_$n" $target attention TJ=64 causal=true $shape
    done
done
# Head dim 128 (FlashAttention-3's), four heads (256 query tiles: every core and SM busy), and
# Hopper at 16k tokens, one head (issue 34's goal shape: >= 0.7 of the roofline).
for target in zpu hopper; do
    shape="S=4096 L=4096 D=128 H=4"
    run_case "online_tj64_d128_h4_4096" $target attention TJ=64 $shape
    run_case "online_causal_tj64_d128_h4_4096" $target attention TJ=64 causal=true $shape
done
# Ascend at head dim 128 with one head: its model keeps every instruction of the run, and four
# heads of the causal form (24 cube cores busy) ran out of this machine's 24 GiB.
run_case "online_tj64_d128_4096" ascend attention TJ=64 S=4096 L=4096 D=128
run_case "online_causal_tj64_d128_4096" ascend attention TJ=64 causal=true S=4096 L=4096 D=128
run_case "online_tj64_d128_16384" hopper attention TJ=64 S=16384 L=16384 D=128
# Hopper's best schedule (session 53: the output accumulated in place in the P V matmul's
# registers, one exponential per score): two consumer warpgroups sharing 128-row query tiles
# (ws_cooperative), key blocks of 128, the exponentials in the scores' registers (exps=inline);
# 4k tokens with four heads and 16k with one (128 query tiles each), head dim 64 and 128, causal
# and not. The 16k
# rows run without the CPU reference (--no-numerics: timing and hazards; the conformance cases
# check the same kernels' numbers at smaller shapes).
for d in 64 128; do
    for causal in false true; do
        best="exps=inline schedule=ws_cooperative TM=128 TJ=128 causal=$causal D=$d"
        c=$([ $causal = true ] && echo causal_ || echo)
        run_case "best_${c}d${d}_h4_4096" hopper attention $best S=4096 L=4096 H=4
        run_case "best_${c}d${d}_16384" hopper attention $best S=16384 L=16384 --no-numerics
    done
done
write_rows "$out/flash_attention.json" \
    "roofline = max(bytes / memory bandwidth, vector work / vector rate, MACs / MAC rate), all cores; from the textbook algorithm (apps/Workload.cpp); by_hand rows: the hand-written generator's cycles against the textbook's roofline (its own algorithm counts the running state's work per element)"
rm -f "$rows"
# The hand-written form's algorithm is not the textbook's: give its rows the textbook roofline of
# the same shape and target (the online rows'), keeping its own as algorithm_roofline_cycles.
python3 - "$out/flash_attention.json" <<'PY'
import json, sys
path = sys.argv[1]
record = json.load(open(path))
rows = record["rows"]
for r in rows:
    if not r["kernel"].startswith("by_hand") or "refused" in r:
        continue
    n = r["kernel"].rsplit("_", 1)[1]
    ref = next(x for x in rows if x["kernel"] == f"online_tj64_{n}" and x["target"] == r["target"])
    r["algorithm_roofline_cycles"] = r["roofline_cycles"]
    r["roofline_cycles"] = ref["roofline_cycles"]
    r["roofline_bound"] = ref["roofline_bound"]
    r["roofline_fraction"] = round(ref["roofline_cycles"] / r["cycles"], 6)
    r["same_cycles_as_online_tj64"] = r["cycles"] == ref["cycles"]
json.dump(record, open(path, "w"), indent=1)
for r in rows:
    if r["kernel"].startswith("by_hand") and "refused" not in r:
        print(f'{r["kernel"]:26} {r["target"]:7} fraction {r["roofline_fraction"]:.3f} of the textbook roofline, same cycles as online_tj64: {r["same_cycles_as_online_tj64"]}')
PY
