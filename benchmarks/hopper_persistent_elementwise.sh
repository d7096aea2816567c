#!/usr/bin/env bash
# elementwise at 8192 x 8192 on the Hopper model (double_buffered): a CTA per tile (ctas_per_sm=0,
# the default) against persistent grids of 1 and 2 CTAs per SM looping over the tiles through their
# ring (issue 15). Model cycles, so the host does not matter.
# Writes results/hopper_persistent_elementwise.json and the raw log beside it.
source "$(dirname "$0")/setup.sh"
log="$out/hopper_persistent_elementwise.log"
: > "$log"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
for ctas in 0 1 2; do
    cmd="run elementwise --target hopper --schedule double_buffered --param W=8192 --param H=8192 --param ctas_per_sm=$ctas --no-numerics --json"
    echo "\$ tandem-cli $cmd" >> "$log"
    "$root/build/apps/tandem-cli" $cmd | tee -a "$log" >> "$tmp"
done
python3 - "$tmp" "$out/hopper_persistent_elementwise.json" <<'PY'
import json, sys, datetime, platform, os
rows = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows.append(dict(ctas_per_sm=int(r["params"]["ctas_per_sm"]), cycles=r["cycles"],
                     roofline_fraction=round(r["roofline_cycles"] / r["cycles"], 3), races=r["races"],
                     deadlock=r["deadlock"], model=r["model"]))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
doc = {"what": "elementwise 8192 x 8192 on the Hopper model: a CTA per tile (0) vs persistent CTAs per SM",
       "rows": rows, "machine": f"{platform.node()}: {os.cpu_count()} cores, {cpu}",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "command": "benchmarks/hopper_persistent_elementwise.sh", "log": "hopper_persistent_elementwise.log"}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
for r in rows: print(r)
PY
