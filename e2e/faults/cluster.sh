#!/usr/bin/env bash
# Fault case (issue 15, item 4): a scheduler cluster under etcd and replica faults. Debian's
# etcd on loopback, reached by the 3 `jobsd scheduler` replicas (--lease-ttl 3s) through a
# delaying TCP proxy (e2e/python/delay_proxy.py), one sidecar, a recording HTTP app
# (trigger_http_app.py). Load all along (faults_cluster.py load): 20 `@every 1s` jobs and a
# one-shot due 3 s ahead created every 0.1 s. Faults, one after the other, each a window:
#
#   1. replica s2 SIGSTOPped past its lease (lease + 1.5 s), then SIGCONT: the others took its
#      partitions; it must not fire what it no longer owns;
#   2. etcd compacted at its current revision, every second for 6 s; then a job created after
#      the compactions must fire and one deleted after them must stop;
#   3. etcd SIGSTOPped for ETCD_STOP seconds (30), then SIGCONT;
#   4. 150 ms added to every chunk between the replicas and etcd for 15 s.
#
# faults_cluster.py check then judges every delivery: no acknowledged one-shot lost or early;
# duplicates only where a fault left a delivery un-acked in flight (counted per fault); every
# tick job fires again within lease TTL + 2 s after each fault. No panic; every process alive.
# Exits non-zero on any failure and closes with `cluster-faults: N passed, M failed`.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

LEASE_TTL=3
PAUSE=4.5
ETCD_STOP="${ETCD_STOP:-30}"
START_TIMEOUT=30
PHASE_TIMEOUT=120
PHASE_SCRIPT=faults_cluster.py
PY_DIR="$E2E_DIR/python"
# Replicas' and sidecar's log filter (e.g. `info,jobsd::replica=debug` to see each trigger sent).
LOG_LEVEL="${FAULTS_LOG_LEVEL:-info}"

[ -x "$ETCD_BIN" ] || e2e_fail "no etcd at $ETCD_BIN: run e2e/setup.sh (Debian etcd-server)"
e2e_suite_begin

mapfile -t ports < <(free_ports 7)
etcd_port="${ports[0]}"
proxy_port="${ports[2]}"
replica_ports=("${ports[3]}" "${ports[4]}" "${ports[5]}")
sidecar_http="${ports[6]}"
sidecar_grpc="$(free_ports 1)"

e2e_start_etcd "$work/etcd" "$work/etcd.log" "$etcd_port" "${ports[1]}" "$START_TIMEOUT" || exit 1
delay_file="$work/delay.ms"
echo 0 >"$delay_file"
e2e_spawn "$work/proxy.log" env PYTHONDONTWRITEBYTECODE=1 "$E2E_PY" "$PY_DIR/delay_proxy.py" \
  --listen "$proxy_port" --to "127.0.0.1:$etcd_port" --delay-file "$delay_file"
proxy_pid=$E2E_SPAWNED
e2e_wait_tcp "$proxy_port" "$START_TIMEOUT" "$proxy_pid" || exit 1

replica_pids=()
addrs=()
for i in 0 1 2; do
  addrs+=("127.0.0.1:${replica_ports[$i]}")
  # shellcheck disable=SC2046
  e2e_spawn "$work/replica-s$((i + 1)).log" env NO_COLOR=1 "$JOBSD_BIN" scheduler \
    --etcd-endpoints "http://127.0.0.1:$proxy_port" --id "s$((i + 1))" \
    --listen-address 127.0.0.1 --port "${replica_ports[$i]}" --lease-ttl "${LEASE_TTL}s" \
    --log-level "$LOG_LEVEL" $(e2e_metrics_flags)
  replica_pids+=("$E2E_SPAWNED")
done
e2e_wait_serving "$work/serving.out" "$START_TIMEOUT" "${addrs[@]}" || exit 1

events="$work/events.jsonl"
e2e_spawn "$work/app.log" env PYTHONDONTWRITEBYTECODE=1 "$E2E_PY" "$PY_DIR/trigger_http_app.py" \
  --log "$events" --port-file "$work/app.port"
app_pid=$E2E_SPAWNED
e2e_wait_file "$work/app.port" "$START_TIMEOUT" "$app_pid" || exit 1
# shellcheck disable=SC2046
e2e_spawn "$work/sidecar.log" env -u APP_PORT -u APP_ID -u DAPR_API_TOKEN NO_COLOR=1 \
  "$JOBSD_BIN" --app-id faultapp --app-port "$(cat "$work/app.port")" \
  --dapr-http-port "$sidecar_http" --dapr-grpc-port "$sidecar_grpc" \
  --dapr-listen-addresses 127.0.0.1 --scheduler-host-address "$(IFS=,; echo "${addrs[*]}")" \
  --data-dir "$work/sidecar-unused" --log-level "$LOG_LEVEL" $(e2e_metrics_flags)
