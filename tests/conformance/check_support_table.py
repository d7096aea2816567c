#!/usr/bin/env python3
"""Checks README's support table against the conformance suite (tests/conformance/CMakeLists.txt):
every case of the suite is in the table; a "yes" cell is a case that runs on that target (not in
conformance_not_yet), a "no: reason" cell one the suite checks to be refused as not supported.

    check_support_table.py README.md tests/conformance/CMakeLists.txt
"""
import re
import sys


def cmake_list(text, name):
    m = re.search(r"set\(" + name + r"\b\s*(.*?)\)", text, re.S)
    if not m:
        sys.exit(f"no set({name} ...) in the CMake file")
    return re.findall(r'"([^"]*)"|(\S+)', m.group(1))


def main():
    readme, cmake = open(sys.argv[1]).read(), open(sys.argv[2]).read()
    cases = [q.split("|")[0] for q, _ in cmake_list(cmake, "conformance_cases")]
    not_yet = {w for _, w in cmake_list(cmake, "conformance_not_yet")}
    m = re.search(r"<!-- support table.*?-->\n(.*?)<!-- end of support table -->", readme, re.S)
    if not m:
        sys.exit("README has no support table")
    rows = [r for r in m.group(1).splitlines() if r.startswith("|") and not r.startswith("|---")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    targets = header[1:]
    errors, seen = [], set()
    for row in rows[1:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        names = re.findall(r"`([a-z0-9_]+)`", cells[0])
        if not names:
            errors.append(f"row without cases: {cells[0]}")
        for name in names:
            if name not in cases:
                errors.append(f"{name}: not a conformance case")
            seen.add(name)
            for target, cell in zip(targets, cells[1:]):
                refused = f"{target}_{name}" in not_yet
                if cell == "yes" and refused:
                    errors.append(f"{name} on {target}: the table says yes, the suite refuses it")
                if cell.startswith("no") and not refused:
                    errors.append(f"{name} on {target}: the table says no, the suite runs it")
                if cell != "yes" and not cell.startswith("no: "):
                    errors.append(f"{name} on {target}: '{cell}' is neither 'yes' nor 'no: why'")
    errors += [f"{c}: a conformance case missing from the table" for c in cases if c not in seen]
    for e in errors:
        print(e)
    print(f"{len(rows) - 1} rows, {len(seen)} cases, {len(targets)} targets: "
          f"{'table and suite agree' if not errors else str(len(errors)) + ' disagreements'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
