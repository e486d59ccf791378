#!/usr/bin/env python3
"""Finds FileCheck directives that FileCheck would silently ignore.

Two mistakes make a check line dead without any test failing:
  * a directive without its colon (`// CHECK foo`, `// CHECK-NEXT foo`);
  * a file with check lines whose RUN lines never pipe into FileCheck with
    that prefix.
A third hides why a test failed: a RUN line that sends a tool's stderr to
/dev/null (lit shows stderr of a failing test; let it flow, or write it to a
file under %t and cat it on failure).
Usage: lint_filecheck.py FILE_OR_DIR...   (exit status 1 on findings)
"""
import os
import re
import sys

SUFFIXES = (".mlir", ".test", ".ll", ".s", ".json", ".txt")
SUFFIX_KINDS = "NEXT|SAME|NOT|DAG|LABEL|EMPTY|COUNT-[0-9]+"
COMMENT = r"(?://|#|;)"


def prefixes_of(run_lines):
    """The check prefixes each FileCheck invocation in the RUN lines uses."""
    found = set()
    for line in run_lines:
        if "FileCheck" not in line:
            continue
        for cmd in line.split("|"):
            if "FileCheck" not in cmd:
                continue
            named = re.findall(r"--?check-prefix(?:es)?[= ]([A-Za-z0-9_,-]+)", cmd)
            if named:
                for group in named:
                    found.update(p for p in group.split(",") if p)
            else:
                found.add("CHECK")
    return found


def lint_file(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return [f"{path}: cannot read: {e}"]
    run_lines, joined = [], ""
    for line in lines:
        m = re.search(COMMENT + r"\s*RUN:(.*)$", line)
        if m:
            joined += m.group(1).rstrip("\\").strip() + " "
            if not m.group(1).rstrip().endswith("\\"):
                run_lines.append(joined)
                joined = ""
    used = prefixes_of(run_lines)
    candidates = used | {"CHECK"}
    problems = []
    for no, line in enumerate(lines, 1):
        m = re.search(COMMENT + r"\s*RUN:(.*)$", line)
        if m and re.search(r"(?:2|&)>\s*/dev/null", m.group(1)):
            problems.append(f"{path}:{no}: RUN line discards stderr (>/dev/null): "
                            "a failure would say nothing about why")
    seen_prefixes = set()
    for no, line in enumerate(lines, 1):
        if re.search(COMMENT + r"\s*RUN:", line):
            continue  # RUN lines may quote check text (the lint's own test)
        for prefix in candidates:
            directive = re.compile(
                COMMENT + r"\s*(" + re.escape(prefix) + r"(?:-(?:" + SUFFIX_KINDS + r"))?)(\s*:|\b)")
            m = directive.search(line)
            if not m:
                continue
            # `CHECK-FOO` where FOO is not a FileCheck suffix belongs to
            # another prefix; leave it to that prefix.
            rest = line[m.end(1):]
            if rest.startswith("-"):
                continue
            if m.group(2).strip() != ":":
                if re.match(r"\s+\S", rest) or rest.strip() == "":
                    problems.append(f"{path}:{no}: '{m.group(1)}' has no colon: "
                                    "FileCheck ignores this line")
                continue
            seen_prefixes.add(prefix)
    for prefix in sorted(seen_prefixes - used):
        problems.append(f"{path}: has {prefix}: lines but no RUN line pipes into "
                        f"FileCheck with that prefix")
    return problems


def main(args):
    files = []
    for arg in args:
        if os.path.isdir(arg):
            for root, _, names in os.walk(arg):
                if "/fixtures" in root or "/Inputs" in root:
                    continue
                files += [os.path.join(root, n) for n in sorted(names) if n.endswith(SUFFIXES)]
        else:
            files.append(arg)
    problems = [p for f in files for p in lint_file(f)]
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["test"]))
