# Sourced by the benchmark scripts that run conformance generators on the machine models
# (user_kernels.sh, two_matmuls.sh, int8_gemm.sh, flash_attention.sh): `run_case NAME TARGET GENERATOR PARAMS...` runs one with
# --run --json, appending the command and its output to $log and a row to $rows;
# `write_rows DEST DEFINITION` writes the record (date, machine, command, commit, model versions,
# the raw log's name, DEFINITION and the rows: cycles, roofline, bound, engines' busy cycles, or
# the refusal) and prints the rows. Needs $root and $out (setup.sh); `begin_rows NAME` first.
# TANDEM_GENERATORS: a copy of conformance_gen to run (so that the tree can be rebuilt meanwhile).
# TANDEM_ROWS_TARGET: run only this target's rows and put them in place of that target's rows of
# the record (the others stay as they were, each row naming its model; the raw log is appended
# to), e.g. after that target's model changed.
gen="${TANDEM_GENERATORS:-$root/build/tests/conformance/conformance_gen}"

# The raw log results/NAME.log, emptied, as $log, and the rows' scratch file as $rows.
begin_rows() {
    log="$out/$1.log"
    rows=$(mktemp)
    if [ -n "${TANDEM_ROWS_TARGET:-}" ]; then
        echo "# $(date -u +%FT%TZ): the $TANDEM_ROWS_TARGET rows again (TANDEM_ROWS_TARGET)" >> "$log"
    else
        : > "$log"
    fi
}

run_case() {
    local name=$1 target=$2 g=$3 result
    shift 3
    [ -n "${TANDEM_ROWS_TARGET:-}" ] && [ "$target" != "$TANDEM_ROWS_TARGET" ] && return
    echo "\$ conformance_gen -g $g --run target=$target $* --json" >> "$log"
    local status=0
    result=$("$gen" -g "$g" --run "target=$target" "$@" --json 2>&1) || status=$?
    if [ $status -eq 0 ]; then
        echo "$result" >> "$log"
        echo "$name|$target|$g $*|$(echo "$result" | tail -1)" >> "$rows"
    else
        # (no message: killed, e.g. 137 when the machine's memory ran out)
        [ -z "$result" ] && result="exit status $status, no message"
        echo "$result" >> "$log"
        echo "$name|$target|$g $*|{\"refused\": $(echo "$result" | tail -1 | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')}" >> "$rows"
    fi
}

write_rows() {
    python3 - "$1" "$rows" "$root" "$(basename "$log")" "$2" "benchmarks/$(basename "$0")" <<'PY'
import json, sys, datetime, platform, os, subprocess
dest, rows_file, root, log, definition, command = sys.argv[1:]
versions = {t: json.load(open(f"{root}/machines/{t}.json"))["version"] for t in ("zpu", "ascend", "hopper")}
rows = []
for line in open(rows_file):
    name, target, generator, result = line.rstrip("\n").split("|", 3)
    j = json.loads(result)
    params = generator.split()[1:]
    row = {"kernel": name, "target": target, "params": " ".join(params), "generator": generator}
    if "refused" in j:
        row["refused"] = j["refused"]
    else:
        row.update({k: j[k] for k in ("model", "correct", "cycles", "roofline_cycles",
                                      "roofline_fraction", "roofline_bound", "bound_cycles", "busy",
                                      "races", "deadlock")})
    rows.append(row)
only = os.environ.get("TANDEM_ROWS_TARGET")
if only:  # this target's rows in place of the record's, the others kept
    fresh = {(r["kernel"], r["target"]): r for r in rows}
    before = json.load(open(dest))["rows"]
    rows = [fresh.pop((r["kernel"], r["target"]), r) if r["target"] == only else r for r in before] + \
        list(fresh.values())
record = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "machine": f"{platform.node()}: {os.cpu_count()} cores", "command": command,
    "commit": subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip(),
    "models": {t: f"{t} v{v}" for t, v in versions.items()},
    "log": log, "definition": definition, "rows": rows,
}
if only:
    record["rows_run"] = f"{only} only (TANDEM_ROWS_TARGET); the other targets' rows are the record's before"
json.dump(record, open(dest, "w"), indent=1)
for r in rows:
    if "refused" in r:
        print(f'{r["kernel"]:26} {r["target"]:7} refused: {r["refused"][:90]}')
    else:
        print(f'{r["kernel"]:26} {r["target"]:7} {r["cycles"]:>9} cycles, roofline {r["roofline_cycles"]:>9.0f} '
              f'({r["roofline_bound"]}), fraction {r["roofline_fraction"]:.3f}')
PY
}

# The tiles a user picks per target for linear at decode shapes (M rows; the best of a few tried
# by hand at M = 16: zpu 256 wide and 512 deep, 0.41 of the roofline against 0.10 at 128 x 64;
# ascend 128 x 128; hopper 64 x 128 x 64): split_k_bound.sh and split_k.sh.
decode_tiles() {
    local tm=$([ "$2" -lt 64 ] && echo "$2" || echo 64)
    case $1 in
        zpu) echo "TM=$tm TN=256 TK=512" ;;
        ascend) echo "TM=$tm TN=128 TK=128" ;;
        hopper) echo "TM=64 TN=128 TK=64" ;;
    esac
}
