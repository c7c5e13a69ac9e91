#!/usr/bin/env bash
# Differential checks: the same requests sent to the real daprd (with the real Dapr Scheduler and
# placement, at DAPR_VERSION of versions.env) and to jobsd, their answers compared exactly
# (e2e/dapr/differential.py says what is compared and how).
#
#   bash e2e/dapr/differential.sh [--seed N] [--scale F] [--only CATEGORY,...] [--keep-logs DIR]
#
# Writes e2e/dapr/results/differential.tsv (one row per request pair: case, request, same |
# differs | deliberate, what differs), prints a summary grouped by cause and closes with
# `N passed, M failed`. Differences listed in e2e/dapr/differential_deliberate.tsv (a regex, a
# tab, why) count as kept, not failed. Exit status 0 only when nothing failed.
#
# JOBSD_BIN: the jobsd binary (default target/release/jobsd, built when missing or stale).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=../lib.sh
source "$root/e2e/lib.sh"

t0=$SECONDS
eval "$(bash "$here/build.sh" | sed 's/^/export /')"
jobsd_build
e2e_venv "$root/e2e/python/requirements.txt"
echo "differential: ready after $((SECONDS - t0)) s (builds and venv)" >&2

rc=0
env -u DAPR_API_TOKEN -u APP_API_TOKEN PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
  "$E2E_PY" "$here/differential.py" --dapr-bin-dir "$DAPR_BIN_DIR" --jobsd-bin "$JOBSD_BIN" "$@" || rc=$?
echo "differential: took $((SECONDS - t0)) s" >&2
exit "$rc"
