#!/usr/bin/env bash
# How often a fuzzed ascend schedule has no AscendC form (issue 12): Tandem emits AscendC's own
# API only, so a copy no DataCopy/DataCopyPad can say, or an element nest the vector instructions
# cannot say within the UB the tiles leave, is a user error ("has no AscendC ..."). Sessions 25-26
# measured the same with TANDEM_ASCEND_FALLBACKS=error while Tandem's StridedBox and VectorOp
# still existed (counted under by_kind as before). ./benchmarks/ascend_fallbacks.sh [seconds]
# [seed] writes results/ascend_fallbacks.json and the raw log results/ascend_fallbacks.log.
source "$(dirname "$0")/setup.sh"
seconds=${1:-300}
seed=${2:-80}
log="$out/ascend_fallbacks.log"
cmd="fuzz --target ascend --seconds $seconds --jobs 2 --seed $seed --verbose"
echo "\$ tandem-cli $cmd" > "$log"
"$root/build/apps/tandem-cli" $cmd >> "$log" || true
python3 - "$log" "$out/ascend_fallbacks.json" "$cmd" <<'PY'
import json, sys, re, datetime, platform, os, collections
log, dest, cmd = sys.argv[1:4]
lines = [l for l in open(log) if l.startswith(("pass ", "FAIL "))]
runs = len(lines)
fallback = [l for l in lines if "has no AscendC" in l]
kinds = collections.Counter()
apps = collections.Counter()
for l in fallback:
    kinds["StridedBox" if "has no AscendC form" in l else "VectorOp"] += 1
    apps[re.search(r"tandem run (\S+)", l).group(1)] += 1
emitted = [l for l in lines if l.startswith("pass ok")]
doc = {"what": "fuzzed ascend schedules with no AscendC form (a user error now; before session 26 Tandem's StridedBox copy or VectorOp element loop)",
       "runs": runs, "real_ascendc_only": len(emitted), "with_fallback": len(fallback),
       "fallback_fraction": round(len(fallback) / max(runs, 1), 4),
       "by_kind": dict(kinds), "by_app": dict(apps),
       "examples": [l.split("# ", 1)[1].strip()[:300] for l in fallback[:12]],
       "machine": f"{platform.node()}: {os.cpu_count()} cores",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "command": "tandem-cli " + cmd, "log": "ascend_fallbacks.log"}
json.dump(doc, open(dest, "w"), indent=2)
print(json.dumps({k: doc[k] for k in ("runs", "real_ascendc_only", "with_fallback", "fallback_fraction", "by_kind", "by_app")}))
PY
