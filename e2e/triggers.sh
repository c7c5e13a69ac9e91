#!/usr/bin/env bash
# End-to-end suite: jobs really fire. The release jobsd delivers to real apps, in real time:
#
#   1. HTTP app (e2e/python/trigger_http_app.py, stdlib): jobs scheduled through the HTTP API
#      and the Python SDK (gRPC API) arrive as `POST /job/<name>` with daprd's exact bodies
#      (§4.4), content-type, path encoding; one-shots exactly once, `@every 1s` + repeats 3
#      exactly 3 times, a 500 answer retried to 4 attempts ≈1 s apart, a 404 answer not
#      retried; finished jobs are gone.
#   2. gRPC app (e2e/python/trigger_grpc_app.py, `dapr.ext.grpc.App` from PyPI dapr[grpc]):
#      `@app.job_event` handlers get the Any value bytes (§4.5, §8); a raising handler is
#      retried to 4 attempts; an unregistered name gets OnJobEvent then OnJobEventAlpha1 4 times.
#   3. Crash in the middle: 20 `@every 1s` jobs and 30 one-shots due over ~6 s, kill -9 after
#      ~3 s, restart on the same data dir ~0.5 s later: the @every jobs keep firing, near their
#      nominal counts; every one-shot arrives, acked ones are not redelivered.
#
# Every wait is bounded; the apps and jobsd are killed on exit. Runnable from any directory;
# exits non-zero on any failure and closes with `triggers: N passed, M failed`. Set
# E2E_KEEP_TMP=1 to keep the temp dir (data dirs, logs, the apps' event logs) of a failed run.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

# Upper bound for one Python phase, in seconds (each normally takes 5–12 s).
PHASE_TIMEOUT=90
PHASE_SCRIPT=trigger_checks.py
# Upper bound for an app to start listening (importing the SDK takes a second or two).
APP_START_TIMEOUT=30
PY_DIR="$E2E_DIR/python"

e2e_suite_begin

# ---------------------------------------------------------------- 1. HTTP app
http_events="$work/http-events.jsonl"
e2e_spawn "$work/http-app.log" "$E2E_PY" "$PY_DIR/trigger_http_app.py" \
  --log "$http_events" --port-file "$work/http-app.port"
http_app_pid=$E2E_SPAWNED
e2e_wait_file "$work/http-app.port" "$APP_START_TIMEOUT" "$http_app_pid" || {
  cat "$work/http-app.log" >&2
  exit 1
}
http_app_port="$(cat "$work/http-app.port")"
e2e_log "HTTP app (pid $http_app_pid) on 127.0.0.1:$http_app_port"

t=$SECONDS
jobsd_start "$work/data-http" "$work/jobsd-http.log" --app-port "$http_app_port"
run_phase http http "$http_events"
shell_check http_jobsd_exits_0_on_sigterm jobsd_stop
shell_check http_no_panic_in_jobsd_log no_panic_in_logs "$work/jobsd-http.log"
e2e_log "HTTP app part took $((SECONDS - t))s"

# ---------------------------------------------------------------- 2. gRPC app
t=$SECONDS
grpc_events="$work/grpc-events.jsonl"
read -r -a grpc_app_args < <(PYTHONDONTWRITEBYTECODE=1 "$E2E_PY" "$PY_DIR/trigger_checks.py" grpc-app-args)
grpc_app_pid=""
for attempt in 1 2 3; do
  grpc_app_port="$(free_ports 1)"
  e2e_spawn "$work/grpc-app.log" "$E2E_PY" "$PY_DIR/trigger_grpc_app.py" \
    --port "$grpc_app_port" --log "$grpc_events" "${grpc_app_args[@]}"
  grpc_app_pid=$E2E_SPAWNED
  if e2e_wait_tcp "$grpc_app_port" "$APP_START_TIMEOUT" "$grpc_app_pid"; then
    break
  fi
  e2e_unspawn "$grpc_app_pid"
  grpc_app_pid=""
  e2e_log "gRPC app did not come up (attempt $attempt); its log:"
  cat "$work/grpc-app.log" >&2
done
[ -n "$grpc_app_pid" ] || e2e_fail "could not start the gRPC app"
e2e_log "gRPC app (pid $grpc_app_pid) on 127.0.0.1:$grpc_app_port"

jobsd_start "$work/data-grpc" "$work/jobsd-grpc.log" --app-port "$grpc_app_port" --app-protocol grpc
run_phase grpc grpc "$grpc_events"
shell_check grpc_jobsd_exits_0_on_sigterm jobsd_stop
shell_check grpc_no_panic_in_jobsd_log no_panic_in_logs "$work/jobsd-grpc.log"
shell_check grpc_app_still_running e2e_alive "$grpc_app_pid"
e2e_unspawn "$grpc_app_pid"
e2e_log "gRPC app part took $((SECONDS - t))s"

# ---------------------------------------------------------------- 3. crash in the middle
t=$SECONDS
crash_data="$work/data-crash"
crash_log="$work/jobsd-crash.log"
crash_state="$work/crash-state.json"
jobsd_start "$crash_data" "$crash_log" --app-port "$http_app_port"
run_phase crash-setup crash-setup "$crash_state"
if [ -f "$crash_state" ]; then
  sleep 3
  jobsd_kill9
  t_kill="$(e2e_now)" # after the reap: nothing the old jobsd sends can start later
  sleep 0.5
  jobsd_start "$crash_data" "$crash_log" --app-port "$http_app_port"
  t_restart="$(e2e_now)"
  run_phase crash crash-verify "$crash_state" "$http_events" "$t_kill" "$t_restart"
else
  skip_failed "crash-verify (no state: setup failed)"
fi
shell_check crash_jobsd_exits_0_on_sigterm jobsd_stop
shell_check crash_no_panic_in_jobsd_log no_panic_in_logs "$crash_log"
shell_check http_app_still_running e2e_alive "$http_app_pid"
e2e_unspawn "$http_app_pid"
e2e_log "crash part took $((SECONDS - t))s"

show_logs_on_ci() {
  [ -n "${CI:-}" ] || return 0
  local f
  for f in "$work"/jobsd-*.log; do
    echo "----- $f (last 100 lines) -----" >&2
    tail -n 100 "$f" >&2
  done
}
e2e_suite_end triggers show_logs_on_ci
