#!/usr/bin/python3
"""The markdown table of a bench/http_sse/run.sh output folder.

Usage: table.py OUT_DIR CLK_TCK
One row per run folder (NAME-cC-rR): kiln-loadgen's result.json, the
server's CPU ticks, VmHWM, sampled thread and descriptor counts and
its closing line (engine steps, events per write), nstat, the client's
/usr/bin/time line, and the first distinct errors below the table.
"""
import json
import os
import re
import sys


def read(path, default=""):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return default


def main():
    out, tck = sys.argv[1], float(sys.argv[2])
    runs = []
    for d in os.listdir(out):
        m = re.fullmatch(r"(\w+)-c(\d+)-r(\d+)", d)
        if m:
            runs.append((int(m.group(2)), m.group(1), int(m.group(3)), d))
    print("| server | C | repeat | ok / failed | TTFT p50 / p99 ms "
          "| ITL p50 / p99 ms | tok/s | duration s | server CPU s | µs/token "
          "| server peak RSS MiB | server threads | server fds | backlog "
          "| client CPU s "
          "| events / write | engine ms / step (late steps) "
          "| listen overflows / SYN retrans |")
    print("|" + "---|" * 18)
    notes = []
    for c, name, rep, d in sorted(runs):
        p = os.path.join(out, d)
        try:
            r = json.loads(read(os.path.join(p, "result.json"), "{}"))
        except json.JSONDecodeError:
            r = {}
        status = read(os.path.join(p, "server.status"))
        hwm = re.search(r"VmHWM:\s+(\d+)", status)
        samples = [line.split() for line in
                   read(os.path.join(p, "threads")).splitlines()]
        threads = [int(x[0]) for x in samples if x]
        fds = [int(x[1]) for x in samples if len(x) > 1]
        ticks = read(os.path.join(p, "server.ticks")).strip()
        # The last line: /usr/bin/time puts "Command exited with non-zero
        # status N" before it when the client failed.
        client = (read(os.path.join(p, "client.time")).strip().splitlines()
                  or [""])[-1].split()
        cpu = float(ticks) / tck if ticks else 0.0
        tokens = r.get("total_output_tokens") or 0
        net = dict(line.split()[:2] for line in
                   read(os.path.join(p, "nstat")).splitlines() if line.strip())
        log = read(os.path.join(p, "server.log"))
        eng = re.search(r"\((\d+\.\d+) ms each.*?(\d+) started over half a "
                        r"step late.*?(\d+) token events in (\d+) writes", log)
        ms = lambda k: f"{r[k]:.1f}" if isinstance(r.get(k), (int, float)) else "-"
        print(f"| {name} | {c} | {rep} "
              f"| {r.get('completed', '-')} / {r.get('failed', '-')} "
              f"| {ms('median_ttft_ms')} / {ms('p99_ttft_ms')} "
              f"| {ms('median_itl_ms')} / {ms('p99_itl_ms')} "
              f"| {r.get('output_throughput', 0):.0f} "
              f"| {r.get('duration', 0):.2f} "
              f"| {cpu:.2f} | {cpu * 1e6 / tokens if tokens else 0:.0f} "
              f"| {int(hwm.group(1)) / 1024 if hwm else 0:.1f} "
              f"| {max(threads) if threads else '-'} "
              f"| {max(fds) if fds else '-'} "
              f"| {read(os.path.join(p, 'backlog')).strip() or '-'} "
              f"| {float(client[1]) + float(client[2]) if len(client) >= 3 else 0:.2f} "
              + (f"| {int(eng.group(3)) / max(int(eng.group(4)), 1):.2f} "
                 f"| {eng.group(1)} ({eng.group(2)}) " if eng else "| - | - ")
              + f"| {net.get('TcpExtListenOverflows', '-')} / "
              f"{net.get('TcpExtTCPSynRetrans', '-')} |")
        errors = r.get("errors") or []
        if errors or not r:
            tail = read(os.path.join(p, "client.log")).strip().splitlines()[-3:]
            notes.append(f"- {name} C={c} repeat {rep}: "
                         + ("; ".join(dict.fromkeys(errors[:5])) if errors
                            else "no result.json: " + " / ".join(tail)))
    if notes:
        print("\nErrors (the first distinct ones per run):")
        print("\n".join(notes))


if __name__ == "__main__":
    main()
