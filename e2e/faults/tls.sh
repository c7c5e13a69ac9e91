#!/usr/bin/env bash
# Fault case: TLS between sidecar, replicas and etcd (issue 15, item 6), with the release binary.
# Certificates are made here with openssl (a CA, a rogue CA, server and client certificates);
# none is committed. The cluster:
#
#   etcd (Debian's) serving clients over TLS with --client-cert-auth;
#   2 `jobsd scheduler` replicas reaching it with --etcd-ca-file/--etcd-cert-file/--etcd-key-file
#   and serving mTLS (--tls-cert-file/--tls-key-file/--tls-client-ca-file);
#   a sidecar with --scheduler-tls-ca/--scheduler-tls-cert/--scheduler-tls-key in front of a real
#   HTTP app (e2e/python/trigger_http_app.py).
#
# Checks: flags that cannot work are refused at start naming the flag and the file; the sidecar
# becomes ready and a one-shot and a repeating job created through it are delivered to the app;
# the job is stored in etcd over TLS and `jobsd jobs --scheduler` reads it over mTLS; a sidecar
# without a client certificate, one with a certificate of another CA and a plaintext one get 504
# DeadlineExceeded naming the reason, and the replicas log the failed handshakes; a replica
# without an etcd client certificate does not get in; no panic anywhere.
#
# Runnable from any directory; closes with `tls: N passed, M failed`.

# The checks pass their values to `bash -c '…'` as arguments, expanded there on purpose.
# shellcheck disable=SC2016
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

START_TIMEOUT=30
PY_DIR="$E2E_DIR/python"

[ -x "$ETCD_BIN" ] || {
  e2e_fail "no etcd at $ETCD_BIN: run e2e/setup.sh (Debian etcd-server) or set ETCD_BIN"
  exit 1
}
command -v openssl >/dev/null || {
  e2e_fail "no openssl: run e2e/setup.sh"
  exit 1
}
e2e_suite_begin
total_passed=0
total_failed=0
failures=()

