#!/usr/bin/env bash
# Issue 35 item 3: what bounds Ascend's gemm on the model, the data paths or the kernel's loads.
# Rows: gemm 2048^3 and 4096^3 with the default tiles (128 x 128, TK = 128) and the wide ones
# (128 x 256 and 256 x 128, TK = 64), then the best 4096^3 schedule and the default beside it with
# the data-path assumptions moved: copy_fixed (a Tandem assumption, 30 cycles per transfer) at 0,
# 15 and 60, and L1 -> L0B at the platform config's 256 B/cycle instead of the AscendC docs' 128.
# Per row: the busy cycles per core of MTE2 (GM -> L1), MTE1 (L1 -> L0A/L0B), M (the cube) and FIX.
# Timing-only runs (no numerics); tests/correctness and tests/ascend check the numbers.
# Writes results/ascend_data_paths.json and the raw log results/ascend_data_paths.log.
source "$(dirname "$0")/setup.sh"
cli="$root/build/apps/tandem-cli"
log="$out/ascend_data_paths.log"
: > "$log"
run() { # target size schedule params...
    local target=$1 n=$2 schedule=$3
    shift 3
    local args=(run gemm --target "$target" --schedule "$schedule" --param "M=$n" --param "N=$n"
                --param "K=$n")
    for kv in "$@"; do args+=(--param "$kv"); done
    echo "\$ tandem-cli ${args[*]} --no-numerics --json" >> "$log"
    # the row names the target as asked, overrides included (the JSON says "ascend")
    "$cli" "${args[@]}" --no-numerics --json | tee -a "$log" |
        sed "s/^{/{\"requested_target\":\"$target\",/"
}
{
    for n in 2048 4096; do
        run ascend $n ws_pingpong
        run ascend $n pipelined TN=256 TK=64
        run ascend $n pipelined TM=256 TN=128 TK=64
    done
    for target in ascend:copy_fixed=0 ascend:copy_fixed=15 ascend:copy_fixed=60 ascend:l1_to_l0b=256; do
        run $target 4096 ws_pingpong
        run $target 4096 pipelined TM=256 TN=128 TK=64
    done
} > "$out/.ascend_data_paths.jsonl"
python3 - "$out/.ascend_data_paths.jsonl" "$out/ascend_data_paths.json" "$(git -C "$root" rev-parse --short HEAD)" <<'PY'
import json, sys, datetime, platform, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def row(r):
    cores = 24  # the 910B's cube cores
    busy = {pipe: r["busy"][pipe] // cores for pipe in ("MTE2", "MTE1", "M", "FIX")}
    return {"target": r["requested_target"], "schedule": r["schedule"],
            "params": {k: r["params"][k] for k in ("M", "N", "K", "TM", "TN", "TK", "group")},
            "cycles": r["cycles"], "roofline_fraction": r["roofline_fraction"],
            "bound_pipe": max(busy, key=busy.get), "busy_per_core": busy,
            "races": r["races"], "deadlock": r["deadlock"]}
table = [row(r) for r in rows]
doc = {"what": "Ascend 910B model: gemm's pipes per core with the default and the wide tiles, and "
               "the best 4096^3 schedule with the data-path assumptions moved (target overrides)",
       "machine": {"host": platform.node(), "cores": os.cpu_count(),
                   "note": "cycles are simulated AI-core cycles; host speed does not change them"},
       "date": datetime.datetime.utcnow().isoformat() + "Z", "commit": sys.argv[3],
       "command": "benchmarks/ascend_data_paths.sh", "model": rows[0]["model"], "rows": table}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
for t in table:
    p = t["params"]
    print(t["target"], t["schedule"], p["M"], p["TM"], p["TN"], p["TK"], t["cycles"],
          round(t["roofline_fraction"], 3), t["bound_pipe"], t["busy_per_core"])
PY
rm -f "$out/.ascend_data_paths.jsonl"
