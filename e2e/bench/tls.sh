#!/usr/bin/env bash
# What TLS costs a cluster's creates — run by hand, never part of CI or e2e/test.sh.
#
#   bash e2e/bench/tls.sh
#
# Two clusters side by side, each one Debian etcd on loopback, 2 `jobsd scheduler` replicas and
# one sidecar in remote mode: `plain` (no TLS anywhere) and `mtls` (sidecar → replicas mTLS,
# replicas → etcd TLS with client certificates, etcd with --client-cert-auth; openssl
# certificates made for the run). RUNS runs of CREATES `POST /v1.0/jobs/…` from CLIENTS HTTP
# clients through the sidecar (examples/bench_api --mode http; nothing fires), the two clusters
# alternating: creates/s, p50, p99.
#
# Settings (environment): CREATES=10000 RUNS=3 CLIENTS=16 QUIET=0.5 QUIET_WAIT=60 BUILD=1
#   JOBSD_BIN ETCD_BIN KEEP=0.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=e2e/lib.sh
source e2e/lib.sh

CREATES=${CREATES:-10000}
RUNS=${RUNS:-3}
CLIENTS=${CLIENTS:-16}
QUIET=${QUIET:-0.5}
QUIET_WAIT=${QUIET_WAIT:-60}

bench_begin tls-bench
echo "== build"
if [ "${BUILD:-1}" = 1 ]; then
  cargo build --release --locked --bin jobsd --example bench_api
fi
JOBSD=${JOBSD_BIN:-${CARGO_TARGET_DIR:-target}/release/jobsd}
BENCH_API=${CARGO_TARGET_DIR:-target}/release/examples/bench_api
RESULTS=$TMP/results.txt
: >"$RESULTS"

CERTS=$TMP/certs
mkdir -p "$CERTS"
e2e_new_ca "$CERTS" ca
e2e_new_cert "$CERTS" ca etcd "IP:127.0.0.1"
e2e_new_cert "$CERTS" ca replica "IP:127.0.0.1"
e2e_new_cert "$CERTS" ca client "DNS:client"

declare -A HTTP PID
# cluster_up MODE: etcd, 2 replicas and a sidecar, with TLS everywhere when MODE is mtls.
cluster_up() {
  local mode=$1 ports i etcd_tls=() replica_tls=() sidecar_tls=() hosts=""
  mapfile -t ports < <(free_ports 5)
  if [ "$mode" = mtls ]; then
    etcd_tls=("$CERTS/ca.crt" "$CERTS/etcd.crt" "$CERTS/etcd.key")
    replica_tls=(--etcd-ca-file "$CERTS/ca.crt" --etcd-cert-file "$CERTS/client.crt"
      --etcd-key-file "$CERTS/client.key" --tls-cert-file "$CERTS/replica.crt"
      --tls-key-file "$CERTS/replica.key" --tls-client-ca-file "$CERTS/ca.crt")
    sidecar_tls=(--scheduler-tls-ca "$CERTS/ca.crt" --scheduler-tls-cert "$CERTS/client.crt"
      --scheduler-tls-key "$CERTS/client.key")
  fi
  e2e_start_etcd "$TMP/etcd-$mode" "$TMP/etcd-$mode.log" "${ports[0]}" "${ports[1]}" 30 \
    "${etcd_tls[@]}" || exit 1
  for i in 0 1; do
    # shellcheck disable=SC2046
    e2e_spawn "$TMP/replica-$mode-$i.log" "$JOBSD" scheduler --etcd-endpoints "$ETCD_URL" \
      --id "s$i" --listen-address 127.0.0.1 --port "${ports[$((2 + i))]}" --log-level warn \
      $(e2e_metrics_flags) "${replica_tls[@]}"
    e2e_wait_tcp "${ports[$((2 + i))]}" 30 "$E2E_SPAWNED"
    hosts="$hosts${hosts:+,}127.0.0.1:${ports[$((2 + i))]}"
  done
  HTTP[$mode]=${ports[4]}
  # shellcheck disable=SC2046
  e2e_spawn "$TMP/sidecar-$mode.log" env -u APP_PORT -u APP_ID -u DAPR_API_TOKEN \
    -u DAPR_SCHEDULER_HOST_ADDRESS_DNS_A "$JOBSD" --app-id myapp --dapr-http-port "${HTTP[$mode]}" \
    --dapr-grpc-port 0 --dapr-listen-addresses 127.0.0.1 --scheduler-host-address "$hosts" \
    --data-dir "$TMP/unused" --log-level warn $(e2e_metrics_flags) "${sidecar_tls[@]}"
  PID[$mode]=$E2E_SPAWNED
  e2e_wait_http "http://127.0.0.1:${HTTP[$mode]}/v1.0/healthz" 204 30 "${PID[$mode]}" \
    "$mode sidecar" || exit 1
  echo "   $mode cluster up: etcd $ETCD_URL, replicas $hosts, sidecar http ${HTTP[$mode]}"
}
cluster_up plain
cluster_up mtls

for r in $(seq 1 "$RUNS"); do
  for mode in plain mtls; do
    echo "-- run $r, $mode"
    bench_wait_quiet
    "$BENCH_API" --mode http --http "127.0.0.1:${HTTP[$mode]}" --server-pid "${PID[$mode]}" \
      -n "$CREATES" -c "$CLIENTS" --run-id "$mode$r" | tee "$TMP/last.log" | grep -v '^RESULT'
    grep '^RESULT' "$TMP/last.log" | sed "s/\$/ mode=$mode busy_before=$BUSY/" >>"$RESULTS"
  done
done

echo
echo "== summary ($(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores): creates, HTTP/1.1, $CLIENTS clients, $CREATES per run, through one sidecar, 2 replicas on one etcd"
echo
echo "| cluster | creates/s (median) | p50 ms | p99 ms | creates/s per run | others' cores before each run |"
echo "|---|---|---|---|---|---|"
for mode in plain mtls; do
  lines=$(grep "^RESULT label=http .* mode=$mode " "$RESULTS" || true)
  printf '| %s | %s | %s | %s | %s | %s |\n' "$mode" \
    "$(echo "$lines" | field rate | median | awk '$1 == "-" { print; next } { printf "%.0f", $1 }')" \
    "$(echo "$lines" | field p50_ms | median)" "$(echo "$lines" | field p99_ms | median)" \
    "$(echo "$lines" | field rate | xargs printf '%.0f ' | sed 's/ $//')" \
    "$(echo "$lines" | field busy_before | xargs | sed 's/ /, /g')"
done
