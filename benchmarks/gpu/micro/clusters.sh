#!/usr/bin/env bash
# Issue 37: the cluster variants of cluster_variants.py on the GPU, beside the kernels as emitted
# and the same GEMMs without clusters, in one process each (harness rows: correctness, then the
# median of 25 against cuBLAS). Kernels built here with
#   python3 benchmarks/gpu/micro/cluster_variants.py benchmarks/gpu/kernels benchmarks/gpu/kclu NAME...
#   TANDEM_GPU_KERNELS=benchmarks/gpu/kclu benchmarks/gpu/run.sh build
# and run there: benchmarks/gpu/micro/clusters.sh benchmarks/gpu/kclu OUT_DIR
set -uo pipefail
k=$1 out=$2
bin=$k/bin
{
    echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"
    echo "# command: benchmarks/gpu/micro/clusters.sh; kernels emitted at commit $(cat "$k/commit")"
    echo "## small kernels: debug build (spin limit), check"
    for name in $(awk '{print $2}' "$k/sets.txt" | grep -E '_[0-9]+x[0-9]+x[0-9]+'); do
        timeout 30 "$bin/harness_debug" "$name" check || echo "{\"name\": \"$name\", \"correct\": false, \"rc\": $?}"
    done
    echo "## large kernels: bench (check, then timing against cuBLAS)"
    for round in 1 2; do
        for name in $(awk '{print $2}' "$k/sets.txt" | grep -vE '_[0-9]+x[0-9]+x[0-9]+'); do
            timeout 60 "$bin/harness" "$name" bench || echo "{\"name\": \"$name\", \"correct\": false, \"rc\": $?}"
        done
    done
    echo "## racecheck on the small _cta variants"
    for name in $(awk '{print $2}' "$k/sets.txt" | grep -E '_[0-9]+x[0-9]+x[0-9]+_cta$'); do
        echo "### racecheck $name"
        timeout 60 compute-sanitizer --tool racecheck --print-limit 5 "$bin/harness" "$name" check 2>&1 | tail -3
    done
    echo "## SASS around the consumers' arrivals (gemm_coop_4096_cm2 and _cta)"
    for name in gemm_coop_4096_cm2 gemm_coop_4096_cm2_cta; do
        echo "### $name"
        cuobjdump -sass "$bin/harness" | awk -v n="$name" '/Function :/ {on = ($3 ~ n "14CUtensorMap")} on' | grep -E 'SYNCS|MEMBAR|FENCE|ERRBAR|CCTL|UCGABAR' | sed 's|/\*[0-9a-f]*\*/||' | sort | uniq -c
    done
} 2>&1 | tee "$out/clusters.log"
