#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS_PER_HARNESS] [harness...]
#
# The one command for fuzzing Kiln's parsers for longer. Builds the fuzz build
# (build-fuzz/: clang-22, -DKILN_FUZZ=ON -DKILN_SANITIZE=ON, libFuzzer + ASan +
# UBSan, compiler off: the harnesses link no MLIR) and runs each harness in
# turn, one process on one core, for SECONDS_PER_HARNESS (default 60; 0 runs
# until interrupted, libFuzzer's meaning of -max_total_time=0) with
#   -max_total_time=S -timeout=10 -rss_limit_mb=2048
# over the seeds in fuzz/corpus/<h>/ and fuzz/regressions/<h>/. The repository
# corpora are only read: new entries go to a scratch folder,
# $KILN_FUZZ_WORK (default ${TMPDIR:-/tmp}/kiln-fuzz), as do crash inputs
# and logs:
#   $KILN_FUZZ_WORK/corpus/<h>/    corpus entries found by this and earlier runs
#   $KILN_FUZZ_WORK/findings/<h>/  crash-*, leak-*, timeout-*, oom-* inputs
#   $KILN_FUZZ_WORK/logs/<h>.log   libFuzzer's output
# Harnesses (default: all): safetensors index config glob tokenizer_json
# tokenizer_encode chat artifact npy openai_request glm_output.
#
# A finding: reproduce with build-fuzz/bin/fuzz/fuzz-<h> FILE, fix the library,
# copy FILE to fuzz/regressions/<h>/ (ctest replays it from then on), and
# consider merging useful scratch corpus entries into fuzz/corpus/<h>/ with
#   build-fuzz/bin/fuzz/fuzz-<h> -merge=1 fuzz/corpus/<h> $KILN_FUZZ_WORK/corpus/<h>
#
# Environment: JOBS (build parallelism, default 2), KILN_FUZZ_WORK,
# BUILD_DIR (default build-fuzz), CLANG_DIR (default /usr/lib/llvm-22/bin),
# FUZZ_FLAGS (extra libFuzzer flags, e.g. "-max_len=4096").
# Exits 1 if any harness reported a finding, 2 on a usage or build error.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

ALL=(safetensors index config glob tokenizer_json tokenizer_encode chat artifact
  npy openai_request glm_output)
SECONDS_PER=${1:-60}
if ! [[ "$SECONDS_PER" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_HARNESS] [harness...]" >&2
  echo "harnesses: ${ALL[*]}" >&2
  exit 2
fi
shift || true
HARNESSES=("$@")
[[ ${#HARNESSES[@]} -eq 0 ]] && HARNESSES=("${ALL[@]}")
for h in "${HARNESSES[@]}"; do
  if [[ ! -f "fuzz/fuzz_$h.cpp" ]]; then
    echo "scripts/fuzz.sh: unknown harness '$h' (known: ${ALL[*]})" >&2
    exit 2
  fi
done

BUILD_DIR=${BUILD_DIR:-build-fuzz}
CLANG_DIR=${CLANG_DIR:-/usr/lib/llvm-22/bin}
JOBS=${JOBS:-2}
WORK=${KILN_FUZZ_WORK:-${TMPDIR:-/tmp}/kiln-fuzz}

if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$CLANG_DIR/clang" \
    -DCMAKE_CXX_COMPILER="$CLANG_DIR/clang++" \
    -DKILN_FUZZ=ON -DKILN_SANITIZE=ON -DKILN_BUILD_COMPILER=OFF ||
    exit 2
fi
targets=()
for h in "${HARNESSES[@]}"; do targets+=("fuzz-$h"); done
ninja -C "$BUILD_DIR" -j"$JOBS" "${targets[@]}" || exit 2

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$CLANG_DIR/llvm-symbolizer}
export KILN_SOURCE_DIR=$ROOT

dict_for() {
  case $1 in
  safetensors | index | config | tokenizer_json | openai_request) echo "$ROOT/fuzz/dicts/json.dict" ;;
  npy) echo "$ROOT/fuzz/dicts/npy.dict" ;;
  *) echo "" ;;
  esac
}

status=0
summary=()
for h in "${HARNESSES[@]}"; do
  corpus="$WORK/corpus/$h" findings="$WORK/findings/$h" log="$WORK/logs/$h.log"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  seeds=("$ROOT/fuzz/corpus/$h")
  [[ -d "$ROOT/fuzz/regressions/$h" ]] && seeds+=("$ROOT/fuzz/regressions/$h")
  flags=(-max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048
    -print_final_stats=1 -artifact_prefix="$findings/")
  dict=$(dict_for "$h")
  [[ -n "$dict" ]] && flags+=(-dict="$dict")
  # shellcheck disable=SC2206
  [[ -n "${FUZZ_FLAGS:-}" ]] && flags+=($FUZZ_FLAGS)
  before=$(find "$findings" -type f | wc -l)
  echo "== fuzz-$h: ${SECONDS_PER}s, log $log"
  start=$(date +%s)
  rc=0
  "$BUILD_DIR/bin/fuzz/fuzz-$h" "${flags[@]}" "$corpus" "${seeds[@]}" \
    >"$log" 2>&1 || rc=$?
  elapsed=$(($(date +%s) - start))
  after=$(find "$findings" -type f | wc -l)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
  line="$h: rc=$rc execs=${execs:-?} time=${elapsed}s cov=${cov:-?} corpus=${corp:-?} findings=$((after - before))"
  summary+=("$line")
  echo "   $line"
  if [[ $rc -ne 0 || $after -ne $before ]]; then
    status=1
    grep -E 'ERROR|runtime error|fuzz property failed|SUMMARY' "$log" | head -5 | sed 's/^/   /'
  fi
done

echo "== summary ($(date -u +%Y-%m-%dT%H:%MZ), ${SECONDS_PER}s per harness, scratch $WORK)"
printf '%s\n' "${summary[@]}"
exit $status
