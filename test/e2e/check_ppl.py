#!/usr/bin/env python3
"""usage: check_ppl.py KILN_RUN_JSON GOLDEN_METRICS_JSON REL_TOL

Prints `ok ppl <got> golden <ref>` when |got - ref| / ref <= REL_TOL,
`FAIL ...` (exit 1) otherwise.
"""
import json
import sys

got = json.load(open(sys.argv[1]))["ppl"]
ref = json.load(open(sys.argv[2]))["ppl"]
tol = float(sys.argv[3])
rel = abs(got - ref) / ref
print(("ok" if rel <= tol else "FAIL") + f" ppl {got:.6f} golden {ref:.6f} ({100 * rel:.4f}% off, tolerance {100 * tol:g}%)")
sys.exit(0 if rel <= tol else 1)
