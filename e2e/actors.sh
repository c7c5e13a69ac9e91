#!/usr/bin/env bash
# End-to-end suite: actors (issue 10). A real actor service written with the PyPI Dapr SDK
# (e2e/python/actor_app.py: `dapr.ext.fastapi.DaprActor` under uvicorn, one actor type) behind
# the release jobsd, driven by the SDK's `ActorProxy` from a separate process
# (e2e/python/actor_checks.py, which reads what the app received from its JSON-lines events file):
#
#   1. Embedded scheduler (jobsd's own store in a temp dir), `--app-port` to the app: jobsd reads
#      the app's /dapr/config and hosts its type; method calls answer through jobsd (errors as
#      ERR_ACTOR_INVOKE_METHOD, one actor's calls turn-based); the actor registers a reminder
#      (due 1 s, every 1 s, binary data), a timer and a one-shot reminder with the SDK's own
#      calls; the app receives the ticks with their data intact; the one-shot fires exactly
#      once; an unregistered timer stops; an idle actor is deactivated.
#   2. `kill -9` of jobsd, restart on the same data dir and ports: the reminder ticks again
#      without being registered again, and GET still answers it; then a reminder unregistered
#      by the actor (SDK `unregister_reminder`) and one deleted over HTTP both stop ticking.
#   3. Remote scheduler: Debian's etcd, 3 `jobsd scheduler` replicas on it, a jobsd sidecar with
#      `--scheduler-host-address` to all of them, a fresh app: the same checks as 1 (method
#      call, SDK-registered reminders and timer, ticks, one-shot) and the same stops as 2.
#
# Every wait is bounded; etcd, the replicas, jobsd and the apps are killed on exit. Runnable
# from any directory; exits non-zero on any failure and closes with `actors: N passed, M failed`.
# Settings (environment): ETCD_BIN (/usr/bin/etcd), JOBSD_BIN (a prebuilt jobsd instead of the
# release build), E2E_KEEP_TMP=1 (keep the temp dir — data dirs, logs, the apps' event logs —
# of a failed run).
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

# Upper bound for one Python phase, in seconds (each normally takes 15–25 s).
PHASE_TIMEOUT=120
PHASE_SCRIPT=actor_checks.py
# Upper bound for etcd, a replica or an app to become ready (the app imports the SDK and
# FastAPI, a few seconds on a loaded machine).
START_TIMEOUT=30
REPLICAS=3
PY_DIR="$E2E_DIR/python"

[ -x "$ETCD_BIN" ] || {
  e2e_fail "no etcd at $ETCD_BIN: run e2e/setup.sh (Debian etcd-server) or set ETCD_BIN"
  exit 1
}
e2e_suite_begin

# The checks' ActorProxy calls: the SDK's HTTP timeout (60 s by default) within the phase's.
PHASE_ENV=(DAPR_HTTP_TIMEOUT_SECONDS=20)

