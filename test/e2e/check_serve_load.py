#!/usr/bin/env python3
"""kiln-serve under 256 concurrent streaming requests (loopback only).

usage: check_serve_load.py KILN_SERVE ARTIFACT FIXTURE_DIR WORKDIR

Starts kiln-serve on a free port, takes each of 8 prompts' greedy text alone
(not streamed), then opens 256 streaming connections at once (each prompt
32 times) and checks: every request succeeds, every token arrives (the
streamed text equals the prompt's text alone, usage counts every token),
the server's resident memory stays bounded while they run, and at the end no
KV page is held: used pages are 0, and after /flush_cache every page is
free. Stops the server with SIGTERM (exit 0). One line per check.
"""
import http.client
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Checks, metric, request, start_server  # noqa: E402

serve, artifact, fixture, work = sys.argv[1:5]
check = Checks()
N, PROMPTS, TOKENS = 256, 8, 16


def rss_mb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


proc, port = start_server(serve, artifact, work, log_name="serve-load.log")
try:
    eval_text = open(os.path.join(fixture, "golden", "eval.txt")).read()
    prompts = [eval_text[i * 300:i * 300 + 120 + 40 * i] for i in range(PROMPTS)]
    body = {"max_tokens": TOKENS, "temperature": 0, "ignore_eos": True}
    alone = [request(port, "POST", "/v1/completions",
                     dict(body, prompt=p))[1]["choices"][0]["text"]
             for p in prompts]
    base = rss_mb(proc.pid)

    results = [None] * N
    start = threading.Barrier(N + 1)

    def client(i):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        start.wait()
        try:
            c.request("POST", "/v1/completions", body=json.dumps(dict(
                body, prompt=prompts[i % PROMPTS], stream=True,
                stream_options={"include_usage": True})))
            r = c.getresponse()
            text, usage, done = "", None, False
            for block in r.read().decode().split("\n\n"):
                if not block.startswith("data: "):
                    continue
                if block == "data: [DONE]":
                    done = True
                    continue
                e = json.loads(block[6:])
                if e["choices"]:
                    text += e["choices"][0]["text"]
                if e.get("usage"):
                    usage = e["usage"]
            results[i] = (r.status, text, usage, done)
        except Exception as e:  # reported below, per request
            results[i] = (None, repr(e), None, False)
        finally:
            c.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(N)]
    [t.start() for t in threads]
    peak, stop_sampling = [base], threading.Event()

    def sampler():
        while not stop_sampling.is_set():
            peak[0] = max(peak[0], rss_mb(proc.pid))
            time.sleep(0.05)

    s = threading.Thread(target=sampler)
    s.start()
    t0 = time.time()
    start.wait()
    [t.join() for t in threads]
    elapsed = time.time() - t0
    stop_sampling.set()
    s.join()

    ok = [r for r in results if r and r[0] == 200 and r[3]]
    check("%d concurrent streams all succeed" % N, len(ok) == N,
          [r for r in results if not (r and r[0] == 200)][:3])
    check("every token arrives",
          all(r[1] == alone[i % PROMPTS] and r[2] and
              r[2]["completion_tokens"] == TOKENS
              for i, r in enumerate(results) if r and r[0] == 200),
          [(i, r[1][:40], alone[i % PROMPTS][:40]) for i, r in
           enumerate(results) if r and r[1] != alone[i % PROMPTS]][:3])
    print("  %d streams x %d tokens in %.1f s; RSS %.0f MB before, %.0f MB "
          "peak" % (N, TOKENS, elapsed, base, peak[0]), file=sys.stderr)
    check("server RSS stays bounded (< 512 MB over the idle server)",
          peak[0] - base < 512, (base, peak[0]))
    for _ in range(200):
        if metric(port, "num_requests_running") == 0:
            break
        time.sleep(0.05)
    total = metric(port, "kv_cache_pages_total")
    check("no page held at the end",
          metric(port, "num_requests_running") == 0 and
          metric(port, "kv_cache_usage_perc") == 0 and
          metric(port, "kv_cache_pages_free") +
          metric(port, "kv_cache_pages_evictable") == total)
    request(port, "POST", "/flush_cache")
    for _ in range(100):
        if metric(port, "kv_cache_pages_free") == total:
            break
        time.sleep(0.02)
    check("after /flush_cache every page is free",
          metric(port, "kv_cache_pages_free") == total,
          (metric(port, "kv_cache_pages_free"), total))
    proc.send_signal(signal.SIGTERM)
    check("server exits 0", proc.wait(timeout=60) == 0)
finally:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
sys.exit(1 if check.failures else 0)
