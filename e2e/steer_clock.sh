#!/usr/bin/env bash
# End-to-end suite: steering jobs (docs/steering.md) through the release binary
# (embedded store in a temp --data-dir) and a real HTTP app (e2e/python/policy_http_app.py,
# answering 200), checks in e2e/python/steer_checks.py:
#
#   1. `--test-clock`: the clock stands at the real time until advanced; `@every 1h` advanced
#      by 3h is exactly 3 deliveries, made before the advance answers, in seconds of real time.
#      On that clock: a preview across the March 2027 DST gap (the skipped 02:30 said so,
#      nothing stored, errors equal to a create's); a bulk pause by label over three ticks
#      (three skipped each, in the status and jobsd_ticks_skipped_total{reason="paused"}), a
#      bulk resume by prefix (`catchUp: latest` runs one, Dapr's default none); the same
#      operations over gRPC jobsd.v1.Jobs.
#   2. Without the flag the clock routes answer 412 ERR_JOBSD_TEST_CLOCK_OFF; JOBSD_TEST_CLOCK=true
#      turns it on like the flag; `--test-clock` with `--scheduler-host-address` is refused at
#      start.
#
# Every wait is bounded; the app and jobsd are killed on exit. Runnable from any directory (the
# release binary is built with `cargo build --release`, in CARGO_TARGET_DIR when set; or set
# JOBSD_BIN); exits non-zero on any failure and closes with `steer: N passed, M failed`. Set
# E2E_KEEP_TMP=1 to keep the temp dir of a failed run.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

# Upper bound for one Python phase, in seconds (the clock phase normally takes ~15 s).
PHASE_TIMEOUT=120
PHASE_SCRIPT=steer_checks.py
APP_START_TIMEOUT=30

e2e_suite_begin

app_port="$(free_ports 1)"
events="$work/app-events.jsonl"
e2e_start_app "$app_port" "$work/app.log" "$E2E_PY" "$E2E_DIR/python/policy_http_app.py" \
  --port "$app_port" --log "$events" || exit 1
app_pid=$E2E_SPAWNED

# ---------------------------------------------------------------- 1: --test-clock
t=$SECONDS
jobsd_start "$work/data-clock" "$work/jobsd-clock.log" --app-port "$app_port" --test-clock
run_phase clock clock "$events" "$JOBSD_METRICS_PORT"
shell_check clock_jobsd_exits_0_on_sigterm jobsd_stop
shell_check clock_no_panic_in_jobsd_log no_panic_in_logs "$work/jobsd-clock.log"
e2e_log "scenario 1 took $((SECONDS - t))s"

# ---------------------------------------------------------------- 2: off, env, remote
jobsd_start "$work/data-off" "$work/jobsd-off.log" --app-port "$app_port"
run_phase off off
shell_check off_jobsd_exits_0_on_sigterm jobsd_stop

JOBSD_TEST_CLOCK=true jobsd_start "$work/data-env" "$work/jobsd-env.log" --app-port "$app_port"
run_phase on on
shell_check env_jobsd_exits_0_on_sigterm jobsd_stop

# refused_with_remote: `--test-clock` in front of Scheduler replicas exits 64 (usage) at start,
# saying why.
refused_with_remote() {
  local out="$work/remote.out" rc=0
  timeout 20 "$JOBSD_BIN" --app-id myapp --test-clock --scheduler-host-address 127.0.0.1:1 \
    --dapr-listen-addresses 127.0.0.1 --enable-metrics=false </dev/null >"$out" 2>&1 || rc=$?
  [ "$rc" -eq 64 ] && grep -q -- "--test-clock needs the embedded scheduler" "$out" || {
    echo "exit $rc:" >&2
    cat "$out" >&2
    return 1
  }
}
shell_check test_clock_refused_with_scheduler_host_address refused_with_remote

shell_check app_still_running e2e_alive "$app_pid"
e2e_unspawn "$app_pid"
e2e_suite_end steer
