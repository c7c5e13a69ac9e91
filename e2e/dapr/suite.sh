#!/usr/bin/env bash
# Dapr's own integration suite (tests/integration of github.com/dapr/dapr, at DAPR_VERSION of
# versions.env) run against jobsd, in one of two directions:
#
#   bash e2e/dapr/suite.sh sidecar   [FOCUS]   jobsd as daprd, the real Dapr Scheduler behind it
#   bash e2e/dapr/suite.sh scheduler [FOCUS]   the real daprd, `jobsd scheduler` as the Scheduler
#   bash e2e/dapr/suite.sh placement [FOCUS]   the real daprd and Scheduler, `jobsd scheduler
#                                              --placement-enabled` as the placement service
#   bash e2e/dapr/suite.sh dapr      [FOCUS]   the real daprd and Scheduler: the baseline
#   DAPRD_VERSION=v1.16.5 bash e2e/dapr/suite.sh scheduler [FOCUS]   an older daprd (skew)
#   SUITE_TAG=sidecar-actors bash e2e/dapr/suite.sh sidecar '^actors/'   Dapr's actor tests with
#                                              jobsd as daprd (its results file named by the tag)
#
# FOCUS is the suite's own `-focus` regex over test names (`daprd/jobs/get`, ...); the default
# is this direction's part of the suite (below). Results, one line per test, go to
# e2e/dapr/results/<direction>.tsv (test, status, seconds); the whole log to
# target/dapr-suite/<direction>.log. `bash e2e/dapr/table.sh` makes docs/dapr-suites.md of them.
#
# JOBSD_BIN: the jobsd binary (default target/release/jobsd, built if missing).
# The framework builds the binaries it is not given: every one is given here (Dapr's real
# daprd, scheduler and placement from e2e/dapr/build.sh, jobsd, and /bin/false for sentry,
# operator, injector and the suite's helper binaries, which the parts run here do not start:
# a test that needs one fails at once and is listed as not applicable).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"

direction=${1:?usage: suite.sh sidecar|scheduler|placement|dapr [FOCUS]}
workflow='daprd/workflow/((basic|timer|retries|raise|externalevent|purge)/|(activity|fanout|fanoutthree|raise|parallel|order)$)'
case "$direction" in
  sidecar) focus_default='^(daprd/jobs/|actors/reminders/)' ;;
  scheduler | dapr) focus_default="^(scheduler/|daprd/jobs/|actors/reminders/|$workflow)" ;;
  placement) focus_default='^(placement/|actors/)' ;;
  *) echo "suite.sh: direction must be sidecar, scheduler, placement or dapr" >&2; exit 2 ;;
esac
focus=${2:-$focus_default}

eval "$(bash "$here/build.sh" | sed 's/^/export /')"
cache="$(dirname "$DAPR_BIN_DIR")"
src="$cache/src/dapr-$DAPR_VERSION"
suite_bin="$DAPR_BIN_DIR/integration.test"
if [ ! -x "$suite_bin" ]; then
  echo "dapr suite: compiling Dapr's integration suite ($DAPR_VERSION) ..." >&2
  t0=$SECONDS
  # -mod=mod: the go.sum of a copy that build.sh gave DAPR_REPLACE is completed by the Go command.
  mod=()
  [ -z "${DAPR_REPLACE:-}" ] || mod=(-mod=mod)
  (cd "$src" && CGO_ENABLED=0 go test -c "${mod[@]}" -tags integration -o "$suite_bin.tmp" ./tests/integration)
  mv "$suite_bin.tmp" "$suite_bin"
  echo "dapr suite: compiled in $((SECONDS - t0)) s" >&2
fi

if [ -z "${JOBSD_BIN:-}" ]; then
  JOBSD_BIN="$root/target/release/jobsd"
  (cd "$root" && cargo build --release --locked --bin jobsd)
fi
export JOBSD_BIN
command -v etcd >/dev/null || { echo "suite.sh: etcd not found (bash e2e/setup.sh installs it)" >&2; exit 1; }

out="$root/target/dapr-suite"
mkdir -p "$out" "$here/results"
# The framework starts its binaries with an environment of its own choosing: the wrapper gets
# jobsd's path baked into a launcher instead of through JOBSD_BIN.
cat >"$out/scheduler-launcher" <<LAUNCH
#!/bin/sh
JOBSD_BIN='$JOBSD_BIN' exec '$here/scheduler_on_etcd.py' "\$@"
LAUNCH
chmod +x "$out/scheduler-launcher"
cat >"$out/placement-launcher" <<LAUNCH
#!/bin/sh
JOBSD_BIN='$JOBSD_BIN' exec '$here/placement_on_jobsd.py' "\$@"
LAUNCH
chmod +x "$out/placement-launcher"

