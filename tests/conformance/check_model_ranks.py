#!/usr/bin/env python3
"""Runs a generator binary's --run --json for two parameter sets on one target and checks that the
model ranks them as a GPU run did: the first takes fewer cycles than the second, by at least a
factor. Usage:
check_model_ranks.py <generator binary> <generator> <min ratio> "<faster params>" "<slower params>"
"""
import json, shlex, subprocess, sys

binary, generator, min_ratio, faster, slower = sys.argv[1:6]


def cycles(params):
    out = subprocess.run([binary, "-g", generator, "-o", ".", "-f", "ranked", "--run", "--json"] +
                         shlex.split(params), capture_output=True, text=True)
    lines = [l for l in out.stdout.splitlines() if l.strip().startswith("{")]
    if out.returncode != 0 or len(lines) != 1:
        sys.exit(f"{params}: exit {out.returncode}\n{out.stdout}\n{out.stderr}")
    doc = json.loads(lines[0])
    if doc.get("correct") is not True or doc.get("races") != 0:
        sys.exit(f"{params}: not correct or racy: {lines[0]}")
    return doc["cycles"]


a, b = cycles(faster), cycles(slower)
ratio = b / a
print(f"{faster}: {a} cycles\n{slower}: {b} cycles\nratio {ratio:.3f} (at least {min_ratio})")
sys.exit(0 if ratio >= float(min_ratio) else 1)
