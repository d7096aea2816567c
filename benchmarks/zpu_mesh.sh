#!/usr/bin/env bash
# Issue 36: ZPU gemm with mesh clusters (cluster(n): n cores of a mesh column, the operand they
# share loaded once and broadcast down the column) against the same gemm without, on
# machines/zpu.json (model v5). Per shape: no cluster, cluster_m = 2 and 4 (B shared), cluster_n
# = 2 and 4 (A shared). Then what the assumptions decide: a column of 4 (512^3 and 2048^3 along
# M, M = 16 along N) at half and double the VLink rate (vlink_bytes_per_cycle 1024, 4096: a
# public figure, kept as the fork's cost model has it) and at barrier_cycles 0, 50 and 200 (the
# Tandem assumption is 100). 512^3 with the tiling
# the tuner found best (tune_bounds.sh), the others at gemm's defaults. Writes
# results/zpu_mesh.json and the raw log results/zpu_mesh.log. TANDEM_CLI: the CLI to run.
source "$(dirname "$0")/setup.sh"
cli="${TANDEM_CLI:-$root/build/apps/tandem-cli}"
log="$out/zpu_mesh.log"
: > "$log"
rows="$(mktemp)"
run() { # label machine params...
    local label="$1" machine="$2"
    shift 2
    echo "\$ tandem-cli run gemm --target $machine $* --no-numerics --json" >> "$log"
    "$cli" run gemm --target "$machine" "$@" --no-numerics --json | tee -a "$log" |
        python3 -c 'import json, sys; r = json.load(sys.stdin); r["label"] = sys.argv[1]; r["machine"] = sys.argv[2]; print(json.dumps(r))' "$label" "$machine" >> "$rows"
}
shapes=("512 512 512 TM=128 TN=128 TK=512 stages=2" "1024 1024 1024" "2048 2048 2048"
        "16 4096 4096" "64 4096 4096")
for shape in "${shapes[@]}"; do
    read -r m n k more <<< "$shape"
    params=(--schedule ws_pingpong --param M=$m --param N=$n --param K=$k)
    for kv in $more; do params+=(--param "$kv"); done
    run "none" zpu "${params[@]}"
    for c in cluster_m=2 cluster_m=4 cluster_n=2 cluster_n=4; do
        run "$c" zpu "${params[@]}" --param "$c"
    done
done
for pair in "0 cluster_m=4" "2 cluster_m=4" "3 cluster_n=4"; do
    read -r index cluster <<< "$pair"
    read -r m n k more <<< "${shapes[$index]}"
    params=(--schedule ws_pingpong --param M=$m --param N=$n --param K=$k)
    for kv in $more; do params+=(--param "$kv"); done
    for machine in zpu:vlink_bytes_per_cycle=1024 zpu:vlink_bytes_per_cycle=4096 \
        zpu:barrier_cycles=0 zpu:barrier_cycles=50 zpu:barrier_cycles=200; do
        run "none" "$machine" "${params[@]}"
        run "$cluster" "$machine" "${params[@]}" --param "$cluster"
    done
done
python3 - "$out/zpu_mesh.json" "$rows" <<'PY'
import datetime, json, os, platform, subprocess, sys
dest, rows = sys.argv[1], [json.loads(l) for l in open(sys.argv[2])]
cores = 16  # machines/zpu.json
out, base = [], {}
for r in rows:
    p = r["params"]
    shape = f'{p["M"]}x{p["N"]}x{p["K"]}'
    row = {"shape": shape, "tiles": f'{p["TM"]}x{p["TN"]}x{p["TK"]}', "cluster": r["label"],
           "machine": r["machine"], "schedule": r["schedule"], "model": r["model"],
           "cycles": r["cycles"], "roofline_fraction": r["roofline_fraction"],
           "roofline_bound": r["roofline_bound"],
           "busy_per_core": {k: v / cores for k, v in r["busy"].items()}}
    key = (shape, r["machine"])
    if r["label"] == "none":
        base[key] = r["cycles"]
    else:
        row["speedup_over_no_cluster"] = round(base[key] / r["cycles"], 4)
    out.append(row)
record = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "machine": f"{platform.node()}: {os.cpu_count()} cores", "command": "benchmarks/zpu_mesh.sh",
    "commit": subprocess.run(["git", "-C", os.path.dirname(dest), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip(),
    "log": "zpu_mesh.log",
    "what": "zpu gemm (ws_pingpong) with mesh clusters against the same gemm without, in the same run; "
            "sensitivity to the VLink rate and to barrier_cycles (a Tandem assumption)",
    "rows": out,
}
json.dump(record, open(dest, "w"), indent=1)
for r in out:
    print(f'{r["shape"]:15} {r["tiles"]:12} {r["machine"]:30} {r["cluster"]:12} cycles {r["cycles"]:7} '
          f'fraction {r["roofline_fraction"]:.3f}' +
          (f' x{r["speedup_over_no_cluster"]}' if "speedup_over_no_cluster" in r else ""))
PY
rm -f "$rows"
