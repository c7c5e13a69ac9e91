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

trap e2e_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Upper bound for one Python phase, in seconds (each normally takes 5–12 s).
PHASE_TIMEOUT=90
# Upper bound for an app to start listening (importing the SDK takes a second or two).
APP_START_TIMEOUT=30
PY_DIR="$E2E_DIR/python"

suite_start=$SECONDS
jobsd_build
e2e_venv "$PY_DIR/requirements.txt"

e2e_mktemp
work="$E2E_TMP"

total_passed=0
total_failed=0
failures=()

# run_phase LABEL ARGS...: run trigger_checks.py ARGS against the running jobsd; add its counts
# to the totals. A phase that crashes, times out or prints no closing line counts as a failure.
run_phase() {
  local label="$1"
  shift
  local out="$work/$label.out" rc=0
  e2e_log "phase $label: trigger_checks.py $*"
  # In the background and waited for, so that a signal to this script is acted on at once
  # and e2e_cleanup stops the phase too; its output is shown when it ends.
  e2e_spawn "$out" env -u DAPR_API_TOKEN -u DAPR_GRPC_ENDPOINT -u DAPR_HTTP_ENDPOINT \
    DAPR_HTTP_PORT="$JOBSD_HTTP_PORT" DAPR_GRPC_PORT="$JOBSD_GRPC_PORT" \
    DAPR_RUNTIME_HOST=127.0.0.1 DAPR_HEALTH_TIMEOUT=10 DAPR_API_TIMEOUT_SECONDS=15 \
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    timeout -k 5 "$PHASE_TIMEOUT" "$E2E_PY" "$PY_DIR/trigger_checks.py" "$@"
  e2e_wait_spawned "$E2E_SPAWNED" || rc=$?
  cat "$out"
  e2e_tally_phase "$label" "$out" "$rc" failures
  if [ -n "$JOBSD_PID" ] && _proc_gone "$JOBSD_PID"; then
    _dump_log
    e2e_fail "jobsd died during phase $label"
  fi
  return 0
}

# shell_check LABEL CMD...: a check done by this script, counted with the Python ones.
shell_check() {
  local label="$1"
  shift
  if "$@"; then
    total_passed=$((total_passed + 1))
    echo "ok   shell/$label"
  else
    total_failed=$((total_failed + 1))
    failures+=("$label")
    echo "FAIL shell/$label"
  fi
}

no_panic_in_log() {
  if grep -n -i -E 'panicked' "$1" >&2; then
    e2e_log "jobsd logged a panic (above, in $1)"
    return 1
  fi
}

app_alive() { ! _proc_gone "$1"; }

# ---------------------------------------------------------------- 1. HTTP app
t_build_done=$SECONDS
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
shell_check http_no_panic_in_jobsd_log no_panic_in_log "$work/jobsd-http.log"
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
shell_check grpc_no_panic_in_jobsd_log no_panic_in_log "$work/jobsd-grpc.log"
shell_check grpc_app_still_running app_alive "$grpc_app_pid"
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
  t_kill="$(e2e_now)"
  jobsd_kill9
  sleep 0.5
  jobsd_start "$crash_data" "$crash_log" --app-port "$http_app_port"
  t_restart="$(e2e_now)"
  run_phase crash crash-verify "$crash_state" "$http_events" "$t_kill" "$t_restart"
else
  failures+=("crash-verify (no state: setup failed)")
  total_failed=$((total_failed + 1))
fi
shell_check crash_jobsd_exits_0_on_sigterm jobsd_stop
shell_check crash_no_panic_in_jobsd_log no_panic_in_log "$crash_log"
shell_check http_app_still_running app_alive "$http_app_pid"
e2e_unspawn "$http_app_pid"
e2e_log "crash part took $((SECONDS - t))s"

e2e_log "suite took $((SECONDS - suite_start))s ($((SECONDS - t_build_done))s after build and venv)"
if [ "$total_failed" -ne 0 ]; then
  e2e_log "failed: ${failures[*]}"
  if [ -n "${CI:-}" ]; then
    for f in "$work"/jobsd-*.log; do
      echo "----- $f (last 100 lines) -----" >&2
      tail -n 100 "$f" >&2
    done
  fi
fi
echo "triggers: $total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
