# Sourced by the benchmark scripts: strict mode, $root (the checkout), $out (benchmarks/results,
# created) and a built tree (./tandem build).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/benchmarks/results"
mkdir -p "$out"
"$root/tandem" build >/dev/null
