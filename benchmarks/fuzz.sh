#!/usr/bin/env bash
# Records a schedule-fuzzer run: ./benchmarks/fuzz.sh [fuzz args...] (default: --seconds 1200
# --jobs 2 --seed 1). Writes results/fuzz.log (every failure line and the summary) and
# results/fuzz.json ({"fuzz": {"runs", "failures", "seed", "seconds", "by_target"}} plus the
# machine, the date and the command).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cli="$root/build/apps/tandem-cli"
out="$root/benchmarks/results"
mkdir -p "$out"
"$root/tandem" build >/dev/null
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--seconds 1200 --jobs 2 --seed 1)
log="$out/fuzz.log"
echo "\$ tandem-cli fuzz ${args[*]}" > "$log"
status=0
"$cli" fuzz "${args[@]}" --verbose | tee -a "$log" | grep -v '^pass ' || status=$?
python3 - "$log" "$out/fuzz.json" "${args[*]}" <<'PY'
import json, sys, datetime, platform, os, re
log, dest, args = sys.argv[1], sys.argv[2], sys.argv[3]
lines = open(log).read().splitlines()
by_target, runs, failures = {}, 0, 0
for l in lines:
    m = re.match(r'(pass|FAIL) (\w+) \((\w+), [0-9.]+ s\) \./tandem run \S+ --target (\S+)', l)
    if not m:
        continue
    verdict, outcome, mode, target = m.groups()
    t = by_target.setdefault(target, {"runs": 0, "failures": 0})
    t["runs"] += 1
    t[outcome] = t.get(outcome, 0) + 1
    t[mode] = t.get(mode, 0) + 1
    runs += 1
    if verdict == "FAIL":
        t["failures"] += 1
        failures += 1
summary = [l for l in lines if l.startswith("fuzz: ")]
seconds = float(re.search(r'in ([0-9.]+) s', summary[-1]).group(1)) if summary else None
seed = re.search(r'--seed (\d+)', args)
record = {"fuzz": {"runs": runs, "failures": failures, "seed": int(seed.group(1)) if seed else 1,
                   "seconds": seconds, "by_target": by_target},
          "command": "tandem-cli fuzz " + args,
          "machine": f"{platform.node()} ({os.cpu_count()} cores, {platform.processor() or platform.machine()})",
          "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "log": "fuzz.log"}
json.dump(record, open(dest, "w"), indent=2)
print(json.dumps(record["fuzz"]))
PY
exit $status
