#!/usr/bin/env python3
"""The Hopper machine model next to the GPU: runs the model (tandem run --no-numerics) for kernels
measured on an H100 and writes benchmarks/results/hopper_model_vs_gpu.{json,log}.

The model counts SM cycles; they become time at the clock the machine description states
(1.83 GHz). `model_over_gpu` > 1: the model is slower (pessimistic) than the GPU.

Usage: benchmarks/hopper_model_vs_gpu.py [GPU_RESULTS_JSON...] (later files win for the same kernel)
"""
import datetime
import json
import pathlib
import platform
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = ROOT / "build" / "apps" / "tandem-cli"
CLOCK_GHZ = 1.83  # machines/hopper.json: "Timing in SM cycles at about 1.83 GHz"

# GPU row name -> (app, schedule, params)
KERNELS = {
    "gemm_pingpong_1024": ("gemm", "ws_pingpong", {"M": 1024, "N": 1024, "K": 1024}),
    "gemm_coop_1024": ("gemm", "ws_cooperative", {"M": 1024, "N": 1024, "K": 1024, "TN": 256}),
    "gemm_pingpong_2048": ("gemm", "ws_pingpong", {"M": 2048, "N": 2048, "K": 2048}),
    "gemm_coop_2048": ("gemm", "ws_cooperative", {"M": 2048, "N": 2048, "K": 2048, "TN": 256}),
    "gemm_pingpong_4096": ("gemm", "ws_pingpong", {"M": 4096, "N": 4096, "K": 4096}),
    "gemm_coop_4096_1": ("gemm", "ws_cooperative", {"M": 4096, "N": 4096, "K": 4096, "TN": 256}),
    "gemm_ws_4096": ("gemm", "ws", {"M": 4096, "N": 4096, "K": 4096}),
    "gemm_pipelined_4096": ("gemm", "pipelined", {"M": 4096, "N": 4096, "K": 4096}),
    "gemm_coop_6144": ("gemm", "ws_cooperative", {"M": 6144, "N": 6144, "K": 6144, "TN": 256}),
    "gemm_coop_3000x5000x2000": ("gemm", "ws_cooperative", {"M": 3000, "N": 5000, "K": 2000, "TN": 256}),
    "gemm_pingpong_1000x1096x520": ("gemm", "ws_pingpong", {"M": 1000, "N": 1096, "K": 520}),
    "rmsnorm_1024x65536": ("rmsnorm", "double_buffered", {"D": 1024, "R": 65536}),
    "rmsnorm_4096x16384": ("rmsnorm", "double_buffered", {"D": 4096, "R": 16384}),
    "rmsnorm_8192x8192": ("rmsnorm", "double_buffered", {"D": 8192, "R": 8192}),
    "rmsnorm_2048x32768": ("rmsnorm", "double_buffered", {"D": 2048, "R": 32768}),
    "rmsnorm_16384x4096": ("rmsnorm", "double_buffered", {"D": 16384, "R": 4096}),
    "elementwise_single_8192b": ("elementwise", "single_buffered", {"W": 8192, "H": 8192}),
    "elementwise_double_8192b": ("elementwise", "double_buffered", {"W": 8192, "H": 8192}),
}


def model(app, schedule, params):
    args = [str(CLI), "run", app, "--target", "hopper", "--schedule", schedule, "--json", "--no-numerics"]
    for k, v in params.items():
        args += ["--param", f"{k}={v}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])


def main():
    gpu_files = [pathlib.Path(a) for a in sys.argv[1:]] or [ROOT / "benchmarks/results/gpu_hopper_v11.json",
                                                            ROOT / "benchmarks/results/gpu_hopper_v13.json"]
    gpu = {}
    for f in gpu_files:  # later files' rows of the same kernel win
        gpu.update({r["name"].removesuffix("_v13"): r for r in json.load(open(f)) if "tandem_ms" in r})
    rows, log = [], []
    for name, (app, schedule, params) in KERNELS.items():
        if name not in gpu:
            continue
        m = model(app, schedule, params)
        cycles = m["cycles"]
        model_ms = cycles / (CLOCK_GHZ * 1e6)
        row = {"name": name, "app": app, "schedule": schedule, "params": params, "model_cycles": cycles,
               "model_bound_cycles": m.get("bound_cycles"), "model_ms_at_1.83GHz": round(model_ms, 4),
               "gpu_ms": gpu[name]["tandem_ms"], "gpu_device": gpu[name]["device"],
               "model_over_gpu": round(model_ms / gpu[name]["tandem_ms"], 2)}
        rows.append(row)
        log.append(f"{name:40s} model {model_ms:8.4f} ms ({cycles} cycles)  gpu {gpu[name]['tandem_ms']:8.4f} ms  "
                   f"model/gpu {row['model_over_gpu']}")
        print(log[-1], flush=True)
    meta = {"date": datetime.date.today().isoformat(), "machine": platform.node(),
            "command": "benchmarks/hopper_model_vs_gpu.py " + " ".join(str(f.resolve().relative_to(ROOT)) for f in gpu_files),
            "gpu_results": [str(f.resolve().relative_to(ROOT)) for f in gpu_files], "rows": rows}
    out = ROOT / "benchmarks/results/hopper_model_vs_gpu.json"
    out.write_text(json.dumps(meta, indent=1) + "\n")
    (ROOT / "benchmarks/results/hopper_model_vs_gpu.log").write_text(
        f"# {meta['date']} {meta['machine']} {meta['command']}\n" + "\n".join(log) + "\n")


if __name__ == "__main__":
    main()
