#!/usr/bin/env python3
"""Issue 37, on the GPU machine: the conformance suite's linear libraries built for timing
(tests/conformance/CMakeLists.txt, conformance_gpu_bench: conformance_bench_linear_*) beside
torch at the same shape, in the same run. FP8 (in=e4m3, rowwise scales, bf16 out) against
torch._scaled_mm (cuBLASLt's FP8 GEMM) with the same rowwise scales; bf16 against torch.matmul
(cuBLAS), also at decode shapes (bench_linear_skinny_*: M = 1..64, N = K = 4096, split-K's
pipeline of two kernels where U > 1, timed as one call). Each runner times its library on random inputs at its extents (5 warm-up calls, then
the median of 20 with CUDA events, each call synchronising); torch is timed the same way. Prints
one JSON row per library on stdout; the ratio is torch's time over ours (above 1: ours is faster).

    matmul_vs_torch.py DIR   (DIR holds conformance_bench_linear_*_hopper_run)
"""
import glob
import json
import os
import sys

import torch

from attention_vs_sdpa import extents, time_into, time_torch


def main(directory):
    gpu = torch.cuda.get_device_name()
    for runner in sorted(glob.glob(os.path.join(directory, "conformance_bench_linear_*_run"))):
        name = os.path.basename(runner)[len("conformance_"):-len("_hopper_run")]
        e = extents(runner)
        k, m = e["x"]  # x(k, m): M rows of K; w(k, n): N rows of K (layout nt)
        n = e["w"][1]
        fp8 = "fp8" in name
        flops = 2.0 * m * n * k
        row = {"name": name, "app": "matmul_vs_torch", "gpu": gpu, "M": m, "N": n, "K": k,
               "operands": "e4m3" if fp8 else "bf16", "flops": flops}
        ours = time_into(row, runner, flops)
        if ours is None:
            continue
        x = torch.randn(m, k, device="cuda")
        w = torch.randn(n, k, device="cuda")
        try:
            if fp8:
                x8, w8 = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
                scale_x = torch.rand(m, 1, device="cuda") + 0.5
                scale_w = torch.rand(1, n, device="cuda") + 0.5
                t = time_torch(lambda: torch._scaled_mm(x8, w8.t(), scale_a=scale_x,
                                                        scale_b=scale_w, out_dtype=torch.bfloat16))
                row["reference"] = "torch._scaled_mm rowwise (cuBLASLt)"
            else:
                xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
                t = time_torch(lambda: torch.matmul(xb, wb.t()))
                row["reference"] = "torch.matmul (cuBLAS)"
        except Exception as error:  # a torch without the rowwise FP8 GEMM
            row["torch"] = {"refused": str(error)[:200]}
            print(json.dumps(row), flush=True)
            continue
        row["torch"] = dict(t, tflops=round(flops / t["ms"] / 1e9, 1))
        row["ratio_vs_torch"] = round(t["ms"] / ours["ms"], 4)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
