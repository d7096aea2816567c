#!/usr/bin/env bash
# A library's runner checks the problem the generator's --run saved (--save DIR, then
# <lib>_run --check DIR): it passes as saved, fails when the saved reference is wrong, and says
# so when the directory is missing.
#   check_saved.sh GENERATOR_BINARY RUNNER DIR generator-args...
set -u
gen=$1 runner=$2 dir=$3
shift 3
rm -rf "$dir"
"$gen" "$@" --save "$dir" > /dev/null || { echo "FAIL: $gen $* --save $dir"; exit 1; }
out=$("$runner" --check "$dir") || { echo "FAIL: the saved problem: $out"; exit 1; }
echo "$out" | grep -q "^correct: yes" || { echo "FAIL: no 'correct: yes' in: $out"; exit 1; }
# The reference's output zeroed: the runner's output no longer matches it.
out_name=$("$runner" --describe | awk '$2 == "output" {sub(":", "", $1); print $1}')
truncate -s 0 "$dir/$out_name.bin.tmp" && head -c "$(stat -c %s "$dir/$out_name.bin")" /dev/zero > "$dir/$out_name.bin.tmp"
mv "$dir/$out_name.bin.tmp" "$dir/$out_name.bin"
if out=$("$runner" --check "$dir"); then echo "FAIL: a wrong reference passed: $out"; exit 1; fi
echo "$out" | grep -q "^correct: NO" || { echo "FAIL: no 'correct: NO' in: $out"; exit 1; }
# No such directory: an error naming what is missing, exit 1.
if err=$("$runner" --check "$dir/none" 2>&1); then echo "FAIL: a missing directory passed"; exit 1; fi
echo "$err" | grep -q "written by the generator's --run --save" || { echo "FAIL: unclear error: $err"; exit 1; }
echo "PASS"
