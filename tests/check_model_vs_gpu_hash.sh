#!/usr/bin/env bash
# benchmarks/hopper_model_vs_gpu.py keeps a GPU row whose kernel hash (benchmarks/gpu/run.sh's
# kernel_hash, written at emit) is that of today's emit of its kernel, and leaves out one whose
# hash differs. Usage: check_model_vs_gpu_hash.sh TANDEM_CLI
set -euo pipefail
cli=$1
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# run.sh's kernel_hash, as its emit runs it on a kernel of its smoke set (a hopper gemm).
source <(sed -n '/^kernel_hash() {/,/^}/p' "$root/benchmarks/gpu/run.sh")
name=gemm_ws_pingpong_1000x1096x520
"$cli" emit gemm --target hopper --schedule ws_pingpong --what cuda --name "$name" \
    --param M=1000 --param N=1096 --param K=520 -o "$tmp" > /dev/null
hash=$(kernel_hash "$tmp/$name.cu")
cat > "$tmp/gpu_hopper_check.json" <<EOF
[{"name": "$name", "device": "NVIDIA H200", "tandem_ms": 0.0177, "kernel_hash": "$hash"},
 {"name": "$name", "device": "NVIDIA H100", "tandem_ms": 0.0183, "kernel_hash": "0000000000000000"}]
EOF
TANDEM_CLI="$cli" TANDEM_MODEL_VS_GPU_JOBS=1 TANDEM_MODEL_VS_GPU_OUT="$tmp/out" \
    python3 "$root/benchmarks/hopper_model_vs_gpu.py" "$tmp/gpu_hopper_check.json" > "$tmp/log"
python3 - "$tmp/out.json" "$hash" <<'EOF'
import json, sys
record, hash = json.load(open(sys.argv[1])), sys.argv[2]
kept = [(r["device"], r.get("kernel_hash")) for r in record["rows"]]
assert kept == [("NVIDIA H200", hash)], f"kept {kept}"
why = [r["why"] for r in record["left_out"]]
assert len(why) == 1 and "kernel changed" in why[0], f"left out {why}"
assert record["summary"]["rows with a kernel hash (today's kernel)"] == 1
print(f"kept the row of hash {hash}, left out the other: {why[0]}")
EOF
