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
# fused forms only: linear has one schedule). Each row: cycles, roofline cycles and fraction (the roofline of
# the algorithm: MACs, vector work, bytes; apps/Workload.cpp). Writes results/two_matmuls.json
# and the raw log results/two_matmuls.log.
source "$(dirname "$0")/setup.sh"
gen="$root/build/tests/conformance/conformance_gen"
log="$out/two_matmuls.log"
: > "$log"
rows=$(mktemp)
S=1024
R=8192 # the chain's rows: 128 row tiles of 64, about one per SM (the chain's tiles are its rows)
run() { # name target generator params...
    local name=$1 target=$2 g=$3
    shift 3
    echo "\$ conformance_gen -g $g --run target=$target $* --json" >> "$log"
    local result
    if result=$("$gen" -g "$g" --run "target=$target" "$@" --json 2>&1); then
        echo "$result" >> "$log"
        echo "$name|$target|$g $*|$(echo "$result" | tail -1)" >> "$rows"
    else
        echo "$result" >> "$log"
        echo "$name|$target|$g $*|{\"refused\": $(echo "$result" | tail -1 | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')}" >> "$rows"
    fi
}
for target in zpu ascend hopper; do
    schedules=("")
    [ "$target" = hopper ] && schedules=("" "schedule=ws_cooperative TM=128 TN=128")
    for s in "${schedules[@]}"; do
        tag=${s:+_coop}
        run "swiglu_separate$tag" $target swiglu M=$S N=$S K=$S $s
        run "swiglu_shared_x$tag" $target swiglu share=true M=$S N=$S K=$S $s
        # The chain as attention has it: N (the value width) one tile wide, so that each block of
        # hidden units is computed once per row tile (a narrower N tile recomputes it per tile).
        run "chain_one_kernel$tag" $target matmul_chain M=$R J=$S K=128 N=128 TN=128 $s
        [ -n "$s" ] && continue # linear has one schedule (pipelined)
        run "chain_first_matmul" $target linear epilogue=none out_type=bf16 layout=nt M=$R N=$S K=128 TM=64 TN=64
        run "chain_second_matmul" $target linear epilogue=none layout=nn M=$R N=128 K=$S TM=64 TN=128
    done
done
python3 - "$out/two_matmuls.json" "$rows" "$root" <<'PY'
import json, sys, datetime, platform, os, subprocess
dest, rows_file, root = sys.argv[1:]
versions = {t: json.load(open(f"{root}/machines/{t}.json"))["version"] for t in ("zpu", "ascend", "hopper")}
rows = []
for line in open(rows_file):
    name, target, command, result = line.rstrip("\n").split("|", 3)
    j = json.loads(result)
    row = {"name": name, "target": target, "generator": command}
    if "refused" in j:
        row["refused"] = j["refused"]
    else:
        row.update({k: j[k] for k in ("model", "correct", "cycles", "roofline_cycles",
                                      "roofline_fraction", "roofline_bound", "races", "deadlock")})
    rows.append(row)
by = {(r["name"], r["target"]): r for r in rows}
ratios = []
for target in ("zpu", "ascend", "hopper"):
    for tag in ("", "_coop"):
        sep, shared = by.get(("swiglu_separate" + tag, target)), by.get(("swiglu_shared_x" + tag, target))
        if sep and shared and "cycles" in sep and "cycles" in shared:
            ratios.append({"target": target, "what": "swiglu separate / shared x" + tag,
                           "ratio": round(sep["cycles"] / shared["cycles"], 3)})
        one = by.get(("chain_one_kernel" + tag, target))
        a, b = by.get(("chain_first_matmul" + tag, target)), by.get(("chain_second_matmul" + tag, target))
        if one and a and b and all("cycles" in r for r in (one, a, b)):
            ratios.append({"target": target, "what": "chain two kernels / one kernel" + tag,
                           "ratio": round((a["cycles"] + b["cycles"]) / one["cycles"], 3)})
record = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "machine": f"{platform.node()}: {os.cpu_count()} cores", "command": "benchmarks/two_matmuls.sh",
    "commit": subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip(),
    "models": {t: f"{t} v{v}" for t, v in versions.items()},
    "log": "two_matmuls.log",
    "rows": rows,
    "ratios (> 1: the fused form is faster)": ratios,
}
json.dump(record, open(dest, "w"), indent=1)
for r in rows:
    if "refused" in r:
        print(f'{r["name"]:26} {r["target"]:7} refused: {r["refused"][:100]}')
    else:
        print(f'{r["name"]:26} {r["target"]:7} {r["cycles"]:>9} cycles, roofline {r["roofline_cycles"]:>9.0f} '
              f'({r["roofline_bound"]}), fraction {r["roofline_fraction"]:.3f}, correct {r["correct"]}')
for r in ratios:
    print(f'{r["target"]:7} {r["what"]:40} {r["ratio"]}')
PY
rm -f "$rows"
