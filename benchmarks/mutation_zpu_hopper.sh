#!/usr/bin/env bash
# Records the protocol mutation test on zpu and hopper (tests/mutation): per kernel, how many
# mutants of its async Stmt there are, how many the machine model kills (race, deadlock, model
# error or wrong result) and how many are equivalent (a shifted wait that waits for a later event
# than it needs: a correct program). Writes results/mutation_zpu_hopper.json and the raw log
# results/mutation_zpu_hopper.log. TANDEM_BUILD_DIR picks the build (default build/).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TANDEM_BUILD_DIR:-$root/build}"
out="$root/benchmarks/results"
mkdir -p "$out"
TANDEM_BUILD_DIR="$build" "$root/tandem" build >/dev/null
log="$out/mutation_zpu_hopper.log"
"$build/tests/mutation_test" > "$log" 2>&1 || true # the JSON says what failed
python3 - "$log" "$out/mutation_zpu_hopper.json" <<'PY'
import datetime, json, os, platform, re, sys
text = open(sys.argv[1]).read()
rows = []
for target, kernel, mutants, killed, equivalent in re.findall(
        r"^(\w+) (\S+): mutants (\d+), killed (\d+), equivalent (\d+)$", text, re.M):
    mutants, killed, equivalent = int(mutants), int(killed), int(equivalent)
    rows.append({"target": target, "kernel": kernel, "mutants": mutants, "killed": killed,
                 "equivalent": equivalent,
                 "kill_rate": killed / (mutants - equivalent) if mutants > equivalent else None})
passed = re.search(r"\[  PASSED  \] (\d+) tests?\.", text)
failed = re.search(r"(\d+) FAILED TESTS?", text)
total = {k: sum(r[k] for r in rows) for k in ("mutants", "killed", "equivalent")}
total["kill_rate"] = total["killed"] / (total["mutants"] - total["equivalent"])
doc = {"what": "protocol mutants of zpu and hopper kernels' async Stmt (tests/mutation): each "
               "deletes a wait or a zpu engine sync, flips a parity, shifts a version index or drops a fence, arrive, "
               "expect or advance; killed = the model reports a race, a deadlock or an error, or "
               "the result differs from the Halide reference; equivalent = a shifted wait that "
               "waits for a later event than it needs, or (hopper) the fence before a store "
               "that threads make where TMA cannot (generic proxy: the emitter drops it)",
       "machine": {"host": platform.node(), "cores": os.cpu_count(),
                   "note": "the counts do not depend on the host"},
       "date": datetime.datetime.utcnow().isoformat() + "Z",
       "command": "benchmarks/mutation_zpu_hopper.sh (runs tests/mutation_test)",
       "tests_passed": int(passed.group(1)) if passed else 0,
       "tests_failed": int(failed.group(1)) if failed else 0,
       "total": total, "rows": rows}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
print(json.dumps({k: v for k, v in doc.items() if k != "rows"}, indent=1))
for r in rows:
    print(r["target"], r["kernel"], r["mutants"], r["killed"], r["equivalent"])
PY
