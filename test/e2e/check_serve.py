#!/usr/bin/env python3
"""kiln-serve end to end, through http.client (a real HTTP client).

usage: check_serve.py KILN_SERVE KILN_RUN ARTIFACT FIXTURE_DIR WORKDIR NODE_MODULES

Starts kiln-serve on a free loopback port, waits on /health, and checks:
greedy completions of the golden prompts equal kiln-run's text, alone and as
16 concurrent requests; streaming (completions and chat) gives the same text
as not streaming, with the usage chunk only when asked; a repeated long
prompt reports cached tokens; stop strings; seeds reproducible; errors
(400 malformed / too long / bad type, 404 unknown model, 413 body too large,
401 without the API key of a second server, which the official `openai` npm
client in NODE_MODULES (scripts/setup-node.sh) also drives); a client that disconnects
mid-stream frees its pages; SIGTERM drains (the running request finishes,
new ones get 503, exit 0). Prints one line per check; exits 1 on failure.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import (Checks, metric, read_until_closed,  # noqa: E402
                        request, start_server)

serve, kiln_run, artifact, fixture, work, node_modules = sys.argv[1:7]
golden = os.path.join(fixture, "golden")
prompts = json.load(open(os.path.join(golden, "prompts.json")))
check = Checks()


def start(*extra):
    return start_server(serve, artifact, work, *extra)


def stream(port, path, body):
    """The data events of a streamed request, parsed ([DONE] as None)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body=json.dumps(body))
    r = c.getresponse()
    events = []
    for block in r.read().decode().split("\n\n"):
        if block.startswith("data: "):
            payload = block[6:]
            events.append(None if payload == "[DONE]" else json.loads(payload))
    c.close()
    return r.status, events


