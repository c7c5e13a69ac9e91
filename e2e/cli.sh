#!/usr/bin/env bash
# End-to-end suite: the `jobsd jobs …` command line (docs/cli.md) of the release
# binary, against a release sidecar on `--test-clock` in front of a real HTTP app
# (e2e/python/policy_http_app.py, answering 200), against a `jobsd scheduler` replica
# (`--scheduler`), and with no server (`preview`). Shell checks only:
#
#   1. list (table, JSON across pages), get, runs, pause by label, trigger, delete of a
#      selection refused without a terminal and `--yes` then done with it; the exit codes of
#      not found (3), cannot connect (4), bad flag (64).
#   2. `--scheduler`: list, get and delete of the jobs a sidecar in remote mode created on a
#      replica process.
#   3. `preview` offline: the DST gap noted, nothing listening anywhere.
#
# Every wait is bounded; the app, jobsd and the replica are killed on exit. Runnable from any
# directory (the release binary is built with `cargo build --release`, in CARGO_TARGET_DIR when
# set; or set JOBSD_BIN); exits non-zero on any failure and closes with
# `cli: N passed, M failed`. Set E2E_KEEP_TMP=1 to keep the temp dir of a failed run.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

APP_START_TIMEOUT=30

e2e_suite_begin

app_port="$(free_ports 1)"
e2e_start_app "$app_port" "$work/app.log" "$E2E_PY" "$E2E_DIR/python/policy_http_app.py" \
  --port "$app_port" --log "$work/app-events.jsonl" || exit 1
app_pid=$E2E_SPAWNED

# cli OUT ARGS...: `jobsd jobs ARGS` with stdin from /dev/null (no terminal), stdout in OUT,
# stderr in OUT.err; the exit code in CLI_RC.
cli() {
  local out="$1"
  shift
  CLI_RC=0
  env -u DAPR_API_TOKEN -u JOBSD_ADDRESS -u NAMESPACE timeout 60 "$JOBSD_BIN" jobs "$@" \
    </dev/null >"$out" 2>"$out.err" || CLI_RC=$?
}

# expect RC OUT ARGS...: `cli OUT ARGS` exits RC (its output shown when not).
expect() {
  local want="$1" out="$2"
  shift 2
  cli "$out" "$@"
  [ "$CLI_RC" -eq "$want" ] || {
    echo "jobsd jobs $*: exit $CLI_RC, not $want" >&2
    cat "$out" "$out.err" >&2
    return 1
  }
}

# json_len FILE: the length of the JSON array in FILE.
json_len() { "$E2E_PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$1"; }

# ---------------------------------------------------------------- 1: a sidecar
t=$SECONDS
jobsd_start "$work/data" "$work/jobsd.log" --app-port "$app_port" --test-clock
api="http://127.0.0.1:$JOBSD_HTTP_PORT"
for i in $(seq 1 12); do
  curl -sf -X POST "$api/jobsd/v1/jobs/batch-$i" \
    -d '{"schedule":"@every 10m","labels":{"team":"ops"}}' >/dev/null
done
curl -sf -X POST "$api/jobsd/v1/jobs/report" -d '{"schedule":"@every 1h","labels":{"team":"billing"}}' >/dev/null
curl -sf -X POST "$api/jobsd/v1/clock/advance" -d '{"by":"61m"}' >/dev/null

list_table() {
  expect 0 "$work/list.txt" --address "$api" list || return 1
  # The header, then 13 rows in name order, each job's next fire relative to the test clock.
  [ "$(wc -l <"$work/list.txt")" -eq 14 ] &&
    head -1 "$work/list.txt" | grep -q '^NAME  *STATE  *SCHEDULE  *NEXT FIRE  *LAST FIRE  *OUTCOME  *LABELS$' &&
    grep -q '^report  *active  *@every 1h  *in 59m  *1m ago  *success  *team=billing$' "$work/list.txt"
}
shell_check list_is_a_table_of_every_job list_table

list_json_pages() {
  expect 0 "$work/list.json" --address "$api" list -o json --page-size 5 &&
    [ "$(json_len "$work/list.json")" -eq 13 ]
}
shell_check list_json_follows_every_page list_json_pages

get_and_runs() {
  expect 0 "$work/get.txt" --address "$api" get report &&
    grep -q '^Counters:  *delivered 1, succeeded 1' "$work/get.txt" &&
    grep -q '^Next fire times (UTC):$' "$work/get.txt" &&
    expect 0 "$work/runs.json" --address "$api" runs batch-1 -o json &&
    [ "$(json_len "$work/runs.json")" -eq 6 ]
}
shell_check get_and_runs get_and_runs

