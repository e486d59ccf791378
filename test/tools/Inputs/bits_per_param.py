#!/usr/bin/env python3
"""Summarizes `kiln-dump --weights` by weight group: layout and bits/param.

Prints one line per group: `<group> <layout> <bits per parameter>`, where
the group is routed-experts, shared-experts, mtp-experts or attention, and
the bits are the group's total (values + scales) over its parameters.
"""
import json
import re
import sys

dump = json.load(sys.stdin)
mtp = dump["config"]["num_layers"]
groups = {}
for w in dump["weights"]["tensors"]:
    name = w["name"]
    m = re.match(r"model\.layers\.(\d+)\.", name)
    layer = int(m.group(1)) if m else -1
    if ".mlp.experts." in name:
        group = "mtp-experts" if layer == mtp else "routed-experts"
    elif ".mlp.shared_experts." in name and layer != mtp:
        group = "shared-experts"
    elif ".self_attn.q_a_proj" in name and layer != mtp:
        group = "attention"
    else:
        continue
    g = groups.setdefault(group, {"layouts": set(), "bytes": 0, "params": 0})
    g["layouts"].add(w["layout"])
    g["bytes"] += w["bytes"]
    g["params"] += w["params"]
for group in ("routed-experts", "shared-experts", "mtp-experts", "attention"):
    if group in groups:
        g = groups[group]
        print(group, "/".join(sorted(g["layouts"])),
              round(8 * g["bytes"] / g["params"], 3))
