#!/usr/bin/env bash
# Jobs API create benchmark (issue 3) — run by hand, never part of CI or e2e/test.sh.
#
#   bash e2e/bench/api.sh
#
# Builds the release binary and examples/bench_api, starts jobsd on a temp data dir and
# measures, against it:
#   1. HTTP creates: RUNS runs of N creates from C clients (one keep-alive HTTP/1.1
#      connection each); median creates/s and p99 across runs.
#   2. gRPC creates: the same with the C clients on 1 HTTP/2 channel and on C channels.
#   3. Ceilings (CEILING=1): the same load on GET /v1.0/healthz and grpc.health.v1 Check —
#      what the transports alone reach on this machine.
#   4. A fresh data dir filled with FILL jobs (64 clients): VmRSS / VmHWM, data size.
#   5. SIGTERM + restart on that dir: stop time, time until /v1.0/healthz answers 204, RSS.
#   6. kill -9 (idle) + restart, and kill -9 during a create load + restart: the same.
#
# Settings (environment): N=100000 C=16 RUNS=3 FILL=1000000 (0: skip 4-6) FILL_C=64 CEILING=1
#   JOBSD_ARGS="" (extra jobsd flags)
#   HTTP_PORT=3590 GRPC_PORT=30590 KEEP=0 (1: keep the temp dir) JOBSD_BIN=target/release/jobsd
#   QUIET=0.5: before each timed run, wait (up to QUIET_WAIT=300 s) until other processes
#   use less than this many cores; each run also reports the load it saw (other_cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=e2e/lib.sh
source e2e/lib.sh

N=${N:-100000}
C=${C:-16}
RUNS=${RUNS:-3}
FILL=${FILL:-1000000}
FILL_C=${FILL_C:-64}
JOBSD_ARGS=${JOBSD_ARGS:-}
CEILING=${CEILING:-1}
HTTP_PORT=${HTTP_PORT:-3590}
GRPC_PORT=${GRPC_PORT:-30590}
QUIET=${QUIET:-0.5}
QUIET_WAIT=${QUIET_WAIT:-300}
HTTP=127.0.0.1:$HTTP_PORT
GRPC=127.0.0.1:$GRPC_PORT

bench_begin bench

echo "== build"
cargo build --release --locked --bin jobsd --example bench_api
# JOBSD_BIN: another build of jobsd to measure (e.g. an older tree, side by side).
JOBSD=${JOBSD_BIN:-target/release/jobsd}
BENCH=target/release/examples/bench_api

PID=
RESULTS=$TMP/results.txt
SUMMARY=$TMP/summary.txt
: >"$RESULTS"
: >"$SUMMARY"

mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
# VmRSS and VmHWM of $PID in MiB: "rss hwm".
rss() {
  local r h
  r=$(awk '/^VmRSS/ { print $2 }' "/proc/$PID/status")
  h=$(awk '/^VmHWM/ { print $2 }' "/proc/$PID/status")
  echo "$(mib "$r") $(mib "$h")"
}
note() { echo "$*" | tee -a "$SUMMARY"; }

# Starts jobsd on $1; sets PID and READY_MS (launch until /v1.0/healthz answers 204).
start_jobsd() {
  local t0 t1
  t0=$(now_ns)
  # shellcheck disable=SC2046
  e2e_spawn "$TMP/jobsd.log" "$JOBSD" --app-id myapp --data-dir "$1" --dapr-http-port "$HTTP_PORT" \
    --dapr-grpc-port "$GRPC_PORT" --dapr-listen-addresses 127.0.0.1 --log-level warn \
    $(e2e_metrics_flags) $JOBSD_ARGS
  PID=$E2E_SPAWNED
  t1=$("$BENCH" wait-healthy --http "$HTTP" --timeout-secs 900 --pid "$PID")
  READY_MS=$(ms_between "$t0" "$t1")
}

# One load run; its RESULT line goes to $RESULTS, everything to the terminal.
bench() {
  bench_wait_quiet
  "$BENCH" --http "$HTTP" --grpc "$GRPC" --server-pid "$PID" -n "$N" -c "$C" "$@" |
    tee "$TMP/last.log" | grep -v '^RESULT'
  cat "$TMP/last.log" >>"$TMP/bench.log"
  grep '^RESULT' "$TMP/last.log" >>"$RESULTS"
}

# "median rate, median p99, all rates, all p99s, median other load" of the runs labelled $1.
summarize() {
  local lines
  lines=$(grep " label=$1 " "$RESULTS" || true)
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$2" \
    "$(echo "$lines" | field rate | median)" \
    "$(echo "$lines" | field p99_ms | median)" \
    "$(echo "$lines" | field rate | xargs printf '%.0f ' | sed 's/ $//')" \
    "$(echo "$lines" | field p99_ms | xargs | sed 's/ /, /g')" \
    "$(echo "$lines" | field server_cpu_us | median)" \
    "$(echo "$lines" | field other_cores | median)"
}

