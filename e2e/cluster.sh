#!/usr/bin/env bash
# End-to-end suite: a scheduler cluster (issue 5). Debian's etcd on loopback, 3 `jobsd scheduler`
# replicas sharing it (--lease-ttl 3s), 2 sidecars with the same app id in front of one recording
# HTTP app (e2e/python/trigger_http_app.py, which listens with a backlog fit for bursts).
# Sidecar 1 is given every replica's address, sidecar 2 only the first one's (it learns
# the others through WatchHosts). The checks are in e2e/python/cluster_checks.py:
#
#   1. replicas SERVING (grpc.health.v1), sidecars healthy and connected to all 3 replicas,
#      each replica owning a share of the partitions (read from etcd);
#   2. a job with jobsd's settings (labels, policy, failurePolicy) created through sidecar 1 and
#      shown with them by sidecar 2; 200 `@every 1s` jobs and 800 one-shots due 4–15 s ahead,
#      scheduled through both sidecars;
#   3. `kill -9` of replica s2 ~8 s in: every one-shot delivered (and answered 200, so acked),
#      in time or within kill + 6 s; duplicates few and only around the kill; every @every job
#      resumes with no gap over 6 s (lease 3 s + takeover) and fires once a second afterwards,
#      while the jobs of s1 and s3 never pause over 2.5 s; exactly s2's partitions changed owner;
#   4. s2 restarted with the same --id: the same partitions move back to it, its jobs with no
#      gap over 6 s, the others' with none over 2.5 s, and no double firing (≤ 5 + 2 deliveries
#      per job in the last 5 s of 8); 100 new one-shots delivered at least once with ≤ 2
#      duplicates; finished one-shots never fire again;
#   5. the job with jobsd's settings still shows them on both sidecars (kept in etcd through the
#      kill and restart), then is deleted;
#      GET /v1.0/jobs lists exactly the 200 @every jobs; all deleted; the list is empty on both
#      sidecars and the jobs stop firing;
#   6. through sidecar 2, 24 `@every 1s` jobs that every replica owns some of are paused (they
#      fire nowhere, the rest go on), resumed (they fire again), all 24 are paused and resumed
#      by one bulk call each (by prefix), one is run now and backfilled
#      (the executions arrive with the ids the calls answered): each call reaches the replica
#      that fires the job; every process still alive, no panic logged, sidecars and replicas
#      exit 0 on SIGTERM.
#
# Every wait is bounded; etcd, the replicas, the sidecars and the app are killed on exit.
# Runnable from any directory; exits non-zero on any failure and closes with
# `cluster: N passed, M failed`. Settings (environment): ETCD_BIN (/usr/bin/etcd), JOBSD_BIN
# (a prebuilt jobsd instead of the release build), E2E_KEEP_TMP=1 (keep the temp dir — etcd
# data, logs, the app's event log — of a failed run).
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

LEASE_TTL=3s
REPLICAS=3
# The replica killed and restarted (1-based); not s1, the only address sidecar 2 is given.
VICTIM=2
# Upper bound for one Python phase, in seconds (the longest normally takes ~20 s).
PHASE_TIMEOUT=90
PHASE_SCRIPT=cluster_checks.py
# Upper bound for etcd, a replica or a sidecar to become ready.
START_TIMEOUT=30
PY_DIR="$E2E_DIR/python"
APP_ID=clusterapp

[ -x "$ETCD_BIN" ] || {
  e2e_fail "no etcd at $ETCD_BIN: run e2e/setup.sh (Debian etcd-server) or set ETCD_BIN"
  exit 1
}
e2e_suite_begin

# stop_exits_0 PID NAME: SIGTERM PID; it must exit 0 within E2E_STOP_TIMEOUT seconds.
stop_exits_0() {
  local pid="$1" name="$2" rc=0 deadline=$((SECONDS + E2E_STOP_TIMEOUT))
  kill -TERM "$pid" 2>/dev/null || true
  until _proc_gone "$pid"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      e2e_log "$name (pid $pid) still running ${E2E_STOP_TIMEOUT}s after SIGTERM"
      e2e_unspawn "$pid"
      return 1
    fi
    sleep 0.1
  done
  wait "$pid" || rc=$?
  _e2e_forget "$pid"
  [ "$rc" -eq 0 ] || e2e_log "$name (pid $pid) exited with status $rc after SIGTERM"
  [ "$rc" -eq 0 ]
}

