#!/usr/bin/env bash
# Issue 33 item 1: int8 matmul into int32 against bf16 on the machine models that have int8
# (ascend: Mmad s8 at 16x16x32 MACs per cycle, twice bf16's; hopper: wgmma .s32.s8.s8 at 4096
# MACs per cycle per SM, twice bf16's), in the same process and model version: the conformance
# suite's linear (NT: both operands K-major, as wgmma needs for 8 bits), epilogue none, M = N =
# K = 2048 and a decode shape M = 16, N = K = 4096; bf16 with an f32 output, int8 with the int32
# sums; one schedule (pipelined, 2 stages), tiles 128 x 128 with K tiles of 64 bf16 or 128 int8
# (one 128-byte swizzle row on hopper: a 64-deep int8 K tile is copied by threads). Each row:
# cycles, roofline cycles and fraction (the roofline from the algorithm: int8 MACs at the int8
# rate; apps/Workload.cpp). Writes results/int8_gemm.json and the raw log results/int8_gemm.log.
source "$(dirname "$0")/setup.sh"
source "$root/benchmarks/conformance_rows.sh"
begin_rows int8_gemm
for target in ascend hopper; do
    for shape in "M=2048 N=2048 K=2048" "M=16 N=4096 K=4096"; do
        tag=_$(echo "$shape" | sed 's/[MNK]=//g; s/ /x/g')
        run_case "gemm_bf16$tag" $target linear in=bf16 epilogue=none layout=nt TM=128 TN=128 TK=64 $shape
        run_case "gemm_int8$tag" $target linear in=i8 out_type=i32 epilogue=none layout=nt TM=128 TN=128 TK=128 $shape
    done
done
write_rows "$out/int8_gemm.json" \
    "roofline = max(bytes / memory bandwidth, vector work / vector rate, MACs / MAC rate (int8 MACs at the int8 rate)), all cores; from the algorithm (apps/Workload.cpp)"
# int8 against bf16 (> 1: int8 is faster).
python3 - "$out/int8_gemm.json" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
by = {(r["kernel"], r["target"]): r for r in record["rows"]}
ratios = []
for (name, target), row in by.items():
    if not name.startswith("gemm_int8"):
        continue
    bf16 = by.get((name.replace("int8", "bf16"), target), {}).get("cycles")
    if bf16 and row.get("cycles"):
        ratios.append({"target": target, "shape": name[len("gemm_int8_"):],
                       "ratio": round(bf16 / row["cycles"], 3)})
record["ratios (bf16 cycles / int8 cycles)"] = ratios
json.dump(record, open(sys.argv[1], "w"), indent=1)
for r in ratios:
    print(f'{r["target"]:7} {r["shape"]:16} bf16 / int8 {r["ratio"]}')
PY
rm -f "$rows"
