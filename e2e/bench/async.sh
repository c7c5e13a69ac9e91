#!/usr/bin/env bash
# Async completion benchmark (issue 13 item 7) — run by hand, never part of CI or e2e/test.sh.
#
#   bash e2e/bench/async.sh
#
# N one-shot jobs all due at one instant T, delivered to examples/bench_triggers' app, RUNS
# times in each of two modes, each run on a fresh data dir:
#   sync   the app answers 200 (a plain delivery): deliveries/s = N / (last arrival − T);
#   async  the app answers 202 with `Jobsd-Async: true` and completes every execution through
#          `POST /jobsd/v1/executions/{id}/complete`: executions/s = N / (last completion
#          answered − T). Every execution is held (written to the store), then its end is
#          written with its run: two trips through the loop and the store per execution, and
#          one more HTTP request to jobsd.
# Prints a table with the load average before each run (`uptime`).
#
# Settings (environment): N=10000 RUNS=3 MAX_LOAD=1.0 QUIET=0.3 LOAD_WAIT=240 APP_THREADS=2
#   JOBSD_BIN=target/release/jobsd KEEP=0
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=e2e/lib.sh
source e2e/lib.sh

N=${N:-10000}
RUNS=${RUNS:-3}
MAX_LOAD=${MAX_LOAD:-1.0}
QUIET=${QUIET:-0.3}
QUIET_WAIT=${LOAD_WAIT:-240}
APP_THREADS=${APP_THREADS:-2}

bench_begin async

echo "== build"
cargo build --release --locked --bin jobsd --example bench_triggers
JOBSD=${JOBSD_BIN:-${CARGO_TARGET_DIR:-target}/release/jobsd}
BENCH=${CARGO_TARGET_DIR:-target}/release/examples/bench_triggers

read -r APP_PORT HTTP_PORT GRPC_PORT < <(free_ports 3 | xargs)
RESULTS=$TMP/results.txt
: >"$RESULTS"
PID=

target() {
  echo --http "127.0.0.1:$HTTP_PORT" --grpc "127.0.0.1:$GRPC_PORT" --app "127.0.0.1:$APP_PORT" \
    --app-pid "$APP_PID" ${PID:+--jobsd-pid "$PID"}
}

# one_run MODE R: app in MODE, a fresh jobsd, one burst; its RESULT line to $RESULTS.
one_run() {
  local mode=$1 r=$2 extra=()
  [ "$mode" = async ] && extra=(--complete-via "127.0.0.1:$HTTP_PORT")
  bench_wait_quiet
  local load
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  e2e_spawn "$TMP/app-$mode-$r.log" "$BENCH" app --port "$APP_PORT" --threads "$APP_THREADS" \
    "${extra[@]}"
  APP_PID=$E2E_SPAWNED
  e2e_wait_http "http://127.0.0.1:$APP_PORT/_count" 200 10 "$APP_PID" "bench app"
  # shellcheck disable=SC2046
  e2e_spawn "$TMP/jobsd-$mode-$r.log" "$JOBSD" --app-id myapp --app-port "$APP_PORT" \
    --data-dir "$TMP/data-$mode-$r" --dapr-http-port "$HTTP_PORT" --dapr-grpc-port "$GRPC_PORT" \
    --dapr-listen-addresses 127.0.0.1 --log-level warn $(e2e_metrics_flags)
  PID=$E2E_SPAWNED
  e2e_wait_http "http://127.0.0.1:$HTTP_PORT/v1.0/healthz" 204 120 "$PID" jobsd
  # shellcheck disable=SC2046
  "$BENCH" burst -n "$N" --run-id "$mode$r" $(target) | tee "$TMP/last.log"
  grep '^RESULT' "$TMP/last.log" | sed "s/\$/ mode=$mode load=${load// /,} busy_before=$BUSY/" >>"$RESULTS"
  bench_stop_jobsd
  e2e_unspawn "$APP_PID"
  rm -rf "$TMP/data-$mode-$r"
}

for r in $(seq 1 "$RUNS"); do
  for mode in sync async; do
    echo "== $mode run $r: $N one-shots due at one instant"
    one_run "$mode" "$r"
  done
done

{
  echo
  echo "== summary ($(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; uptime: $(uptime | sed 's/^ *//'))"
  echo
  echo "| run | executions/s N/(last−T) | missing / dups | jobsd CPU ms | load1 before | others' cores before |"
  echo "|---|---|---|---|---|---|"
  while read -r line; do
    printf '| %s | %s | %s / %s | %s | %s | %s |\n' \
      "$(echo "$line" | field run)" "$(echo "$line" | field rate_t)" \
      "$(echo "$line" | field missing)" "$(echo "$line" | field dups)" \
      "$(echo "$line" | field jobsd_cpu_ms)" "$(echo "$line" | field load | cut -d, -f1)" \
      "$(echo "$line" | field busy_before)"
  done <"$RESULTS"
  for mode in sync async; do
    echo "| $mode median | $(grep " mode=$mode " "$RESULTS" | field rate_t | median) | | | | |"
  done
} | tee "$TMP/table.md"
