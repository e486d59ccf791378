#!/usr/bin/env python3
"""Expert-parallel runs of the fixture against its single-rank artifact.

usage: check_ranks.py KILN_BIN FIXTURE_DIR WORK_DIR [--ep N ...]

Compiles the fixture once as one artifact and, for each N, with --ep N into
N rank artifacts; then, for every golden prompt whose greedy margin the
fixture's fragility data marks safe (top-1/top-2 gap >= 1e-3), runs
`mpirun -np N kiln-run` (spec 0 and the default spec) beside the
single-rank run and checks: last-position logits within relative L2 1e-5,
greedy tokens equal to the single rank's and to golden/greedy.json, only
rank 0 writing to stdout. Also checks each rank maps 1/N of the experts'
bytes (kiln-dump) plus the replicated rest, and that a wrong process count
or a single process is refused with a message naming both sides, that a
batch of concurrent requests (--batch-file) gives the single rank's tokens,
and that a rank killed or stopped mid-run ends the job, non-zero, within the
collective timeout.
Prints one line per check and exits 1 on any failure. mpirun runs on
loopback only, as root where needed, with --oversubscribe.
"""
import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpi_util import MPIRUN, mpi_env, rank_pid  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("kiln_bin")
ap.add_argument("fixture")
ap.add_argument("work")
ap.add_argument("--ep", type=int, action="append", default=[])
args = ap.parse_args()
eps = args.ep or [2]

ENV = mpi_env(30)
failures = 0


def report(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += 0 if ok else 1


def tool(name):
    return os.path.join(args.kiln_bin, name)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV,
                          timeout=120, **kw)


os.makedirs(args.work, exist_ok=True)
single = os.path.join(args.work, "one.kiln")
out = run([tool("kiln-compile"), args.fixture, "-o", single])
if out.returncode != 0:
    print("FAIL compile: " + out.stderr)
    sys.exit(1)

golden = os.path.join(args.fixture, "golden")
prompts = json.load(open(os.path.join(golden, "prompts.json")))
fragility = json.load(open(os.path.join(golden, "fragility.json")))
greedy = {g["name"]: g["greedy_ids"] for g in
          json.load(open(os.path.join(golden, "greedy.json")))["prompts"]}
safe = [p for p in prompts
        if fragility.get(p["name"], {}).get("greedy_min_top1_top2_gap", 0) >= 1e-3]


def kiln_run(launcher, artifact, prompt_file, logits, spec):
    cmd = launcher + [tool("kiln-run"), artifact, "--prompt-file", prompt_file,
                      "-n", "32", "--ignore-eos", "--threads", "1",
                      "--output-format=json", "--dump-logits", logits,
                      "--spec", spec]
    return run(cmd)


def expert_bytes(artifact):
    dump = json.loads(run([tool("kiln-dump"), artifact, "--weights"]).stdout)
    tensors = dump["weights"]["tensors"]
    experts = sum(w["bytes"] for w in tensors if "{e}" in w["name"])
    rest = sum(w["bytes"] for w in tensors
               if "{e}" not in w["name"] and "shared_experts" not in w["name"])
    return experts, rest


def compare(single_art, split_art, n, i, p, spec, what, gold=None):
    """Runs prompt p on the single artifact and under mpirun -np n on the
    split one; reports logits within rel L2 1e-5, equal greedy tokens (and
    equal to `gold` when given); returns the single run's logits."""
    prompt_file = os.path.join(args.work, f"p{i}.txt")
    with open(prompt_file, "w", encoding="utf-8") as f:
        f.write(p["text"])
    ref_logits = os.path.join(args.work, f"one{i}.npy")
    ep_logits = os.path.join(args.work, f"ep{n}_{i}.npy")
    ref = kiln_run([], single_art, prompt_file, ref_logits, spec)
    got = kiln_run(MPIRUN + ["-np", str(n)], split_art, prompt_file,
                   ep_logits, spec)
    if ref.returncode != 0 or got.returncode != 0:
        report(False, what + ": kiln-run failed: " +
               (ref.stderr + got.stderr).strip()[-400:])
        return None
    # Rank 0 alone prints: exactly one JSON document on stdout.
    try:
        a, b = json.loads(ref.stdout), json.loads(got.stdout)
    except ValueError:
        report(False, what + ": stdout is not one JSON document "
               "(did another rank print?)")
        return None
    la = np.load(ref_logits).astype(np.float64)
    lb = np.load(ep_logits).astype(np.float64)
    rel = float(np.linalg.norm(lb - la) / np.linalg.norm(la))
    golden_ok = gold is None or b["ids"][:len(gold)] == gold
    report(rel <= 1e-5 and b["ids"] == a["ids"] and golden_ok,
           f"{what}: logits rel L2 {rel:.1e}, greedy "
           f"{'equal' if b['ids'] == a['ids'] else 'DIFFERENT'}" +
           ("" if gold is None else
            f", golden {'equal' if golden_ok else 'DIFFERENT'}"))
    return la


