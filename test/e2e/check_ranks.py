#!/usr/bin/env python3
"""Multi-rank runs of the fixture against its single-rank artifact.

usage: check_ranks.py KILN_BIN FIXTURE_DIR WORK_DIR [--ep N ...] [--tp T,E ...]
                      [--dp [T,]N ...]

Compiles the fixture once as one artifact and, for each --ep N, with --ep N
into N rank artifacts (for each --tp T,E: --tp T --ep E into T x E; for
each --dp [T,]N: [--tp T] --ep N --dp-attention, where one prompt is the
first group's alone and the others join its steps with no tokens, and a
batch is split between the groups); then,
for every golden prompt whose greedy margin the
fixture's fragility data marks safe (top-1/top-2 gap >= 1e-3), runs
`mpirun -np N kiln-run` (spec 0 and the default spec) beside the
single-rank run and checks: last-position logits within relative L2 1e-5,
greedy tokens equal to the single rank's and to golden/greedy.json, only
rank 0 writing to stdout. Also checks each rank maps its share of the
split weights' bytes (kiln-dump): 1/N of the experts under --ep N; under
--tp T 1/T of the attention heads' q_b/kv_b/o projections, of the dense
MLPs and of each expert's columns; the replicated rest whole. With --ep: that a wrong process count
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
import re
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
ap.add_argument("--tp", action="append", default=[],
                help="T,E: tensor parallel T beside expert parallel E")
ap.add_argument("--dp", action="append", default=[],
                help="N or T,N: [--tp T] --ep N --dp-attention (each group "
                "of T ranks its own requests)")
ap.add_argument("--moe-exchange", default="gather",
                help="with --dp: kiln-compile --moe-exchange (all-to-all: "
                "each rank holds the shared expert and runs it for its own "
                "rows; also checks every token routed to rank 0's experts)")
ap.add_argument("--compile-args", default="",
                help="more kiln-compile flags, for every artifact (the "
                "golden-token check is then skipped)")
args = ap.parse_args()
eps = args.ep
layouts = [(1, n, False) for n in eps] + \
    [tuple(int(x) for x in t.split(",")) + (False,) for t in args.tp] + \
    [tuple(int(x) for x in ("1," + d if "," not in d else d).split(",")) +
     (True,) for d in args.dp]

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
EXTRA = args.compile_args.split()
out = run([tool("kiln-compile"), args.fixture, "-o", single] + EXTRA)
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


def compare(single_art, split_art, n, i, p, spec, what, gold=None,
            launcher=None):
    """Runs prompt p on the single artifact and under mpirun -np n (or
    `launcher`) on the split one; reports logits within rel L2 1e-5, equal
    greedy tokens (and equal to `gold` when given); returns the single run's
    logits."""
    prompt_file = os.path.join(args.work, f"p{i}.txt")
    with open(prompt_file, "w", encoding="utf-8") as f:
        f.write(p["text"])
    ref_logits = os.path.join(args.work, f"one{i}.npy")
    ep_logits = os.path.join(args.work, f"ep{n}_{i}.npy")
    ref = kiln_run([], single_art, prompt_file, ref_logits, spec)
    got = kiln_run(launcher or MPIRUN + ["-np", str(n)], split_art,
                   prompt_file, ep_logits, spec)
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


# Weights tensor parallelism splits (kiln-partition-tensor): MLA's q_b, kv_b
# and o projections, the dense MLPs; experts are split by both.
TP_SPLIT = ("self_attn.q_b_proj.", "self_attn.kv_b_proj.", "self_attn.o_proj.",
            "self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj.",
            "mlp.gate_proj.", "mlp.up_proj.", "mlp.down_proj.")


def dequantized_source(source):
    """Whether kiln-dump's `source` of a weight says it is stored as f32
    from quantized bytes: FP8 or Quark MXFP4 values times their scales, or
    Kiln's MXFP4 quantization dequantized."""
    return source.endswith("->F32") and ("scales" in source or
                                         "mxfp4" in source)


