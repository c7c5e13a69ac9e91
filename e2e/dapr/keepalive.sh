#!/usr/bin/env bash
# A jobsd sidecar in front of the real Dapr Scheduler keeps its connection: the Scheduler (a
# grpc-go server, default keepalive enforcement) answers HTTP/2 pings sent more often than
# every 5 min on a connection without data with `GOAWAY too_many_pings`, which closes the
# sidecar's streams. The sidecar (debug log: every h2 frame) idles on its WatchHosts and
# WatchJobs streams for IDLE seconds (default 40: three 3 s pings and the GOAWAY fit in 12 s);
# no GOAWAY may come.
#
#   bash e2e/dapr/keepalive.sh          JOBSD_BIN: a prebuilt jobsd (default: the release build)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$here/../lib.sh"
IDLE="${IDLE:-40}"
eval "$(DAPR_BUILD_CLI=0 bash "$here/build.sh" | sed 's/^/export /')"
jobsd_build
trap e2e_cleanup EXIT
e2e_mktemp
work="$E2E_TMP"
mapfile -t ports < <(free_ports 9)
e2e_spawn "$work/scheduler.log" "$DAPR_BIN_DIR/scheduler" --id sched0 \
  --listen-address 127.0.0.1 --port "${ports[0]}" --healthz-port "${ports[1]}" \
  --metrics-port "${ports[2]}" --etcd-data-dir "$work/etcd" \
  --etcd-client-port "${ports[3]}" --etcd-initial-cluster "sched0=http://127.0.0.1:${ports[4]}" \
  --etcd-client-listen-address 127.0.0.1
e2e_wait_http "http://127.0.0.1:${ports[1]}/healthz" 200 60 "$E2E_SPAWNED" "dapr scheduler"
# An app port is given (nothing listens there): the sidecar opens its WatchJobs streams too.
e2e_spawn "$work/jobsd.log" "$JOBSD_BIN" --app-id keepalive --app-port "${ports[5]}" \
  --dapr-http-port "${ports[6]}" --dapr-grpc-port "${ports[7]}" --metrics-port "${ports[8]}" \
  --dapr-internal-grpc-port 0 --scheduler-host-address "127.0.0.1:${ports[0]}" --log-level debug
e2e_wait_http "http://127.0.0.1:${ports[6]}/v1.0/healthz/outbound" 204 60 "$E2E_SPAWNED" "jobsd"
e2e_log "keepalive: idle for ${IDLE} s on the real Dapr Scheduler"
sleep "$IDLE"
goaways="$(grep -c 'too_many_pings' "$work/jobsd.log" || true)"
pings="$(grep -c 'send frame=Ping' "$work/jobsd.log" || true)"
e2e_log "keepalive: ${pings} ping frames sent (answers to the Scheduler's 3 s pings included), ${goaways} GOAWAY too_many_pings received"
[ "$goaways" = 0 ] || e2e_fail "the Dapr Scheduler closed the sidecar's connection (too_many_pings)"