sidecar_pid=$E2E_SPAWNED
e2e_wait_http "http://127.0.0.1:$sidecar_http/v1.0/healthz" 204 "$START_TIMEOUT" "$sidecar_pid" sidecar || exit 1

api="http://127.0.0.1:$sidecar_http/v1.0-alpha1/jobs"
windows="$work/windows.txt"
: >"$windows"
acked="$work/acked.jsonl"
: >"$acked"
# window LABEL START: the fault LABEL lasted from START until now.
window() { echo "$1 $2 $(e2e_now)" >>"$windows"; }
etcd_revision() {
  curl -s -m 5 -X POST "$ETCD_URL/v3/kv/range" -d '{"key":"AA=="}' |
    "$E2E_PY" -c 'import json, sys; print(json.load(sys.stdin)["header"]["revision"])'
}

load_seconds=$((5 + 8 + 6 + 8 + ETCD_STOP + 8 + 15 + 6))
e2e_spawn "$work/load.out" env PYTHONDONTWRITEBYTECODE=1 "$E2E_PY" "$PY_DIR/$PHASE_SCRIPT" \
  load "127.0.0.1:$sidecar_http" "$load_seconds" "$acked"
load_pid=$E2E_SPAWNED
sleep 5

# 1. a replica paused past its lease
t="$(e2e_now)"
kill -STOP "${replica_pids[1]}"
# Past the lease, but short of the sidecar's keep-alive timeout (3 s pings, 5 s timeout): its
# stream to s2 survives, so whatever s2 would fire on waking would reach the app.
sleep "$PAUSE"
kill -CONT "${replica_pids[1]}"
window replica-paused "$t"
e2e_log "replica s2 was stopped for ${PAUSE}s"
sleep 8

# 2. compactions under load; a job deleted and one created after them
curl -s -m 5 -X POST -H 'content-type: application/json' -d '{"schedule":"@every 1s"}' "$api/delme" >/dev/null
t="$(e2e_now)"
for _ in 1 2 3 4 5 6; do
  rev="$(etcd_revision)"
  curl -s -m 5 -X POST "$ETCD_URL/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
  sleep 1
done
window compaction "$t"
e2e_log "etcd compacted 6 times (last at revision $rev)"
shell_check "after compactions: a create answers 204" \
  test "$(curl -s -o /dev/null -w '%{http_code}' -m 10 -X POST -H 'content-type: application/json' \
    -d '{"schedule":"@every 1s"}' "$api/postcompact")" = 204
shell_check "after compactions: a delete answers 204" \
  test "$(curl -s -o /dev/null -w '%{http_code}' -m 10 -X DELETE "$api/delme")" = 204
e2e_now >"$windows.deleted"
sleep 8

# 3. etcd stopped
t="$(e2e_now)"
kill -STOP "$ETCD_PID"
sleep "$ETCD_STOP"
kill -CONT "$ETCD_PID"
window etcd-stopped "$t"
e2e_log "etcd was stopped for ${ETCD_STOP}s"
sleep 8

# 4. a slow network to etcd
t="$(e2e_now)"
echo 150 >"$delay_file"
sleep 15
echo 0 >"$delay_file"
window etcd-delay "$t"
e2e_log "150 ms added between the replicas and etcd for 15s"

e2e_wait_spawned "$load_pid" || e2e_fail "the load phase failed: $(cat "$work/load.out")"
cat "$work/load.out"
# Let the last one-shots (due 3 s after their create) fall due and fire.
sleep $((LEASE_TTL + 5))
run_phase check check "$events" "$acked" "$windows" "$LEASE_TTL"

shell_check "etcd alive" e2e_alive "$ETCD_PID"
for i in 0 1 2; do shell_check "replica s$((i + 1)) alive" e2e_alive "${replica_pids[$i]}"; done
shell_check "sidecar alive" e2e_alive "$sidecar_pid"
shell_check "no panic logged" no_panic_in_logs "$work"/replica-*.log "$work/sidecar.log"
e2e_suite_end cluster-faults bash -c 'for f in "$1"/replica-*.log "$1"/sidecar.log; do echo "--- $f"; tail -n 30 "$f"; done' _ "$work"
