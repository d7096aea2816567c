#!/usr/bin/env bash
# The mix kernel's cost on the Ascend model: Tandem's gemm at 2048^3 (ws_pingpong, its default
# tiles on ascend) with no epilogue (AIC only, Fixpipe into C) and with bias + ReLU (a mix
# kernel: the AICs hand each tile to their AIVs through a GM workspace; the AIVs add the bias,
# apply the ReLU, cast to bf16 and store). Writes results/ascend_mix.json and the raw log
# results/ascend_mix.log.
source "$(dirname "$0")/setup.sh"
log="$out/ascend_mix.log"
: > "$log"
size=${1:-2048}
{
    for epilogue in none bias_relu; do
        cmd="run gemm --target ascend --schedule ws_pingpong --param M=$size --param N=$size --param K=$size --param epilogue=$epilogue --no-numerics --json"
        echo "\$ tandem-cli $cmd" >> "$log"
        "$root/build/apps/tandem-cli" $cmd | tee -a "$log"
    done
} > "$out/.mix.jsonl"
python3 - "$out/.mix.jsonl" "$out/ascend_mix.json" "$size" <<'PY'
import json, sys, datetime, platform, os
plain, mix = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n = int(sys.argv[3])
rows = [dict(app="gemm", target="ascend", M=n, N=n, K=n, epilogue=r["params"]["epilogue"], cycles=r["cycles"],
             busy=r["busy"], races=r["races"], deadlock=r["deadlock"]) for r in (plain, mix)]
doc = {"what": "Ascend model: gemm with and without a bias + ReLU epilogue (a mix kernel), same schedule",
       "model": plain["model"],
       "note": "the epilogue runs on the vector cores (AIV) while the cube cores (AIC) compute the next tiles: "
               "each AIC stores a tile to its two-slot GM workspace (Fixpipe, f32) and its two AIVs take the "
               "tiles in turn (DataCopy in, Add, Maxs, Cast to bf16, DataCopy out), joined by cross-core flags. "
               "The ratio is the epilogue's cost beyond the plain kernel: the workspace round trip (f32 out and "
               "in again) through L2/HBM and the last tile's epilogue, which nothing overlaps.",
       "ratio_mix_over_plain": mix["cycles"] / plain["cycles"],
       "machine": {"host": platform.node(), "cores": os.cpu_count(),
                   "note": "cycles are simulated AI-core cycles; host speed does not change them"},
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "command": "benchmarks/ascend_mix.sh", "log": "ascend_mix.log", "rows": rows}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
print(json.dumps({"plain": plain["cycles"], "mix": mix["cycles"], "ratio": doc["ratio_mix_over_plain"]}))
PY
rm -f "$out/.mix.jsonl"