echo "== 1-3. creates, $RUNS runs of $N from $C clients (fresh data dir)"
start_jobsd "$TMP/data"
note "cold start on an empty dir: ${READY_MS} ms; idle RSS (VmRSS VmHWM MiB): $(rss)"
for r in $(seq 1 "$RUNS"); do
  echo "-- run $r"
  bench --mode http --run-id "r$r"
  bench --mode grpc --channels 1 --run-id "r$r"
  bench --mode grpc --channels "$C" --run-id "r$r"
  if [ "$CEILING" = 1 ]; then
    bench --mode healthz
    bench --mode grpc-health --channels 1
  fi
done
JOBS_AFTER=$(grep -c '^RESULT label=\(http\|grpc-ch[0-9]*\) ' "$RESULTS" || true)
note "after the create runs ($JOBS_AFTER runs of $N + warmups): RSS (VmRSS VmHWM MiB): $(rss), data: $(du -sh "$TMP/data" | cut -f1)"
bench_stop_jobsd

if [ "$FILL" -gt 0 ]; then
  echo "== 4. fill $FILL jobs ($FILL_C clients, fresh data dir)"
  bench_wait_quiet
  start_jobsd "$TMP/fill"
  "$BENCH" --http "$HTTP" --grpc "$GRPC" --server-pid "$PID" --fill "$FILL" \
    --fill-concurrency "$FILL_C" --run-id fill | tee "$TMP/last.log" | grep -v '^RESULT'
  cat "$TMP/last.log" >>"$TMP/bench.log"
  grep '^RESULT' "$TMP/last.log" >>"$RESULTS"
  read -r FILL_RSS FILL_HWM < <(rss)
  sync
  FILL_APPARENT=$(du -sb --apparent-size "$TMP/fill" | cut -f1)
  FILL_ALLOC=$(du -sk "$TMP/fill" | cut -f1)
  FILL_RATE=$(field rate <"$RESULTS" | tail -1)
  FILL_P99=$(grep ' label=fill ' "$RESULTS" | field p99_ms | tail -1)

  echo "== 5. SIGTERM + reopen"
  bench_stop_jobsd
  TERM_STOP_MS=$STOP_MS
  start_jobsd "$TMP/fill"
  REOPEN_MS=$READY_MS
  read -r REOPEN_RSS REOPEN_HWM < <(rss)

  echo "== 6. kill -9 (idle) + reopen"
  bench_kill9_jobsd
  start_jobsd "$TMP/fill"
  KILL_MS=$READY_MS
  read -r KILL_RSS KILL_HWM < <(rss)

  echo "== 6b. kill -9 during creates + reopen"
  e2e_spawn "$TMP/crash-load.log" "$BENCH" --http "$HTTP" --fill 200000 --fill-concurrency "$FILL_C" \
    --run-id crash --max-error-ratio 1
  LOAD_PID=$E2E_SPAWNED
  sleep 3
  bench_kill9_jobsd
  e2e_wait_spawned "$LOAD_PID" || true
  start_jobsd "$TMP/fill"
  CRASH_MS=$READY_MS
  read -r CRASH_RSS CRASH_HWM < <(rss)
  bench_stop_jobsd

fi

{
  echo
  echo "== summary (N=$N, C=$C, RUNS=$RUNS; medians across runs)"
  echo
  echo "| run | creates/s (median) | p99 ms (median) | creates/s per run | p99 ms per run | server CPU µs/req | other load (cores) |"
  echo "|---|---|---|---|---|---|---|"
  summarize http "HTTP/1.1, $C clients"
  summarize grpc-ch1 "gRPC, $C clients on 1 channel"
  summarize "grpc-ch$C" "gRPC, $C clients on $C channels"
  if [ "$CEILING" = 1 ]; then
    summarize http-healthz "ceiling: GET /v1.0/healthz, $C clients"
    summarize grpc-health-ch1 "ceiling: grpc.health Check, 1 channel"
  fi
  if [ "$FILL" -gt 0 ]; then
    echo
    echo "| measurement | value |"
    echo "|---|---|"
    echo "| fill $FILL jobs, $FILL_C clients | $FILL_RATE creates/s, p99 $FILL_P99 ms |"
    echo "| RSS after the fill (VmRSS / VmHWM) | $FILL_RSS / $FILL_HWM MiB |"
    echo "| data dir after the fill (apparent / allocated) | $(mib $((FILL_APPARENT / 1024))) / $(mib "$FILL_ALLOC") MiB |"
    echo "| SIGTERM → exit | $TERM_STOP_MS ms |"
    echo "| reopen after SIGTERM → healthz 204 | $REOPEN_MS ms |"
    echo "| RSS after reopen (VmRSS / VmHWM) | $REOPEN_RSS / $REOPEN_HWM MiB |"
    echo "| reopen after kill -9 (idle) → healthz 204 | $KILL_MS ms (RSS $KILL_RSS / $KILL_HWM MiB) |"
    echo "| reopen after kill -9 during creates → healthz 204 | $CRASH_MS ms (RSS $CRASH_RSS / $CRASH_HWM MiB) |"
  fi
  echo
  cat "$SUMMARY"
} | tee "$TMP/table.md"