def kiln_run_text(ids, n):
    out = subprocess.run([kiln_run, artifact, "--prompt-ids",
                          ",".join(map(str, ids)), "-n", str(n),
                          "--ignore-eos", "--output-format", "json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["text"]


# /health is 503 while the model loads: the artifact is a FIFO, so loading
# blocks until the test writes into it (bytes that are no artifact: the
# server then exits 1 naming the problem).
fifo = os.path.join(work, "loading.kiln")
if os.path.exists(fifo):
    os.remove(fifo)
os.mkfifo(fifo)
port_file = os.path.join(work, "port")
if os.path.exists(port_file):
    os.remove(port_file)
loading = subprocess.Popen([serve, fifo, "--port", "0", "--port-file",
                            port_file], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
while not (os.path.exists(port_file) and open(port_file).read().strip()):
    time.sleep(0.01)
lport = int(open(port_file).read())
h = request(lport, "GET", "/health")
c = request(lport, "POST", "/v1/completions", {"prompt": "x"})
try:
    with open(fifo, "w") as f:
        f.write("not an artifact")
except BrokenPipeError:  # the server gave up on it before reading
    pass
log_text = loading.communicate(timeout=60)[0]
check("health 503 while loading, then a clear load error",
      h[0] == 503 and h[1]["status"] == "loading" and c[0] == 503 and
      loading.returncode == 1 and "loading.kiln" in log_text, (h, c, log_text))

# Speculative decoding on (off by default on the CPU): greedy answers must
# still equal kiln-run's, which does not speculate.
proc, port = start("--log-interval", "1", "--spec", "3")
greedy = {"max_tokens": 32, "temperature": 0, "ignore_eos": True}

# Golden prompts: alone, then 16 at once.
want = [kiln_run_text(p["token_ids"], 32) for p in prompts]
alone = [request(port, "POST", "/v1/completions",
                 dict(greedy, prompt=p["token_ids"]))[1] for p in prompts]
check("greedy completions equal kiln-run",
      [a["choices"][0]["text"] for a in alone] == want,
      [a["choices"][0]["text"] for a in alone])
results = [None] * 16


def worker(i):
    results[i] = request(port, "POST", "/v1/completions",
                         dict(greedy, prompt=prompts[i % 5]["token_ids"]))[1]


threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
check("16 concurrent completions equal kiln-run",
      all(r["choices"][0]["text"] == want[i % 5] for i, r in enumerate(results)))

# Streaming equals non-streaming; usage only when asked.
body = dict(greedy, prompt=prompts[1]["token_ids"], stream=True)
status, events = stream(port, "/v1/completions", body)
text = "".join(e["choices"][0]["text"] for e in events if e and e["choices"])
check("streamed completion equals the whole one",
      status == 200 and text == want[1] and events[-1] is None and
      all(e["usage"] is None for e in events if e), text)
body["stream_options"] = {"include_usage": True}
status, events = stream(port, "/v1/completions", body)
check("usage chunk when asked", events[-2]["choices"] == [] and
      events[-2]["usage"]["completion_tokens"] == 32)
chat = {"messages": [{"role": "user", "content": "def main():"}],
        "max_tokens": 16, "temperature": 0}
whole = request(port, "POST", "/v1/chat/completions", chat)[1]
status, events = stream(port, "/v1/chat/completions", dict(chat, stream=True))
deltas = "".join(e["choices"][0]["delta"].get("content", "")
                 for e in events if e and e["choices"])
check("chat: streamed equals whole",
      whole["object"] == "chat.completion" and
      deltas == whole["choices"][0]["message"]["content"] and
      events[0]["choices"][0]["delta"]["role"] == "assistant", deltas)

# Logprobs: the greedy token heads its top list; streamed equals whole.
body = dict(greedy, prompt=prompts[1]["token_ids"], max_tokens=12, logprobs=3)
lp = request(port, "POST", "/v1/completions", body)[1]["choices"][0]
status, events = stream(port, "/v1/completions", dict(body, stream=True))
streamed_tokens = sum((e["choices"][0]["logprobs"]["tokens"] for e in events
                       if e and e["choices"] and e["choices"][0]["logprobs"]), [])
check("completions logprobs: one per token, top 3, streamed equals whole",
      len(lp["logprobs"]["tokens"]) == 12 and
      "".join(lp["logprobs"]["tokens"]) == lp["text"] and
      all(len(t) == 3 and max(t.values()) == v for t, v in
          zip(lp["logprobs"]["top_logprobs"], lp["logprobs"]["token_logprobs"])) and
      streamed_tokens == lp["logprobs"]["tokens"], lp)

# Prefix cache: a long prompt twice.
eval_text = open(os.path.join(golden, "eval.txt")).read()[:4000]
long = dict(greedy, prompt=eval_text, max_tokens=4)
request(port, "POST", "/v1/completions", long)
second = request(port, "POST", "/v1/completions", long)[1]
cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
check("repeated prompt is cached",
      cached >= (second["usage"]["prompt_tokens"] - 1) // 64 * 64 and
      cached > 0, second["usage"])

# Stop strings; seeds.
stop_at = want[0][5:8]
stopped = request(port, "POST", "/v1/completions",
                  dict(greedy, prompt=prompts[0]["token_ids"], stop=stop_at))[1]
check("stop string ends the text before it",
      stopped["choices"][0]["finish_reason"] == "stop" and
      stopped["choices"][0]["text"] == want[0][:want[0].find(stop_at)],
      stopped["choices"][0])
sampled = dict(prompt="def", max_tokens=24, temperature=0.9, seed=7)
a = request(port, "POST", "/v1/completions", sampled)[1]["choices"][0]["text"]
b = request(port, "POST", "/v1/completions", sampled)[1]["choices"][0]["text"]
c = request(port, "POST", "/v1/completions",
            dict(sampled, seed=8))[1]["choices"][0]["text"]
check("seeds reproducible", a == b and a != c, (a, b, c))

# Errors.
s, e = request(port, "POST", "/v1/completions", raw="{oops")
check("malformed JSON -> 400", s == 400 and "not valid JSON" in
      e["error"]["message"], e)
s, e = request(port, "POST", "/v1/completions",
               {"prompt": "x", "max_tokens": 4000})
check("beyond the context -> 400", s == 400 and "2048" in
      e["error"]["message"], e)
s, e = request(port, "POST", "/v1/completions", {"prompt": "x", "top_k": "3"})
check("wrong type -> 400", s == 400 and "top_k" in e["error"]["message"], e)
for path, body, field in (
        ("/v1/completions", {"prompt": "x", "n": 2}, "n"),
        ("/v1/completions", {"prompt": "x", "logprobs": 21}, "logprobs"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                  "tools": [{"type": "function", "function": {"name": "f"}}],
                                  "tool_choice": "required"}, "tool_choice"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                  "tools": [{"type": "function"}]}, "tool"),
        ("/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]},
         "role")):
    s, e = request(port, "POST", path, body)
    check("bad '%s' -> 400" % field,
          s == 400 and field in e["error"]["message"], e)
s, e = request(port, "POST", "/v1/completions", {"prompt": "x",
                                                 "model": "other"})
check("unknown model -> 404", s == 404 and e["error"]["code"] ==
      "model_not_found", e)
s, e = request(port, "POST", "/v1/completions",
               raw=json.dumps({"prompt": "x" * (5 << 20)}))
check("body too large -> 413", s == 413 and "error" in e, (s, e))

# Metrics: histograms and finish reasons, as vLLM names them.
page = request(port, "GET", "/metrics")[1]
check("metrics: histograms and finish reasons",
      metric(port, "time_to_first_token_seconds_count") > 0 and
      metric(port, "e2e_request_latency_seconds_count") > 0 and
      metric(port, "inter_token_latency_seconds_count") > 0 and
      'kiln:request_success_total{model_name="m",finished_reason="length"}'
      in page and 'le="+Inf"' in page, page[:400])
check("metrics: the server speculated (--spec 3)",
      metric(port, "spec_decode_num_drafts_total") > 0 and
      metric(port, "spec_decode_num_draft_tokens_total") ==
      3 * metric(port, "spec_decode_num_drafts_total"), page[:400])



def vanish(stream):
    """Sends a 1,700-token request on a raw socket and closes it once the
    request is under way (streamed: after 3 events; whole: after the first
    token); true when the server then frees its pages with the request cut
    short."""
    generated = metric(port, "generation_tokens_total")
    sock = socket.create_connection(("127.0.0.1", port))
    req = json.dumps(dict(prompt=prompts[3]["token_ids"], max_tokens=1700,
                          temperature=0, ignore_eos=True, stream=stream))
    sock.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  "application/json\r\nContent-Length: %d\r\n\r\n%s" %
                  (len(req), req)).encode())
    got = b""
    while stream and got.count(b"data: ") < 3:
        got += sock.recv(4096)
    for _ in range(400):
        if stream or metric(port, "generation_tokens_total") > generated:
            break
        time.sleep(0.01)
    sock.close()
    for _ in range(400):
        if metric(port, "num_requests_running") == 0:
            break
        time.sleep(0.05)
    made = metric(port, "generation_tokens_total") - generated
    return (metric(port, "num_requests_running") == 0 and
            metric(port, "kv_cache_usage_perc") == 0 and made < 1000), made


