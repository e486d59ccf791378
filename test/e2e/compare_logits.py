#!/usr/bin/env python3
"""Two last-position logits dumps (kiln-run --dump-logits) agree.

usage: compare_logits.py GOT.npy REF.npy [--tol T]

Prints the relative L2 error of GOT against REF and whether their argmax
agree; exit 1 unless the error is at most T (default 1e-2) and the argmax
agree.
"""
import argparse
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("got")
ap.add_argument("ref")
ap.add_argument("--tol", type=float, default=1e-2)
args = ap.parse_args()
got = np.load(args.got).astype(np.float64).reshape(-1)
ref = np.load(args.ref).astype(np.float64).reshape(-1)
if got.shape != ref.shape:
    print("FAIL shapes %s vs %s" % (got.shape, ref.shape))
    sys.exit(1)
rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
same = int(got.argmax()) == int(ref.argmax())
ok = rel <= args.tol and same
print("%s rel L2 %.3e (tolerance %.0e), %s argmax (%d vs %d)"
      % ("ok  " if ok else "FAIL", rel, args.tol, "same" if same else "different",
         got.argmax(), ref.argmax()))
sys.exit(0 if ok else 1)
