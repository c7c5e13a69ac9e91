#!/usr/bin/env bash
# Version skew (issue 38 item 6): the same jobs + reminder smoke (e2e/dapr/skew/run.py says
# which checks) for real daprd of every pinned version on `jobsd scheduler` (one replica, and
# three on etcd) and, as the baseline, on the Dapr Scheduler of its own version; and for a jobsd
# sidecar on the real Dapr Scheduler of every pinned version (and on `jobsd scheduler`).
#
#   bash e2e/dapr/skew.sh              every row: the versions are DAPR_SKEW_VERSIONS and
#                                      DAPR_VERSION of e2e/dapr/versions.env
#   bash e2e/dapr/skew.sh ROW...       some rows, SIDECAR@SCHEDULER: daprd-v1.16.5@jobsd,
#                                      daprd-v1.16.5@jobsd3, daprd-v1.16.5@dapr-v1.16.5,
#                                      jobsd@dapr-v1.16.5, jobsd@jobsd
#
# Results: e2e/dapr/results/skew-table.tsv (row, check, result, note; rows run again replace
# theirs) and each row's warnings and errors in e2e/dapr/results/skew/<row>.log.
# JOBSD_BIN: the jobsd binary (default: target/release/jobsd, built if missing). The real
# daprd and scheduler come from `e2e/dapr/build.sh --skew` (cached). E2E_KEEP_TMP=1 keeps the
# whole logs of a row that failed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"
eval "$(DAPR_BUILD_CLI=0 bash "$here/build.sh" --skew | sed 's/^/export /')"
if [ -z "${JOBSD_BIN:-}" ]; then
  JOBSD_BIN="$root/target/release/jobsd"
  (cd "$root" && cargo build --release --locked --bin jobsd)
fi
export JOBSD_BIN
py="$root/e2e/.venv/bin/python"
[ -x "$py" ] || { echo "skew.sh: no $py (bash e2e/setup.sh makes the venv)" >&2; exit 1; }

rows=("$@")
if [ "${#rows[@]}" = 0 ]; then
  for v in $DAPR_SKEW_VERSIONS $DAPR_VERSION; do
    rows+=("daprd-$v@jobsd" "daprd-$v@jobsd3" "daprd-$v@dapr-$v" "jobsd@dapr-$v")
  done
  rows+=(jobsd@jobsd)
fi
results="$here/results/skew-table.tsv"
new="$(mktemp)"
trap 'rm -f "$new"' EXIT
rc=0
"$py" "$here/skew/run.py" --tsv "$new" --logs "$here/results/skew" "${rows[@]}" || rc=$?
# Keep the rows not run this time, in their order; replace the others.
{
  printf '# row\tcheck\tresult\tnote\n'
  [ -f "$results" ] && grep -v '^#' "$results" | awk -F'\t' 'NR == FNR { ran[$1] = 1; next } !($1 in ran)' "$new" - || true
  cat "$new"
} >"$results.tmp"
mv "$results.tmp" "$results"
echo "skew: $(grep -c $'\tfail\t' "$new" || true) checks failed; results in $results" >&2
exit "$rc"
