#!/usr/bin/env bash
# Issue 33 item 1: FP8 GEMM on the Hopper model against the FP8 roofline (wgmma .f32.e4m3.e4m3 at
# 4096 MACs per cycle per SM, twice bf16's: machines/hopper.json wgmma_fp8_macs_per_cycle), each
# beside the same GEMM in bf16 (same process, same model version): the conformance suite's linear
# (NT: both operands K-major, as wgmma needs for 8 bits), epilogue none, a bf16 output; M = N = K
# = 4096 and 8192 by schedule (pipelined 128 x 128 with 3 stages; ws_cooperative 128 x 256 with 4;
# ws_pingpong 128 x 128 with 4), K tiles of one 128-byte swizzle row (64 bf16, 128 FP8), timing
# only (--no-numerics: the CPU reference would take hours), and the GPU bench cases (rowwise
# scales, 3 stages); 1024^3 with scales and its numerics checked against Halide's reference; the zpu and ascend rows are their refusals (no FP8 in their tensor
# cores). Each row: cycles, roofline cycles and fraction (the roofline from the algorithm: FP8
# MACs at the FP8 rate; apps/Workload.cpp). Writes results/fp8_gemm.json and the raw log
# results/fp8_gemm.log.
source "$(dirname "$0")/setup.sh"
source "$root/benchmarks/conformance_rows.sh"
begin_rows fp8_gemm
run_case "gemm_fp8_1024_checked" hopper linear in=e4m3 epilogue=scales out_type=bf16 schedule=ws_cooperative M=1024 N=1024 K=1024 TM=128 TN=256 stages=3
for target in zpu ascend; do
    run_case "gemm_fp8_1024" $target linear in=e4m3 epilogue=none out_type=bf16 M=1024 N=1024 K=1024
done
for size in 4096 8192; do
    for s in "pipelined TM=128 TN=128 stages=3" "ws_cooperative TM=128 TN=256 stages=4" "ws_pingpong TM=128 TN=128 stages=4"; do
        set -- $s
        for in in bf16 e4m3; do
            run_case "gemm_${in}_${size}_$1" hopper linear in=$in epilogue=none out_type=bf16 \
                schedule=$s M=$size N=$size K=$size --no-numerics
        done
    done
    # The GPU bench case (tests/conformance/CMakeLists.txt bench_linear_fp8_*): rowwise scales, as
    # torch._scaled_mm takes them, 3 stages.
    run_case "gemm_fp8_scaled_${size}_bench" hopper linear in=e4m3 epilogue=scales out_type=bf16 \
        schedule=ws_cooperative M=$size N=$size K=$size TM=128 TN=256 stages=3 --no-numerics
done
write_rows "$out/fp8_gemm.json" \
    "roofline = max(bytes / memory bandwidth, vector work / vector rate, MACs / MAC rate (FP8 MACs at the FP8 rate)), all SMs; from the algorithm (apps/Workload.cpp)"
# FP8 against bf16 (> 1: FP8 is faster).
python3 - "$out/fp8_gemm.json" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
by = {(r["kernel"], r["target"]): r for r in record["rows"]}
ratios = []
for (name, target), row in by.items():
    if not name.startswith("gemm_e4m3"):
        continue
    bf16 = by.get((name.replace("e4m3", "bf16"), target), {}).get("cycles")
    if bf16 and row.get("cycles"):
        ratios.append({"target": target, "shape": name[len("gemm_e4m3_"):],
                       "ratio": round(bf16 / row["cycles"], 3)})
record["ratios (bf16 cycles / FP8 cycles)"] = ratios
json.dump(record, open(sys.argv[1], "w"), indent=1)
for r in ratios:
    print(f'{r["target"]:7} {r["shape"]:24} bf16 / FP8 {r["ratio"]}')
PY
rm -f "$rows"