def weight_parts(artifact):
    """Bytes and values of the experts, the shared experts, the tensor-split
    weights and the replicated rest, and how many weights are FP8 stored as
    f32 (a rank's slice cut their FP8 or MXFP4 blocks: their bytes are not
    a share of the quantized bytes, their values are)."""
    dump = json.loads(run([tool("kiln-dump"), artifact, "--weights"]).stdout)
    parts = {unit: {"experts": 0, "shared": 0, "split": 0, "rest": 0}
             for unit in ("bytes", "values")}
    dequantized = 0
    for w in dump["weights"]["tensors"]:
        name = w["name"]
        kind = ("experts" if "{e}" in name else
                "shared" if "shared_experts" in name else
                "split" if any(k in name for k in TP_SPLIT) else "rest")
        parts["bytes"][kind] += w["bytes"]
        parts["values"][kind] += w["params"]
        dequantized += dequantized_source(w.get("source", ""))
    return parts, dequantized


A2A = args.moe_exchange == "all-to-all"


def layout_name(tp, ep, dp):
    if dp:
        return f"dp-attention {ep}" + ("" if tp == 1 else f" tp {tp}") + \
            (" all-to-all" if A2A else "")
    return f"ep {ep}" if tp == 1 else f"tp {tp}" + ("" if ep == 1 else
                                                     f" ep {ep}")


def layout_args(tp, ep, dp):
    return (["--ep", str(ep)] + (["--tp", str(tp)] if tp > 1 else []) +
            (["--dp-attention"] if dp else []) +
            (["--moe-exchange", args.moe_exchange] if dp and A2A else []))


whole, _ = weight_parts(single)
for tp, ep, dp in layouts:
    n, name = tp * ep, layout_name(tp, ep, dp)
    base = os.path.join(args.work, name.replace(" ", "") + ".kiln")
    out = run([tool("kiln-compile"), args.fixture, "-o", base] +
              layout_args(tp, ep, dp) + EXTRA)
    if out.returncode != 0:
        report(False, f"{name}: compile: {out.stderr.strip()}")
        continue
    for r in range(n):
        rank_art = base.replace(".kiln", f".rank{r}.kiln")
        parts, f32 = weight_parts(rank_art)
        unit = "values" if f32 else "bytes"
        ref, got = whole[unit], parts[unit]
        # Rank r holds experts share r // tp of ep, columns share r % tp;
        # the shared expert on the first group, or (all-to-all) on every
        # rank, for its own rows.
        want = {"experts": ref["experts"] / n,
                "shared": ref["shared"] / tp if r // tp == 0 or
                (dp and A2A) else 0,
                "split": ref["split"] / tp, "rest": ref["rest"]}
        report(got == want,
               f"{name} rank {r}: expert {unit} {got['experts']} = 1/{n} of "
               f"{ref['experts']}, shared {got['shared']}, head/MLP {unit} "
               f"{got['split']} = 1/{tp} of {ref['split']}, replicated "
               f"{unit} {got['rest']} (single: {ref['rest']})"
               + (f" ({f32} quantized weights cut mid-block, stored as "
                  "f32)"
                  if f32 else "")
               + ("" if got == want else f"; expected {want}"))
    for i, p in enumerate(safe):
        for spec in ("0", "3"):
            # Golden tokens are the checkpoint's own: with other compile
            # flags (quantization) the single rank is the reference.
            compare(single, base, n, i, p, spec,
                    f"{name} {p['name']} spec {spec}",
                    None if EXTRA else greedy[p["name"]][:32])

# A batch of concurrent requests: the engine's batched plans on every rank.
batch = os.path.join(args.work, "batch.jsonl")
with open(batch, "w") as f:
    for i, p in enumerate(safe * 2):
        # Lengths that differ between the requests data-parallel ranks
        # take (i % 2), so one rank runs out of work before the other.
        f.write(json.dumps({"id": str(i), "prompt": p["text"],
                            "max_tokens": 48 if i % 2 == 0 else 20,
                            "ignore_eos": True}) + "\n")


def batch_ids(launcher, artifact, out, dp=False, ranks=2):
    r = run(launcher + [tool("kiln-run"), artifact, "--batch-file", batch,
                        "-o", out, "--threads", "1"])
    if r.returncode != 0:
        return None, r.stderr
    if dp:
        # Each rank ran its own requests and joined the others' calls.
        shares = re.findall(r"rank (\d+) of \d+: (\d+) request\(s\) of its "
                            r"own, (\d+) plan call\(s\) of other ranks", r.stderr)
        report(len(shares) == ranks and all(int(s[1]) > 0 for s in shares)
               and any(int(s[2]) > 0 for s in shares),
               "data-parallel ranks (rank, own requests, idle plan calls): "
               + str(sorted(shares)))
    return [json.loads(line)["ids"] for line in open(out)], ""


