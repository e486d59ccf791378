#!/usr/bin/env bash
# The lint step of the test command:
#  1. dead FileCheck directives in test/ (scripts/lint_filecheck.py);
#  2. the dependency arrows between layers (scripts/lint_deps.py; also run by
#     lit as test/lint/deps.test);
#  3. clang-format (LLVM style, .clang-format): with KILN_LINT_BASE=<rev>,
#     only the lines changed since that revision; otherwise every tracked
#     C/C++ file must already be formatted.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-/usr/lib/llvm-22/bin/clang-format}
status=0

echo "lint: FileCheck directives"
/usr/bin/python3 scripts/lint_filecheck.py test || status=1

echo "lint: dependency arrows"
/usr/bin/python3 scripts/lint_deps.py . || status=1

echo "lint: clang-format"
if [ -n "${KILN_LINT_BASE:-}" ]; then
  out=$(git -c core.pager=cat /usr/lib/llvm-22/bin/git-clang-format \
        --binary "$CLANG_FORMAT" --diff "$KILN_LINT_BASE" -- '*.cpp' '*.h' || true)
  if [ -n "$out" ] && ! grep -q "^no modified files\|did not modify any files" <<<"$out"; then
    echo "$out"
    echo "lint: changed lines are not clang-formatted (run git clang-format $KILN_LINT_BASE)"
    status=1
  fi
else
  mapfile -t files < <(git ls-files -co --exclude-standard -- '*.cpp' '*.h' | grep -v '^test/fixtures/' || true)
  bad=()
  for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    if ! "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1; then
      bad+=("$f")
    fi
  done
  if [ ${#bad[@]} -gt 0 ]; then
    printf 'lint: not clang-formatted: %s\n' "${bad[@]}"
    echo "lint: run $CLANG_FORMAT -i on them"
    status=1
  fi
fi
[ $status -eq 0 ] && echo "lint: ok"
exit $status
