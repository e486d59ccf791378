#!/usr/bin/env python3
"""Speculative decoding on the golden prompts of a fixture.

usage: check_spec.py KILN_RUN ARTIFACT FIXTURE_DIR [--threads N] [--max-k K]

For k = 1..K (default 5), greedy generation of 64 tokens with `--spec k`
must equal the golden greedy tokens for every prompt. For the depths the
golden metrics record (1..3), the mean accepted drafts per round over all
prompts (accepted drafts / rounds, the bonus token not counted) must be
within 10% of golden/metrics.json's golden_prompts_depth<k>. Exits 1 on a
failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("kiln_run")
ap.add_argument("artifact")
ap.add_argument("fixture")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--max-k", type=int, default=5)
args = ap.parse_args()

golden = os.path.join(args.fixture, "golden")
prompts = json.load(open(os.path.join(golden, "prompts.json")))
greedy = {g["name"]: g["greedy_ids"]
          for g in json.load(open(os.path.join(golden, "greedy.json")))["prompts"]}
metrics = json.load(open(os.path.join(golden, "metrics.json")))["mtp"]

failures = 0
with tempfile.TemporaryDirectory() as tmp:
    for k in range(1, args.max_k + 1):
        accepted = rounds = 0
        mismatches = []
        for i, p in enumerate(prompts):
            path = os.path.join(tmp, f"p{i}.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(p["text"])
            cmd = [args.kiln_run, args.artifact, "--prompt-file", path, "-n",
                   str(len(greedy[p["name"]])), "--ignore-eos", "--spec", str(k),
                   "--threads", str(args.threads), "--output-format=json"]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"FAIL k={k} {p['name']}: {out.stderr.strip()}")
                failures += 1
                continue
            r = json.loads(out.stdout)
            if r["ids"] != greedy[p["name"]]:
                mismatches.append(p["name"])
            s = r["stats"]["spec"]
            accepted += s["mean_accepted"] * s["rounds"]
            rounds += s["rounds"]
        mean = accepted / rounds if rounds else 0.0
        line = f"k={k}: greedy equal on {len(prompts) - len(mismatches)}/{len(prompts)} prompts, mean accepted {mean:.4f} over {rounds} rounds"
        ok = not mismatches
        ref = metrics.get(f"golden_prompts_depth{k}")
        if ref:
            g = ref["mean_accepted_drafts_per_round"]
            rel = abs(mean - g) / g
            line += f" (golden {g:.4f}, {100 * rel:.1f}% off)"
            ok = ok and rel <= 0.10
        if mismatches:
            line += " mismatches: " + ", ".join(mismatches)
        print(("ok   " if ok else "FAIL ") + line)
        failures += 0 if ok else 1
sys.exit(1 if failures else 0)
