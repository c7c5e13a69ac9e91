#!/usr/bin/env bash
# The fault suite (issue 15): every `e2e/faults/<case>.sh` in name order, each bounded by
# FAULT_CASE_TIMEOUT seconds (default 600) so a hung case fails instead of stalling CI.
# A case is an ordinary e2e suite (sources e2e/lib.sh, e2e_suite_begin/e2e_suite_end) and
# exits non-zero on any failed check. Run one case with `bash e2e/faults/run.sh storage`.
# Closes with `faults: N cases passed, M failed` and exits non-zero if any failed.
set -euo pipefail

FAULTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${FAULT_CASE_TIMEOUT:=600}"

cases=()
if [ "$#" -gt 0 ]; then
  for name in "$@"; do cases+=("$FAULTS_DIR/${name%.sh}.sh"); done
else
  for f in "$FAULTS_DIR"/*.sh; do
    [ "$(basename "$f")" = run.sh ] && continue
    cases+=("$f")
  done
fi

passed=0
failed=0
failed_names=()
for case in "${cases[@]}"; do
  name="$(basename "$case" .sh)"
  printf '[faults %s] case %s\n' "$(date +%H:%M:%S)" "$name" >&2
  start=$SECONDS
  # --kill-after: a case that ignores SIGTERM still ends; its own EXIT trap cleans up on TERM.
  if timeout --kill-after=30 "$FAULT_CASE_TIMEOUT" bash "$case"; then
    passed=$((passed + 1))
    printf '[faults] %s passed in %ss\n' "$name" "$((SECONDS - start))" >&2
  else
    rc=$?
    failed=$((failed + 1))
    failed_names+=("$name")
    if [ "$rc" -eq 124 ]; then
      printf '[faults] %s FAILED: still running after %ss\n' "$name" "$FAULT_CASE_TIMEOUT" >&2
    else
      printf '[faults] %s FAILED (exit %s) after %ss\n' "$name" "$rc" "$((SECONDS - start))" >&2
    fi
  fi
done

echo "faults: $passed cases passed, $failed failed${failed_names:+ (${failed_names[*]})}"
[ "$failed" -eq 0 ]
