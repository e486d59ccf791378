#!/usr/bin/env bash
# The reference-scaled serving sweep (../shared/SERVING.md R-BEN-2, R-BEN-4)
# on one artifact, with and without the prefix cache: kiln-serve on a free
# loopback port, then kiln-loadgen --workload reference-scaled --sweep
# (4 groups x 8 requests of 750 shared + 500 unique prompt tokens, 64 out;
# the prefix cache flushed before each rate), twice.
#   bench/loadgen_sweep.sh MODEL.kiln [OUT_DIR] [RATES]
# OUT_DIR (default out/loadgen-<date>, ignored by git) gets sweep-{cache,nocache}.json
# (sglang bench_serving's field names, every point and the knee),
# sweep-{cache,nocache}.txt (the tables) and the server logs. RATES is a
# comma list for --sweep-rates (default: kiln-loadgen's doubling series from
# 0.5 req/s, stopping after the first rate over the SLO).
# Environment: THREADS (kiln-serve --threads, default nproc), SPEC (kiln-serve
# --spec, default kiln-serve's: off on the CPU), NUM_GROUPS and PER_GROUP (default 4 and 8),
# SLO (p95 TTFT bound in s, default 5), BIN (default build/bin).
set -euo pipefail
model=$1
out=${2:-out/loadgen-$(date +%Y%m%d-%H%M%S)}
rates=${3:-}
BIN=${BIN:-build/bin}
THREADS=${THREADS:-$(nproc)}
mkdir -p "$out"

server=
stop() { if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=; fi; }
trap stop EXIT

for mode in cache nocache; do
  extra=(--threads "$THREADS")
  [ "$mode" = nocache ] && extra+=(--no-prefix-cache)
  [ -n "${SPEC:-}" ] && extra+=(--spec "$SPEC")
  rm -f "$out/port-$mode"
  "$BIN/kiln-serve" "$model" --port 0 --port-file "$out/port-$mode" "${extra[@]}" \
    >"$out/serve-$mode.log" 2>&1 &
  server=$!
  for _ in $(seq 600); do
    [ -s "$out/port-$mode" ] && curl -sf "http://127.0.0.1:$(cat "$out/port-$mode")/health" >/dev/null && break
    kill -0 "$server" 2>/dev/null || { cat "$out/serve-$mode.log"; exit 1; }
    sleep 0.1
  done
  sweep=(--sweep)
  [ -n "$rates" ] && sweep=(--sweep-rates "$rates")
  echo "== kiln-serve ${extra[*]} =="
  # A failed request makes kiln-loadgen exit 1; the table still stands.
  "$BIN/kiln-loadgen" --base-url "http://127.0.0.1:$(cat "$out/port-$mode")" \
    --workload reference-scaled --groups "${NUM_GROUPS:-4}" --prompts-per-group "${PER_GROUP:-8}" \
    "${sweep[@]}" --ttft-slo-s "${SLO:-5}" --json "$out/sweep-$mode.json" |
    tee "$out/sweep-$mode.txt" || true
  stop
done
echo "results in $out"
