#!/usr/bin/env bash
# attention_scores S = Q K^T on the Hopper model (ws_pingpong, K a K-major wgmma B operand) at
# Lq = Lk = 4096 and 8192, D = 64 and 128: model cycles against the problem's roofline (the f32
# scores written once bound it at D = 128). A prediction for the GPU run (set v16 measures it
# against cuBLAS). Model cycles, so the host does not matter.
# Writes results/hopper_attention.json and the raw log beside it.
source "$(dirname "$0")/setup.sh"
log="$out/hopper_attention.log"
: > "$log"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
for size in "4096 128" "8192 128" "8192 64"; do
    read -r l d <<< "$size"
    cmd="run attention_scores --target hopper --param Lq=$l --param Lk=$l --param D=$d --no-numerics --json"
    echo "\$ tandem-cli $cmd" >> "$log"
    "$root/build/apps/tandem-cli" $cmd | tee -a "$log" >> "$tmp"
done
python3 - "$tmp" "$out/hopper_attention.json" <<'PY'
import json, sys, datetime, platform, os
rows = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    p = r["params"]
    rows.append(dict(Lq=int(p["Lq"]), Lk=int(p["Lk"]), D=int(p["D"]), schedule=r["schedule"], cycles=r["cycles"],
                     roofline_cycles=r["roofline_cycles"], roofline_fraction=round(r["roofline_cycles"] / r["cycles"], 3),
                     races=r["races"], deadlock=r["deadlock"], model=r["model"]))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
doc = {"what": "attention_scores on the Hopper model: cycles against the problem's roofline (a prediction; not run on a GPU)",
       "rows": rows, "machine": f"{platform.node()}: {os.cpu_count()} cores, {cpu}",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "command": "benchmarks/hopper_attention.sh", "log": "hopper_attention.log"}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
for r in rows: print(r)
PY
