#!/usr/bin/env bash
# The Hopper model's cycles for the online attention with its exponentials inline and in a tile of
# their own (the conformance generator's exps=inline / exps=block), at D = 64 and 128, beside the
# H200's times (gpu_hopper_session45_*_h200): does the model rank them as the GPU does?
#   TANDEM_GENERATORS=<conformance_gen> TANDEM_RECORD=<name> benchmarks/hopper_attention_exps.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gen="${TANDEM_GENERATORS:-$root/build/tests/conformance/conformance_gen}"
name="${TANDEM_RECORD:-hopper_attention_exps}"
out="$root/benchmarks/results/$name"
work=$(mktemp -d)
{
    echo "# $(date -u +%FT%TZ) $(hostname) generator $gen"
    echo "# command: TANDEM_GENERATORS=$gen TANDEM_RECORD=$name benchmarks/hopper_attention_exps.sh"
    for d in 64 128; do
        for exps in inline block; do
            "$gen" -g attention -o "$work" -f a --run --json target=hopper exps=$exps \
                S=128 L=1024 D=$d TJ=64 H=1 KV=1 B=1 2> /dev/null | grep '^{'
        done
    done
} > "$out.log"
grep '^{' "$out.log" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
print(json.dumps(rows, indent=1))
for d in (64, 128):
    c = {r["params"]["exps"]: r["cycles"] for r in rows if str(r["params"]["D"]) == str(d)}
    i, b = c["inline"], c["block"]
    print(f"D = {d}: inline {i} cycles, block {b}: block / inline {b / i:.3f}", file=sys.stderr)
' > "$out.json"
rm -rf "$work"
