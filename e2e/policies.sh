#!/usr/bin/env bash
# End-to-end suite: jobsd's per-job policies (docs/policies.md), through the release
# binary (embedded store in a temp --data-dir) and a real HTTP app (e2e/python/policy_http_app.py:
# the job's name says whether it answers 200, 500, 500 N times, after S seconds, or hangs; "down"
# is the app not running), in real time. The checks (e2e/python/policy_checks.py) assert counts
# and orders of runs, not latencies:
#
#   1. HTTP surface: `policy` + `labels` + exponential / delays `failurePolicy` → exactly 4 / 3
#      attempts in the run history, the tick dropped with its reason; jobsd's GET shows them,
#      Dapr's GET shows Dapr's fields only.
#   2. `policy.timeout` against a hanging app: attempts fail as timed_out and are retried; a job
#      due at the same time on the same app is delivered.
#   5. gRPC `jobsd.v1.Jobs` with stubs generated now (grpcio-tools) from proto/jobsd/v1/jobs.proto.
#   6. `policy.overlap` against a handler that takes 3 s, four `@every 1s` jobs for ~8 s: serial
#      (Dapr's default), skip and bufferOne have one call in flight at most, allow with
#      maxConcurrent 2 has two at once, never more; skip / bufferOne pass over the ticks that fell
#      due meanwhile (skipped records, reason overlap); every call the app got is a run in the
#      history.
#   4. A restart in the middle, twice — SIGTERM, then kill -9 — each on the same data dir after
#      ~5 s down: a job mid-retry makes exactly its remaining attempt; `catchUp: latest` runs
#      one tick for all it missed (one skipped record, reason catch_up); Dapr's default replays
#      every missed tick.
#   3. `whileTargetDown: skip` (a second jobsd, with app health checks, whose app is not listening
#      for ~4 s): ticks skipped and counted as target_down, none delivered; deliveries resume
#      once the app is back; Dapr's default `stage` holds its tick and replays every one;
#      `latest` holds one tick and delivers it once (the rest counted as target_down), then
#      goes on every second.
#
# Every wait is bounded; the app and jobsd are killed on exit. Runnable from any directory (the
# release binary is built with `cargo build --release`, in CARGO_TARGET_DIR when set; or set
# JOBSD_BIN); exits non-zero on any failure and closes with `policies: N passed, M failed`. Set
# E2E_KEEP_TMP=1 to keep the temp dir (data dirs, logs, the app's event logs) of a failed run.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

# Upper bound for one Python phase, in seconds (each normally takes 2–12 s).
PHASE_TIMEOUT=90
PHASE_SCRIPT=policy_checks.py
APP_START_TIMEOUT=30
# How long jobsd stays stopped in the middle of scenario 4 (the checks want ≥ 3 missed ticks
# of an `@every 1s` job passed over, ≥ 4 replayed).
DOWNTIME=5
PY_DIR="$E2E_DIR/python"

e2e_suite_begin

# start_app PORT EVENTS LOG: start policy_http_app.py on PORT; its pid is left in APP_PID.
APP_PID=""
start_app() {
  e2e_start_app "$1" "$3" "$E2E_PY" "$PY_DIR/policy_http_app.py" --port "$1" --log "$2" || return 1
  APP_PID=$E2E_SPAWNED
  e2e_log "app (pid $APP_PID) on 127.0.0.1:$1"
}

# restart_cycle HOW TAG: scenario 4 on the running jobsd: set up, stop it (HOW: stop = SIGTERM,
# kill9 = SIGKILL) as soon as the retry job has failed twice, DOWNTIME s later start it again on
# the same data dir and ports, verify.
restart_cycle() {
  local how="$1" tag="$2" state="$work/restart-$2.json"
  run_phase "restart-setup-$tag" restart-setup "$state" "$tag"
  if [ ! -f "$state" ]; then
    skip_failed "restart-verify-$tag (no state: setup failed)"
    return 0
  fi
  case "$how" in
    stop) shell_check "jobsd_exits_0_on_sigterm_mid_retry_$tag" jobsd_stop ;;
    kill9) jobsd_kill9 ;;
  esac
  local t_stopped t_launch
  t_stopped="$(e2e_now)"
  sleep "$DOWNTIME"
  t_launch="$(e2e_now)"
  jobsd_restart "$main_data" "$main_log" --app-port "$app_port"
  run_phase "restart-verify-$tag" restart-verify "$state" "$events" "$t_stopped" "$t_launch"
}

mapfile -t ports < <(free_ports 2)
app_port="${ports[0]}"
down_port="${ports[1]}"

# ---------------------------------------------------------------- 1, 2, 5, 6, 4: app up
t=$SECONDS
events="$work/app-events.jsonl"
main_data="$work/data-main"
main_log="$work/jobsd-main.log"
start_app "$app_port" "$events" "$work/app.log"
app_pid=$APP_PID
jobsd_start "$main_data" "$main_log" --app-port "$app_port"
run_phase retries retries "$events"
run_phase timeout timeout "$events"
run_phase grpc grpc "$events"
e2e_log "scenarios 1, 2, 5 took $((SECONDS - t))s"

t=$SECONDS
run_phase overlap overlap "$events"
e2e_log "scenario 6 took $((SECONDS - t))s"

t=$SECONDS
restart_cycle stop term
restart_cycle kill9 kill
shell_check main_jobsd_exits_0_on_sigterm jobsd_stop
shell_check main_no_panic_in_jobsd_log no_panic_in_logs "$main_log"
shell_check app_still_running e2e_alive "$app_pid"
e2e_unspawn "$app_pid"
e2e_log "scenario 4 took $((SECONDS - t))s"

# ---------------------------------------------------------------- 3: app down, then up
# jobsd probes the app every second and takes one failed probe as down. Its app is not
# listening when it starts, and an app starts out unhealthy until a probe succeeds, so no tick
# can find it up before the app is started.
t=$SECONDS
down_state="$work/down.json"
down_events="$work/down-app-events.jsonl"
down_log="$work/jobsd-down.log"
jobsd_start "$work/data-down" "$down_log" --app-port "$down_port" \
  --enable-app-health-check --app-health-probe-interval 1 --app-health-probe-timeout 500 \
  --app-health-threshold 1
run_phase down-setup down-setup "$down_state"
if [ -f "$down_state" ]; then
  t_up="$(e2e_now)"
  start_app "$down_port" "$down_events" "$work/down-app.log"
  run_phase down-verify down-verify "$down_state" "$down_events" "$t_up"
  e2e_unspawn "$APP_PID"
else
  skip_failed "down-verify (no state: setup failed)"
fi
shell_check down_jobsd_exits_0_on_sigterm jobsd_stop
shell_check down_no_panic_in_jobsd_log no_panic_in_logs "$down_log"
e2e_log "scenario 3 took $((SECONDS - t))s"

show_logs_on_ci() {
  [ -n "${CI:-}" ] || return 0
  local f
  for f in "$work"/jobsd-*.log; do
    echo "----- $f (last 100 lines) -----" >&2
    tail -n 100 "$f" >&2
  done
}
e2e_suite_end policies show_logs_on_ci
