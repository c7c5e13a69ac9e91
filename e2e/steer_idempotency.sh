#!/usr/bin/env bash
# End-to-end suite: idempotent creates and compare-and-set (docs/steering.md,
# `Idempotency-Key` and `If-Match`), through the release binary (embedded store in a temp
# --data-dir) and a real HTTP app (e2e/python/policy_http_app.py, which answers 200 to every job
# made here). The checks (e2e/python/idempotency_checks.py) assert statuses, headers and counts:
#
#   1. HTTP: a retried `overwrite: true` create under one Idempotency-Key gets the first answer
#      and the job's progress goes on; the key with another body is 422; a create-only retry on
#      Dapr's route is no 409; If-Match with a stale etag is 412 and changes nothing, with the
#      etag read it overwrites; DELETE under If-Match.
#   2. gRPC metadata `idempotency-key` / `if-match` on Dapr's ScheduleJobAlpha1 (the Dapr SDK's
#      stubs) and on jobsd.v1.Jobs (stubs generated now from proto/jobsd/v1/jobs.proto).
#   3. Durable: a create under a key, kill -9, a start on the same data dir, the retry: 204
#      replayed with the first etag, not 409.
#
# Every wait is bounded; the app and jobsd are killed on exit. Runnable from any directory (the
# release binary is built with `cargo build --release`, in CARGO_TARGET_DIR when set; or set
# JOBSD_BIN); exits non-zero on any failure and closes with `steer_idempotency: N passed, M
# failed`. Set E2E_KEEP_TMP=1 to keep the temp dir of a failed run.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

PHASE_TIMEOUT=90
PHASE_SCRIPT=idempotency_checks.py
APP_START_TIMEOUT=30

e2e_suite_begin

app_port="$(free_ports 1)"
e2e_start_app "$app_port" "$work/app.log" "$E2E_PY" "$E2E_DIR/python/policy_http_app.py" \
  --port "$app_port" --log "$work/app-events.jsonl" || exit 1
app_pid=$E2E_SPAWNED

data="$work/data"
log="$work/jobsd.log"
jobsd_start "$data" "$log" --app-port "$app_port"
run_phase http http
run_phase grpc grpc
run_phase restart-setup restart-setup "$work/restart.json"
jobsd_kill9
jobsd_restart "$data" "$log" --app-port "$app_port"
run_phase restart-verify restart-verify "$work/restart.json"
shell_check jobsd_exits_0_on_sigterm jobsd_stop
shell_check no_panic_in_jobsd_log no_panic_in_logs "$log"
e2e_unspawn "$app_pid"

e2e_suite_end steer_idempotency
