#!/usr/bin/env bash
# Fault case: the app misbehaves (issue 15, item 2). The release jobsd (embedded store in a temp
# data dir) delivers to e2e/python/faults_app_server.py, a raw asyncio app whose job names say
# how it misbehaves; the checks are e2e/python/faults_app_checks.py (counts, not latencies):
#
#   hang    a call never answered ends at --app-call-timeout (3 s here), the failure policy
#           runs (exact attempts); an `@every 1s` job stays on time meanwhile
#   broken  garbage bytes, a close mid-headers, a 500 with a 50 MiB body, a plain 500: each call
#           a failed attempt (exact counts), the huge body not read, jobsd's peak RSS bounded;
#           a 200 whose body is cut short is a success, as in daprd
#   slow    a 10 s handler with 3,000 one-shots due at 1,000/s: in flight ≤ the
#           --app-max-concurrency default (1,024), RSS printed and bounded, nothing lost
#   flap    app health checks on, the app healthy every other second: every tick once, a
#           failing job exactly its 4 attempts
#
# About 2 minutes after the build. Run it with `bash e2e/faults/run.sh app`.
set -euo pipefail

# shellcheck source=e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

PHASE_TIMEOUT=180
PHASE_SCRIPT=faults_app_checks.py
PY_DIR="$E2E_DIR/python"

e2e_suite_begin

mapfile -t ports < <(free_ports 2)
events="$work/app-events.jsonl"
flap_events="$work/flap-events.jsonl"

# ---------------------------------------------------------------- hang, broken; slow
e2e_start_app "${ports[0]}" "$work/app.log" "$E2E_PY" "$PY_DIR/faults_app_server.py" \
  --port "${ports[0]}" --log "$events"
app_pid=$E2E_SPAWNED
jobsd_start "$work/data" "$work/jobsd.log" --app-port "${ports[0]}" --app-call-timeout 3s
run_phase hang hang "$events"
run_phase broken broken "$events" "$JOBSD_PID"
shell_check jobsd_exits_0_on_sigterm jobsd_stop
shell_check no_panic_in_jobsd_log no_panic_in_logs "$work/jobsd.log"
# The slow app on a jobsd with the default call timeout (15 min ≫ the 10 s handler): a 3 s
# timeout would cut every call and retry it, piling abandoned calls on the app.
jobsd_start "$work/data-slow" "$work/jobsd-slow.log" --app-port "${ports[0]}"
run_phase slow slow "$events" "$JOBSD_PID"
shell_check slow_jobsd_exits_0_on_sigterm jobsd_stop
shell_check slow_no_panic_in_jobsd_log no_panic_in_logs "$work/jobsd-slow.log"
e2e_unspawn "$app_pid"

# ---------------------------------------------------------------- flap
e2e_start_app "${ports[1]}" "$work/flap-app.log" "$E2E_PY" "$PY_DIR/faults_app_server.py" \
  --port "${ports[1]}" --log "$flap_events" --flap
flap_pid=$E2E_SPAWNED
jobsd_start "$work/data-flap" "$work/jobsd-flap.log" --app-port "${ports[1]}" \
  --enable-app-health-check --app-health-probe-interval 1 --app-health-probe-timeout 500 \
  --app-health-threshold 1
run_phase flap flap "$flap_events"
shell_check flap_jobsd_exits_0_on_sigterm jobsd_stop
shell_check flap_no_panic_in_jobsd_log no_panic_in_logs "$work/jobsd-flap.log"
e2e_unspawn "$flap_pid"

show_logs_on_ci() {
  [ -n "${CI:-}" ] || return 0
  local f
  for f in "$work"/jobsd*.log; do
    echo "----- $f (last 100 lines) -----" >&2
    tail -n 100 "$f" >&2
  done
}
e2e_suite_end faults-app show_logs_on_ci
