#!/usr/bin/env python3
"""Prints a kiln module's op sequence without weights and dequantization.

Each op line becomes `<op name> : <types>` with SSA names dropped, so two
imports of the same model in different weight formats print the same
skeleton. Weight types (rhs operands) differ between formats; only the
result type (after `->`) and activation operands are kept.
"""
import re
import sys

SKIP = ("kiln.weight", "kiln.dequantize")

for line in open(sys.argv[1]):
    line = line.strip()
    if not line or any(s in line for s in SKIP):
        continue
    m = re.search(r"(kiln\.[a-z_.]+|func\.func @\w+|return)", line)
    if not m:
        continue
    name = m.group(1)
    result = line.split("->")[-1].strip() if "->" in line else ""
    if name.startswith("func.func") or name == "return":
        print(name)
    else:
        print(f"{name} -> {result}")
