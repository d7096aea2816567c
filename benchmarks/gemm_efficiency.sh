#!/usr/bin/env bash
# Records the ZPU GEMM efficiency table: sizes 512..4096, stages 1..4 (timing and hazards on the
# machine model, no numerics), plus the acceptance run at 2048^3 with numerics for stages 1 and 3.
# Writes results/zpu_gemm_efficiency.json and the raw log results/zpu_gemm_efficiency.log.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cli="$root/build/apps/tandem-cli"
out="$root/benchmarks/results"
mkdir -p "$out"
"$root/tandem" build >/dev/null
log="$out/zpu_gemm_efficiency.log"
: > "$log"
run() {
    echo "\$ tandem-cli $*" >> "$log"
    "$cli" "$@" | tee -a "$log"
}
# A stage count whose versions do not fit on chip is a row that says so.
try_run() { # n stages
    local out
    if out=$("$cli" run gemm --target zpu --param M=$1 --param N=$1 --param K=$1 --param stages=$2 --no-numerics --json 2>&1); then
        echo "\$ tandem-cli run gemm ... M=N=K=$1 stages=$2" >> "$log"
        echo "$out" | tee -a "$log"
    else
        echo "\$ tandem-cli run gemm ... M=N=K=$1 stages=$2: $out" >> "$log"
        python3 -c 'import json,sys; print(json.dumps({"error": sys.argv[3], "params": {"M": int(sys.argv[1]), "stages": int(sys.argv[2])}}))' "$1" "$2" "$out"
    fi
}
{
    for n in 512 1024 2048 4096; do
        for stages in 1 2 3 4; do
            try_run $n $stages
        done
    done
    for stages in 1 3; do
        run run gemm --target zpu --param M=2048 --param N=2048 --param K=2048 --param stages=$stages --json
    done
} > "$out/.rows.jsonl"
# What each directive buys at 2048^3, stages 3, for both output types.
{
    for out_type in bf16 f32; do
        for schedule in sync pipelined ws ws_pingpong; do
            run run gemm --target zpu --param stages=3 --param out=$out_type --schedule $schedule --no-numerics --json
        done
    done
} > "$out/.schedules.jsonl"
python3 - "$out/.rows.jsonl" "$out/zpu_gemm_efficiency.json" "$out/.schedules.jsonl" <<'PY'
import json, sys, platform, subprocess, datetime, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
schedules = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
table = [{"n": r["params"]["M"], "stages": r["params"]["stages"], "does_not_fit": r["error"]} if "error" in r else
         {"n": r["params"]["M"], "stages": r["params"]["stages"], "schedule": r["schedule"],
          "numerics": r["correct"] is not None, "correct": r["correct"], "races": r["races"],
          "cycles": r["cycles"], "bound_cycles": r["bound_cycles"], "efficiency": r["efficiency"],
          "roofline_cycles": r["roofline_cycles"], "roofline_fraction": r["roofline_fraction"]} for r in rows]
one = next(r for r in rows if "error" not in r and r["params"]["M"] == 2048 and r["params"]["stages"] == 1 and r["correct"] is not None)
three = next(r for r in rows if "error" not in r and r["params"]["M"] == 2048 and r["params"]["stages"] == 3 and r["correct"] is not None)
doc = {
    "what": "ZPU GEMM (bf16 in, f32 accumulate, bf16 out) on the Tandem machine model (machines/zpu.json), default tiles, schedule ws_pingpong",
    "machine": {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "note": "cycles are simulated ZPU cycles (16 cores, 2 DMA channels, NPU-FACTS.md cost model); host speed does not change them"},
    "date": datetime.datetime.utcnow().isoformat() + "Z",
    "command": "benchmarks/gemm_efficiency.sh",
    "model": three["model"],
    "previous_model": {"model": "zpu v1", "stages_1_cycles": 42364, "stages_3_cycles": 36761,
                       "stages_3_roofline_fraction": 0.891379,
                       "note": "v1 charged the vector core for arithmetic only and let DMA go straight from DRAM to ASRAM on whichever channel was free. v2 charges loads, stores and constants as SUNMMIO's public cost model does, and at least 4 K blocks per MMA (0.89 -> 0.64 of the roofline: the accumulator's zeroing and the epilogue run on the one control stream between MMAs). v3 follows the fork's DMA routes and north-bank rule: A is loaded into RSRAM and each MMA's rows hop to ASRAM on ODMA unit 1 in two passes of half the rows, A and B loads share unit 0 (0.64 -> 0.54; 0.58 once the second pass's hop runs under the first pass's MMA, two ASRAM stage versions). The figures drop because the model got honest. Winning them back: the tensor and vector cores running concurrently, and the A hop pipelined (issue 10, item 4)."},
    "acceptance_2048": {"stages_1_cycles": one["cycles"], "stages_3_cycles": three["cycles"],
                        "speedup_stages3_vs_1": one["cycles"] / three["cycles"],
                        "stages_3_efficiency": three["efficiency"], "stages_3_roofline_fraction": three["roofline_fraction"],
                        "correct": three["correct"] and one["correct"], "races": three["races"] + one["races"]},
    "rows": table,
    "schedules_2048_stages3": [{"schedule": r["schedule"], "out": r["params"]["out"], "cycles": r["cycles"],
                                "efficiency": r["efficiency"], "roofline_fraction": r["roofline_fraction"],
                                "races": r["races"]} for r in schedules],
}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
print(json.dumps(doc["acceptance_2048"], indent=2))
PY
rm -f "$out/.rows.jsonl" "$out/.schedules.jsonl"
