#!/usr/bin/env bash
# End-to-end suite: the release jobsd driven by the Dapr Python SDK (PyPI dapr==1.19.0).
#
#   1. build the release binary (no-op when up to date) and start it on free loopback ports
#      with a temp data dir;
#   2. make (once) the venv e2e/.venv from e2e/python/requirements.txt;
#   3. run e2e/python/jobs_api.py's `api` phase: SDK round trips of every Job field, the
#      python-sdk integration cases, the *_alpha1 methods, HTTP <-> SDK interop, errors;
#   4. durability: schedule a batch, kill -9 jobsd, restart it on the same data dir and check
#      every job is identical and deleted ones stay deleted; then the same after a SIGTERM;
#   5. stop jobsd with SIGTERM (it must exit 0 in time) and clean up.
#
# Runnable from any directory; exits non-zero on any failure. Set E2E_KEEP_TMP=1 to keep the
# temp dir (data dir, jobsd log) of a failed run.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

# Upper bound for one Python phase, in seconds (each normally takes a few seconds).
PHASE_TIMEOUT=90
PHASE_SCRIPT=jobs_api.py

e2e_suite_begin
data_dir="$work/data"
log="$work/jobsd.log"
state="$work/durability.json"
mkdir -p "$data_dir"

# A second jobsd on a data dir in use must refuse to start (and fail fast), not share the store.
second_instance_refused() {
  local ports rc=0 out="$work/second-instance.log"
  mapfile -t ports < <(free_ports 3)
  timeout -k 2 10 env -u APP_PORT NO_COLOR=1 "$JOBSD_BIN" --app-id myapp --data-dir "$data_dir" \
    --dapr-http-port "${ports[0]}" --dapr-grpc-port "${ports[1]}" \
    --dapr-listen-addresses 127.0.0.1 --metrics-listen-address 127.0.0.1 \
    --metrics-port "${ports[2]}" </dev/null >"$out" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    e2e_log "second jobsd on the same data dir: exit $rc (expected a fast failure); its output:"
    cat "$out" >&2
    return 1
  fi
}

jobsd_start "$data_dir" "$log"
run_phase api api
run_phase durability-setup durability-setup "$state"

if [ -f "$state" ]; then
  jobsd_kill9
  jobsd_start "$data_dir" "$log"
  run_phase durability-after-kill9 durability-verify "$state" kill9
  shell_check jobsd_exits_0_on_sigterm jobsd_stop
  jobsd_start "$data_dir" "$log"
  shell_check second_jobsd_on_same_data_dir_refused second_instance_refused
  run_phase durability-after-sigterm durability-verify "$state" sigterm
else
  skip_failed "durability-verify (no state: setup failed)"
fi
shell_check jobsd_exits_0_on_sigterm_again jobsd_stop
shell_check no_panic_in_jobsd_log no_panic_in_logs "$log"

dump_log_on_ci() { [ -z "${CI:-}" ] || _dump_log; }
e2e_suite_end jobs_api dump_log_on_ci
