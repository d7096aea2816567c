#!/usr/bin/env bash
# Issue 33 item 5: two matmuls per tile, on every target's machine model, each beside what a user
# would run without it (same process, same model version):
#  - SwiGLU, silu(x W1) * (x W3): a K loop and a copy of x per matmul (share=false) against one K
#    loop with x staged once for both (share=true, Halide's compute_with);
#  - a chain act(x W1) W2 in one kernel (matmul_chain: the hidden block made on chip) against two
#    kernels (linear + linear, the hidden activations through DRAM: their cycles added; the
#    activation itself left out of the two-kernel side, in its favour).
# Shapes: SwiGLU M = N = K = 1024; the chain as attention's (M = 8192 rows, J = 1024 hidden
# units, K = N = 128, the value width one tile); bf16 operands, f32 out (the first of the two kernels
# writes bf16); default tiles (64 x 64 x 64, pipelined) and, on hopper, ws_cooperative 128 x 128 (the
# fused forms only; the two-kernel side runs pipelined). Each row: cycles, roofline cycles and fraction (the roofline of
# the algorithm: MACs, vector work, bytes; apps/Workload.cpp). Writes results/two_matmuls.json
# and the raw log results/two_matmuls.log.
source "$(dirname "$0")/setup.sh"
source "$root/benchmarks/conformance_rows.sh"
begin_rows two_matmuls
S=1024
R=8192 # the chain's rows: 128 row tiles of 64, about one per SM (the chain's tiles are its rows)
for target in zpu ascend hopper; do
    schedules=("")
    [ "$target" = hopper ] && schedules=("" "schedule=ws_cooperative TM=128 TN=128")
    for s in "${schedules[@]}"; do
        tag=${s:+_coop}
        run_case "swiglu_separate$tag" $target swiglu M=$S N=$S K=$S $s
        run_case "swiglu_shared_x$tag" $target swiglu share=true M=$S N=$S K=$S $s
        # The chain as attention has it: N (the value width) one tile wide, so that each block of
        # hidden units is computed once per row tile (a narrower N tile recomputes it per tile).
        run_case "chain_one_kernel$tag" $target matmul_chain M=$R J=$S K=128 N=128 TN=128 $s
        [ -n "$s" ] && continue # the two-kernel side: pipelined only
        run_case "chain_first_matmul" $target linear epilogue=none out_type=bf16 layout=nt M=$R N=$S K=128 TM=64 TN=64
        run_case "chain_second_matmul" $target linear epilogue=none layout=nn M=$R N=128 K=$S TM=64 TN=128
    done
done
write_rows "$out/two_matmuls.json" \
    "roofline = max(bytes / memory bandwidth, vector work / vector rate, MACs / MAC rate), all cores; from the algorithm (apps/Workload.cpp)"
# The fused forms against the unfused ones (> 1: the fused form is faster).
python3 - "$out/two_matmuls.json" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
by = {(r["kernel"], r["target"]): r for r in record["rows"]}
cycles = lambda name, target: by.get((name, target), {}).get("cycles")
ratios = []
for target in ("zpu", "ascend", "hopper"):
    for tag in ("", "_coop"):
        sep, shared = cycles("swiglu_separate" + tag, target), cycles("swiglu_shared_x" + tag, target)
        if sep and shared:
            ratios.append({"target": target, "what": "swiglu separate / shared x" + tag,
                           "ratio": round(sep / shared, 3)})
        one = cycles("chain_one_kernel" + tag, target)
        a, b = cycles("chain_first_matmul" + tag, target), cycles("chain_second_matmul" + tag, target)
        if one and a and b:
            ratios.append({"target": target, "what": "chain two kernels / one kernel" + tag,
                           "ratio": round((a + b) / one, 3)})
record["ratios (> 1: the fused form is faster)"] = ratios
json.dump(record, open(sys.argv[1], "w"), indent=1)
for r in ratios:
    print(f'{r["target"]:7} {r["what"]:40} {r["ratio"]}')
PY
rm -f "$rows"
