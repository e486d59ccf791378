#!/usr/bin/env bash
# Alternates kiln-bench binaries (e.g. before/after a change) on one model and
# prints the median of each measure per binary and thread count.
#   bench/alternate.sh MODEL ROUNDS "THREADS" BIN... -- [kiln-bench options]
# Example: bench/alternate.sh m.kiln 3 "1 2" old/kiln-bench build/bin/kiln-bench -- --batch 1,4
set -euo pipefail
model=$1 rounds=$2 threads=$3
shift 3
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ $# -gt 0 ] && shift
raw=$(mktemp)
for r in $(seq "$rounds"); do
  for b in "${bins[@]}"; do
    for t in $threads; do
      "$b" "$model" --threads "$t" --results /dev/null "$@" 2>&1 |
        sed -n "s|^\(prefill [0-9]* tokens\), $t thread(s): \([0-9.]*\) tok/s.*|$b\t$t\t\1\t\2|p;
                s|^decode batch \([0-9]*\), $t thread(s): .* \([0-9.]*\) tok/s.*|$b\t$t\tdecode batch \1\t\2|p" >>"$raw"
    done
  done
done
/usr/bin/python3 "$(dirname "$0")/median_table.py" "$raw" binary
rm -f "$raw"
