#!/usr/bin/env bash
# Concurrency limits by key under load, with a replica killed (issue 38): Debian's etcd, three
# `jobsd scheduler` replicas (--lease-ttl 3s), one jobsd sidecar, the counting app of
# e2e/bench/concurrency_load.py (which says what is checked and measured).
#
#   bash e2e/bench/concurrency.sh          LIMIT=20 N_A=3000 N_B=1000 HANDLER_MS=50 KILL_AFTER=3
#
# JOBSD_BIN: a prebuilt jobsd (default: the release build). Results: a table on stdout and
# target/bench/concurrency.json.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$here/../lib.sh"
: "${ETCD_BIN:=/usr/bin/etcd}"
export ETCD_BIN
jobsd_build
e2e_venv "$E2E_ROOT/e2e/python/requirements.txt"
trap e2e_cleanup EXIT
e2e_mktemp
work="$E2E_TMP"
mkdir -p "$E2E_ROOT/target/bench"
mapfile -t ports < <(free_ports 7)
e2e_start_etcd "$work/etcd" "$work/etcd.log" "${ports[0]}" "${ports[1]}" 60
pids=()
for i in 1 2 3; do
  # shellcheck disable=SC2046
  e2e_spawn "$work/replica-s$i.log" env NO_COLOR=1 "$JOBSD_BIN" scheduler \
    --etcd-endpoints "$ETCD_URL" --id "s$i" --listen-address 127.0.0.1 \
    --port "${ports[$((i + 1))]}" --lease-ttl 3s --log-level warn $(e2e_metrics_flags)
  pids+=("$E2E_SPAWNED")
done
replicas="127.0.0.1:${ports[2]},127.0.0.1:${ports[3]},127.0.0.1:${ports[4]}"
e2e_wait_serving "$work/serving.out" 60 127.0.0.1:"${ports[2]}" 127.0.0.1:"${ports[3]}" \
  127.0.0.1:"${ports[4]}"
e2e_log "etcd and 3 replicas up; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
PYTHONDONTWRITEBYTECODE=1 "$E2E_PY" "$here/concurrency_load.py" "${ports[5]}" "${pids[1]}" \
  "$E2E_ROOT/target/bench/concurrency.json" "$work/app.port" &
driver=$!
e2e_wait_file "$work/app.port" 30 "$driver"
# shellcheck disable=SC2046
e2e_spawn "$work/sidecar.log" env NO_COLOR=1 "$JOBSD_BIN" --app-id load --app-port \
  "$(cat "$work/app.port")" --dapr-http-port "${ports[5]}" --dapr-grpc-port "${ports[6]}" \
  --dapr-listen-addresses 127.0.0.1 $(e2e_metrics_flags) --scheduler-host-address "$replicas" \
  --log-level warn
rc=0
wait "$driver" || rc=$?
_e2e_forget "${pids[1]}" 2>/dev/null || true
e2e_log "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
