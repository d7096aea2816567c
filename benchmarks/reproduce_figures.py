#!/usr/bin/env python3
"""Re-runs every model run recorded in the given results logs and checks that the figures
reproduce to the cycle: for each JSON record with "cycles" (a `tandem-cli run ... --json` row),
the same app, target, schedule and parameters are run again and cycles / bound_cycles compared.

    benchmarks/reproduce_figures.py benchmarks/results/zpu_gemm_efficiency.log ... [--json out.json]

A refactoring that must not change behaviour is checked this way (issue 31). Exit status 1 if any
figure differs."""
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
cli = root / "build" / "apps" / "tandem-cli"


def provenance():
    """The date, machine, command and commit a record is made with."""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.machine())
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.node()}: {os.cpu_count()} cores, {cpu}",
            "command": "benchmarks/reproduce_figures.py " + " ".join(
                str(Path(a).relative_to(root)) if Path(a).is_absolute() else a
                for a in sys.argv[1:]),
            "commit": commit}


def records(path):
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(r, dict) and "cycles" in r and "app" in r and "params" in r:
            yield r


def rerun(r):
    cmd = [str(cli), "run", r["app"], "--target", r["target"], "--schedule", r["schedule"],
           "--no-numerics", "--json"]
    for k, v in sorted(r["params"].items()):
        cmd += ["--param", f"{k}={v}"]
    for k, v in sorted(r.get("at", {}).items()):
        cmd += ["--at", f"{k}={v}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, " ".join(cmd[1:]), out.stderr.strip()
    return json.loads(out.stdout), " ".join(cmd[1:]), ""


def main():
    files = [a for a in sys.argv[1:] if not a.startswith("--")]
    out_json = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    if out_json in files:
        files.remove(out_json)
    rows, bad, skipped = [], 0, 0
    for f in files:
        for r in records(f):
            now, cmd, err = rerun(r)
            older = now is not None and now.get("model") != r.get("model")
            same = now is not None and now["cycles"] == r["cycles"] and \
                now.get("bound_cycles") == r.get("bound_cycles")
            if older:
                skipped += 1  # recorded on an earlier version of the model: not comparable
            else:
                bad += not same
            rows.append({"file": Path(f).name, "command": cmd, "model": r.get("model"),
                         "recorded": r["cycles"], "now": now["cycles"] if now else None,
                         "same": same, "older_model": older, "error": err})
            verdict = "older model" if older else "same" if same else "DIFFERS"
            print(f"{verdict:11} {r['cycles']:>10} -> {now['cycles'] if now else err}  {cmd}",
                  flush=True)
    compared = len(rows) - skipped
    print(f"{compared - bad} of {compared} figures reproduce to the cycle "
          f"({skipped} recorded on an earlier model version, not compared)")
    if out_json:
        Path(out_json).write_text(json.dumps({**provenance(), "reproduced": compared - bad,
                                              "of": compared, "older_model": skipped,
                                              "rows": rows}, indent=1) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