one_experts, one_rest = expert_bytes(single)
for n in eps:
    base = os.path.join(args.work, f"ep{n}.kiln")
    out = run([tool("kiln-compile"), args.fixture, "--ep", str(n), "-o", base])
    if out.returncode != 0:
        report(False, f"ep {n}: compile: {out.stderr.strip()}")
        continue
    for r in range(n):
        experts, rest = expert_bytes(base.replace(".kiln", f".rank{r}.kiln"))
        report(experts * n == one_experts and rest == one_rest,
               f"ep {n} rank {r}: expert bytes {experts} = 1/{n} of "
               f"{one_experts}, replicated bytes {rest} (single: {one_rest})")
    for i, p in enumerate(safe):
        for spec in ("0", "3"):
            compare(single, base, n, i, p, spec,
                    f"ep {n} {p['name']} spec {spec}",
                    greedy[p["name"]][:32])

# Wrong process counts are refused, naming both sides.
base = os.path.join(args.work, f"ep{eps[0]}.kiln")
prompt = ["-p", "def f(x):", "-n", "2"]
alone = run([tool("kiln-run"), base] + prompt)
report(alone.returncode == 1 and
       f"run it with mpirun -np {eps[0]}" in alone.stderr,
       "one process on an expert-parallel artifact: " + alone.stderr.strip())
direct = run([tool("kiln-run"), base.replace(".kiln", ".rank1.kiln")] + prompt)
report(direct.returncode == 1 and
       f"compiled as rank 1 of {eps[0]} expert-parallel ranks" in
       direct.stderr and "this process is rank 0 of 1" in direct.stderr,
       "one process on a rank artifact: " + direct.stderr.strip())
wrong = run(MPIRUN + ["-np", str(eps[0] * 2), tool("kiln-run"), base] + prompt)
report(wrong.returncode != 0 and
       f"compiled for {eps[0]} expert-parallel ranks" in wrong.stderr and
       f"this run has {eps[0] * 2}" in wrong.stderr,
       f"{eps[0] * 2} processes on an --ep {eps[0]} artifact: exit "
       f"{wrong.returncode}")