# A client that vanishes mid-stream (1,700 tokens asked: it is cut short);
# the same for a request that is not streamed: the server watches its socket
# while the answer is pending.
check("a vanished client frees its pages", *vanish(True))
check("a vanished client of a whole response frees its pages",
      *vanish(False))

# The HTTP layer's own refusals: an unknown route, a request that is no HTTP.
s, e = request(port, "GET", "/nope")
check("unknown route -> 404", s == 404 and "no route GET /nope" in
      e["error"]["message"], (s, e))
raw = socket.create_connection(("127.0.0.1", port))
raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
answer = read_until_closed(raw)
check("malformed HTTP -> 400", answer.startswith(b"HTTP/1.1 400") and
      b"malformed HTTP request" in answer, answer[:200])

# The status line comes at a --log-interval tick (1 s here) that finds the
# engine busy or tokens made since the last line; the fixture can finish all
# of the above between two ticks on a fast machine. So keep it busy until a
# line is in the log (60 s at most): the check below then reads it.
deadline = time.time() + 60
while time.time() < deadline and "generation" not in open(
        os.path.join(work, "serve.log")).read():
    request(port, "POST", "/v1/completions",
            dict(greedy, prompt="def", max_tokens=64))

# SIGTERM drains.
holder = {}


def long_request():
    holder["r"] = request(port, "POST", "/v1/completions",
                          dict(greedy, prompt="def", max_tokens=300))


