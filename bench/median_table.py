#!/usr/bin/env python3
"""Prints a Markdown table of medians from tab-separated rows: WHO THREADS MEASURE VALUE.

usage: median_table.py RAW_FILE COLUMN_NAME   (COLUMN_NAME titles the WHO column: binary, engine)
Rows are grouped by (measure, threads, who), in that order, Kiln's rows first within a group.
"""
import collections
import statistics
import sys

raw, who_title = sys.argv[1], sys.argv[2]
rows = collections.OrderedDict()
for line in open(raw):
    who, threads, what, value = line.rstrip("\n").split("\t")
    rows.setdefault((what, int(threads), who), []).append(float(value))
print(f"| measure | threads | {who_title} | median tok/s | runs |")
print("|---|---|---|---|---|")
for (what, threads, who), values in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], not kv[0][2].startswith("kiln"), kv[0][2])):
    runs = ", ".join(f"{v:.0f}" for v in values)
    print(f"| {what} | {threads} | {who} | {statistics.median(values):.1f} | {runs} |")
