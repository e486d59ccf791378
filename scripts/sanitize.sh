#!/usr/bin/env bash
# scripts/sanitize.sh [ctest args...]
#
# Builds everything (runtime, tools, compiler, unit tests, the fuzz corpus
# replays) with AddressSanitizer + UndefinedBehaviorSanitizer (clang-22,
# -DKILN_SANITIZE=ON) into build-asan/ and runs ctest there: the gtest units,
# lit (when the compiler is built) and fuzz.replay.* over fuzz/corpus and
# fuzz/regressions. Exits non-zero on any failing test and on any sanitizer
# report, including one from a process whose exit status a test ignores:
# reports are also written under build-asan/sanitizer-reports/ and the
# script fails if that folder is not empty afterwards.
#
# Environment: BUILD_DIR (default build-asan), JOBS (build and ctest
# parallelism, default 2), KILN_BUILD_COMPILER (default ON; OFF skips the
# MLIR-based compiler and lit), CLANG_DIR (default /usr/lib/llvm-22/bin).
# Extra arguments go to ctest, e.g. `scripts/sanitize.sh -R fuzz.replay`.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-asan}
# Paths relative to the checkout, so another clone hits the same ccache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=1
JOBS=${JOBS:-2}
CLANG_DIR=${CLANG_DIR:-/usr/lib/llvm-22/bin}
COMPILER=${KILN_BUILD_COMPILER:-ON}

cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CLANG_DIR/clang" \
  -DCMAKE_CXX_COMPILER="$CLANG_DIR/clang++" \
  -DKILN_SANITIZE=ON -DKILN_BUILD_COMPILER="$COMPILER"
ninja -C "$BUILD_DIR" -j"$JOBS"

REPORTS=$(cd "$BUILD_DIR" && pwd)/sanitizer-reports
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
# halt_on_error: the first report ends the process (and fails its test);
# log_path: each report also lands in $REPORTS/report.<pid>.
# allow_user_poisoning=0: LLVM's BumpPtrAllocator (inlined from its headers
# into our instrumented code) poisons the slabs it starts and unpoisons what
# it hands out, but the same allocator inside the uninstrumented libMLIR.so
# hands out memory without unpoisoning it; MLIR writing there then reads as
# use-after-poison (kiln-compile, QuantizeMxfp4 -> DenseI64ArrayAttr::get).
# Nothing in Kiln poisons memory itself, so only that false positive goes.
common="halt_on_error=1:abort_on_error=1:print_stacktrace=1:log_path=$REPORTS/report"
export ASAN_OPTIONS="$common:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="$common${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-}"
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$CLANG_DIR/llvm-symbolizer}

status=0
(cd "$BUILD_DIR" && ctest --output-on-failure -j"$JOBS" "$@") || status=1

if [[ -n "$(ls -A "$REPORTS")" ]]; then
  echo "== sanitizer reports (in $REPORTS):"
  for f in "$REPORTS"/*; do
    echo "--- $f"
    head -60 "$f"
  done
  status=1
fi
if [[ $status -eq 0 ]]; then
  echo "== sanitize: all tests passed, no sanitizer reports"
else
  echo "== sanitize: FAILED"
fi
exit $status
