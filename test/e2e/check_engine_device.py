#!/usr/bin/env python3
"""The serving engine on a device against the same engine on the CPU.

usage: check_engine_device.py KILN_RUN ARTIFACT FIXTURE_DIR WORKDIR
                              [--ranks R] [kiln-run args...]

Writes 4 requests that share an 8-token prefix (prompt ids from the
fixture's eval text), runs them concurrently with `kiln-run --batch-file`
once on the CPU and once with `--device hip` (the extra arguments added to
both: a small page pool, pages, --spec), and checks:
- every request gives the same tokens on the device as on the CPU, and the
  CPU engine's tokens are those `kiln-run --prompt-ids` gives each request
  alone (an independent reference);
- the device run reports what the test exists for: prefix-cache hits,
  preemptions and, with --spec, rolled-back drafts (its stderr summary).
With --ranks R every kiln-run runs under mpirun with R ranks (an artifact
compiled with --tp/--ep; loopback only, mpi_util.py, the KILN_* variables
passed on). Prints one line per request and per check; exits 1 on any
failure.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpi_util import mpi_launcher  # noqa: E402

kiln_run, artifact, fixture, work = sys.argv[1:5]
extra = sys.argv[5:]
launcher, env = [], None
if extra[:1] == ["--ranks"]:
    launcher, env = mpi_launcher(extra[1], 120)
    extra = extra[2:]
text = np.load(os.path.join(fixture, "golden", "eval_tokens.npy"))
text = text.astype(int).tolist()

shared = text[:8]
requests = [{"id": "r%d" % i,
             "prompt_ids": shared + text[500 + 37 * i:502 + 38 * i],
             "max_tokens": 6, "ignore_eos": True} for i in range(4)]
batch = os.path.join(work, "device-requests.jsonl")
with open(batch, "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in requests))


def run_batch(device):
    out = os.path.join(work, "device-%s.jsonl" % device)
    run = subprocess.run(launcher + [kiln_run, artifact, "--batch-file", batch,
                                     "-o", out, "--device", device] + extra,
                         capture_output=True, text=True, env=env)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        print("FAIL %s exit code %d" % (device, run.returncode))
        sys.exit(1)
    return [json.loads(line) for line in open(out)], run.stderr


failures = 0
cpu, _ = run_batch("cpu")
dev, log = run_batch("hip")
for req, c, d in zip(requests, cpu, dev):
    alone = subprocess.run(
        launcher + [kiln_run, artifact, "--prompt-ids",
                    ",".join(map(str, req["prompt_ids"])), "-n",
                    str(req["max_tokens"]), "--ignore-eos", "--spec", "0",
                    "--output-format=json"],
        capture_output=True, text=True, env=env)
    ref = json.loads(alone.stdout)["ids"] if alone.returncode == 0 else None
    ok = c.get("ids") == ref and d.get("ids") == c.get("ids")
    failures += not ok
    print("%s %s device %s cpu %s alone %s" % (
        "ok  " if ok else "FAIL", req["id"], d.get("ids"), c.get("ids"), ref))


def count(pattern):
    m = re.search(pattern, log)
    return int(m.group(1)) if m else 0


checks = [("prefix-cache hits",
           count(r"\((\d+) from the prefix cache\)") > 0),
          ("preemptions", count(r"(\d+) preemption\(s\)") > 0)]
if "--spec" in extra and extra[extra.index("--spec") + 1] != "0":
    checks.append(("rollbacks", count(r"(\d+) rolled back") > 0))
for name, ok in checks:
    failures += not ok
    print("%s %s on the device" % ("ok  " if ok else "FAIL", name))
sys.exit(1 if failures else 0)
