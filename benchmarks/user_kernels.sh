#!/usr/bin/env bash
# Issue 32 item 8: the bandwidth-bound user kernels of the conformance suite (tests/conformance:
# softmax, log-softmax, layernorm, rmsnorm, x - mean(row), transpose, column sums) at a large size
# with their default schedule (only the shape given) on every target's machine model, against the
# roofline of their algorithm (apps/Workload.cpp: compulsory bytes and the vector work of the
# Funcs' definitions, weighed by the target's vector costs). Each row: cycles, roofline cycles,
# fraction, the roofline term that bounds (memory, vector, matrix) and the engines' busy cycles.
# Writes results/user_kernels.json and the raw log results/user_kernels.log.
source "$(dirname "$0")/setup.sh"
gen="$root/build/tests/conformance/conformance_gen"
log="$out/user_kernels.log"
: > "$log"
rows=$(mktemp)
kernels=("softmax C=4096 R=1024" "log_softmax C=4096 R=1024" "layernorm C=4096 R=1024"
         "user_rmsnorm C=4096 R=1024" "subtract_mean C=4096 R=1024" "transpose W=4096 H=1024"
         "column_reduce W=4096 H=1024")
for target in zpu ascend hopper; do
    for k in "${kernels[@]}"; do
        set -- $k
        echo "\$ conformance_gen -g $1 --run target=$target ${*:2} --json" >> "$log"
        if result=$("$gen" -g "$1" --run "target=$target" "${@:2}" --json 2>&1); then
            echo "$result" >> "$log"
            echo "$target|$k|$(echo "$result" | tail -1)" >> "$rows"
        else
            echo "$result" >> "$log"
            echo "$target|$k|{\"refused\": $(echo "$result" | tail -1 | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')}" >> "$rows"
        fi
    done
done
python3 - "$out/user_kernels.json" "$rows" "$root" <<'PY'
import json, sys, datetime, platform, os, subprocess
dest, rows_file, root = sys.argv[1:]
versions = {t: json.load(open(f"{root}/machines/{t}.json"))["version"] for t in ("zpu", "ascend", "hopper")}
rows = []
for line in open(rows_file):
    target, kernel, result = line.rstrip("\n").split("|", 2)
    name, *params = kernel.split()
    j = json.loads(result)
    row = {"kernel": name, "target": target, "params": " ".join(params)}
    if "refused" in j:
        row["refused"] = j["refused"]
    else:
        row.update({"model": j["model"], "correct": j["correct"], "cycles": j["cycles"],
                    "roofline_cycles": j["roofline_cycles"], "roofline_fraction": j["roofline_fraction"],
                    "roofline_bound": j["roofline_bound"], "bound_cycles": j["bound_cycles"],
                    "busy": j["busy"], "races": j["races"], "deadlock": j["deadlock"]})
    rows.append(row)
record = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "machine": f"{platform.node()}: {os.cpu_count()} cores", "command": "benchmarks/user_kernels.sh",
    "commit": subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip(),
    "models": {t: f"{t} v{v}" for t, v in versions.items()},
    "log": "user_kernels.log",
    "definition": "roofline = max(bytes / memory bandwidth, vector work / vector rate, MACs / MAC rate), "
                  "all cores; vector work from the algorithm (apps/Workload.cpp, docs/design/testing.md 'Speed')",
    "rows": rows,
}
json.dump(record, open(dest, "w"), indent=1)
for r in rows:
    if "refused" in r:
        print(f'{r["kernel"]:14} {r["target"]:7} refused: {r["refused"][:90]}')
    else:
        print(f'{r["kernel"]:14} {r["target"]:7} {r["cycles"]:>8} cycles, roofline {r["roofline_cycles"]:>9.0f} '
              f'({r["roofline_bound"]}), fraction {r["roofline_fraction"]:.3f}')
PY
rm -f "$rows"
