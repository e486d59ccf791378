#!/usr/bin/env python3
"""Each rank's share of the full-size GLM-5.2 under --tp/--ep, from its config.

usage: check_memory.py KILN_BIN CONFIG_JSON WORK_DIR

Runs `kiln-compile DIR --config-only --emit=memory` (MXFP4 routed experts,
bf16 KV cache: the reference deployment's form) with --tp 1, --tp 8,
--tp 4 --ep 2 and --ep 8, parses every rank's report and checks, against
the single rank's: routed experts 1/(T x E) on every rank; dense MLPs 1/T;
the shared expert 1/T on the first expert group and absent on the others;
MLA attention S/T + R with the same split part S and replicated part R for
T = 4 and 8; indexer, embedding, head and the rest whole; the KV cache per
token the same on every rank (MLA's one latent head is not split); one
rank of the single artifact does not fit a 288 GB MI355X while every
8-rank share does. Prints one line per layout and per check; exit 1 on a
failure.
"""
import os
import re
import shutil
import subprocess
import sys

kiln_bin, config, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
shutil.copy(config, os.path.join(work, "config.json"))
failures = 0


def report(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += 0 if ok else 1


def memory(tp, ep):
    """Per rank: {group: bytes}, with 'weights', 'kv' and 'fits'."""
    out = subprocess.run(
        [os.path.join(kiln_bin, "kiln-compile"), work, "--config-only",
         "--tp", str(tp), "--ep", str(ep), "--quantize=mxfp4",
         "--kv-cache-type=bf16", "--emit=memory"],
        capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        report(False, f"--tp {tp} --ep {ep}: {out.stderr.strip()[-300:]}")
        return []
    ranks = []
    for line in out.stdout.splitlines():
        if line.startswith("kiln-report-memory:"):
            ranks.append({})
            continue
        m = re.match(r"\s+(.+?)\s+(\d+) B", line)
        if m:
            key = "kv" if m.group(1) == "KV cache per token" else m.group(1)
            ranks[-1][key] = int(m.group(2))
        if "on a device of" in line:
            ranks[-1]["fits"] = "do not fit" not in line
    return ranks


one = memory(1, 1)
layouts = {(8, 1): memory(8, 1), (4, 2): memory(4, 2), (1, 8): memory(1, 8)}
if not one or any(not r for r in layouts.values()):
    sys.exit(1)
single = one[0]
report(not single["fits"], f"one rank: {single['weights'] / 1e9:.1f} GB of "
       "weights do not fit 288 GB")


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1)


attention = {}
for (tp, ep), ranks in layouts.items():
    name = f"--tp {tp} --ep {ep}"
    report(len(ranks) == tp * ep, f"{name}: {len(ranks)} rank reports")
    for r, got in enumerate(ranks):
        shared = single["shared experts"] / tp if r // tp == 0 else 0
        want = {"routed experts": single["routed experts"] / (tp * ep),
                "dense MLPs": single["dense MLPs"] / tp,
                "indexer": single["indexer"],
                "embedding and head": single["embedding and head"],
                "other": single["other"], "kv": single["kv"]}
        bad = [k for k, v in want.items() if not close(got.get(k, 0), v)]
        bad += [] if close(got.get("shared experts", 0), shared) else \
            ["shared experts"]
        report(not bad and got["fits"],
               f"{name} rank {r}: {got['weights'] / 1e9:.3f} GB of weights "
               f"(experts {got['routed experts'] / 1e9:.3f}, attention "
               f"{got['attention (MLA)'] / 1e9:.3f}), KV {got['kv']} B per "
               f"token" + (f"; wrong: {bad}" if bad else ""))
        attention.setdefault(tp, set()).add(got["attention (MLA)"])
# MLA attention: A_T = S / T + R. T = 4 and 8 give S and R; T = 1 and 8
# must agree with them.
a1, a4, a8 = single["attention (MLA)"], attention[4].pop(), attention[8].pop()
split = 8 * (a4 - a8)
rest = a1 - split
report(split > 0 and rest >= 0 and close(a8, split / 8 + rest) and
       attention[4] == set() and attention[8] == set(),
       f"attention: {split / 1e9:.3f} GB split by heads (q_b, kv_b, o), "
       f"{rest / 1e9:.3f} GB replicated (q_a, kv_a, norms)")
sys.exit(1 if failures else 0)
