#!/usr/bin/env python3
"""kiln-loadgen end to end, against kiln-serve and against a fake server.

usage: check_loadgen.py KILN_SERVE KILN_LOADGEN ARTIFACT WORKDIR

Starts kiln-serve on a free loopback port, waits on /health, and checks
kiln-loadgen on a small shared-prefix workload: every request succeeds with
exactly max_tokens tokens; run one at a time on a flushed cache the hit rate
is the theory (each group's first request misses, the others find the
page-aligned prefix, never the last prompt token) and repeats with the seed;
all at once and at a finite Poisson rate; 200 requests at once (a thread
each); a two-rate --sweep reports a knee;
the accept length comes from kiln:'s /metrics. Then the failures: a bad flag
exits 2 naming it, a closed port fails the requests, and a fake server
(Python's http.server) without /metrics or /flush_cache is measured all the
same while its HTTP 500, malformed event, error event and stalled stream
each fail the request with a message, the stall within --timeout-s. Prints
one line per check; exits 1 on failure. kiln-serve is always stopped.
"""
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Checks, start_server  # noqa: E402

serve, loadgen, artifact, work = sys.argv[1:5]
check = Checks()
PAGE = 64  # kiln-serve's default --page-size


def run(name, *args, timeout=300):
    """kiln-loadgen with ARGS; (exit status, stdout, stderr, JSON or None)."""
    out = os.path.join(work, name + ".json")
    if os.path.exists(out):
        os.remove(out)
    p = subprocess.run([loadgen] + list(args) + ["--json", out],
                       capture_output=True, text=True, timeout=timeout)
    with open(os.path.join(work, name + ".log"), "w") as f:
        f.write(p.stdout + p.stderr)
    j = json.load(open(out)) if os.path.exists(out) else None
    return p.returncode, p.stdout, p.stderr, j


def expected_hit_pct(P, S, Q):
    hit = min(P, P + S - 1) // PAGE * PAGE
    return 100.0 * (Q - 1) * hit / (Q * (P + S))


G, Q, P, S, O = 2, 4, 192, 64, 8
N = G * Q
SMALL = ["--dataset", "shared-prefix", "--groups", str(G),
         "--prompts-per-group", str(Q), "--prefix-len", str(P),
         "--suffix-len", str(S), "--output-len", str(O),
         "--warmup-requests", "1", "--flush-cache"]
FIELDS = ["mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p95_ttft_ms",
          "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
          "p95_itl_ms", "mean_itl_per_token_ms", "mean_e2e_latency_ms",
          "p99_e2e_latency_ms", "request_throughput", "input_throughput",
          "output_throughput", "total_throughput", "completed",
          "total_input_tokens", "total_output_tokens", "duration",
          "concurrency", "max_output_tokens_per_s", "cache_hit_rate_pct",
          "accept_length", "request_rate", "max_concurrency"]


def all_done(rc, j):
    return (rc == 0 and j is not None and j["completed"] == N and
            j["failed"] == 0 and j["total_output_tokens"] == N * O and
            j["total_input_tokens"] == N * (P + S))


def kiln_checks(port):
    url = ["--base-url", "http://127.0.0.1:%d" % port]
    theory = expected_hit_pct(P, S, Q)

    rc, out, err, a = run("sequential", *url, *SMALL, "--max-concurrency",
                          "1", "--output-details")
    check("one at a time: all succeed, N*O tokens", all_done(rc, a),
          (rc, err, a and a["total_output_tokens"]))
    missing = [f for f in FIELDS if a is None or f not in a]
    check("sglang's JSON fields", not missing, missing)
    hit = a["cache_hit_rate_pct"] if a else -1
    check("cache hit rate is the theory (%.2f%%)" % theory,
          abs(hit - theory) < 0.5, hit)
    check("accept length from kiln:'s /metrics",
          a is not None and a["accept_length"] is not None and
          1.0 <= a["accept_length"] <= 4.0, a and a["accept_length"])
    check("table printed", "Cache hit rate (%):" in out and
          "Successful requests:" in out, out)

    rc, _, err, b = run("sequential-again", *url, *SMALL,
                        "--max-concurrency", "1", "--output-details")
    check("the seed repeats the run",
          a is not None and b is not None and
          a["cached_tokens"] == b["cached_tokens"] and
          a["input_lens"] == b["input_lens"],
          b and (a["cached_tokens"], b["cached_tokens"]))

    rc, _, err, j = run("burst", *url, *SMALL)
    check("rate inf: all succeed, N*O tokens", all_done(rc, j), (rc, err))
    check("rate inf: hit rate at most the theory",
          j is not None and 0 <= j["cache_hit_rate_pct"] <= theory + 0.5,
          j and j["cache_hit_rate_pct"])

    rc, _, err, j = run("poisson", *url, *SMALL, "--request-rate", "8")
    check("rate 8: all succeed, N*O tokens", all_done(rc, j), (rc, err))
    check("rate 8: hit rate at most the theory",
          j is not None and j["request_rate"] == 8 and
          0 < j["cache_hit_rate_pct"] <= theory + 0.5,
          j and j["cache_hit_rate_pct"])

    rc, _, err, j = run("crowd", *url, "--dataset", "random",
                        "--num-prompts", "200", "--random-input-len", "16",
                        "--random-output-len", "2", "--warmup-requests", "0")
    check("200 requests at once all succeed",
          rc == 0 and j is not None and j["completed"] == 200 and
          j["total_output_tokens"] == 400, (rc, err[-300:]))

    rc, out, err, j = run("sweep", *url, *SMALL, "--sweep-rates", "4,inf")
    points = j["points"] if j else []
    check("sweep: two points, all succeed",
          rc == 0 and len(points) == 2 and
          all(p["completed"] == N and p["failed"] == 0 for p in points),
          (rc, err))
    check("sweep: a knee",
          j is not None and j["knee"] is not None and
          j["knee"]["request_rate"] in (4, "inf") and
          "knee (p95 TTFT <= 5 s):" in out, out)


