#!/usr/bin/env bash
# Issue 34's Ascend anchor: Tandem's attention, written as the textbook has it and fused by the
# online_softmax schedule (conformance generator `attention`, TJ = 64 / 128, the query tile staged
# per key block or once per tile (q_at), TK = 128 at head dim 128), beside FlashAttention's forward pass hand-written as an AscendC mix kernel
# (benchmarks/ascend/HandwrittenAttention.cpp, checked against a reference in double), on the same
# Ascend model; one head, S = L = 1024 and 4096, head dim 64 and 128, query tiles of 64 rows, not
# causal (the anchor has no mask). Per shape: each side's best key block, and the ratio
# anchor cycles / Tandem cycles (>= 1: Tandem as fast or faster). Writes
# results/ascend_attention_anchor.json and the raw log results/ascend_attention_anchor.log.
source "$(dirname "$0")/setup.sh"
source "$root/benchmarks/conformance_rows.sh"
cmake --build "$root/build" --target ascend_anchor >/dev/null
begin_rows ascend_attention_anchor
anchors=$(mktemp)
for n in 1024 4096; do
    for d in 64 128; do
        tk=$([ $d -eq 128 ] && echo "TK=128" || echo "")
        for tj in 64 128; do
            for qa in block tile; do
                run_case "tandem_${n}_d${d}_tj${tj}_q_${qa}" ascend attention TJ=$tj q_at=$qa $tk \
                    S=$n L=$n D=$d
            done
            echo "\$ build/benchmarks/ascend_anchor attention $n $n $d 64 $tj" >> "$log"
            "$root/build/benchmarks/ascend_anchor" attention $n $n $d 64 $tj | tee -a "$log" >> "$anchors"
        done
    done
done
write_rows "$out/ascend_attention_anchor.json" \
    "Tandem's attention (online_softmax) on the Ascend model; anchors: the hand-written AscendC mix kernel on the same model (handwritten rows)"
rm -f "$rows"
python3 - "$out/ascend_attention_anchor.json" "$anchors" <<'PY'
import json, sys
path, anchors = sys.argv[1:]
record = json.load(open(path))
tandem = record["rows"]
hand = [json.loads(l) for l in open(anchors) if l.strip()]
comparisons = []
for n in (1024, 4096):
    for d in (64, 128):
        mine = [r for r in tandem if r["kernel"].startswith(f"tandem_{n}_d{d}_") and "cycles" in r]
        theirs = [h for h in hand if h["S"] == n and h["D"] == d]
        best, anchor = min(mine, key=lambda r: r["cycles"]), min(theirs, key=lambda h: h["cycles"])
        comparisons.append({
            "S": n, "L": n, "D": d, "tandem_cycles": best["cycles"], "tandem_params": best["params"],
            "handwritten_cycles": anchor["cycles"], "handwritten_TJ": anchor["TJ"],
            "ratio_handwritten_over_tandem": round(anchor["cycles"] / best["cycles"], 4),
            "tandem_roofline_fraction": best["roofline_fraction"]})
record["handwritten_rows"] = hand
record["comparisons"] = comparisons
json.dump(record, open(path, "w"), indent=2)
for c in comparisons:
    print(c)
PY
rm -f "$anchors"
