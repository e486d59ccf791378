#!/usr/bin/env bash
# Kiln beside llama.cpp on the same model, runs alternated, medians printed:
# prefill of P tokens from an empty context, and batch-1 decode of D tokens
# after a P-token context, for each thread count.
#   bench/peer_compare.sh MODEL.kiln MODEL.gguf ROUNDS "THREADS" P D [KILN_BENCH] [LLAMA_BENCH]
# llama-bench comes from ../shared/peers/get_llamacpp.sh (default /work/peer/bin/llama-bench).
set -euo pipefail
kiln=$1 gguf=$2 rounds=$3 threads=$4 P=$5 D=$6
KB=${7:-build/bin/kiln-bench}
LB=${8:-/work/peer/bin/llama-bench}
raw=$(mktemp)
for r in $(seq "$rounds"); do
  for t in $threads; do
    "$KB" "$kiln" --threads "$t" --prompt-tokens "$P" --decode-tokens "$D" --results /dev/null 2>&1 |
      sed -n "s|^prefill $P tokens, $t thread(s): \([0-9.]*\) tok/s.*|kiln\t$t\tprefill $P\t\1|p;
              s|^decode batch 1, $t thread(s): .* \([0-9.]*\) tok/s.*|kiln\t$t\tdecode $D at depth $P\t\1|p" >>"$raw"
    "$LB" -m "$gguf" -t "$t" -p "$P" -n 0 -d 0 -r 1 -o jsonl 2>/dev/null |
      /usr/bin/python3 -c "import sys,json
for l in sys.stdin:
  j=json.loads(l); print(f'llama.cpp\t$t\tprefill $P\t{j[\"avg_ts\"]}')" >>"$raw"
    "$LB" -m "$gguf" -t "$t" -p 0 -n "$D" -d "$P" -r 1 -o jsonl 2>/dev/null |
      /usr/bin/python3 -c "import sys,json
for l in sys.stdin:
  j=json.loads(l); print(f'llama.cpp\t$t\tdecode $D at depth $P\t{j[\"avg_ts\"]}')" >>"$raw"
  done
done
/usr/bin/python3 "$(dirname "$0")/median_table.py" "$raw" engine
rm -f "$raw"
