#!/usr/bin/env bash
# The whole test suite: set-up and build, the lint step, lit (compiler tests),
# ctest (gtest units, fuzz corpus replays, end-to-end checks), then the
# runtime's unit tests and the fuzz corpora again under ASan + UBSan
# (scripts/sanitize.sh, build-asan/). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/setup-node.sh
BUILD_DIR=${BUILD_DIR:-build}
status=0
bash scripts/lint.sh || status=1
echo "== lit =="
/usr/lib/llvm-22/bin/lit -sv "$BUILD_DIR/test" || status=1
echo "== ctest (lit ran above) =="
(cd "$BUILD_DIR" && ctest --output-on-failure -j"$(nproc)" -E '^lit$') || status=1
echo "== ASan + UBSan: runtime unit tests and every fuzz corpus replayed =="
KILN_BUILD_COMPILER=OFF bash scripts/sanitize.sh -R 'unit\.|fuzz\.replay' || status=1
exit $status
