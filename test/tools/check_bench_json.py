#!/usr/bin/env python3
"""Checks kiln-bench --json output: usage: check_bench_json.py FILE THREADS BATCHES [MXFP4_MODE]

Every (threads, batch) pair has a decode row with positive speed and weight bytes per token, batch B's
bytes per token below batch 1's (weights are read once per step, shared by the batch), a floor fraction
in (0, 1.5] when the bandwidth was measured, and the CPU block names the kernel path and the MXFP4
activation mode (MXFP4_MODE, default f32). Prints 'ok'.
"""
import json
import sys

doc = json.load(open(sys.argv[1]))
threads = [int(t) for t in sys.argv[2].split(",")]
batches = [int(b) for b in sys.argv[3].split(",")]
want_mode = sys.argv[4] if len(sys.argv) > 4 else "f32"
errors = []
if doc["cpu"]["kernel_path"] not in ("scalar", "avx512"):
    errors.append(f"kernel_path {doc['cpu']['kernel_path']!r}")
if doc["cpu"].get("mxfp4_activations") != want_mode:
    errors.append(f"mxfp4_activations {doc['cpu'].get('mxfp4_activations')!r}, want {want_mode!r}")
for t in threads:
    decode = {r["batch"]: r for r in doc["rows"] if r["what"] == "decode" and r["threads"] == t}
    for b in batches:
        r = decode.get(b)
        if r is None:
            errors.append(f"no decode row for threads {t} batch {b}")
            continue
        if not (r["tok_per_s"] > 0 and r["weight_bytes_per_token"] > 0):
            errors.append(f"threads {t} batch {b}: {r}")
        if not (r["floor_fraction"] is not None and 0 < r["floor_fraction"] <= 1.5):
            errors.append(f"threads {t} batch {b}: floor_fraction {r['floor_fraction']}")
    if 1 in decode and len(batches) > 1:
        for b in batches[1:]:
            if b in decode and not decode[b]["weight_bytes_per_token"] < decode[1]["weight_bytes_per_token"]:
                errors.append(f"threads {t}: batch {b} reads no fewer weight bytes per token than batch 1")
for e in errors:
    print("FAIL", e)
print("ok" if not errors else f"{len(errors)} errors")
sys.exit(1 if errors else 0)
