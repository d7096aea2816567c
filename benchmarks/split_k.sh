#!/usr/bin/env bash
# Issue 33 item 6: split-K built into the compiler (Stage::rfactor, a pipeline of two kernels:
# the partial sums over U slices of K, each (tile, slice) on a core of its own, then the slices
# summed with the epilogue), against the same GEMM without it (U = 1), on skinny (decode) shapes:
# M = 1, 16, 64, N = K = 4096, bf16 operands, f32 out, on every target, U = 1 to 16. The tiles
# are split_k_bound.sh's (a user's pick per target). The roofline is the GEMM's own (its bytes
# and MACs): the partials' round trip through DRAM is split-K's price. Writes
# results/split_k.json and the raw log results/split_k.log; the table at the end has the best U
# per (target, M).
source "$(dirname "$0")/setup.sh"
source "$root/benchmarks/conformance_rows.sh"
begin_rows split_k
N=4096
K=4096
for target in zpu ascend hopper; do
    for M in 1 16 64; do
        tiles=$(decode_tiles $target $M)
        for U in 1 2 4 8 16; do
            run_case "linear_m${M}_u$U" $target linear in=bf16 epilogue=none layout=nt M=$M N=$N K=$K $tiles U=$U --no-numerics
        done
    done
done
write_rows "$out/split_k.json" \
    "roofline = max(bytes / memory bandwidth, vector work / vector rate, MACs / MAC rate), all cores; from the algorithm (apps/Workload.cpp); U > 1: the cycles of the pipeline's two kernels, run one after the other"
python3 - "$out/split_k.json" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
best = {}
for r in record["rows"]:
    if "cycles" not in r:
        continue
    m, u = r["kernel"][len("linear_m"):].split("_u")
    key = (r["target"], int(m))
    entry = {"target": r["target"], "M": int(m), "U": int(u), "cycles": r["cycles"],
             "roofline_fraction": r["roofline_fraction"]}
    if u == "1":
        best.setdefault(key, {})["without"] = entry
    if key not in best or "best" not in best[key] or r["cycles"] < best[key]["best"]["cycles"]:
        best.setdefault(key, {})["best"] = entry
record["best U per (target, M)"] = [
    {"target": t, "M": m, "U": b["best"]["U"], "fraction_without": b["without"]["roofline_fraction"],
     "fraction": b["best"]["roofline_fraction"]} for (t, m), b in sorted(best.items())]
json.dump(record, open(sys.argv[1], "w"), indent=1)
for row in record["best U per (target, M)"]:
    print(f'{row["target"]:7} M={row["M"]:<3} best U={row["U"]:<3} fraction {row["fraction_without"]} -> {row["fraction"]}')
PY
rm -f "$rows"
