#!/usr/bin/env python3
"""Checks kiln-bench --json output: usage: check_bench_json.py FILE THREADS BATCHES [MXFP4_MODE]

Every (threads, batch) pair has a decode row with positive speed and weight bytes per token, batch B's
bytes per token below batch 1's (weights are read once per step, shared by the batch), a positive floor
fraction equal to the row's weight GB/s over its measured read GB/s, and the CPU block names the kernel
path and the MXFP4 activation mode (MXFP4_MODE, default f32). Prints 'ok'. The fraction itself has no
upper bound here: the fixture's weights stay in the caches, so it can pass 1, and more so when a
concurrent test slows the bandwidth probe (1.54 was seen under lit's two workers).
"""
import json
import sys

doc = json.load(open(sys.argv[1]))
threads = [int(t) for t in sys.argv[2].split(",")]
batches = [int(b) for b in sys.argv[3].split(",")]
want_mode = sys.argv[4] if len(sys.argv) > 4 else "f32"
errors = []
if doc["cpu"]["kernel_path"] not in ("scalar", "avx2", "avx512"):
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
        f = r["floor_fraction"]
        if not (f is not None and f > 0 and r["read_gb_per_s"] > 0 and
                abs(f - r["weight_gb_per_s"] / r["read_gb_per_s"]) <= 1e-9 * f):
            errors.append(f"threads {t} batch {b}: floor_fraction {f}, weight "
                          f"{r['weight_gb_per_s']} GB/s, read {r['read_gb_per_s']} GB/s")
    if 1 in decode and len(batches) > 1:
        for b in batches[1:]:
            if b in decode and not decode[b]["weight_bytes_per_token"] < decode[1]["weight_bytes_per_token"]:
                errors.append(f"threads {t}: batch {b} reads no fewer weight bytes per token than batch 1")
for e in errors:
    print("FAIL", e)
print("ok" if not errors else f"{len(errors)} errors")
sys.exit(1 if errors else 0)
