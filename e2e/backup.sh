#!/usr/bin/env bash
# End-to-end suite: backup and restore (docs/operations.md "Backup and restore") through the release binary
# and a real HTTP app (e2e/python/backup_app.py, failing `fail-*` jobs and recording every
# delivery's execution id and attempt), checks in e2e/python/backup_checks.py:
#
#   1. jobsd A (its own --data-dir) gets JOBS mixed jobs (default 10,000): cron with TZ, @every,
#      one-shots due in hours and one-shots that run at once (kept as finished), repeats, ttl,
#      tick and failure policies, labels, data, paused jobs, `fail-*` jobs mid-retry, `@every 2s`
#      jobs firing through the move.
#   2. `jobsd jobs export --handover -f FILE` (A stops firing them, the file is their final
#      state); every job's GET and next 3 fire times read from A; A stops (SIGTERM).
#   3. jobsd B (another --data-dir) starts; `jobsd jobs import -f FILE` creates every job; every
#      job's GET and next 3 fire times read from B; B delivers for RUN_AFTER seconds and stops.
#   4. Every job is identical on both (but the fields named volatile in backup_checks.py), or,
#      when it fell due before B's read, B's deliveries carry A's next fire times; no execution
#      attempt (Jobsd-Execution-Id, Jobsd-Attempt) reached the app twice; `fail-*` jobs went on
#      with their next attempt of the same execution; one-shots that ran did not run again.
#
# Prints the export and import rates (`RESULT backup …`, with the machine's load average).
# Every wait is bounded; the app and jobsd are killed on exit. Settings: JOBS=10000,
# RUN_AFTER=10 (seconds B runs), PHASE_TIMEOUT=300 (per Python phase). e2e/bench/backup.sh runs
# it with 100,000 jobs. Exits non-zero on any failure and closes with `backup: N passed, M
# failed`. Set E2E_KEEP_TMP=1 to keep the temp dir of a failed run.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

JOBS="${JOBS:-10000}"
RUN_AFTER="${RUN_AFTER:-10}"
PHASE_TIMEOUT="${PHASE_TIMEOUT:-300}"
PHASE_SCRIPT=backup_checks.py
APP_START_TIMEOUT=30

e2e_suite_begin

app_port="$(free_ports 1)"
events="$work/app-events.jsonl"
: >"$events"
e2e_start_app "$app_port" "$work/app.log" "$E2E_PY" "$E2E_DIR/python/backup_app.py" \
  --port "$app_port" --log "$events" || exit 1
app_pid=$E2E_SPAWNED
file="$work/export.ndjson"

# cli_timed NAME OUT ARGS...: run `jobsd jobs ARGS` against the running jobsd, its stdout in OUT,
# and leave its wall time in seconds in the global `took`.
took=""
cli_timed() {
  local name="$1" out="$2" start end rc=0
  shift 2
  start="$(e2e_now)"
  timeout 600 "$JOBSD_BIN" jobs --address "http://127.0.0.1:$JOBSD_HTTP_PORT" "$@" \
    >"$out" 2>"$work/$name.err" || rc=$?
  end="$(e2e_now)"
  took="$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')"
  [ "$rc" -eq 0 ] || {
    echo "jobsd jobs $* exited $rc:" >&2
    cat "$out" "$work/$name.err" >&2
    return 1
  }
}

# ---------------------------------------------------------------- 1-2: fill A, export, stop A
jobsd_start "$work/data-a" "$work/jobsd-a.log" --app-port "$app_port"
run_phase fill fill "$JOBSD_HTTP_PORT" "$JOBS" "$events"

export_load="$(cut -d' ' -f1-3 /proc/loadavg)"
export_took=""
export_with_handover() {
  cli_timed export "$work/export.json" export --handover -f "$file" -o json || return 1
  export_took="$took"
  # Header, one line per job, trailer; the CLI counted what the trailer says.
  local lines jobs
  lines="$(wc -l <"$file")"
  jobs="$("$E2E_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"])' \
    "$work/export.json")"
  if [ "$jobs" -ne "$JOBS" ] || [ "$lines" -ne "$((JOBS + 2))" ]; then
    echo "exported $jobs jobs in $lines lines, want $JOBS" >&2
    return 1
  fi
}
shell_check export_with_handover_writes_every_job export_with_handover
run_phase snapshot-a snapshot "$JOBSD_HTTP_PORT" "$file" "$work/a.jsonl"
shell_check a_exits_0_on_sigterm jobsd_stop
split="$(wc -l <"$events")"

# ---------------------------------------------------------------- 3: import into B
jobsd_start "$work/data-b" "$work/jobsd-b.log" --app-port "$app_port"
import_load="$(cut -d' ' -f1-3 /proc/loadavg)"
import_took=""
import_into_fresh() {
  cli_timed import "$work/import.json" import -f "$file" -o json || return 1
  import_took="$took"
  "$E2E_PY" - "$work/import.json" "$JOBS" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
assert summary["created"] == want and summary["failedCount"] == 0, summary
PY
}
shell_check import_creates_every_job import_into_fresh
run_phase snapshot-b snapshot "$JOBSD_HTTP_PORT" "$file" "$work/b.jsonl"
sleep "$RUN_AFTER"
# Importing the same file again skips every job (nothing written twice).
import_again() {
  cli_timed import-again "$work/import-again.json" import -f "$file" -o json || return 1
  "$E2E_PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["skipped"]==int(sys.argv[2]) and s["created"]==0, s' \
    "$work/import-again.json" "$JOBS"
}
shell_check a_second_import_skips_every_job import_again
shell_check b_exits_0_on_sigterm jobsd_stop

# ---------------------------------------------------------------- 4: compare
run_phase compare compare "$work/a.jsonl" "$work/b.jsonl" "$events" "$split"
shell_check no_panic_in_jobsd_logs no_panic_in_logs "$work/jobsd-a.log" "$work/jobsd-b.log"
shell_check app_still_running e2e_alive "$app_pid"
e2e_unspawn "$app_pid"

if [ -n "$export_took" ] && [ -n "$import_took" ]; then
  awk -v n="$JOBS" -v e="$export_took" -v i="$import_took" -v el="$export_load" \
    -v il="$import_load" -v bytes="$(wc -c <"$file")" 'BEGIN {
      printf "RESULT backup jobs=%d bytes=%d export_s=%.3f export_jobs_per_s=%.0f import_s=%.3f import_jobs_per_s=%.0f loadavg_export=\"%s\" loadavg_import=\"%s\"\n",
        n, bytes, e, n / e, i, n / i, el, il }'
fi
e2e_suite_end backup
