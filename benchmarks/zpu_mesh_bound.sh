#!/usr/bin/env bash
# Issue 36: how much a mesh that shares operands could save on the ZPU model (v5), measured
# before any kernel uses it. Each gemm runs twice: on machines/zpu.json, and on a what-if copy in
# which data movement is free (dma_fixed 0, unbounded ODMA bytes per cycle: more than any
# broadcast scheme can give, since a broadcast still loads each operand once and pays its link
# and barriers). The free row is the ceiling of what sharing operands can win; its busy cycles
# per core say what bounds the kernel then. 512^3 with the tiling the tuner found best
# (tune_bounds.sh), the others at gemm's defaults. Writes results/zpu_mesh_bound.json and the
# raw log results/zpu_mesh_bound.log.
source "$(dirname "$0")/setup.sh"
cli="$root/build/apps/tandem-cli"
log="$out/zpu_mesh_bound.log"
free="$(mktemp -d)/zpu_free_data_movement.json"
python3 - "$root/machines/zpu.json" "$free" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["params"]["dma_fixed"]["value"] = 0
d["params"]["dma_bytes_per_cycle"]["value"] = 1 << 30
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
: > "$log"
rows="$(mktemp)"
shapes=("512 512 512 TM=128 TN=128 TK=512 stages=2" "1024 1024 1024" "2048 2048 2048"
        "16 4096 4096" "64 4096 4096")
for shape in "${shapes[@]}"; do
    read -r m n k more <<< "$shape"
    params=(--param M=$m --param N=$n --param K=$k)
    for kv in $more; do params+=(--param "$kv"); done
    for machine in zpu "zpu:file=$free"; do
        echo "\$ tandem-cli run gemm --target $machine ${params[*]} --no-numerics --json" >> "$log"
        "$cli" run gemm --target "$machine" "${params[@]}" --no-numerics --json | tee -a "$log" |
            python3 -c 'import json, sys; r = json.load(sys.stdin); r["free_data_movement"] = sys.argv[1] != "zpu"; print(json.dumps(r))' "$machine" >> "$rows"
    done
done
python3 - "$out/zpu_mesh_bound.json" "$rows" <<'PY'
import datetime, json, os, platform, subprocess, sys
dest, rows = sys.argv[1], [json.loads(l) for l in open(sys.argv[2])]
cores = 16  # machines/zpu.json
out = []
for r in rows:
    p = r["params"]
    out.append({"shape": f'{p["M"]}x{p["N"]}x{p["K"]}', "tiles": f'{p["TM"]}x{p["TN"]}x{p["TK"]}',
                "schedule": r["schedule"], "model": r["model"], "free_data_movement": r["free_data_movement"],
                "cycles": r["cycles"], "roofline_cycles": r["roofline_cycles"],
                "roofline_fraction": r["roofline_fraction"], "roofline_bound": r["roofline_bound"],
                "busy_per_core": {k: v / cores for k, v in r["busy"].items()}})
# A free row's own roofline drops its memory term: quote it against the real machine's too.
for a, b in zip(out[::2], out[1::2]):
    b["speedup_over_real"] = round(a["cycles"] / b["cycles"], 3)
    b["fraction_of_real_roofline"] = round(a["roofline_cycles"] / b["cycles"], 6)
record = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "machine": f"{platform.node()}: {os.cpu_count()} cores", "command": "benchmarks/zpu_mesh_bound.sh",
    "commit": subprocess.run(["git", "-C", os.path.dirname(dest), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip(),
    "log": "zpu_mesh_bound.log",
    "what": "zpu gemm on machines/zpu.json and with data movement free (the ceiling of any operand sharing)",
    "rows": out,
}
json.dump(record, open(dest, "w"), indent=1)
for r in out:
    print(f'{r["shape"]:15} {r["tiles"]:12} free={str(r["free_data_movement"]):5} cycles {r["cycles"]:7} '
          f'fraction {r["roofline_fraction"]:.3f} ({r["roofline_bound"]}) busy {r["busy_per_core"]}'
          + (f' x{r["speedup_over_real"]}, {r["fraction_of_real_roofline"]:.3f} of the real roofline'
             if "speedup_over_real" in r else ""))
PY
rm -f "$rows"