# Every token routed to rank 0's experts: the fixture with the selection bias
# of experts E/2..E-1 at -1000 in every MoE layer (sigmoid scores are in
# [0, 1], so those experts are never among the top k). Under --ep 2 rank 1's
# routed experts then get no pairs at all: its share of each MoE is the
# empty sum, and the result must still equal the single rank's.
biased = os.path.join(args.work, "rank0-experts")
shutil.copytree(args.fixture, biased, dirs_exist_ok=True)
st = os.path.join(biased, "model.safetensors")
with open(st, "r+b") as f:
    size = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(size))
    for name, t in header.items():
        if name.endswith("e_score_correction_bias"):
            begin, end = t["data_offsets"]
            f.seek(8 + size + begin)
            bias = np.frombuffer(f.read(end - begin), dtype="<f4").copy()
            bias[len(bias) // 2:] = -1000.0
            f.seek(8 + size + begin)
            f.write(bias.tobytes())
b_single = os.path.join(args.work, "biased.kiln")
b_split = os.path.join(args.work, "biased-ep2.kiln")
built = [run([tool("kiln-compile"), biased, "-o", b_single]),
         run([tool("kiln-compile"), biased, "--ep", "2", "-o", b_split])]
if any(b.returncode for b in built):
    report(False, "rank-0 experts: compile: " +
           " ".join(b.stderr for b in built)[-400:])
else:
    biased_logits = None
    for spec in ("0", "3"):
        la = compare(b_single, b_split, 2, 0, safe[0], spec,
                     f"every token routed to rank 0's experts, spec {spec}")
        biased_logits = la if biased_logits is None else biased_logits
    # The bias did change the routing: not the original model's logits.
    orig = os.path.join(args.work, "orig0.npy")
    kiln_run([], single, os.path.join(args.work, "p0.txt"), orig, "0")
    if biased_logits is not None and os.path.exists(orig):
        change = float(np.abs(np.load(orig) - biased_logits).max())
        report(change > 1e-3, "the biased fixture routes differently from "
               f"the original (max logit change {change:.3f})")

# A batch of concurrent requests: the engine's batched plans on every rank.
n = eps[0]
base = os.path.join(args.work, f"ep{n}.kiln")
batch = os.path.join(args.work, "batch.jsonl")
with open(batch, "w") as f:
    for i, p in enumerate(safe * 2):
        f.write(json.dumps({"id": str(i), "prompt": p["text"],
                            "max_tokens": 48, "ignore_eos": True}) + "\n")


def batch_ids(launcher, artifact, out):
    r = run(launcher + [tool("kiln-run"), artifact, "--batch-file", batch,
                        "-o", out, "--threads", "1"])
    if r.returncode != 0:
        return None, r.stderr
    return [json.loads(line)["ids"] for line in open(out)], ""


one_ids, e1 = batch_ids([], single, os.path.join(args.work, "b1.jsonl"))
ep_ids, e2 = batch_ids(MPIRUN + ["-np", str(n)], base,
                       os.path.join(args.work, "b2.jsonl"))
report(one_ids is not None and one_ids == ep_ids,
       f"ep {n} batch of {len(safe) * 2} concurrent requests: "
       + ("tokens equal to the single rank's" if one_ids == ep_ids
          else "DIFFERENT " + (e1 + e2)[-300:]))


# kiln-bench under mpirun: rank 0 prints each rank's compute and
# communication time per step.
bench = run(MPIRUN + ["-np", str(n), tool("kiln-bench"), base, "--profile",
                      "--results", os.devnull, "--decode-tokens", "8"])
rows = [line.split() for line in bench.stdout.splitlines()]
ranks_seen = [r[0] for r in rows if len(r) == 3 and r[0].isdigit()]
report(bench.returncode == 0 and
       "communication us/step" in bench.stdout and
       ranks_seen[:n] == [str(r) for r in range(n)],
       f"kiln-bench --profile under mpirun -np {n}: per-rank compute and "
       f"communication rows for ranks {ranks_seen[:n]}")


# A rank that dies (SIGKILL) or hangs (SIGSTOP) mid-run: the job ends,
# non-zero, within the collective timeout (3 s here) plus slack.
long_batch = os.path.join(args.work, "long.jsonl")
with open(long_batch, "w") as f:
    for i in range(24):
        f.write(json.dumps({"prompt": f"def f{i}(x):", "max_tokens": 1500,
                            "ignore_eos": True}) + "\n")
for sig, name in ((signal.SIGKILL, "killed"), (signal.SIGSTOP, "stopped")):
    env = mpi_env(3)
    job = subprocess.Popen(MPIRUN + ["-np", "2", tool("kiln-run"),
                                     os.path.join(args.work, "ep2.kiln"),
                                     "--batch-file", long_batch, "-o",
                                     os.devnull, "--threads", "1"],
                           env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    victim = None
    for _ in range(100):
        time.sleep(0.1)
        victim = rank_pid("kiln-run", 1, job.pid)
        if victim:
            break
    time.sleep(1.5)  # mid-run
    if victim is None or job.poll() is not None:
        job.kill()
        report(False, f"rank 1 {name}: no running rank 1 to stop")
        continue
    start = time.time()
    os.kill(victim, sig)
    try:
        _, err = job.communicate(timeout=30)
        took = time.time() - start
        report(job.returncode != 0 and took < 3 + 10,
               f"rank 1 {name} mid-run: the job exited {job.returncode} "
               f"after {took:.1f} s")
    except subprocess.TimeoutExpired:
        job.kill()
        if victim:
            try:
                os.kill(victim, signal.SIGKILL)
            except OSError:
                pass
        job.communicate()
        report(False, f"rank 1 {name} mid-run: the job still ran after 30 s")

sys.exit(1 if failures else 0)
