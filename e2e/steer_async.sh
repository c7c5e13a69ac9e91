#!/usr/bin/env bash
# End-to-end suite: async completion (issue 13 item 7, docs/steering.md), through the
# release binary (embedded store in a temp --data-dir) and real apps in real time:
#
#   1. HTTP app (e2e/python/async_app.py, standard library): it answers `202` with
#      `Jobsd-Async: true` and ends the execution from a worker thread through
#      /jobsd/v1/executions/{id}/heartbeat|complete|fail — heartbeats outlive a 2 s lease, a
#      fail is recorded with its error and retried with the same execution id, a lease nobody
#      extends fails its attempts ("lease expired") until the failure policy drops the tick,
#      a plain 202 stays Dapr's success; unknown / ended executions → 404 / 409.
#   2. kill -9 while executions are held: after the restart on the same data dir the one with
#      a live lease is still held (not delivered again) and heartbeat + complete work; the one
#      whose lease ran out while jobsd was down fails its attempt.
#   3. gRPC app (e2e/python/async_grpc_app.py, Dapr's Python SDK): `jobsd-async: true`
#      response metadata holds the execution; jobsd.v1.Jobs Heartbeat / CompleteExecution /
#      FailExecution end it.
#
# The checks (e2e/python/async_checks.py) assert counts, orders and outcomes, never latencies.
# Every wait is bounded; the apps and jobsd are killed on exit. Runnable from any directory
# (the release binary is built with `cargo build --release`, in CARGO_TARGET_DIR when set; or
# set JOBSD_BIN); exits non-zero on any failure and closes with `steer_async: N passed,
# M failed`. E2E_KEEP_TMP=1 keeps the temp dir of a failed run.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

# Upper bound for one Python phase, in seconds (each normally takes 2–8 s).
PHASE_TIMEOUT=90
PHASE_SCRIPT=async_checks.py
APP_START_TIMEOUT=30
# How long jobsd stays killed in scenario 2: longer than the short lease (2 s).
DOWNTIME=4
PY_DIR="$E2E_DIR/python"

e2e_suite_begin

mapfile -t ports < <(free_ports 2)
app_port="${ports[0]}"
grpc_app_port="${ports[1]}"

# ---------------------------------------------------------------- 1, 2: HTTP app
t=$SECONDS
events="$work/app-events.jsonl"
data="$work/data-http"
log="$work/jobsd-http.log"
# jobsd first: the app is told its API port. Nothing is due before the app listens.
jobsd_start "$data" "$log" --app-port "$app_port"
e2e_start_app "$app_port" "$work/app.log" "$E2E_PY" "$PY_DIR/async_app.py" --port "$app_port" \
  --jobsd "http://127.0.0.1:$JOBSD_HTTP_PORT" --log "$events" || exit 1
app_pid=$E2E_SPAWNED
run_phase http http "$events"
e2e_log "scenario 1 took $((SECONDS - t))s"

t=$SECONDS
state="$work/kill.json"
run_phase kill-setup kill-setup "$state"
if [ -f "$state" ]; then
  jobsd_kill9
  sleep "$DOWNTIME"
  jobsd_restart "$data" "$log" --app-port "$app_port"
  run_phase kill-verify kill-verify "$state" "$events"
else
  skip_failed "kill-verify (no state: setup failed)"
fi
shell_check http_jobsd_exits_0_on_sigterm jobsd_stop
shell_check http_no_panic_in_jobsd_log no_panic_in_logs "$log"
shell_check app_still_running e2e_alive "$app_pid"
e2e_unspawn "$app_pid"
e2e_log "scenario 2 took $((SECONDS - t))s"

# ---------------------------------------------------------------- 3: gRPC app
t=$SECONDS
grpc_events="$work/grpc-app-events.jsonl"
grpc_log="$work/jobsd-grpc.log"
jobsd_start "$work/data-grpc" "$grpc_log" --app-port "$grpc_app_port" --app-protocol grpc
# (The script's own directory is on its import path: it uses async_app and policy_checks.)
e2e_start_app "$grpc_app_port" "$work/grpc-app.log" "$E2E_PY" "$PY_DIR/async_grpc_app.py" \
  --port "$grpc_app_port" --jobsd-grpc "127.0.0.1:$JOBSD_GRPC_PORT" --log "$grpc_events" \
  --names async-gdone-1 async-gfail-1 || exit 1
grpc_app_pid=$E2E_SPAWNED
run_phase grpc grpc "$grpc_events"
shell_check grpc_jobsd_exits_0_on_sigterm jobsd_stop
shell_check grpc_no_panic_in_jobsd_log no_panic_in_logs "$grpc_log"
e2e_unspawn "$grpc_app_pid"
e2e_log "scenario 3 took $((SECONDS - t))s"

show_logs_on_ci() {
  [ -n "${CI:-}" ] || return 0
  local f
  for f in "$work"/jobsd-*.log "$work"/*app.log; do
    echo "----- $f (last 100 lines) -----" >&2
    tail -n 100 "$f" >&2
  done
}
e2e_suite_end steer_async show_logs_on_ci
