#!/usr/bin/env python3
"""Runs `tandem-cli run ... --json` and checks the single JSON object it prints against
key=expectation pairs: `key=true`, `key>=0.95`, `key==0`. Usage:
check_run_json.py <cli> [checks...] -- <run arguments...>"""
import json, subprocess, sys

sep = sys.argv.index("--")
cli, checks, args = sys.argv[1], sys.argv[2:sep], sys.argv[sep + 1:]
out = subprocess.run([cli] + args, capture_output=True, text=True)
lines = [l for l in out.stdout.splitlines() if l.strip()]
if len(lines) != 1:
    sys.exit(f"expected one JSON line, got {len(lines)}:\n{out.stdout}\n{out.stderr}")
doc = json.loads(lines[0])
for key in ("app", "target", "params", "schedule", "correct", "max_rel_err", "cycles", "bound_cycles", "efficiency",
            "roofline_cycles", "roofline_fraction", "busy", "races", "deadlock"):
    if key not in doc:
        sys.exit(f"missing field {key}")
failed = []
for check in checks:
    for op in (">=", "<=", "==", "="):
        if op in check:
            key, want = check.split(op, 1)
            break
    have = doc[key]
    if op == "=":
        ok = str(have).lower() == want
    else:
        ok = eval(f"{float(have)} {op} {float(want)}")
    print(f"{key} = {have} ({check}): {'ok' if ok else 'FAILED'}")
    if not ok:
        failed.append(check)
sys.exit(1 if failed else 0)
