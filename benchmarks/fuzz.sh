#!/usr/bin/env bash
# Records a schedule-fuzzer run: ./benchmarks/fuzz.sh [fuzz args...] (default: --seconds 1200
# --jobs 2 --seed 1). Writes results/fuzz.log (the command, every failure line, the summary) and
# results/fuzz.json ({"fuzz": {"runs", "failures", "seed", "seconds", "by_target"}} plus the
# machine, the date and the command). Exits 1 if any run failed. TANDEM_FUZZ_RECORD names the
# record instead of "fuzz" (e.g. fuzz_runtime_shapes for a --runtime-shapes run).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# TANDEM_CLI: a copy of the binary to fuzz (so that the tree can be rebuilt meanwhile);
# TANDEM_GENERATORS: a copy of the conformance suite's generator program, fuzzed beside the apps
# ("none": the apps only).
cli="${TANDEM_CLI:-$root/build/apps/tandem-cli}"
generators="${TANDEM_GENERATORS:-$root/build/tests/conformance/conformance_gen}"
out="$root/benchmarks/results"
mkdir -p "$out"
[ -z "${TANDEM_CLI:-}" ] && "$root/tandem" build >/dev/null
commit="$(git -C "$root" rev-parse --short HEAD)"
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--seconds 1200 --jobs 2 --seed 1)
record="${TANDEM_FUZZ_RECORD:-fuzz}"
log="$out/$record.log"
[ "$generators" != none ] && [[ " ${args[*]} " != *" --runtime-shapes "* ]] &&
    args+=(--generators "$generators")
echo "\$ tandem-cli fuzz ${args[*]} --json" > "$log"
status=0
"$cli" fuzz "${args[@]}" --json >> "$log" || status=$?
python3 - "$log" "$out/$record.json" "tandem-cli fuzz ${args[*]}" "$commit" <<'PY'
import json, sys, datetime, platform, os, subprocess
log, dest, command, commit = sys.argv[1:5]
summary = json.loads(open(log).read().splitlines()[-1])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
record = {**summary, "command": command, "machine": f"{platform.node()}: {os.cpu_count()} cores, {cpu}",
          "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "log": os.path.basename(log),
          "commit": commit,
          "models": {t: f"{t} v{json.load(open(os.path.join(os.path.dirname(dest), '../../machines', t + '.json')))['version']}"
                     for t in ("zpu", "hopper", "ascend")}}
json.dump(record, open(dest, "w"), indent=2)
print(json.dumps(summary))
PY
exit $status
