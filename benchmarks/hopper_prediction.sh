#!/usr/bin/env bash
# Issue 15's prediction: the Hopper model's time of the GEMM built for speed against the design it
# replaced, at 4096^3 and 8192^3 (bf16 in, bf16 out), before a GPU measures them.
# - old: ws_pingpong with the first design's tiles and order (128x128x64, tile rows walked
#   row-major: group=1) on today's emitter (one wgmma group in flight and the lone producer are
#   not switchable off: the old wait_group 0 and 128 spinning producer threads are gone);
# - new: ws_pingpong at its defaults (grouped tile order, 8 tile rows) and ws_cooperative with
#   128x256 tiles (two consumer warpgroups on one tile, the output staged through a ring);
# - cluster: the new ones in 2x1 clusters (cluster_m=2: B's tile multicast to the two CTAs of a
#   pair of tile rows) and ws_cooperative in 1x2 clusters (cluster_n=2, row-major: A multicast);
#   speedup_over_unclustered compares them with the new row of the same schedule.
# The model counts SM cycles (hopper model version in the rows), so the host does not matter.
# Writes results/hopper_prediction.json and the raw log results/hopper_prediction.log.
source "$(dirname "$0")/setup.sh"
cli="$root/build/apps/tandem-cli"
log="$out/hopper_prediction.log"
: > "$log"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
for size in 4096 8192; do
    for config in "old|ws_pingpong|--param group=1" "new|ws_pingpong|" "new|ws_cooperative|--param TN=256" \
                  "cluster|ws_pingpong|--param cluster_m=2" "cluster|ws_cooperative|--param TN=256 --param cluster_m=2" \
                  "cluster|ws_cooperative|--param TN=256 --param group=1 --param cluster_n=2"; do
        IFS='|' read -r kind schedule more <<< "$config"
        cmd="run gemm --target hopper --schedule $schedule --param M=$size --param N=$size --param K=$size $more --no-numerics --json"
        echo "\$ tandem-cli $cmd" >> "$log"
        echo "$kind $size $("$cli" $cmd | tee -a "$log")" >> "$tmp"
    done
done
python3 - "$tmp" "$out/hopper_prediction.json" <<'PY'
import json, sys, datetime, platform, os
rows, old = [], {}
for line in open(sys.argv[1]):
    kind, size, text = line.split(" ", 2)
    r = json.loads(text)
    row = dict(kind=kind, schedule=r["schedule"], M=int(size), N=int(size), K=int(size), params=r["params"],
               cycles=r["cycles"], roofline_fraction=round(r["roofline_cycles"] / r["cycles"], 3),
               races=r["races"], deadlock=r["deadlock"], model=r["model"])
    if kind == "old":
        old[size] = r["cycles"]
    rows.append(row)
for row in rows:
    row["predicted_speedup_over_old"] = round(old[str(row["M"])] / row["cycles"], 3)
    if row["kind"] == "cluster":
        base = next(r for r in rows if r["kind"] == "new" and r["schedule"] == row["schedule"] and r["M"] == row["M"])
        row["predicted_speedup_over_unclustered"] = round(base["cycles"] / row["cycles"], 3)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
doc = {"what": "Hopper model: predicted time of the GEMM built for speed (new; cluster: in 2x1 / 1x2 clusters with "
               "TMA multicast) over the first design's tiles and order (old: ws_pingpong 128x128x64, row-major "
               "tiles) at 4096^3 and 8192^3; speedup = old cycles / cycles",
       "rows": rows, "machine": f"{platform.node()}: {os.cpu_count()} cores, {cpu}",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "command": "benchmarks/hopper_prediction.sh", "log": "hopper_prediction.log"}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
for row in rows:
    print(row["kind"], row["schedule"], row["M"], row["cycles"], row["roofline_fraction"], row["predicted_speedup_over_old"],
          row.get("predicted_speedup_over_unclustered", ""))
PY