pause_and_trigger() {
  expect 0 "$work/pause.txt" --address "$api" pause -l team=ops --note deploy &&
    grep -q '^paused 12 job(s): ' "$work/pause.txt" &&
    expect 0 "$work/paused.json" --address "$api" list --state paused -o json &&
    [ "$(json_len "$work/paused.json")" -eq 12 ] &&
    expect 0 "$work/trigger.txt" --address "$api" trigger report &&
    grep -q '^triggered job report: execution ' "$work/trigger.txt"
}
shell_check pause_by_label_and_trigger pause_and_trigger

delete_selection() {
  expect 6 "$work/refused.txt" --address "$api" delete --prefix batch- &&
    grep -q -- '--yes' "$work/refused.txt.err" &&
    expect 0 "$work/deleted.json" --address "$api" delete --prefix batch- --yes -o json &&
    grep -q '"count": 12' "$work/deleted.json" &&
    expect 0 "$work/left.json" --address "$api" list -o json &&
    [ "$(json_len "$work/left.json")" -eq 1 ]
}
shell_check delete_of_a_selection_needs_yes_without_a_terminal delete_selection

exit_codes() {
  expect 3 "$work/missing.txt" --address "$api" get nope &&
    grep -q 'ERR_JOB_NOT_FOUND' "$work/missing.txt.err" &&
    expect 4 "$work/nowhere.txt" --address "127.0.0.1:$(free_ports 1)" list &&
    expect 64 "$work/bad.txt" --address "$api" list --bogus
}
shell_check exit_codes_not_found_unreachable_usage exit_codes
shell_check jobsd_exits_0_on_sigterm jobsd_stop
shell_check no_panic_in_jobsd_log no_panic_in_logs "$work/jobsd.log"
e2e_log "scenario 1 took $((SECONDS - t))s"

# ---------------------------------------------------------------- 2: a replica, --scheduler
t=$SECONDS
replica_port="$(free_ports 1)"
e2e_spawn "$work/replica.log" env NO_COLOR=1 "$JOBSD_BIN" scheduler --port "$replica_port" \
  --listen-address 127.0.0.1 --data-dir "$work/replica-data" --enable-metrics=false
replica_pid=$E2E_SPAWNED
e2e_wait_tcp "$replica_port" 30 "$replica_pid"
jobsd_start "$work/remote-unused" "$work/remote.log" --scheduler-host-address "127.0.0.1:$replica_port"
api="http://127.0.0.1:$JOBSD_HTTP_PORT"
for name in alpha beta gamma; do
  curl -sf -X POST "$api/v1.0-alpha1/jobs/$name" -d '{"schedule":"@every 1h"}' >/dev/null
done
sched=(--scheduler "127.0.0.1:$replica_port" --app-id myapp)

through_replica() {
  expect 0 "$work/r-list.txt" "${sched[@]}" list &&
    [ "$(wc -l <"$work/r-list.txt")" -eq 4 ] &&
    grep -q '^beta  *active  *@every 1h' "$work/r-list.txt" &&
    expect 0 "$work/r-get.json" "${sched[@]}" get beta -o json &&
    grep -q '"schedule": "@every 1h"' "$work/r-get.json" &&
    expect 0 "$work/r-delete.txt" "${sched[@]}" delete alpha &&
    expect 3 "$work/r-gone.txt" "${sched[@]}" get alpha &&
    expect 0 "$work/r-left.json" "${sched[@]}" list -o json &&
    [ "$(json_len "$work/r-left.json")" -eq 2 ]
}
shell_check scheduler_list_get_delete through_replica
shell_check remote_jobsd_exits_0_on_sigterm jobsd_stop
e2e_unspawn "$replica_pid"
e2e_log "scenario 2 took $((SECONDS - t))s"

# ---------------------------------------------------------------- 3: preview, no server
offline_preview() {
  expect 0 "$work/preview.txt" --address "127.0.0.1:$(free_ports 1)" preview nightly \
    --schedule 'TZ=America/New_York 0 30 2 * * *' --count 3 --at 2027-03-12T12:00:00Z &&
    grep -q '02:30 on 2027-03-14 does not exist in America/New_York' "$work/preview.txt"
}
shell_check preview_works_offline offline_preview

shell_check app_still_running e2e_alive "$app_pid"
e2e_unspawn "$app_pid"
e2e_suite_end cli
