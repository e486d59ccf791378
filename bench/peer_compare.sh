#!/usr/bin/env bash
# Kiln beside llama.cpp on the same model, runs alternated, medians printed:
# prefill of P tokens from an empty context, and batch-1 decode of D tokens
# after a P-token context, for each thread count.
#   bench/peer_compare.sh MODEL.kiln MODEL.gguf[,MORE.gguf] ROUNDS "THREADS" P D [KILN_BENCH] [LLAMA_BENCH]
# KILN_SETS="ARGS;ARGS..." runs kiln-bench once per set of extra arguments
# in every round (e.g. KILN_SETS="--mxfp4-activations f32;--mxfp4-activations int8"),
# each labelled "kiln ARGS"; several GGUF files are each labelled by name.
# llama-bench comes from ../shared/peers/get_llamacpp.sh (default /work/peer/bin/llama-bench).
set -euo pipefail
kiln=$1 ggufs=$2 rounds=$3 threads=$4 P=$5 D=$6
KB=${7:-build/bin/kiln-bench}
LB=${8:-/work/peer/bin/llama-bench}
IFS=';' read -r -a sets <<<"${KILN_SETS:-}"
[[ ${#sets[@]} -gt 0 ]] || sets=("")
IFS=',' read -r -a models <<<"$ggufs"
raw=$(mktemp)
for r in $(seq "$rounds"); do
  for t in $threads; do
    for set in "${sets[@]}"; do
      label=$(echo "kiln $set" | sed 's/ *$//')
      # shellcheck disable=SC2086 # a set is several arguments
      "$KB" "$kiln" --threads "$t" --prompt-tokens "$P" --decode-tokens "$D" --results /dev/null $set 2>&1 |
        sed -n "s|^prefill $P tokens, $t thread(s): \([0-9.]*\) tok/s.*|$label\t$t\tprefill $P\t\1|p;
                s|^decode batch 1, $t thread(s): .* \([0-9.]*\) tok/s.*|$label\t$t\tdecode $D at depth $P\t\1|p" >>"$raw"
    done
    for gguf in "${models[@]}"; do
      label="llama.cpp"
      [[ ${#models[@]} -eq 1 ]] || label="llama.cpp $(basename "$gguf" .gguf)"
      "$LB" -m "$gguf" -t "$t" -p "$P" -n 0 -d 0 -r 1 -o jsonl 2>/dev/null |
        /usr/bin/python3 -c "import sys,json
for l in sys.stdin:
  j=json.loads(l); print(f'$label\t$t\tprefill $P\t{j[\"avg_ts\"]}')" >>"$raw"
      "$LB" -m "$gguf" -t "$t" -p 0 -n "$D" -d "$P" -r 1 -o jsonl 2>/dev/null |
        /usr/bin/python3 -c "import sys,json
for l in sys.stdin:
  j=json.loads(l); print(f'$label\t$t\tdecode $D at depth $P\t{j[\"avg_ts\"]}')" >>"$raw"
    done
  done
done
/usr/bin/python3 "$(dirname "$0")/median_table.py" "$raw" engine
rm -f "$raw"
