#!/usr/bin/env python3
"""kiln-serve under `mpirun -np 2` on an expert-parallel artifact.

usage: check_serve_mpi.py KILN_BIN FIXTURE_DIR WORKDIR [LAYOUT_FLAGS]

Compiles the fixture once as one artifact and once with LAYOUT_FLAGS
(default "--ep 2"; any 2-rank layout, e.g. "--tp 2"), starts
`mpirun -np 2 kiln-serve` on a free loopback port (collective timeout 3 s)
and checks, through http.client: greedy completions of the golden prompts
the fixture's fragility data marks safe equal single-rank kiln-run, alone
and 16 at once; streamed equals whole; a client that vanishes mid-stream
frees its pages on every rank (the next answers still agree); idle longer
than the collective timeout, the job still serves (rank 0's heartbeats);
SIGTERM to rank 0 drains and the whole job exits 0. Then a rank 1 killed or
stopped while a request runs ends the job, non-zero, within the timeout (the
stopped case answering its running request with an error first), and
a launch with the wrong process count ends at once naming both counts.
With LAYOUT_FLAGS given, only the equality checks run (up to SIGTERM), on
tp x ep ranks; with --dp-attention the first rank of the second group must
also have run requests of its own (placed there by rank 0), and on 2 ranks
every check runs.
Prints one line per check; exits 1 on failure.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpi_util import MPIRUN, mpi_env, rank_pid  # noqa: E402
from serve_util import (Checks, metric, raw_post,  # noqa: E402
                        read_until_closed, request, start_server)

kiln_bin, fixture, work = sys.argv[1:4]
layout = sys.argv[4].split() if len(sys.argv) > 4 else ["--ep", "2"]


def flag(name):
    return int(layout[layout.index(name) + 1]) if name in layout else 1


# Ranks per data-parallel group (--tp) and in all.
TP = flag("--tp")
NP = TP * flag("--ep")
TIMEOUT_S = 3
ENV = mpi_env(TIMEOUT_S)
check = Checks()


def tool(name):
    return os.path.join(kiln_bin, name)


single = os.path.join(work, "one.kiln")
split = os.path.join(work, "ep2.kiln")
for cmd in ([tool("kiln-compile"), fixture, "-o", single],
            [tool("kiln-compile"), fixture, "-o", split] + layout):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("compile failed: " + out.stderr)

golden = os.path.join(fixture, "golden")
prompts = json.load(open(os.path.join(golden, "prompts.json")))
fragility = json.load(open(os.path.join(golden, "fragility.json")))
safe = [p for p in prompts
        if fragility.get(p["name"], {}).get("greedy_min_top1_top2_gap", 0) >= 1e-3]
greedy = {"max_tokens": 32, "temperature": 0, "ignore_eos": True}


def kiln_run_text(ids):
    out = subprocess.run([tool("kiln-run"), single, "--prompt-ids",
                          ",".join(map(str, ids)), "-n", "32", "--ignore-eos",
                          "--output-format", "json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["text"]


def start():
    return start_server(tool("kiln-serve"), split, work, "--threads", "1",
                        launcher=MPIRUN + ["-np", str(NP)], env=ENV,
                        log_name="serve-mpi.log")


def completion(port, p):
    s, r = request(port, "POST", "/v1/completions",
                   dict(greedy, prompt=p["token_ids"]))
    return r["choices"][0]["text"] if s == 200 else (s, r)


want = [kiln_run_text(p["token_ids"]) for p in safe]
job, port = start()
alone = [completion(port, p) for p in safe]
check("greedy completions under mpirun -np %d equal single-rank kiln-run "
      % NP + 
      "(%d safe prompts)" % len(safe), alone == want, alone)

results = [None] * 16


def worker(i):
    results[i] = completion(port, safe[i % len(safe)])


threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
check("16 concurrent completions equal single-rank kiln-run",
      all(r == want[i % len(safe)] for i, r in enumerate(results)), results)

# Streamed equals whole.
raw = read_until_closed(raw_post(
    port, dict(greedy, prompt=safe[0]["token_ids"], stream=True), close=True))
text = ""
for block in raw.decode().split("\n\n"):
    at = block.find("data: {")
    if at >= 0:
        text += json.loads(block[at + 6:])["choices"][0]["text"]
check("streamed completion equals the whole one", text == want[0], text)

# A client that vanishes mid-stream: rank 0 cancels, the cancel reaches
# rank 1, both free the pages; the ranks still agree on the next requests.
long_request = dict(prompt=safe[0]["token_ids"], max_tokens=1500,
                    temperature=0, ignore_eos=True, stream=True)


def under_way(port):
    """A streamed 1,500-token request, once 3 events have come; its socket."""
    sock = raw_post(port, long_request)
    got = b""
    while got.count(b"data: ") < 3:
        got += sock.recv(4096)
    return sock


under_way(port).close()
for _ in range(400):
    if metric(port, "num_requests_running") == 0:
        break
    time.sleep(0.05)
freed = (metric(port, "num_requests_running") == 0 and
         metric(port, "kv_cache_usage_perc") == 0)
after = [completion(port, p) for p in safe[:2]]
check("a vanished client frees its pages; the ranks still agree",
      freed and after == want[:2], (freed, after))

# Idle for longer than the collective timeout: rank 0's heartbeats keep
# rank 1 waiting, not failing.
time.sleep(2 * TIMEOUT_S + 1)
check("idle for %d s (collective timeout %d s), then served" %
      (2 * TIMEOUT_S + 1, TIMEOUT_S),
      job.poll() is None and completion(port, safe[1]) == want[1])

# SIGTERM to rank 0: it drains, tells rank 1, and the job exits 0.
rank0 = rank_pid("kiln-serve", 0, job.pid)
os.kill(rank0, signal.SIGTERM)
try:
    job.wait(timeout=60)
    check("SIGTERM to rank 0 drains; the job exits %d" % job.returncode,
          job.returncode == 0)
except subprocess.TimeoutExpired:
    job.kill()
    check("SIGTERM to rank 0 drains", False, "still running after 60 s")

if "--dp-attention" in layout:
    # Rank 1 ran requests of its own (data-parallel attention places each
    # request on one rank) and says so once rank 0 stops it.
    log = open(os.path.join(work, "serve-mpi.log")).read()
    # The first rank of the second data-parallel group.
    own = re.findall(r"rank %d of %d ran (\d+) request\(s\) of its own" %
                     (TP, NP), log)
    check("rank %d ran %s of the requests" % (TP, own[-1] if own else "none"),
          bool(own) and int(own[-1]) > 0, log[-400:])

if "--dp-attention" in layout and TP > 1:
    # The ranks of a group must schedule alike: rank 1 gets a KV pool too
    # small for what rank 0 (same group) admits (an MPMD launch with its own
    # --kv-memory), and rank 0 ends the job naming it instead of answering
    # from engines that went their own ways.
    def section(kv):
        return [tool("kiln-serve"), split, "--port", "0", "--threads", "1",
                "--kv-memory", kv]
    job, port = start_server(
        tool("kiln-serve"), split, work, "--kv-memory", "64M", ":",
        "-np", "1", *section("1M"), ":", "-np", str(NP - 2),
        *section("64M"), launcher=MPIRUN + ["-np", "1"], env=ENV,
        log_name="diverge.log")
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    try:
        job.wait(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
    log = open(os.path.join(work, "diverge.log")).read()
    check("a group rank whose engine schedules otherwise ends the job, named",
          job.returncode not in (0, None) and
          "the engine of rank 1 no longer schedules as rank 0's" in log,
          log[-600:])

if len(sys.argv) > 4 and ("--dp-attention" not in layout or NP != 2):
    sys.exit(1 if check.failures else 0)

# A rank killed or stopped while a request runs: the job ends, non-zero,
# within the collective timeout (twice: the plan call, then the step check)
# plus slack.
for sig, name in ((signal.SIGKILL, "killed"), (signal.SIGSTOP, "stopped")):
    job, port = start()
    victim = rank_pid("kiln-serve", 1, job.pid)
    sock = under_way(port)
    start_t = time.time()
    os.kill(victim, sig)
    try:
        job.wait(timeout=30)
        took = time.time() - start_t
        check("rank 1 %s mid-request: the job exited %d after %.1f s" %
              (name, job.returncode, took),
              job.returncode != 0 and took < 2 * TIMEOUT_S + 10)
        if sig == signal.SIGSTOP:
            # Rank 0 saw the collective fail: the client got an error
            # event before the job ended (a killed rank 1 takes the job
            # down through mpirun first).
            sock.settimeout(10)
            try:
                answer = read_until_closed(sock)
            except OSError:
                answer = b""
            check("the running request of the stopped job got an error",
                  b"server_error" in answer, answer[-300:])
    except subprocess.TimeoutExpired:
        job.kill()
        check("rank 1 %s mid-request: the job exited" % name, False,
              "still running after 30 s")
    finally:
        sock.close()
        try:
            os.kill(victim, signal.SIGKILL)
        except OSError:
            pass

# Three processes on a 2-rank artifact: the load fails on every rank and the
# job ends at once, naming both counts, instead of leaving ranks waiting.
start_t = time.time()
wrong = subprocess.run(MPIRUN + ["-np", str(NP + 1), tool("kiln-serve"), split,
                                 "--port", "0", "--threads", "1"],
                       capture_output=True, text=True, env=ENV, timeout=60)
check("3 processes on a 2-rank artifact: exit %d after %.1f s" %
      (wrong.returncode, time.time() - start_t),
      wrong.returncode != 0 and
      "compiled for 2 ranks" in wrong.stderr and
      "this run has 3" in wrong.stderr, wrong.stderr[-600:])

log = open(os.path.join(work, "serve-mpi.log")).read()
# (Under data-parallel attention the failed collective may be the ranks'
# meeting before a plan call or a plan's row exchange, which the message
# names first.)
check("rank 0 names the failure",
      re.search(r"kiln: rank 0 of 2: kiln-serve: (data-parallel ranks "
                r"meeting before a plan call: |plan '\w+' dispatches\[\d+\] "
                r"\w+: )?mpi \w+ on rank 0 of 2", log), log[-600:])
sys.exit(1 if check.failures else 0)