dump_logs() {
  local f
  for f in "$work"/*.log; do
    echo "----- $f (last 30 lines) -----" >&2
    tail -n 30 "$f" >&2
  done
}

# ---------------------------------------------------------------- certificates
certs="$work/certs"
mkdir -p "$certs"
e2e_new_ca "$certs" ca
e2e_new_ca "$certs" rogue
e2e_new_cert "$certs" ca etcd "IP:127.0.0.1,DNS:localhost"
e2e_new_cert "$certs" ca replica "IP:127.0.0.1,DNS:localhost"
e2e_new_cert "$certs" ca replica-etcd-client "DNS:replica"
e2e_new_cert "$certs" ca sidecar "DNS:sidecar"
e2e_new_cert "$certs" rogue stranger "DNS:sidecar"
e2e_log "certificates made in $certs"

# ---------------------------------------------------------------- refused at start
# refused LABEL WANT ARGS...: jobsd ARGS exits non-zero at once, and its error says WANT.
refused() {
  local label="$1" want="$2" out="$work/refused.out" rc=0
  shift 2
  timeout 20 env NO_COLOR=1 "$JOBSD_BIN" "$@" >"$out" 2>&1 || rc=$?
  shell_check "$label" bash -c '[ "$1" -ne 0 ] && [ "$1" -ne 124 ] && grep -qF -- "$2" "$3" ||
    { echo "exit $1, want \"$2\" in:"; cat "$3"; exit 1; }' _ "$rc" "$want" "$out"
}
refused "missing certificate file is refused naming flag and file" \
  "--tls-cert-file $certs/missing.crt: cannot read the file" \
  scheduler --port 0 --tls-cert-file "$certs/missing.crt" --tls-key-file "$certs/replica.key"
refused "a key that is not the certificate's is refused" "--tls-key-file $certs/sidecar.key" \
  scheduler --port 0 --tls-cert-file "$certs/replica.crt" --tls-key-file "$certs/sidecar.key"
refused "sidecar TLS flags without --scheduler-host-address are refused" \
  "--scheduler-tls-ca needs --scheduler-host-address" \
  --app-id a --scheduler-tls-ca "$certs/ca.crt"
refused "etcd TLS flags without --etcd-endpoints are refused" \
  "--etcd-ca-file needs --etcd-endpoints" scheduler --port 0 --etcd-ca-file "$certs/ca.crt"
refused "a client certificate without its key is refused" \
  "--scheduler-tls-cert needs --scheduler-tls-key" --app-id a --scheduler-host-address h:1 \
  --scheduler-tls-ca "$certs/ca.crt" --scheduler-tls-cert "$certs/sidecar.crt"

# ---------------------------------------------------------------- etcd and replicas over TLS
mapfile -t ports < <(free_ports 9)
etcd_client_port="${ports[0]}"
etcd_peer_port="${ports[1]}"
replica_ports=("${ports[2]}" "${ports[3]}" "${ports[8]}")
http_ports=("${ports[4]}" "${ports[5]}" "${ports[6]}" "${ports[7]}")

e2e_start_etcd "$work/etcd" "$work/etcd.log" "$etcd_client_port" "$etcd_peer_port" \
  "$START_TIMEOUT" "$certs/ca.crt" "$certs/etcd.crt" "$certs/etcd.key" || {
  dump_logs
  exit 1
}
e2e_log "etcd (pid $ETCD_PID) on $ETCD_URL with --client-cert-auth"

# start_replica I LOG [ETCD_TLS_ARGS...]: replica s<I+1> on its port, mTLS on its Scheduler port.
start_replica() {
  local i="$1" log="$2"
  shift 2
  # shellcheck disable=SC2046
  e2e_spawn "$log" env NO_COLOR=1 "$JOBSD_BIN" scheduler --etcd-endpoints "$ETCD_URL" "$@" \
    --id "s$((i + 1))" --listen-address 127.0.0.1 --port "${replica_ports[$i]}" \
    --lease-ttl 3s --log-level info $(e2e_metrics_flags) \
    --tls-cert-file "$certs/replica.crt" --tls-key-file "$certs/replica.key" \
    --tls-client-ca-file "$certs/ca.crt"
}
etcd_tls=(--etcd-ca-file "$certs/ca.crt" --etcd-cert-file "$certs/replica-etcd-client.crt"
  --etcd-key-file "$certs/replica-etcd-client.key")
replica_pids=()
for i in 0 1; do
  start_replica "$i" "$work/replica-s$((i + 1)).log" "${etcd_tls[@]}"
  replica_pids+=("$E2E_SPAWNED")
done
for i in 0 1; do
  e2e_wait_tcp "${replica_ports[$i]}" "$START_TIMEOUT" "${replica_pids[$i]}" || {
    dump_logs
    exit 1
  }
done
e2e_log "replicas s1, s2 (pids ${replica_pids[*]}) serving mTLS on ${replica_ports[0]}, ${replica_ports[1]}"

# ---------------------------------------------------------------- app and sidecars
events="$work/events.jsonl"
e2e_spawn "$work/app.log" env PYTHONDONTWRITEBYTECODE=1 "$E2E_PY" "$PY_DIR/trigger_http_app.py" \
  --log "$events" --port-file "$work/app.port"
app_pid=$E2E_SPAWNED
e2e_wait_file "$work/app.port" "$START_TIMEOUT" "$app_pid" || exit 1
app_port="$(cat "$work/app.port")"

# start_sidecar N HOST_ADDRESS [TLS_ARGS...]: sidecar N (0-based) of app tlsapp on its HTTP port.
start_sidecar() {
  local n="$1" hosts="$2"
  shift 2
  # shellcheck disable=SC2046
  e2e_spawn "$work/sidecar-$n.log" env -u APP_PORT -u APP_ID -u DAPR_API_TOKEN \
    -u DAPR_SCHEDULER_HOST_ADDRESS_DNS_A NO_COLOR=1 "$JOBSD_BIN" --app-id tlsapp \
    --app-port "$app_port" --dapr-http-port "${http_ports[$n]}" --dapr-grpc-port 0 \
    --dapr-listen-addresses 127.0.0.1 --scheduler-host-address "$hosts" \
    --data-dir "$work/sidecar-$n-unused" --log-level info $(e2e_metrics_flags) "$@"
}
start_sidecar 0 "127.0.0.1:${replica_ports[0]}" --scheduler-tls-ca "$certs/ca.crt" \
  --scheduler-tls-cert "$certs/sidecar.crt" --scheduler-tls-key "$certs/sidecar.key"
sidecar_pid=$E2E_SPAWNED
sidecar="http://127.0.0.1:${http_ports[0]}"
if ! e2e_wait_http "$sidecar/v1.0/healthz" 204 "$START_TIMEOUT" "$sidecar_pid" "mTLS sidecar"; then
  dump_logs
  exit 1
fi
shell_check "the mTLS sidecar learns both replicas through WatchHosts" bash -c \
  'curl -sf "$1/v1.0/metadata" | grep -q "$2" && curl -sf "$1/v1.0/metadata" | grep -q "$3"' _ \
  "$sidecar" "127.0.0.1:${replica_ports[0]}" "127.0.0.1:${replica_ports[1]}"

# post NAME BODY: create job NAME through the mTLS sidecar; print the status.
post() {
  curl -s -o "$work/post.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data "$2" "$sidecar/v1.0/jobs/$1"
}
shell_check "a one-shot job is created over mTLS" test "$(post tls-once '{"dueTime":"2s","data":"over-tls"}')" = 204
shell_check "a repeating job is created over mTLS" \
  test "$(post tls-every '{"schedule":"@every 1s","repeats":3}')" = 204
shell_check "the job reads back over mTLS" bash -c \
  'curl -sf "$1/v1.0/jobs/tls-every" | grep -q "@every 1s"' _ "$sidecar"

# delivered NAME N: the app got job NAME at least N times within 20 s.
delivered() {
  local deadline=$((SECONDS + 20))
  until [ "$(grep -c "\"name\":\"$1\"" "$events" 2>/dev/null || true)" -ge "$2" ]; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
shell_check "the one-shot job is delivered to the app" delivered tls-once 1
shell_check "its data arrives intact" grep -q "$(printf '"over-tls"' | od -An -tx1 | tr -d ' \n')" "$events"
shell_check "the repeating job fires 3 times" delivered tls-every 3

# etcd_keys: the keys under `dapr` in etcd, one a line (read over TLS with etcd's certificate).
etcd_keys() {
  curl -sf --cacert "$certs/ca.crt" --cert "$certs/etcd.crt" --key "$certs/etcd.key" -X POST \
    -d '{"key":"ZGFwcg==","range_end":"ZGFwcw==","keys_only":true}' "$ETCD_URL/v3/kv/range" |
    "$(e2e_python)" -c 'import base64, json, sys
for kv in json.load(sys.stdin).get("kvs", []):
    print(base64.b64decode(kv["key"]).decode(errors="replace"))'
}
shell_check "a job due later is created over mTLS" test "$(post tls-later '{"dueTime":"1h"}')" = 204
etcd_keys >"$work/keys-later.out" || true
shell_check "the replicas keep it in etcd (over TLS)" grep -q tls-later "$work/keys-later.out"
shell_check "jobsd jobs --scheduler reads it from a replica over mTLS" bash -c \
  '"$1" jobs --scheduler "$2" --app-id tlsapp --scheduler-tls-ca "$3/ca.crt" \
     --scheduler-tls-cert "$3/sidecar.crt" --scheduler-tls-key "$3/sidecar.key" get tls-later |
   grep -q tls-later' _ "$JOBSD_BIN" "127.0.0.1:${replica_ports[1]}" "$certs"

# ---------------------------------------------------------------- sidecars that cannot get in
# A sidecar with the CA but no certificate, one with a certificate of another CA, and a
# plaintext one: they never become ready, and a create waits daprd's 30 s and answers 504
# DeadlineExceeded with the reason. The three run together.
start_sidecar 1 "127.0.0.1:${replica_ports[0]}" --scheduler-tls-ca "$certs/ca.crt"
start_sidecar 2 "127.0.0.1:${replica_ports[1]}" --scheduler-tls-ca "$certs/ca.crt" \
  --scheduler-tls-cert "$certs/stranger.crt" --scheduler-tls-key "$certs/stranger.key"
start_sidecar 3 "127.0.0.1:${replica_ports[0]}"
for n in 1 2 3; do e2e_wait_tcp "${http_ports[$n]}" "$START_TIMEOUT" || exit 1; done
creates=()
for n in 1 2 3; do
  curl -s -o "$work/refused-$n.out" -w '%{http_code}' --max-time 45 -X POST \
    --data '{"dueTime":"1s"}' "http://127.0.0.1:${http_ports[$n]}/v1.0/jobs/intruder-$n" \
    >"$work/refused-$n.code" &
  creates+=("$!")
done
# Meanwhile: a replica whose etcd client presents no certificate is not let into etcd.
start_replica 2 "$work/replica-s3-nocert.log" --etcd-ca-file "$certs/ca.crt"
nocert_pid=$E2E_SPAWNED
for pid in "${creates[@]}"; do wait "$pid" || true; done
# refused_with N WHY: sidecar N's create answered 504 with WHY in its message.
refused_with() {
  if [ "$(cat "$work/refused-$1.code")" != 504 ] || ! grep -q "DeadlineExceeded" "$work/refused-$1.out" ||
    ! grep -q "$2" "$work/refused-$1.out"; then
    echo "sidecar $1: $(cat "$work/refused-$1.code") $(cat "$work/refused-$1.out")"
    return 1
  fi
}
shell_check "a sidecar without a client certificate gets 504 naming CertificateRequired" \
  refused_with 1 CertificateRequired
shell_check "a sidecar with another CA's certificate gets 504 naming UnknownCA" refused_with 2 UnknownCA
shell_check "a plaintext sidecar gets 504 naming the connection error" \
  refused_with 3 "latest connection error"
for n in 1 2 3; do
  shell_check "sidecar $n never became ready" bash -c \
    '[ "$(curl -s -o /dev/null -w "%{http_code}" "$1")" != 204 ]' _ \
    "http://127.0.0.1:${http_ports[$n]}/v1.0/healthz"
done
etcd_keys >"$work/keys.out" || true
shell_check "no intruder job was stored" bash -c '! grep intruder "$1"' _ "$work/keys.out"
shell_check "the replica logs a client without a certificate" bash -c \
  'grep "TLS handshake failed" "$1" | grep -q "peer sent no certificates"' _ "$work/replica-s1.log"
shell_check "the replica logs a plaintext client" bash -c \
  'grep "TLS handshake failed" "$1" | grep -q "InvalidContentType"' _ "$work/replica-s1.log"
shell_check "the replicas log a certificate of another CA" bash -c \
  'grep "TLS handshake failed" "$1" | grep -qi "UnknownIssuer"' _ "$work/replica-s2.log"
shell_check "a replica without an etcd client certificate is refused by etcd" bash -c \
  'grep -q "etcd call failed; retrying" "$1" &&
   grep -q "client didn.t provide a certificate" "$2"' _ "$work/replica-s3-nocert.log" "$work/etcd.log"
e2e_unspawn "$nocert_pid"

# ---------------------------------------------------------------- end
shell_check "every process is still running" bash -c \
  'for p in "$@"; do kill -0 "$p" || exit 1; done' _ "$ETCD_PID" "${replica_pids[@]}" "$sidecar_pid" "$app_pid"
shell_check "no panic logged" no_panic_in_logs "$work"/*.log

e2e_suite_end tls dump_logs
