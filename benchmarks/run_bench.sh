#!/usr/bin/env bash
# Records the Google Benchmark run (compile time, simulator throughput) as JSON plus the raw log.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tandem" build >/dev/null
mkdir -p "$root/benchmarks/results"
"$root/build/benchmarks/tandem_bench" --benchmark_out="$root/benchmarks/results/zpu_bench.json" \
    --benchmark_out_format=json 2>&1 | tee "$root/benchmarks/results/zpu_bench.log"
