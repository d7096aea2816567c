#!/usr/bin/env bash
# Host time of the machine models on a program of many tiny ops (the fuzz case that timed out in
# session 24: ascend rmsnorm, rows in chunks of one value, 1676 x 127): simulate_ms of this build
# and, when given, of another build's tandem-cli (the baseline), same case, same machine, median
# of 3. ./benchmarks/sim_speed.sh [baseline-tandem-cli] writes results/sim_speed.json and the raw
# log results/sim_speed.log.
source "$(dirname "$0")/setup.sh"
baseline="${1:-}"
log="$out/sim_speed.log"
: > "$log"
cmd="run rmsnorm --target ascend --schedule sync --param D=1676 --param R=127 --param RB=0 --param TD=1 --param stages=1 --json"
{
    for which in current baseline; do
        cli="$root/build/apps/tandem-cli"
        if [ "$which" = baseline ]; then
            [ -z "$baseline" ] && continue
            cli="$baseline"
        fi
        for i in 1 2 3; do
            echo "\$ $cli $cmd" >> "$log"
            echo "$which $("$cli" $cmd | tee -a "$log")"
        done
    done
} > "$out/.sim_speed.lines"
python3 - "$out/.sim_speed.lines" "$out/sim_speed.json" "$baseline" "$(git -C "$root" rev-parse --short HEAD)" <<'PY'
import json, sys, statistics, datetime, platform, os
runs = {}
for line in open(sys.argv[1]):
    which, text = line.split(" ", 1)
    runs.setdefault(which, []).append(json.loads(text))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
rows = []
for which, rs in runs.items():
    rows.append(dict(build=which, simulate_ms_median=statistics.median(r["simulate_ms"] for r in rs),
                     cycles=rs[0]["cycles"], correct=rs[0]["correct"], races=rs[0]["races"]))
doc = {"what": "host time of the Ascend model on a program of ~3M tiny ops (rmsnorm TD=1, 1676 x 127)",
       "rows": rows, "baseline": sys.argv[3] or None, "commit": sys.argv[4],
       "note": "the same simulated cycles in both builds: the speed-up is in the race histories (grouped by hull "
               "width and period) and the scheduler (a core's next op recomputed only after its own steps)",
       "machine": f"{platform.node()}: {os.cpu_count()} cores, {cpu}",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "command": "benchmarks/sim_speed.sh " + sys.argv[3], "log": "sim_speed.log"}
if len(rows) == 2:
    doc["speedup"] = round(rows[1]["simulate_ms_median"] / rows[0]["simulate_ms_median"], 2)
json.dump(doc, open(sys.argv[2], "w"), indent=2)
print(json.dumps(doc["rows"]), doc.get("speedup"))
PY
rm -f "$out/.sim_speed.lines"