dump_logs() {
  local f
  for f in "$work"/etcd.log "$work"/replica-*.log "$work"/sidecar-*.log "$work"/app.log; do
    [ -f "$f" ] || continue
    echo "----- $f (last ${1:-60} lines) -----" >&2
    tail -n "${1:-60}" "$f" >&2
  done
}

# ---------------------------------------------------------------- ports
mapfile -t ports < <(free_ports 9)
[ "${#ports[@]}" -eq 9 ] || {
  e2e_fail "could not pick free ports"
  exit 1
}
etcd_client_port="${ports[0]}"
etcd_peer_port="${ports[1]}"
replica_ports=("${ports[2]}" "${ports[3]}" "${ports[4]}")
sidecar_http_ports=("${ports[5]}" "${ports[6]}")
sidecar_grpc_ports=("${ports[7]}" "${ports[8]}")
replica_addrs=()
for ((i = 0; i < REPLICAS; i++)); do replica_addrs+=("127.0.0.1:${replica_ports[$i]}"); done
sidecar_addrs="127.0.0.1:${sidecar_http_ports[0]},127.0.0.1:${sidecar_http_ports[1]}"

PHASE_ENV=(CLUSTER_SIDECARS="$sidecar_addrs" CLUSTER_ETCD_PREFIX=dapr CLUSTER_VICTIM="s$VICTIM"
  CLUSTER_APP_ID="$APP_ID")

# ---------------------------------------------------------------- etcd
e2e_start_etcd "$work/etcd" "$work/etcd.log" "$etcd_client_port" "$etcd_peer_port" "$START_TIMEOUT" || {
  dump_logs 40
  exit 1
}
PHASE_ENV+=(CLUSTER_ETCD="$ETCD_URL")
e2e_log "etcd $("$ETCD_BIN" --version | head -1 | sed 's/.*: //') (pid $ETCD_PID) on $ETCD_URL"

# ---------------------------------------------------------------- replicas
replica_pids=()
# start_replica I: start replica s<I+1> on its port (again, after a kill: same --id and port).
start_replica() {
  local i="$1" log="$work/replica-s$(($1 + 1)).log"
  echo "=== start $(date -u +%H:%M:%S.%N)" >>"$log"
  # shellcheck disable=SC2046
  e2e_spawn "$log" env NO_COLOR=1 "$JOBSD_BIN" scheduler --etcd-endpoints "$ETCD_URL" \
    --id "s$((i + 1))" --listen-address 127.0.0.1 --port "${replica_ports[$i]}" \
    --lease-ttl "$LEASE_TTL" --log-level info $(e2e_metrics_flags)
  replica_pids[i]=$E2E_SPAWNED
  e2e_log "replica s$((i + 1)) (pid $E2E_SPAWNED) on ${replica_addrs[$i]}"
}

# wait_serving ADDR...: every replica answers grpc.health.v1 SERVING (bounded).
wait_serving() {
  e2e_wait_serving "$work/serving.out" "$START_TIMEOUT" "$@" || {
    dump_logs 40
    return 1
  }
}

for ((i = 0; i < REPLICAS; i++)); do start_replica "$i"; done
wait_serving "${replica_addrs[@]}" || exit 1
e2e_log "replicas SERVING after $((SECONDS - suite_ready))s"

# ---------------------------------------------------------------- app and sidecars
events="$work/events.jsonl"
e2e_spawn "$work/app.log" env PYTHONDONTWRITEBYTECODE=1 "$E2E_PY" "$PY_DIR/trigger_http_app.py" \
  --log "$events" --port-file "$work/app.port"
app_pid=$E2E_SPAWNED
e2e_wait_file "$work/app.port" "$START_TIMEOUT" "$app_pid" || {
  cat "$work/app.log" >&2
  exit 1
}
app_port="$(cat "$work/app.port")"

