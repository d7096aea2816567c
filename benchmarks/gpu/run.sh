#!/usr/bin/env bash
# Hopper GPU check and benchmark, in two steps (the GPU machines have nvcc and cuBLAS but no
# Halide, so the kernels are emitted where Tandem builds):
#   benchmarks/gpu/run.sh emit   on the development machine: emits the CUDA of every hopper app
#                                and schedule into benchmarks/gpu/kernels/ (git-ignored; carry it)
#   benchmarks/gpu/run.sh gpu    on the machine with the Hopper GPU: builds them with the harness,
#                                checks each against the reference on fresh random inputs and
#                                times it against cuBLAS / device-to-device copy in the same run;
#                                writes benchmarks/results/gpu_hopper.json and gpu_hopper.log
#                                (and $OUT/ copies when $OUT is set)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
kernels="$here/kernels"

# name | app | schedule | params (M N K for gemm; W H for elementwise; D R for rmsnorm)
configs=(
  "gemm_ws_pingpong_4096|gemm|ws_pingpong|4096 4096 4096"
  "gemm_ws_pingpong_8192|gemm|ws_pingpong|8192 8192 8192"
  "gemm_ws_pingpong_2048|gemm|ws_pingpong|2048 2048 2048"
  "gemm_ws_pingpong_1024|gemm|ws_pingpong|1024 1024 1024"
  "gemm_ws_pingpong_1000|gemm|ws_pingpong|1000 1000 1000"
  "gemm_ws_4096|gemm|ws|4096 4096 4096"
  "gemm_pipelined_4096|gemm|pipelined|4096 4096 4096"
  "gemm_ws_1000|gemm|ws|1000 1000 1000"
  "gemm_pipelined_1000|gemm|pipelined|1000 1000 1000"
  "elementwise_8192|elementwise|double_buffered|8192 8192"
  "rmsnorm_4096|rmsnorm|double_buffered|4096 16384"
)

emit() {
    rm -rf "$kernels"
    mkdir -p "$kernels"
    : > "$kernels/registry.inc"
    for config in "${configs[@]}"; do
        IFS='|' read -r name app schedule sizes <<< "$config"
        read -r a b c <<< "$sizes"
        case "$app" in
            gemm) params=(--param M=$a --param N=$b --param K=$c) ;;
            elementwise) params=(--param W=$a --param H=$b); c=0 ;;
            rmsnorm) params=(--param D=$a --param R=$b); c=0 ;;
        esac
        "$root/tandem" emit "$app" --target hopper --schedule "$schedule" --what cuda --name "$name" \
            "${params[@]}" -o "$kernels" >/dev/null
        echo "TANDEM_KERNEL($name, \"$app\", \"$schedule\", $a, $b, $c)" >> "$kernels/registry.inc"
    done
    echo "emitted ${#configs[@]} kernels into $kernels; now run '$0 gpu' on the GPU machine (carry $kernels)"
}

gpu() {
    [ -f "$kernels/registry.inc" ] || { echo "no kernels: run '$0 emit' first" >&2; exit 1; }
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    local build=/tmp/tandem_gpu
    mkdir -p "$build"
    nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$root/backends/hopper/runtime" -I"$kernels" \
        "$here/harness.cu" "$kernels"/*.cu -lcublas -o "$build/harness" 2>&1 | tee "$build/build.log"
    local results="$root/benchmarks/results"
    mkdir -p "$results"
    {
        echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name --format=csv,noheader) benchmarks/gpu/run.sh gpu"
        "$build/harness"
    } | tee "$results/gpu_hopper.log"
    grep '^{' "$results/gpu_hopper.log" | python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in sys.stdin], indent=1))' \
        > "$results/gpu_hopper.json"
    if [ -n "${OUT:-}" ]; then cp "$results/gpu_hopper.json" "$results/gpu_hopper.log" "$OUT/"; fi
}

case "${1:-}" in
    emit) emit ;;
    gpu) gpu ;;
    *) echo "usage: $0 emit|gpu" >&2; exit 2 ;;
esac
