#!/usr/bin/env bash
# Records the Ascend model's figures: gemm 2048^3 (multi_buffer + ping_pong) and elementwise
# double- vs single-buffered, timing and hazards on the machine model (no numerics).
# Per row: cube_utilisation = M-pipe busy / (cores x cycles), the cube's share of its peak;
# cube_bound_utilisation = the same over bound_cycles (the busiest pipe of the busiest core: the
# model's bound for this tiling); efficiency = bound_cycles / cycles = their ratio.
# Writes results/ascend_figures.json and the raw log results/ascend_figures.log.
source "$(dirname "$0")/setup.sh"
cli="$root/build/apps/tandem-cli"
log="$out/ascend_figures.log"
: > "$log"
run() {
    echo "\$ tandem-cli $*" >> "$log"
    "$cli" "$@" | tee -a "$log"
}
{
    run run gemm --target ascend --schedule ws_pingpong --param M=2048 --param N=2048 --param K=2048 --no-numerics --json
    run run gemm --target ascend --schedule pipelined --param M=2048 --param N=2048 --param K=2048 --no-numerics --json
    # One 128 x 256 accumulator filling L0C: no result ping-pong, but 25% less MTE2 traffic per flop.
    run run gemm --target ascend --schedule pipelined --param M=2048 --param N=2048 --param K=2048 --param TN=256 --param TK=64 --no-numerics --json
    run run elementwise --target ascend --schedule double_buffered --no-numerics --json
    run run elementwise --target ascend --schedule single_buffered --no-numerics --json
    run run elementwise --target ascend --schedule sync --no-numerics --json
    run run attention_scores --target ascend --no-numerics --json
} > "$out/.ascend.jsonl"
python3 - "$out/.ascend.jsonl" "$out/ascend_figures.json" <<'PY'
import json, sys, datetime, platform, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# The 910B's kernels run on 24 cube cores (AIC: gemm, attention) or 48 vector cores (AIV).
def cores_of(r):
    return 48 if r["app"] in ("elementwise", "rmsnorm") else 24
def row(r):
    cores = cores_of(r)
    per_core = {pipe: cycles / cores for pipe, cycles in r["busy"].items() if pipe != "HBM"}
    per_core["HBM (chip)"] = r["busy"].get("HBM", 0)
    bound_pipe = max(per_core, key=per_core.get)
    return {"app": r["app"], "schedule": r["schedule"], "params": r["params"], "cycles": r["cycles"],
            "cores": cores, "bound_cycles": r["bound_cycles"], "efficiency": r["efficiency"],
            "bound_pipe": bound_pipe, "roofline_fraction": r.get("roofline_fraction"),
            "cube_utilisation": r["busy"]["M"] / cores / r["cycles"],
            "cube_bound_utilisation": r["busy"]["M"] / cores / r["bound_cycles"],
            "busy_per_core": per_core,
            "races": r["races"], "deadlock": r["deadlock"]}
table = [row(r) for r in rows]
ew = {r["schedule"]: r for r in rows if r["app"] == "elementwise"}
doc = {"what": "Ascend 910B model (NPU-FACTS.md rates; 24 AIC and 48 AIV sharing only GM; shared L2: "
               "first read of a line from HBM at 32 B/cycle/core, later reads at 110; HBM 865 B/cycle "
               "for the chip, reads and write-backs), timing-only runs",
       "machine": {"host": platform.node(), "cores": os.cpu_count(),
                   "note": "cycles are simulated AI-core cycles; host speed does not change them"},
       "date": datetime.datetime.utcnow().isoformat() + "Z", "command": "benchmarks/ascend_figures.sh",
       "model": rows[0]["model"],
       "elementwise_speedup_double_vs_single": ew["single_buffered"]["cycles"] / ew["double_buffered"]["cycles"],
       "elementwise_speedup_double_vs_sync": ew["sync"]["cycles"] / ew["double_buffered"]["cycles"],
       "rows": table}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
print(json.dumps({k: v for k, v in doc.items() if k != "rows"}, indent=1))
for t in table:
    print(t["app"], t["schedule"], t["cycles"], round(t["efficiency"], 3), t["bound_pipe"],
          round(t["cube_utilisation"], 3), round(t["cube_bound_utilisation"], 3))
PY
rm -f "$out/.ascend.jsonl"
