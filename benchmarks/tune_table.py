#!/usr/bin/env python3
"""Tuned vs default schedules on the machine models (issue 13): for each workload, `tandem tune`
into a fresh SQLite database, then the best candidate run again with numerics against the Halide
reference. Writes benchmarks/results/tune_table.{json,log}.

Usage: benchmarks/tune_table.py [--budget N] [--seed S] [--jobs J]   (TANDEM_CLI: another tandem-cli)
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = os.environ.get("TANDEM_CLI", str(ROOT / "build" / "apps" / "tandem-cli"))

# (target, app, fixed params, numerics during the search)
WORKLOADS = [
    ("zpu", "gemm", {"M": 256, "N": 256, "K": 256}, True),
    ("zpu", "gemm", {"M": 512, "N": 512, "K": 512}, True),
    ("zpu", "gemm", {"M": 1024, "N": 1024, "K": 1024}, True),
    ("zpu", "gemm", {"M": 2048, "N": 2048, "K": 2048}, False),
    ("zpu", "gemm", {"M": 16, "N": 1024, "K": 1024}, True),
    ("zpu", "elementwise", {"W": 2048, "H": 2048}, True),
    ("zpu", "rmsnorm", {"D": 4096, "R": 1024}, True),
    ("ascend", "gemm", {"M": 256, "N": 256, "K": 256}, True),
    ("ascend", "gemm", {"M": 512, "N": 512, "K": 512}, True),
    ("ascend", "gemm", {"M": 1024, "N": 1024, "K": 1024}, True),
    ("ascend", "gemm", {"M": 16, "N": 1024, "K": 1024}, True),
    ("ascend", "elementwise", {"W": 2048, "H": 2048}, True),
    ("ascend", "rmsnorm", {"D": 4096, "R": 1024}, True),
]


def cli(*args):
    out = subprocess.run([CLI, *args], capture_output=True, text=True)
    text = out.stdout
    if "{" not in text:
        raise RuntimeError(f"{' '.join(args)}: {out.stderr.strip()}")
    return json.loads(text[text.index("{"):])


def params_args(params):
    args = []
    for k, v in params.items():
        args += ["--param", f"{k}={v}"]
    return args


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    a = parser.parse_args()
    rows, log = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for target, app, fixed, numerics in WORKLOADS:
            db = f"sqlite:{tmp}/{target}_{app}_{'_'.join(map(str, fixed.values()))}.db"
            args = ["tune", app, "--target", target, *params_args(fixed), "--db", db, "--budget", str(a.budget),
                    "--seed", str(a.seed), "--jobs", str(a.jobs), "--timeout", "10", "--json"] + ([] if numerics else ["--no-numerics"])
            t = cli(*args)
            default = cli("run", app, "--target", target, *params_args(fixed), "--json", "--no-numerics")
            best = t.get("best")
            row = {"target": target, "app": app, "params": fixed, "default_cycles": default["cycles"],
                   "default_roofline_fraction": default["roofline_fraction"], "budget": a.budget,
                   "measured": t["measured"], "space": t["space"], "numerics_during_search": numerics}
            if best:
                p = dict(fixed)
                p.update({k: v for k, v in best["params"].items() if k != "schedule"})
                check = cli("run", app, "--target", target, "--schedule", best["params"].get("schedule", ""),
                            *params_args(p), "--json")
                row.update({"tuned_params": best["params"], "tuned_cycles": best["cycles"],
                            "tuned_roofline_fraction": best["roofline_fraction"],
                            "speedup": round(default["cycles"] / best["cycles"], 3),
                            "tuned_correct": check["correct"], "tuned_max_rel_err": check["max_rel_err"]})
            rows.append(row)
            line = (f"{target:7s} {app:12s} {json.dumps(fixed):40s} default {default['cycles']:>10} "
                    f"tuned {row.get('tuned_cycles', '-'):>10} x{row.get('speedup', '-')} "
                    f"roofline {row.get('tuned_roofline_fraction', 0):.3f} correct {row.get('tuned_correct')}")
            log.append(line)
            print(line, flush=True)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.node()}: {os.cpu_count()} cores",
            "command": f"benchmarks/tune_table.py --budget {a.budget} --seed {a.seed} --jobs {a.jobs}",
            "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip(),
            "rows": rows}
    (ROOT / "benchmarks/results/tune_table.json").write_text(json.dumps(meta, indent=1) + "\n")
    (ROOT / "benchmarks/results/tune_table.log").write_text(
        f"# {meta['date']} {meta['machine']} {meta['command']} at {meta['commit']}\n" + "\n".join(log) + "\n")


if __name__ == "__main__":
    main()