sidecar_pids=()
all_replicas="$(IFS=,; echo "${replica_addrs[*]}")"
for i in 0 1; do
  # Sidecar 1 knows every replica; sidecar 2 only s1 (WatchHosts names the rest).
  if [ "$i" -eq 0 ]; then hosts="$all_replicas"; else hosts="${replica_addrs[0]}"; fi
  # shellcheck disable=SC2046
  e2e_spawn "$work/sidecar-$((i + 1)).log" env -u APP_PORT -u APP_ID -u DAPR_API_TOKEN \
    -u DAPR_SCHEDULER_HOST_ADDRESS_DNS_A NO_COLOR=1 "$JOBSD_BIN" --app-id "$APP_ID" \
    --app-port "$app_port" --dapr-http-port "${sidecar_http_ports[$i]}" \
    --dapr-grpc-port "${sidecar_grpc_ports[$i]}" --dapr-listen-addresses 127.0.0.1 \
    --scheduler-host-address "$hosts" --data-dir "$work/sidecar-$((i + 1))-unused" --log-level info \
    $(e2e_metrics_flags)
  sidecar_pids[i]=$E2E_SPAWNED
  e2e_log "sidecar $((i + 1)) (pid $E2E_SPAWNED) on http ${sidecar_http_ports[$i]}, scheduler $hosts"
done
for i in 0 1; do
  e2e_wait_http "http://127.0.0.1:${sidecar_http_ports[$i]}/v1.0/healthz" 204 "$START_TIMEOUT" \
    "${sidecar_pids[$i]}" "sidecar $((i + 1))" || {
    dump_logs 40
    exit 1
  }
done

run_phase sidecars sidecars "$REPLICAS"

# ---------------------------------------------------------------- schedule, kill, restart
state="$work/state.json"
run_phase setup setup "$state"
if [ -s "$state" ]; then
  kill_at="$("$E2E_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["kill_at"])' "$state")"
  sleep "$(awk -v t="$kill_at" -v now="$(e2e_now)" 'BEGIN { d = t - now; print (d > 0 ? d : 0) }')"
  victim_pid="${replica_pids[$((VICTIM - 1))]}"
  kill -KILL "$victim_pid"
  t_kill="$(e2e_now)"
  wait "$victim_pid" 2>/dev/null || true
  _e2e_forget "$victim_pid"
  echo "=== killed with SIGKILL $(date -u +%H:%M:%S.%N)" >>"$work/replica-s$VICTIM.log"
  e2e_log "replica s$VICTIM (pid $victim_pid) killed with SIGKILL"
  run_phase after-kill after-kill "$state" "$events" "$t_kill"

  start_replica $((VICTIM - 1))
  if wait_serving "${replica_addrs[$((VICTIM - 1))]}"; then
    t_restart="$(e2e_now)"
    since_kill="$(awk -v a="$t_kill" -v b="$t_restart" 'BEGIN { printf "%.2f", b - a }')"
    e2e_log "replica s$VICTIM SERVING again ${since_kill}s after the kill"
    run_phase after-restart after-restart "$state" "$events" "$t_kill" "$t_restart"
  else
    skip_failed "restart of s$VICTIM"
  fi
  run_phase cleanup cleanup "$state" "$events"
else
  skip_failed "setup (no state: the rest skipped)"
fi
# Last: its jobs would be strays to the phases above.
run_phase steer steer "$events"

# ---------------------------------------------------------------- processes
shell_check etcd_alive e2e_alive "$ETCD_PID"
shell_check app_alive e2e_alive "$app_pid"
for i in 0 1; do shell_check "sidecar$((i + 1))_alive" e2e_alive "${sidecar_pids[$i]}"; done
for ((i = 0; i < REPLICAS; i++)); do shell_check "replica_s$((i + 1))_alive" e2e_alive "${replica_pids[$i]}"; done
shell_check no_panic_in_logs no_panic_in_logs "$work"/replica-*.log "$work"/sidecar-*.log
for i in 0 1; do
  shell_check "sidecar$((i + 1))_exits_0_on_sigterm" stop_exits_0 "${sidecar_pids[$i]}" "sidecar $((i + 1))"
done
for ((i = 0; i < REPLICAS - 1; i++)); do
  shell_check "replica_s$((i + 1))_exits_0_on_sigterm" stop_exits_0 "${replica_pids[$i]}" "replica s$((i + 1))"
done
# The last replica with etcd not answering (as the last members of a cluster whose etcd lost
# its quorum): its stop is bounded (8 s to leave, 4 s for the last writes), still exit 0.
kill -STOP "$ETCD_PID"
E2E_STOP_TIMEOUT=30 shell_check "replica_s${REPLICAS}_exits_0_on_sigterm_with_etcd_frozen" \
  stop_exits_0 "${replica_pids[$((REPLICAS - 1))]}" "replica s${REPLICAS}"
kill -CONT "$ETCD_PID"

e2e_suite_end cluster dump_logs 80
