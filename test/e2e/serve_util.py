"""What the kiln-serve end-to-end scripts share: starting a server on a free
loopback port and waiting for it to be healthy, plain HTTP requests through
http.client, reading a /metrics value, and one line per check."""
import atexit
import http.client
import json
import os
import socket
import subprocess
import sys
import time


class Checks:
    """Prints `ok   NAME` or `FAIL NAME: DETAIL` per check; counts failures."""

    def __init__(self):
        self.failures = 0

    def __call__(self, name, ok, detail=""):
        print("%s %s%s" % ("ok  " if ok else "FAIL", name,
                           "" if ok else ": " + str(detail)), flush=True)
        self.failures += not ok


def request(port, method, path, body=None, headers=None, raw=None,
            timeout=300):
    """(status, parsed JSON or text) of one request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body) if body else None)
    c.request(method, path, body=data, headers=headers or {})
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, text


def raw_post(port, body, close=False):
    """Sends a POST /v1/completions of `body` on a raw socket (to read a
    stream as it comes, or to vanish mid-request); the socket."""
    sock = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body)
    sock.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  "application/json\r\nContent-Length: %d\r\n%s\r\n%s" %
                  (len(data), "Connection: close\r\n" if close else "",
                   data)).encode())
    return sock


def read_until_closed(sock):
    """Everything the peer sends until it closes; closes `sock`."""
    got = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            break
        got += piece
    sock.close()
    return got


def metric(port, name, headers=None):
    """The first sample of kiln:NAME on /metrics, or None."""
    text = request(port, "GET", "/metrics", headers=headers)[1]
    for line in text.splitlines():
        if line.startswith("kiln:" + name + "{"):
            return float(line.split()[-1])
    return None


def _kill(p):
    if p.poll() is None:
        p.kill()
        p.wait()


def start_server(serve, artifact, work, *extra, log_name="serve.log",
                 launcher=(), env=None):
    """Starts kiln-serve (under `launcher`, e.g. an mpirun command line) on a
    free loopback port; (process, port) once /health says 200. Exits the
    script if the server dies or stays unready."""
    port_file = os.path.join(work, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    log = open(os.path.join(work, log_name), "a")
    p = subprocess.Popen(list(launcher) +
                         [serve, artifact, "--port", "0", "--port-file",
                          port_file, "--threads", "2"] + list(extra),
                         stdout=log, stderr=log, env=env)
    atexit.register(_kill, p)  # also when the script dies of an exception
    for _ in range(1200):
        if os.path.exists(port_file) and open(port_file).read().strip():
            port = int(open(port_file).read())
            try:
                if request(port, "GET", "/health")[0] == 200:
                    return p, port
            except OSError:
                pass
        if p.poll() is not None:
            sys.exit("kiln-serve exited with %d" % p.returncode)
        time.sleep(0.05)
    p.kill()
    sys.exit("kiln-serve did not become healthy")