dump_logs() {
  local f
  for f in "$work"/*.log; do
    [ -f "$f" ] || continue
    echo "----- $f (last ${1:-60} lines) -----" >&2
    tail -n "${1:-60}" "$f" >&2
  done
}

# start_app PORT EVENTS LOG: start actor_app.py on 127.0.0.1:PORT, its SDK pointed at the
# running jobsd's HTTP port, recording to EVENTS; wait until it listens (the SDK makes it wait
# for jobsd's /v1.0/healthz/outbound first). Sets app_pid.
app_pid=""
start_app() {
  local port="$1" events="$2" log="$3"
  e2e_spawn "$log" env -u DAPR_API_TOKEN -u APP_API_TOKEN -u DAPR_HTTP_ENDPOINT \
    DAPR_HTTP_PORT="$JOBSD_HTTP_PORT" DAPR_RUNTIME_HOST=127.0.0.1 DAPR_HEALTH_TIMEOUT=20 \
    DAPR_HTTP_TIMEOUT_SECONDS=20 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    "$E2E_PY" "$PY_DIR/actor_app.py" --port "$port" --log "$events"
  app_pid=$E2E_SPAWNED
  if ! e2e_wait_tcp "$port" "$START_TIMEOUT" "$app_pid"; then
    cat "$log" >&2
    return 1
  fi
  e2e_log "actor app (pid $app_pid) on 127.0.0.1:$port, sidecar http $JOBSD_HTTP_PORT"
}

# ---------------------------------------------------------------- 1 and 2. embedded scheduler
t=$SECONDS
events="$work/embedded-events.jsonl"
data_dir="$work/data"
log="$work/jobsd-embedded.log"
app_port="$(free_ports 1)"
jobsd_start "$data_dir" "$log" --app-port "$app_port"
if start_app "$app_port" "$events" "$work/app-embedded.log"; then
  run_phase basics basics "$events"

  t_kill="$(e2e_now)"
  jobsd_kill9
  echo "=== killed with SIGKILL $(date -u +%H:%M:%S.%N)" >>"$log"
  # Down for a tick or so, as a crashed sidecar is, before it is back.
  sleep 1
  if jobsd_restart "$data_dir" "$log" --app-port "$app_port"; then
    t_restart="$(e2e_now)"
    e2e_log "jobsd restarted on the same data dir and ports"
    run_phase after-restart after-restart "$events" "$t_kill" "$t_restart"
  else
    skip_failed "restart after kill -9"
  fi
  shell_check embedded_app_still_running e2e_alive "$app_pid"
  e2e_unspawn "$app_pid"
else
  skip_failed "embedded app start"
fi
shell_check embedded_jobsd_exits_0_on_sigterm jobsd_stop
shell_check embedded_no_panic_in_jobsd_log no_panic_in_logs "$log"
e2e_log "embedded part took $((SECONDS - t))s"

# ---------------------------------------------------------------- 3. remote scheduler cluster
t=$SECONDS
mapfile -t ports < <(free_ports $((3 + REPLICAS)))
[ "${#ports[@]}" -eq $((3 + REPLICAS)) ] || {
  e2e_fail "could not pick free ports"
  exit 1
}
e2e_start_etcd "$work/etcd" "$work/etcd.log" "${ports[0]}" "${ports[1]}" "$START_TIMEOUT" || {
  dump_logs 40
  exit 1
}
e2e_log "etcd (pid $ETCD_PID) on $ETCD_URL"
replica_pids=()
replica_addrs=()
for ((i = 0; i < REPLICAS; i++)); do
  replica_addrs+=("127.0.0.1:${ports[$((2 + i))]}")
  # shellcheck disable=SC2046
  e2e_spawn "$work/replica-s$((i + 1)).log" env NO_COLOR=1 "$JOBSD_BIN" scheduler \
    --etcd-endpoints "$ETCD_URL" --id "s$((i + 1))" --listen-address 127.0.0.1 \
    --port "${ports[$((2 + i))]}" --log-level info $(e2e_metrics_flags)
  replica_pids+=("$E2E_SPAWNED")
  e2e_log "replica s$((i + 1)) (pid $E2E_SPAWNED) on ${replica_addrs[$i]}"
done
e2e_wait_serving "$work/serving.out" "$START_TIMEOUT" "${replica_addrs[@]}" || {
  dump_logs 40
  exit 1
}

events="$work/remote-events.jsonl"
log="$work/jobsd-remote.log"
app_port="${ports[$((2 + REPLICAS))]}"
jobsd_start "$work/remote-unused" "$log" --app-port "$app_port" \
  --scheduler-host-address "$(IFS=,; echo "${replica_addrs[*]}")"
if start_app "$app_port" "$events" "$work/app-remote.log"; then
  run_phase remote remote "$events"
  shell_check remote_app_still_running e2e_alive "$app_pid"
  e2e_unspawn "$app_pid"
else
  skip_failed "remote app start"
fi
shell_check etcd_alive e2e_alive "$ETCD_PID"
for ((i = 0; i < REPLICAS; i++)); do
  shell_check "replica_s$((i + 1))_alive" e2e_alive "${replica_pids[$i]}"
done
shell_check remote_jobsd_exits_0_on_sigterm jobsd_stop
shell_check remote_no_panic_in_logs no_panic_in_logs "$log" "$work"/replica-*.log
e2e_log "remote part took $((SECONDS - t))s"

e2e_suite_end actors dump_logs 80
