#!/usr/bin/env bash
# cpp-httplib (as kiln-serve uses it) against Boost.Beast for many concurrent
# SSE streams: each mock server (sse_httplib, sse_beast; both tick one
# shared engine thread every INTERVAL_MS) on a free loopback port, then
# kiln-loadgen sends C streaming completions at once (--request-rate inf
# --max-concurrency C --num-prompts C, TOKENS tokens each). Per run: requests
# ok/failed and the first errors, p50/p99 TTFT and inter-chunk latency,
# delivered tokens/s, the server's CPU seconds, peak RSS, peak thread and
# descriptor counts, listen backlog, tokens per write and the engine
# thread's hand-over time, and the client's CPU seconds. Servers alternate within
# each repeat (the order flips every repeat), so load from anything else on
# the machine falls on both.
#   bench/http_sse/run.sh [OUT_DIR]     (default out/http-sse-<date>)
# Environment: CONCURRENCY (default "256 512 1024 2048"), REPEATS (2),
# TOKENS (64), INTERVAL_MS (20), PROMPT_LEN (128 token ids, ignored by the
# servers), BEAST_THREADS (io_context threads, 2), HTTPLIB_THREADS (pool
# size; default C + 64, as kiln-serve sizes it for --max-running C),
# SAME_SESSION=1 (start the server in the script's session: see below),
# PIN=1 (server on CPU 0, client on CPU 1),
# BACKLOG (listen backlog of both; default C + 64, what kiln-serve's
# widenBacklog sets for --max-running C; 5 is Debian httplib's own),
# NOFILE (open-file limit to ask for, 65536), BUILD=0 to skip building.
# The kernel's listen-queue overflow and SYN retransmission counters (nstat,
# machine-wide) are recorded around each client run.
# The server runs in a session of its own (setsid), as it would started from
# another terminal: with the kernel's autogroup scheduling each session gets
# a fair share of the CPUs, where within one session every thread does, and
# the client's thread per stream would starve a server of three threads.
# Prints a markdown table (also OUT_DIR/table.md); raw results in OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out/http-sse-$(date +%Y%m%d-%H%M%S)}
CONCURRENCY=${CONCURRENCY:-"256 512 1024 2048"}
REPEATS=${REPEATS:-2}
TOKENS=${TOKENS:-64}
INTERVAL_MS=${INTERVAL_MS:-20}
PROMPT_LEN=${PROMPT_LEN:-128}
BEAST_THREADS=${BEAST_THREADS:-2}
NOFILE=${NOFILE:-65536}
mkdir -p "$out"

if [ "${BUILD:-1}" = 1 ]; then
  if ! dpkg-query -W -f='${Status}' libboost-dev 2>/dev/null | grep -q "install ok installed"; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "run.sh: installing libboost-dev (Beast is header-only)"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libboost-dev >/dev/null
  fi
  bash scripts/build.sh bench-sse-httplib bench-sse-beast kiln-loadgen >/dev/null
fi
BIN=build/bin

# Every stream holds a socket in the server and one in the client.
nofile_was="$(ulimit -Sn) (hard $(ulimit -Hn))"
ulimit -n "$NOFILE" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "nproc: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "load before: $(uptime)"
  echo "ulimit -n: was $nofile_was, now $(ulimit -Sn)"
  echo "net.core.somaxconn: $(cat /proc/sys/net/core/somaxconn); tcp_max_syn_backlog: $(cat /proc/sys/net/ipv4/tcp_max_syn_backlog)"
  echo "packages: $(dpkg-query -W -f='${Package} ${Version}; ' libcpp-httplib0.11 libboost1.74-dev nlohmann-json3-dev g++ 2>/dev/null)"
  echo "server: $([ "${SAME_SESSION:-0}" = 1 ] && echo "the script's session" || echo "own session (setsid)")$([ "${PIN:-0}" = 1 ] && echo ", pinned to CPU 0, client to CPU 1")"
  echo "workload: C streams at once, $TOKENS tokens each at one per $INTERVAL_MS ms, prompts of $PROMPT_LEN token ids; repeats $REPEATS"
} | tee "$out/machine.txt"