one_ids, e1 = batch_ids([], single, os.path.join(args.work, "b1.jsonl"))
# Under data-parallel attention each rank runs its own share of the
# requests (different sets, one rank idle at times).
batch_layouts = layouts[:1] + [t for t in layouts if t[0] > 1][:1] + \
    [t for t in layouts if t[2]]
for tp, ep, dp in dict.fromkeys(batch_layouts):
    name = layout_name(tp, ep, dp)
    base = os.path.join(args.work, name.replace(" ", "") + ".kiln")
    split_ids, e2 = batch_ids(MPIRUN + ["-np", str(tp * ep)], base,
                              os.path.join(args.work, "b2.jsonl"), dp,
                              tp * ep)
    report(one_ids is not None and one_ids == split_ids,
           f"{name} batch of {len(safe) * 2} concurrent requests: "
           + ("tokens equal to the single rank's" if one_ids == split_ids
              else "DIFFERENT " + (e1 + e2)[-300:]))

# Every token routed to rank 0's experts: the fixture with the selection bias
# of experts E/2..E-1 at -1000 in every MoE layer (sigmoid scores are in
# [0, 1], so those experts are never among the top k). Under 2 expert shares
# rank 1's routed experts then get no pairs at all: its share of each MoE is
# the empty sum (all-to-all: no rank sends it a row, it sends its own rows
# to rank 0), and the result must still equal the single rank's.
def check_rank0_experts(split_args, name):
    biased = os.path.join(args.work, "rank0-experts")
    shutil.copytree(args.fixture, biased, dirs_exist_ok=True)
    st = os.path.join(biased, "model.safetensors")
    with open(st, "r+b") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        for wname, t in header.items():
            if wname.endswith("e_score_correction_bias"):
                begin, end = t["data_offsets"]
                f.seek(8 + size + begin)
                bias = np.frombuffer(f.read(end - begin), dtype="<f4").copy()
                bias[len(bias) // 2:] = -1000.0
                f.seek(8 + size + begin)
                f.write(bias.tobytes())
    b_single = os.path.join(args.work, "biased.kiln")
    b_split = os.path.join(args.work, "biased-split.kiln")
    built = [run([tool("kiln-compile"), biased, "-o", b_single]),
             run([tool("kiln-compile"), biased, "-o", b_split] + split_args)]
    if any(b.returncode for b in built):
        report(False, "rank-0 experts: compile: " +
               " ".join(b.stderr for b in built)[-400:])
        return
    biased_logits = None
    for spec in ("0", "3"):
        la = compare(b_single, b_split, 2, 0, safe[0], spec,
                     f"{name}every token routed to rank 0's experts, "
                     f"spec {spec}")
        biased_logits = la if biased_logits is None else biased_logits
    # The bias did change the routing: not the original model's logits.
    orig = os.path.join(args.work, "orig0.npy")
    kiln_run([], single, os.path.join(args.work, "p0.txt"), orig, "0")
    if biased_logits is not None and os.path.exists(orig):
        change = float(np.abs(np.load(orig) - biased_logits).max())
        report(change > 1e-3, "the biased fixture routes differently from "
               f"the original (max logit change {change:.3f})")
    if "--dp-attention" in split_args:
        # Both ranks with requests of their own: rank 1 sends all its rows
        # to rank 0 and receives none.
        a, e1 = batch_ids([], b_single, os.path.join(args.work, "bb1.jsonl"))
        b, e2 = batch_ids(MPIRUN + ["-np", "2"], b_split,
                          os.path.join(args.work, "bb2.jsonl"))
        report(a is not None and a == b,
               f"{name}every token routed to rank 0's experts, batch of "
               f"{len(safe) * 2} concurrent requests: " +
               ("tokens equal to the single rank's" if a == b
                else "DIFFERENT " + (e1 + e2)[-300:]))


def kill_ranks(artifact, what):
    """A rank that dies (SIGKILL) or hangs (SIGSTOP) mid-run: the job ends,
    non-zero, within the collective timeout (3 s here) plus slack."""
    long_batch = os.path.join(args.work, "long.jsonl")
    with open(long_batch, "w") as f:
        for i in range(24):
            f.write(json.dumps({"prompt": f"def f{i}(x):", "max_tokens": 1500,
                                "ignore_eos": True}) + "\n")
    for sig, name in ((signal.SIGKILL, "killed"), (signal.SIGSTOP, "stopped")):
        env = mpi_env(3)
        job = subprocess.Popen(MPIRUN + ["-np", "2", tool("kiln-run"),
                                         artifact,
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
            report(False, f"{what}rank 1 {name}: no running rank 1 to stop")
            continue
        start = time.time()
        os.kill(victim, sig)
        try:
            _, err = job.communicate(timeout=30)
            took = time.time() - start
            report(job.returncode != 0 and took < 3 + 10,
                   f"{what}rank 1 {name} mid-run: the job exited "
                   f"{job.returncode} after {took:.1f} s")
        except subprocess.TimeoutExpired:
            job.kill()
            if victim:
                try:
                    os.kill(victim, signal.SIGKILL)
                except OSError:
                    pass
            job.communicate()
            report(False, f"{what}rank 1 {name} mid-run: the job still ran "
                   "after 30 s")


if not eps:
    if args.dp and "," not in args.dp[0]:
        n = int(args.dp[0])
        name = layout_name(1, n, True)
        dp_art = os.path.join(args.work, name.replace(" ", "") + ".kiln")
        if A2A and n == 2:
            check_rank0_experts(layout_args(1, 2, True), name + ": ")
        kill_ranks(dp_art, name + ": ")
    sys.exit(1 if failures else 0)

# Wrong process counts are refused, naming both sides.
base = os.path.join(args.work, f"ep{eps[0]}.kiln")
prompt = ["-p", "def f(x):", "-n", "2"]
alone = run([tool("kiln-run"), base] + prompt)
report(alone.returncode == 1 and
       f"run it with mpirun -np {eps[0]}" in alone.stderr,
       "one process on an expert-parallel artifact: " + alone.stderr.strip())
direct = run([tool("kiln-run"), base.replace(".kiln", ".rank1.kiln")] + prompt)
report(direct.returncode == 1 and
       f"compiled as rank 1 of {eps[0]} ranks" in
       direct.stderr and "this process is rank 0 of 1" in direct.stderr,
       "one process on a rank artifact: " + direct.stderr.strip())
wrong = run(MPIRUN + ["-np", str(eps[0] * 2), tool("kiln-run"), base] + prompt)
report(wrong.returncode != 0 and
       f"compiled for {eps[0]} ranks" in wrong.stderr and
       f"this run has {eps[0] * 2}" in wrong.stderr,
       f"{eps[0] * 2} processes on an --ep {eps[0]} artifact: exit "
       f"{wrong.returncode}")
check_rank0_experts(["--ep", "2"], "")

# Across machines: the job as docs/comm.md runs it on several hosts, from a
# hostfile, the ranks talking over TCP (no shared memory), here with this
# host as the only line.
hostfile = os.path.join(args.work, "hosts")
with open(hostfile, "w") as f:
    f.write(f"localhost slots={eps[0]}\n")
compare(single, os.path.join(args.work, f"ep{eps[0]}.kiln"), eps[0], 0,
        safe[0], "0", f"ep {eps[0]} from a hostfile over TCP",
        launcher=[MPIRUN[0], "--hostfile", hostfile, "-np", str(eps[0]),
                  "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include",
                  "lo", "--mca", "oob_tcp_if_include", "lo"])

n = eps[0]
base = os.path.join(args.work, f"ep{n}.kiln")


# kiln-bench under mpirun: rank 0 prints each rank's compute and
# communication time per step.
bench = run(MPIRUN + ["-np", str(n), tool("kiln-bench"), base, "--profile",
                      "--results", os.devnull, "--decode-tokens", "8"])
rows = [line.split() for line in bench.stdout.splitlines()]
ranks_seen = [r[0] for r in rows if len(r) == 4 and r[0].isdigit()]
report(bench.returncode == 0 and
       "communication us/step" in bench.stdout and
       "sent to peers KB/step" in bench.stdout and
       ranks_seen[:n] == [str(r) for r in range(n)],
       f"kiln-bench --profile under mpirun -np {n}: per-rank compute, "
       f"communication and bytes-sent rows for ranks {ranks_seen[:n]}")


kill_ranks(os.path.join(args.work, "ep2.kiln"), "")
sys.exit(1 if failures else 0)