t = threading.Thread(target=long_request)
t.start()
while metric(port, "num_requests_running") == 0:
    time.sleep(0.01)
proc.send_signal(signal.SIGTERM)
time.sleep(0.1)
try:
    late = request(port, "POST", "/v1/completions", {"prompt": "x"})[0]
except OSError:
    late = "closed"
t.join()
rc = proc.wait(timeout=60)
check("SIGTERM drains", rc == 0 and holder["r"][0] == 200 and
      holder["r"][1]["usage"]["completion_tokens"] == 300 and
      late in (503, "closed"), (rc, late))
log_text = open(os.path.join(work, "serve.log")).read()
check("status line while busy", "generation" in log_text and "tok/s" in
      log_text and "prefix hits" in log_text, log_text[-600:])

# API key, and a queue of one: 429 once a request waits.
proc, port = start("--api-key", "sekret", "--max-running", "1",
                   "--max-waiting", "1", "--idle-timeout", "2")
# A connection that sends nothing is closed after --idle-timeout.
idle = socket.create_connection(("127.0.0.1", port))
idle.settimeout(30)
t0 = time.time()
try:
    closed = idle.recv(1) == b""
except OSError:
    closed = True
check("an idle connection is closed after --idle-timeout",
      closed and 1.5 < time.time() - t0 < 10, time.time() - t0)
idle.close()
auth = {"Authorization": "Bearer sekret"}
busy = [threading.Thread(target=request, args=(
    port, "POST", "/v1/completions",
    dict(greedy, prompt="def", max_tokens=400)), kwargs={"headers": auth})
    for _ in range(2)]
[t.start() for t in busy]
for _ in range(400):
    if metric(port, "num_requests_waiting", auth) == 1:
        break
    time.sleep(0.01)
s, e = request(port, "POST", "/v1/completions", dict(greedy, prompt="x"),
               headers=auth)
check("queue full -> 429", s == 429 and "queue is full" in
      e["error"]["message"], (s, e))
[t.join() for t in busy]
s, _ = request(port, "POST", "/v1/completions", dict(greedy, prompt="x"))
s2, ok = request(port, "POST", "/v1/completions", dict(greedy, prompt="x"),
                 headers={"Authorization": "Bearer sekret"})
s3, _ = request(port, "GET", "/health")
check("api key: 401 without, 200 with, /health open",
      s == 401 and s2 == 200 and s3 == 200, (s, s2, s3))
client = subprocess.run(["node", os.path.join(os.path.dirname(__file__),
                                              "openai_client.mjs"),
                         node_modules, "http://127.0.0.1:%d/v1" % port,
                         "sekret"], capture_output=True, text=True)
print(client.stdout + client.stderr, end="")
check("the openai npm client ran", client.returncode == 0, client.returncode)
proc.send_signal(signal.SIGTERM)
check("second server exits 0", proc.wait(timeout=60) == 0)
sys.exit(1 if check.failures else 0)
