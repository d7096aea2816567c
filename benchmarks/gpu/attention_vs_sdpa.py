#!/usr/bin/env python3
"""Issue 37, on the GPU machine: the conformance suite's attention libraries built for timing
(tests/conformance/CMakeLists.txt, conformance_gpu_bench) beside torch's
scaled_dot_product_attention at the same shape, in the same run. Each runner times its library
on random inputs at its extents (5 warm-up calls, then the median of 20 with CUDA events, each
call synchronising); torch runs bf16 q, k, v of the shape the runner describes, per backend
(flash, cuDNN, memory-efficient), timed the same way. The FLOPs are FlashAttention's count,
4 * B * H * S * L * D, halved where causal, for both. Prints one JSON row per library on stdout;
the ratio is SDPA's best backend time over ours (above 1: ours is faster).

    attention_vs_sdpa.py DIR   (DIR holds conformance_bench_*attention*_hopper_run)
"""
import glob
import json
import os
import re
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def extents(runner):
    """The runner's arguments' extents by name (--describe: "  q: input bfloat16 [64 x 4096 ...]")."""
    said = subprocess.run([runner, "--describe"], capture_output=True, text=True, timeout=60).stdout
    return {m[1]: [int(x) for x in m[2].split(" x ")]
            for m in re.finditer(r"^\s+(\w+): \w+ \w+ \[([0-9 x]+)\]", said, re.M)}


def time_ours(runner):
    said = subprocess.run([runner, "--iterations", "20"], capture_output=True, text=True, timeout=120)
    m = re.search(r"([0-9.]+) ms per call on the GPU \(median of (\d+)(?:, min ([0-9.]+), max ([0-9.]+))?",
                  said.stdout)
    if said.returncode != 0 or not m:
        return None, (said.stdout + said.stderr)[-400:]
    return {"ms": float(m[1]), "n": int(m[2]), "min_ms": float(m[3] or m[1]),
            "max_ms": float(m[4] or m[1])}, None


def time_into(row, runner, flops):
    """Times the runner into row["ours"] (with its TFLOP/s) and returns the timing; or prints the
    row with the runner's failure and returns None."""
    ours, failure = time_ours(runner)
    if ours is None:
        row.update(correct=None, failure=failure)
        print(json.dumps(row), flush=True)
        return None
    row["ours"] = dict(ours, tflops=round(flops / ours["ms"] / 1e9, 1))
    return ours


def time_torch(fn, n=20):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return {"ms": times[len(times) // 2], "min_ms": times[0], "max_ms": times[-1], "n": n}


def main(directory):
    gpu = torch.cuda.get_device_name()
    for runner in sorted(glob.glob(os.path.join(directory, "conformance_bench_*attention*_run"))):
        name = os.path.basename(runner)[len("conformance_"):-len("_hopper_run")]
        causal = "_causal" in name
        e = extents(runner)
        d, s, h, b = e["q"]
        l, kv = e["k"][1], e["k"][2]
        flops = 4.0 * b * h * s * l * d * (0.5 if causal else 1.0)
        row = {"name": name, "app": "attention_vs_sdpa", "gpu": gpu, "B": b, "H": h, "KV": kv,
               "S": s, "L": l, "D": d, "causal": causal, "flops": flops,
               "ours_output": "f32", "sdpa_output": "bf16"}
        ours = time_into(row, runner, flops)
        if ours is None:
            continue
        q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, kv, l, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, kv, l, d, device="cuda", dtype=torch.bfloat16)
        best = None
        for label, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                               ("cudnn", SDPBackend.CUDNN_ATTENTION),
                               ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    t = time_torch(lambda: F.scaled_dot_product_attention(
                        q, k, v, is_causal=causal, enable_gqa=kv != h))
            except Exception as error:  # a backend that does not take the shape
                row[f"sdpa_{label}"] = {"refused": str(error)[:200]}
                continue
            row[f"sdpa_{label}"] = dict(t, tflops=round(flops / t["ms"] / 1e9, 1))
            if best is None or t["ms"] < best[1]:
                best = (label, t["ms"])
        if best:
            row["sdpa_best"] = best[0]
            row["ratio_vs_sdpa"] = round(best[1] / ours["ms"], 4)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
