#!/usr/bin/env bash
# Records the runs behind two figures of the tuning notes (issue 13): the best zpu gemm 512^3
# candidate the tuner found (benchmarks/results/tune_table.*) with its engines' busy cycles per
# core (why 0.7 of the roofline is out of reach on the model: DMA alone keeps a core busier than
# 0.7 allows), and the default Ascend rmsnorm 4096 x 1024 on the real vector instructions.
# Writes results/tune_bounds.json and the raw log results/tune_bounds.log.
source "$(dirname "$0")/setup.sh"
cli="$root/build/apps/tandem-cli"
log="$out/tune_bounds.log"
: > "$log"
run() {
    echo "\$ tandem-cli $*" >> "$log"
    "$cli" "$@" | tee -a "$log"
}
gemm=$(run run gemm --target zpu --param M=512 --param N=512 --param K=512 --param TK=512 --param TM=128 \
       --param TN=128 --param stages=2 --no-numerics --json)
rms=$(run run rmsnorm --target ascend --param D=4096 --param R=1024 --no-numerics --json)
python3 - "$out/tune_bounds.json" "$gemm" "$rms" <<'PY'
import json, sys, datetime, platform, os, subprocess
dest, gemm, rms = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
cores = 16  # machines/zpu.json
busy = {k: v / cores for k, v in gemm["busy"].items()}
record = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "machine": f"{platform.node()}: {os.cpu_count()} cores", "command": "benchmarks/tune_bounds.sh",
    "commit": subprocess.run(["git", "-C", os.path.dirname(dest), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip(),
    "log": "tune_bounds.log",
    "zpu_gemm_512": {"cycles": gemm["cycles"], "roofline_cycles": gemm["roofline_cycles"],
                     "roofline_fraction": gemm["roofline_fraction"],
                     "cycles_for_0.7": gemm["roofline_cycles"] / 0.7, "busy_per_core": busy},
    "ascend_rmsnorm_4096x1024": {"cycles": rms["cycles"], "roofline_fraction": rms["roofline_fraction"],
                                 "races": rms["races"]},
}
json.dump(record, open(dest, "w"), indent=1)
print(json.dumps(record["zpu_gemm_512"]))
PY
