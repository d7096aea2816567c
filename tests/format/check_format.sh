#!/usr/bin/env bash
# The tree stays formatted: every C++ source and header of Tandem's own (tracked by git, or found
# under the source folders outside a git checkout) matches the checked-in .clang-format.
# Fix with: clang-format -i <file> (Debian's clang-format, installed by ./tandem).
set -euo pipefail
root="$1"
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh')
else
    mapfile -t files < <(find apps backends benchmarks dsl examples generator tests -type f \
                         \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \))
fi
bad=()
for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
    echo "not formatted (clang-format -i these):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
fi
echo "${#files[@]} files formatted"