export DAPR_INTEGRATION_DAPRD_PATH="$DAPR_BIN_DIR/daprd"
# DAPRD_VERSION=v1.16.5 (one of DAPR_SKEW_VERSIONS, built by `build.sh --skew`): an older real
# daprd against this suite and jobsd, for version skew; results go to <direction>-daprd-<v>.tsv.
# SUITE_TAG names the results file instead (a part of a direction run on its own).
tag="${SUITE_TAG:-$direction}"
if [ -n "${DAPRD_VERSION:-}" ] && [ "$DAPRD_VERSION" != "$DAPR_VERSION" ]; then
  DAPR_INTEGRATION_DAPRD_PATH="$cache/$DAPRD_VERSION/daprd"
  [ -x "$DAPR_INTEGRATION_DAPRD_PATH" ] || { echo "suite.sh: no $DAPR_INTEGRATION_DAPRD_PATH (bash e2e/dapr/build.sh --skew)" >&2; exit 1; }
  tag="$direction-daprd-$DAPRD_VERSION"
fi
export DAPR_INTEGRATION_SCHEDULER_PATH="$DAPR_BIN_DIR/scheduler"
export DAPR_INTEGRATION_PLACEMENT_PATH="$DAPR_BIN_DIR/placement"
case "$direction" in
  sidecar) export DAPR_INTEGRATION_DAPRD_PATH="$JOBSD_BIN" ;;
  scheduler) export DAPR_INTEGRATION_SCHEDULER_PATH="$out/scheduler-launcher" ;;
  placement) export DAPR_INTEGRATION_PLACEMENT_PATH="$out/placement-launcher" ;;
esac
for b in SENTRY OPERATOR INJECTOR HELMTEMPLATE MCPSTDIOSERVER CONTROLLERGEN; do
  export "DAPR_INTEGRATION_${b}_PATH=/bin/false"
done

log="$out/$direction.log"
cases_dir="$out/$direction-cases"
rm -rf "$cases_dir"
mkdir -p "$cases_dir"
# Each case runs in a process of its own: a test that panics in a goroutine kills its whole
# test binary, and would take every case still running with it.
python3 "$here/cases.py" "$src/tests/integration/suite" "$focus" >"$out/$direction.cases"
echo "dapr suite: $direction, $(wc -l <"$out/$direction.cases") cases, focus $focus (log: $log)" >&2
t0=$SECONDS
run_case() {
  local name=$1 file
  file="$cases_dir/$(printf '%s' "$name" | tr '/' '_').json"
  (cd "$src/tests/integration" && timeout -k 10 "${DAPR_CASE_TIMEOUT:-240}" \
    go tool test2json -t "$suite_bin" -test.v=test2json -test.parallel 1 \
    -focus "^$(printf '%s' "$name" | sed 's/[][\.*^$+?(){}|]/\\&/g')\$") >"$file" 2>&1 || true
}
export -f run_case
export suite_bin src cases_dir
# -P: cases at once; each starts its own processes, so on a small machine fewer at once means
# fewer timeouts that are only load.
xargs -a "$out/$direction.cases" -d '\n' -P "${DAPR_SUITE_PARALLEL:-2}" -I{} \
  bash -c 'run_case "$1"' _ {}
# Cases that failed are run once more, alone: the framework keeps ports apart only within one
# process, so two cases at once can collide on a port, and a loaded box times out tests. What
# passes then is listed as passed on a rerun (`flaky`), not hidden.
rm -f "$out/$direction.first.tsv"
python3 "$here/results.py" "$cases_dir" "$out/$direction.first.tsv" "$log.first" "$out/$direction.cases" >&2
awk -F'\t' '$2 == "fail" {print $1}' "$out/$direction.first.tsv" >"$out/$direction.rerun"
mkdir -p "$cases_dir/rerun"
if [ -s "$out/$direction.rerun" ]; then
  echo "dapr suite: rerunning $(wc -l <"$out/$direction.rerun") failed cases one at a time" >&2
  cases_dir="$cases_dir/rerun" xargs -a "$out/$direction.rerun" -d '\n' -P 1 -I{} \
    bash -c 'run_case "$1"' _ {}
fi
python3 "$here/results.py" "$cases_dir,$cases_dir/rerun" "$here/results/$tag.tsv" "$log" \
  "$out/$direction.cases"
echo "dapr suite: $direction done in $((SECONDS - t0)) s" >&2
