#!/usr/bin/env bash
# How often emitted AscendC still leaves AscendC's own API (issue 12): the fuzzer on ascend with
# TANDEM_ASCEND_FALLBACKS=error, which makes the emitter refuse a copy it can only write as
# Tandem's StridedBox and a vector op it can only write as Tandem's VectorOp. Every run that
# reaches one reports the op; the rest emit real AscendC only. ./benchmarks/ascend_fallbacks.sh
# [seconds] [seed] writes results/ascend_fallbacks.json and the raw log results/ascend_fallbacks.log.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/benchmarks/results"
mkdir -p "$out"
"$root/tandem" build >/dev/null
seconds=${1:-300}
seed=${2:-80}
log="$out/ascend_fallbacks.log"
cmd="fuzz --target ascend --seconds $seconds --jobs 2 --seed $seed --verbose"
echo "\$ TANDEM_ASCEND_FALLBACKS=error tandem-cli $cmd" > "$log"
TANDEM_ASCEND_FALLBACKS=error "$root/build/apps/tandem-cli" $cmd >> "$log" || true
python3 - "$log" "$out/ascend_fallbacks.json" "$cmd" <<'PY'
import json, sys, re, datetime, platform, os, collections
log, dest, cmd = sys.argv[1:4]
lines = [l for l in open(log) if l.startswith(("pass ", "FAIL "))]
runs = len(lines)
fallback = [l for l in lines if "ascend emitter fallback" in l]
kinds = collections.Counter()
apps = collections.Counter()
for l in fallback:
    what = l.split("ascend emitter fallback: ", 1)[1]
    kinds["StridedBox" if "StridedBox" in what else "VectorOp"] += 1
    apps[re.search(r"tandem run (\S+)", l).group(1)] += 1
emitted = [l for l in lines if l.startswith("pass ok")]
doc = {"what": "fuzzed ascend kernels whose emitted AscendC needs a Tandem fallback (StridedBox, VectorOp)",
       "runs": runs, "real_ascendc_only": len(emitted), "with_fallback": len(fallback),
       "fallback_fraction": round(len(fallback) / max(runs, 1), 4),
       "by_kind": dict(kinds), "by_app": dict(apps),
       "examples": [l.split("# ", 1)[1].strip()[:300] for l in fallback[:12]],
       "machine": f"{platform.node()}: {os.cpu_count()} cores",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "command": "TANDEM_ASCEND_FALLBACKS=error tandem-cli " + cmd, "log": "ascend_fallbacks.log"}
json.dump(doc, open(dest, "w"), indent=2)
print(json.dumps({k: doc[k] for k in ("runs", "real_ascendc_only", "with_fallback", "fallback_fraction", "by_kind", "by_app")}))
PY
