#!/usr/bin/env python3
"""kiln-run --batch-file against single-request runs and the golden tokens.

usage: check_batch.py KILN_RUN ARTIFACT FIXTURE_DIR WORKDIR [kiln-run args...]

Writes 16 requests (the golden prompts; prefixes of the eval text of mixed
lengths, several sharing a 130-token prefix; two repeats of a golden prompt)
plus one malformed line, runs them concurrently with `kiln-run --batch-file`
(the extra arguments added), and checks: results come in input order with
their ids; every golden prompt gives its golden greedy tokens; every other
request gives exactly the tokens `kiln-run --prompt-ids` gives it alone; the
malformed line is reported with its line number and the others still run.
Prints one line per request and exits 1 on any failure.
"""
import json
import os
import subprocess
import sys

import numpy as np

kiln_run, artifact, fixture, work = sys.argv[1:5]
extra = sys.argv[5:]
golden = os.path.join(fixture, "golden")
prompts = json.load(open(os.path.join(golden, "prompts.json")))
greedy = json.load(open(os.path.join(golden, "greedy.json")))["prompts"]
text = np.load(os.path.join(golden, "eval_tokens.npy")).astype(int).tolist()

requests = []  # (request, golden ids or None)
for p, g in zip(prompts, greedy):
    requests.append(({"id": p["name"], "prompt_ids": p["token_ids"],
                      "max_tokens": 64, "ignore_eos": True}, g["greedy_ids"]))
shared = text[:130]
for i in range(9):
    length = [3, 17, 64, 65, 140, 200, 260, 333, 410][i]
    ids = shared + text[1000 + 50 * i:1000 + 50 * i + length] if i % 2 else \
        text[2000 + 97 * i:2000 + 97 * i + length]
    requests.append(({"id": "mixed_%d" % i, "prompt_ids": ids,
                      "max_tokens": 5 + 7 * i, "ignore_eos": True}, None))
for name in ("code_24", "chat"):
    p = next(r for r, _ in requests if r["id"] == name)
    g = next(g for r, g in requests if r["id"] == name)
    requests.append((dict(p, id=name + "_again"), g))
assert len(requests) == 16

lines = [json.dumps(r) for r, _ in requests]
lines.insert(7, '{"prompt_ids": [1, 2,')  # line 8: malformed
batch = os.path.join(work, "requests.jsonl")
out = os.path.join(work, "results.jsonl")
with open(batch, "w") as f:
    f.write("\n".join(lines) + "\n")

run = subprocess.run([kiln_run, artifact, "--batch-file", batch, "-o", out]
                     + extra, capture_output=True, text=True)
print(run.stderr, file=sys.stderr)
failures = 0
if run.returncode != 1:  # 1: a line was malformed
    print("FAIL exit code %d, expected 1" % run.returncode)
    failures += 1
if "requests.jsonl:8: not valid JSON" not in run.stderr:
    print("FAIL the malformed line 8 is not reported by number")
    failures += 1
results = [json.loads(l) for l in open(out)]
if len(results) != 17 or "error" not in results[7]:
    print("FAIL expected 17 results with an error at line 8")
    sys.exit(1)
results.pop(7)


def alone(req):
    cmd = [kiln_run, artifact, "--prompt-ids",
           ",".join(str(t) for t in req["prompt_ids"]), "-n",
           str(req["max_tokens"]), "--ignore-eos", "--spec", "0",
           "--output-format", "json"]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                      check=True).stdout)["ids"]


for (req, gold), res in zip(requests, results):
    want = gold if gold is not None else alone(req)
    ok = res.get("id") == req["id"] and res.get("ids") == want and \
        res.get("prompt_ids") == req["prompt_ids"] and \
        res.get("finish_reason") == "length"
    kind = "golden" if gold is not None else "alone"
    print("%s %-14s %3d tokens vs %s, cached %d" %
          ("ok  " if ok else "FAIL", req["id"], len(res.get("ids", [])), kind,
           res.get("cached_tokens", -1)))
    failures += not ok
sys.exit(1 if failures else 0)