server="" sampler=""
cleanup() {
  for p in $sampler $server; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  sampler="" server=""
}
trap cleanup EXIT

# run_one NAME C REPEAT: one server, one client run.
run_one() {
  local name=$1 c=$2 rep=$3 dir="$out/$1-c$2-r$3" args=()
  local backlog=${BACKLOG:-$((c + 64))}
  mkdir -p "$dir"
  if [ "$name" = httplib ]; then
    args=(--threads "${HTTPLIB_THREADS:-$((c + 64))}" --backlog "$backlog")
  else
    args=(--threads "$BEAST_THREADS" --backlog "$backlog")
  fi
  local launch=() client=()
  [ "${SAME_SESSION:-0}" = 1 ] || launch+=(setsid)
  [ "${PIN:-0}" = 1 ] && launch+=(taskset -c 0) && client+=(taskset -c 1)
  "${launch[@]}" "$BIN/bench/sse_$name" --port 0 --port-file "$dir/port" --interval-ms "$INTERVAL_MS" \
    "${args[@]}" >"$dir/server.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    [ -s "$dir/port" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$dir/server.log"; exit 1; }
    sleep 0.05
  done
  # setsid forks when its caller leads a process group: then $! would not be
  # the server and its /proc figures would be wrong.
  if [ "$(cat "/proc/$server/comm")" != "sse_$name" ]; then
    echo "run.sh: pid $server is $(cat "/proc/$server/comm"), not sse_$name" >&2
    exit 1
  fi
  local port
  port=$(cat "$dir/port")
  ss -ltnH "sport = :$port" | awk '{print $3}' >"$dir/backlog"
  # Threads and open descriptors, sampled every 50 ms for their peaks (past
  # 1024 descriptors a select()-based server could no longer wait on them).
  (while [ -r "/proc/$server/status" ]; do
     t=$(awk '/^Threads:/ {print $2}' "/proc/$server/status" 2>/dev/null) || true
     f=$(ls "/proc/$server/fd" 2>/dev/null | wc -l) || true
     [ -n "$t" ] && echo "$t $f"
     sleep 0.05
   done) >"$dir/threads" &
  sampler=$!
  export NSTAT_HISTORY="$dir/nstat.history"
  nstat -n
  "${client[@]}" /usr/bin/time -f "%e %U %S %M" -o "$dir/client.time" \
    "$BIN/kiln-loadgen" --base-url "http://127.0.0.1:$port" --dataset random \
    --num-prompts "$c" --max-concurrency "$c" --request-rate inf \
    --random-input-len "$PROMPT_LEN" --random-output-len "$TOKENS" \
    --timeout-s 120 --json "$dir/result.json" >"$dir/client.log" 2>&1 ||
    echo "run.sh: kiln-loadgen exited $? ($name, C=$c)" >>"$dir/client.log"
  nstat -z TcpExtListenOverflows TcpExtListenDrops TcpExtTCPSynRetrans \
    TcpExtTCPReqQFullDrop TcpExtTCPReqQFullDoCookies | awk 'NR > 1 {print $1, $2}' >"$dir/nstat"
  # The server's totals before it stops: CPU (utime+stime, in clock ticks),
  # peak RSS, threads now.
  awk '{print $14 + $15}' "/proc/$server/stat" >"$dir/server.ticks"
  grep -E '^(VmHWM|Threads):' "/proc/$server/status" >"$dir/server.status"
  cleanup
  echo "run.sh: $name C=$c repeat $rep done ($(tail -n 1 "$dir/client.log" | cut -c1-80))"
}

for rep in $(seq "$REPEATS"); do
  order="httplib beast"
  [ $((rep % 2)) -eq 0 ] && order="beast httplib"
  for c in $CONCURRENCY; do
    for name in $order; do
      run_one "$name" "$c" "$rep"
    done
  done
done
echo "load after: $(uptime)" | tee -a "$out/machine.txt"
/usr/bin/python3 bench/http_sse/table.py "$out" "$(getconf CLK_TCK)" | tee "$out/table.md"