def failure_checks():
    rc = subprocess.run([loadgen, "--base-url", "http://127.0.0.1:1",
                         "--dataset", "random", "--groups", "2"],
                        capture_output=True, text=True)
    check("a flag of the other dataset exits 2 naming it",
          rc.returncode == 2 and "--groups" in rc.stderr, rc.stderr)
    rc = subprocess.run([loadgen, "--base-url", "http://127.0.0.1:1",
                         "--dataset", "random", "--num-prompts", "many"],
                        capture_output=True, text=True)
    check("a bad number exits 2 naming the flag",
          rc.returncode == 2 and "--num-prompts: 'many'" in rc.stderr,
          rc.stderr)

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = s.getsockname()[1]
    s.close()
    tiny = ["--dataset", "random", "--num-prompts", "3",
            "--random-input-len", "5", "--random-output-len", "3"]
    rc, _, err, j = run("closed", "--base-url", "http://127.0.0.1:%d" % closed,
                        "--model", "m", "--warmup-requests", "0", *tiny)
    check("closed port: requests fail with a message, exit 1",
          rc == 1 and j is not None and j["failed"] == 3 and
          "could not connect" in err, (rc, err))
    rc, _, err, _ = run("closed-models",
                        "--base-url", "http://127.0.0.1:%d" % closed, *tiny)
    check("closed port: no model found, exit 1",
          rc == 1 and "cannot find the model" in err, (rc, err))

    fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHandler)
    fake.daemon_threads = True
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % fake.server_address[1]
    try:
        rc, _, err, j = run("fake-good", "--base-url", base, "--endpoint",
                            "/good/v1/completions", "--flush-cache", *tiny)
        check("a plain OpenAI server: measured without /metrics or a flush",
              rc == 0 and j is not None and j["completed"] == 3 and
              j["total_output_tokens"] == 9 and
              j["accept_length"] is None and
              "prefix cache was not flushed" in err, (rc, err, j))
        # The slow route holds the first token 50 ms: every TTFT misses a
        # 10 ms bound, however fast the machine.
        rc, out, err, j = run("fake-sweep", "--base-url", base, "--endpoint",
                              "/slow/v1/completions", *tiny, "--sweep-rates",
                              "50,20", "--ttft-slo-s", "0.01")
        check("sweep: rising rates, no knee when every rate misses the SLO",
              rc == 0 and j is not None and j["knee"] is None and
              [p["request_rate"] for p in j["points"]] == [20, 50] and
              "none of the rates met it" in out, (rc, out, err))
        for route, message, extra in [
                ("error", "HTTP 500: fake failure", []),
                ("malformed", "malformed event", []),
                ("errevent", "error event: engine died", []),
                ("stall", "timed out after 1 s", ["--timeout-s", "1"])]:
            t0 = time.time()
            rc, _, err, j = run("fake-" + route, "--base-url", base,
                                "--endpoint", "/%s/v1/completions" % route,
                                "--warmup-requests", "0", *tiny, *extra)
            check("%s: the request fails with a message, exit 1" % route,
                  rc == 1 and j is not None and j["failed"] == 3 and
                  message in err and time.time() - t0 < 20, (rc, err))
    finally:
        fake.shutdown()


class FakeHandler(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible server with nothing but /v1/models and a
    completions route per behaviour (the first path segment)."""
    protocol_version = "HTTP/1.0"  # the body ends when the connection does

    def log_message(self, *args):
        pass

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models":
            return self.reply(200, {"data": [{"id": "fake"}]})
        self.reply(404, {"error": {"message": "no such route"}})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        route = self.path.split("/")[1]
        if route not in ("good", "slow", "malformed", "errevent", "stall"):
            return self.reply(500 if route == "error" else 404,
                              {"error": {"message": "fake failure"
                                         if route == "error" else "no"}})
        req = json.loads(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        w = self.wfile
        try:
            if route == "stall":
                for _ in range(100):
                    w.write(b": ping\n\n")
                    w.flush()
                    time.sleep(0.2)
                return
            if route == "malformed":
                w.write(b'data: {"choices": [\n\n')
            if route == "errevent":
                w.write(b'data: {"error": {"message": "engine died"}}\n\n')
            if route == "slow":
                time.sleep(0.05)
            n = req["max_tokens"]
            for i in range(n):
                chunk = {"choices": [{"index": 0, "text": "t%d" % i}]}
                # CRLF line ends, a comment and an event: field are legal.
                w.write(b": ping\r\nevent: x\r\ndata: " +
                        json.dumps(chunk).encode() + b"\r\n\r\n")
                w.flush()
                time.sleep(0.01)
            usage = {"prompt_tokens": len(req["prompt"]),
                     "completion_tokens": n, "total_tokens": 0}
            w.write(b"data: " + json.dumps({"choices": [], "usage": usage})
                    .encode() + b"\n\ndata: [DONE]\n\n")
        except OSError:
            pass


# Speculation on (the CPU default is off) so that /metrics has an accept
# length.
server, port = start_server(serve, artifact, work, "--spec", "3")
try:
    kiln_checks(port)
finally:
    server.kill()
    server.wait()
failure_checks()
sys.exit(1 if check.failures else 0)
