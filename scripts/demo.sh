#!/usr/bin/env bash
# The main job: set up, build, compile the bundled GLM-5.2-architecture
# fixture ahead of time (BF16, and the Quark MXFP4 form), then generate text
# on the CPU with speculative decoding from the model's MTP head, printing
# the speeds. Usage: scripts/demo.sh ["prompt text"]
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the two tools it runs (and their libraries), not the test suite.
bash scripts/build.sh kiln-compile kiln-run
BIN=${BUILD_DIR:-build}/bin
OUT=${BUILD_DIR:-build}/demo
mkdir -p "$OUT"
PROMPT=${1:-"$(printf 'class Stack:\n    def __init__(self, ')"}

echo "== kiln-compile: test/fixtures/glm5-tiny-dev (BF16) -> $OUT/glm5-tiny-dev.kiln"
"$BIN/kiln-compile" test/fixtures/glm5-tiny-dev -o "$OUT/glm5-tiny-dev.kiln"
echo "== kiln-run on the CPU, speculative decoding with 3 MTP drafts per round"
"$BIN/kiln-run" "$OUT/glm5-tiny-dev.kiln" -p "$PROMPT" -n 96 --spec 3

echo
echo "== kiln-compile: test/fixtures/glm5-tiny-dev-mxfp4 (Quark MXFP4 experts)"
"$BIN/kiln-compile" test/fixtures/glm5-tiny-dev-mxfp4 -o "$OUT/glm5-tiny-dev-mxfp4.kiln"
echo "== kiln-run, MXFP4 experts, greedy without speculation"
"$BIN/kiln-run" "$OUT/glm5-tiny-dev-mxfp4.kiln" -p "$PROMPT" -n 96 --spec 0
