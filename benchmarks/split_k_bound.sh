#!/usr/bin/env bash
# Issue 33 item 6, before split-K is built into the compiler: what splitting K can win on skinny
# (decode) GEMMs, measured with what a user can write today, two kernels on the same model run
# one after the other: split_k_partials (the partial sums over U slices of K, each (tile, slice)
# on a core of its own) and column_reduce op=sum (the U slices summed: W = N * M columns of U
# rows), their cycles added, against linear (one kernel, the same tiles) at M = 1, 16, 64 and
# N = K = 4096, bf16 operands, f32 out, on every target. U = 1 (no split) to 16. The pair's
# roofline fraction uses the GEMM's own roofline (its bytes and MACs; the partials' round trip
# through DRAM is the price of this form, which a compiler-built split-K would pay too unless it
# reduces on chip). Writes results/split_k_bound.json and the raw log results/split_k_bound.log.
source "$(dirname "$0")/setup.sh"
source "$root/benchmarks/conformance_rows.sh"
begin_rows split_k_bound
N=4096
K=4096
for target in zpu ascend hopper; do
    for M in 1 16 64; do
        # (the sums 512 columns per CTA on hopper; 16: 0.02)
        tiles=$(decode_tiles $target $M)
        reduce=$([ $target = hopper ] && echo "TX=512" || echo "")
        run_case "linear_m$M" $target linear in=bf16 epilogue=none layout=nt M=$M N=$N K=$K $tiles --no-numerics
        for U in 2 4 8 16; do
            run_case "partials_m${M}_u$U" $target split_k_partials M=$M N=$N K=$K U=$U $tiles --no-numerics
            run_case "reduce_m${M}_u$U" $target column_reduce op=sum W=$((N * M)) H=$U $reduce --no-numerics
        done
    done
done
write_rows "$out/split_k_bound.json" \
    "roofline = max(bytes / memory bandwidth, vector work / vector rate, MACs / MAC rate), all cores; from the algorithm (apps/Workload.cpp); a pair's fraction: the GEMM's (linear's) roofline over the two kernels' cycles"
python3 - "$out/split_k_bound.json" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
by = {(r["kernel"], r["target"]): r for r in record["rows"]}
pairs = []
for (name, target), row in sorted(by.items()):
    if not name.startswith("linear_m") or "cycles" not in row:
        continue
    m = name[len("linear_m"):]
    best = {"target": target, "M": int(m), "U": 1, "cycles": row["cycles"],
            "roofline_fraction": row["roofline_fraction"]}
    pairs.append(dict(best))
    for u in (2, 4, 8, 16):
        p, r = by.get((f"partials_m{m}_u{u}", target), {}), by.get((f"reduce_m{m}_u{u}", target), {})
        if "cycles" in p and "cycles" in r:
            cycles = p["cycles"] + r["cycles"]
            pairs.append({"target": target, "M": int(m), "U": u, "cycles": cycles,
                          "partials_cycles": p["cycles"], "reduce_cycles": r["cycles"],
                          "roofline_fraction": round(row["roofline_cycles"] / cycles, 3)})
record["split-K as two kernels (U = 1: linear alone)"] = pairs
json.dump(record, open(sys.argv[1], "w"), indent=1)
for p in pairs:
    print(f'{p["target"]:7} M={p["M"]:<3} U={p["U"]:<3} {p["cycles"]:>9} cycles, fraction {p["roofline_fraction"]}')
PY
rm -f "$rows"
