#!/usr/bin/env python3
"""kiln-serve --device hip end to end, through http.client.

usage: check_serve_device.py KILN_SERVE KILN_RUN ARTIFACT FIXTURE_DIR WORKDIR
                             [--ranks R] [kiln-serve args...]

Starts kiln-serve with `--device hip` (the extra arguments added; the
environment's KILN_HIP_LIBRARY picks the HIP runtime) on a free loopback
port and checks: the status line names the device; 4 concurrent greedy
completions of prompts sharing a prefix, streamed and whole, equal
`kiln-run --prompt-ids` on the CPU; a repeat of one prompt reports cached
prompt tokens; /metrics counts the requests. With --ranks R the server and
the reference kiln-run run under mpirun with R ranks (an artifact compiled
with --tp/--ep; loopback only, the KILN_* variables passed on). Prints one
line per check; exits 1 on failure.
"""
import http.client
import json
import os
import subprocess
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpi_util import mpi_launcher  # noqa: E402
from serve_util import Checks, request, start_server  # noqa: E402

serve, kiln_run, artifact, fixture, work = sys.argv[1:6]
extra = sys.argv[6:]
launcher, env = [], None
if extra[:1] == ["--ranks"]:
    launcher, env = mpi_launcher(extra[1], 120)
    extra = extra[2:]
text = np.load(os.path.join(fixture, "golden", "eval_tokens.npy"))
text = text.astype(int).tolist()
check = Checks()

shared = text[:8]
prompts = [shared + text[700 + 41 * i:703 + 42 * i] for i in range(4)]
max_tokens = 5


def kiln_run_text(ids):
    out = subprocess.run(launcher + [kiln_run, artifact, "--prompt-ids",
                                     ",".join(map(str, ids)), "-n",
                                     str(max_tokens), "--ignore-eos",
                                     "--output-format", "json"],
                         capture_output=True, text=True, check=True,
                         env=env).stdout
    return json.loads(out)["text"]


def streamed_text(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=json.dumps(body))
    r = c.getresponse()
    got = ""
    for block in r.read().decode().split("\n\n"):
        if block.startswith("data: ") and block[6:] != "[DONE]":
            event = json.loads(block[6:])
            if event["choices"]:
                got += event["choices"][0]["text"]
    c.close()
    return r.status, got


want = [kiln_run_text(p) for p in prompts]
proc, port = start_server(serve, artifact, work, "--device", "hip",
                          "--log-interval", "0", *extra, launcher=launcher,
                          env=env)
results = [None] * len(prompts)


def worker(i):
    body = {"prompt": prompts[i], "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True}
    if i % 2:
        body["stream"] = True
        results[i] = streamed_text(port, body)
    else:
        status, reply = request(port, "POST", "/v1/completions", body,
                                timeout=600)
        results[i] = (status, reply["choices"][0]["text"]
                      if status == 200 else reply)


threads = [threading.Thread(target=worker, args=(i,))
           for i in range(len(prompts))]
[t.start() for t in threads]
[t.join() for t in threads]
check("4 concurrent completions on the device equal kiln-run on the CPU",
      all(r == (200, w) for r, w in zip(results, want)), (results, want))

status, again = request(port, "POST", "/v1/completions",
                        {"prompt": prompts[3], "max_tokens": max_tokens,
                         "temperature": 0, "ignore_eos": True}, timeout=600)
cached = (again.get("usage", {}).get("prompt_tokens_details") or {}).get(
    "cached_tokens", 0) if status == 200 else 0
check("a repeated prompt is served from the device's prefix cache",
      status == 200 and again["choices"][0]["text"] == want[3] and cached > 0,
      again)
metrics = request(port, "GET", "/metrics")[1]
finished = sum(float(line.split()[-1]) for line in metrics.splitlines()
               if line.startswith("kiln:request_success_total{"))
check("metrics count the requests", finished == len(prompts) + 1, finished)
proc.terminate()
proc.wait(timeout=120)
log = open(os.path.join(work, "serve.log")).read()
check("the status line names the device", "(hip:gfx950, " in log, log[-2000:])
sys.exit(1 if check.failures else 0)
