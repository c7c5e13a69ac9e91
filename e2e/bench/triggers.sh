#!/usr/bin/env bash
# Trigger delivery benchmark (issue 4) — run by hand, never part of CI or e2e/test.sh.
#
#   bash e2e/bench/triggers.sh
#
# Builds the release binary and examples/bench_triggers, starts the bench app (a minimal
# HTTP app that records every `POST /job/<name>`) and jobsd on free loopback ports with temp
# data dirs, and measures:
#   (a) burst: BURST_N one-shot jobs all due at one instant T, BURST_RUNS runs, each on a
#       fresh data dir: deliveries/s = N / (last arrival − T), lateness p50/p99/max,
#       duplicates, missing.
#   (b) steady: STEADY_RATE triggers/s for STEADY_SECS s on a fresh data dir, as STEADY_RATE
#       recurring jobs (`@every 1s`, repeats STEADY_SECS, due times spread evenly over one
#       second); STEADY_ONESHOT=1 also runs it as STEADY_RATE × STEADY_SECS one-shot jobs.
#       Lateness per trigger (arrival − nominal time), achieved triggers/s.
#   (c) FILL jobs due in 48 h on a fresh data dir: VmRSS / VmHWM after the fill and after a
#       restart (jobs loaded from disk), data size.
#   (d) with those jobs stored plus one job due while jobsd is down: SIGTERM + restart, and
#       kill -9 + restart; time from launch to /v1.0/healthz 204 and to the app receiving
#       that job.
#   (e) with those jobs still stored (after (d)): the steady run of (b) (recurring) and one
#       burst of BURST_N, on the same data dir.
# MIX=1 makes (c)'s jobs a mix (60 % one-shots, 30 % `@every` 1 min – 1 day, 10 % cron), all
# first due within the week after 2 h from now, so none fires during the run.
# Before each run it waits (up to LOAD_WAIT s) for the 1-min load average to drop to
# MAX_LOAD (or for the machine to be idle right now: under QUIET cores busy over 3 s) and
# prints the load it ran at; each run also reports the cores other processes used during its
# measured window (other_cores).
#
# Settings (environment): BURST_N=100000 BURST_RUNS=3 STEADY_RATE=5000 STEADY_SECS=60
#   STEADY_ONESHOT=1 FILL=1000000 MIX=0 CREATE_C=64 CREATE_CH=4 MAX_LOAD=1.0 QUIET=0.3 LOAD_WAIT=240
#   APP_THREADS=1 JOBSD_ARGS="" (extra jobsd flags) JOBSD_BIN=target/release/jobsd BENCH_BIN= PERF=0 (1: perf record -g jobsd during
#   the first burst into $PERF_OUT) PARTS=abcd (which of (a)–(d) to run) KEEP=0 (1: keep
#   the temp dir) REUSE_DIR= (a kept data dir for (c)-(e) instead of a fill)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=e2e/lib.sh
source e2e/lib.sh

BURST_N=${BURST_N:-100000}
BURST_RUNS=${BURST_RUNS:-3}
STEADY_RATE=${STEADY_RATE:-5000}
STEADY_SECS=${STEADY_SECS:-60}
STEADY_ONESHOT=${STEADY_ONESHOT:-1}
FILL=${FILL:-1000000}
MIX=${MIX:-0}
CREATE_C=${CREATE_C:-64}
CREATE_CH=${CREATE_CH:-4}
# FILL_BATCH=N: (c) creates N jobs per call of jobsd.v1.Jobs/ScheduleJobs (0: one ScheduleJob each).
FILL_BATCH=${FILL_BATCH:-0}
MAX_LOAD=${MAX_LOAD:-1.0}
QUIET=${QUIET:-0.3}
LOAD_WAIT=${LOAD_WAIT:-240}
APP_THREADS=${APP_THREADS:-1}
JOBSD_ARGS=${JOBSD_ARGS:-}
PERF=${PERF:-0}
PARTS=${PARTS:-abcd}
# REUSE_DIR: a data dir kept from an earlier run (KEEP=1) whose jobs (c)-(e) use instead of
# filling a fresh one (its jobs must not be due during the run).
REUSE_DIR=${REUSE_DIR:-}
PERF_OUT=${PERF_OUT:-/tmp/jobsd-burst.perf.data}

bench_begin trig

# JOBSD_BIN: another build of jobsd to measure (e.g. one with frame pointers for perf);
# BENCH_BIN: a copy of the load generator (both given: nothing is built).
if [ -z "${JOBSD_BIN:-}" ] || [ -z "${BENCH_BIN:-}" ]; then
  echo "== build"
  cargo build --release --locked --bin jobsd --example bench_triggers
fi
JOBSD=${JOBSD_BIN:-${CARGO_TARGET_DIR:-target}/release/jobsd}
BENCH=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/examples/bench_triggers}

read -r APP_PORT HTTP_PORT GRPC_PORT < <(free_ports 3 | xargs)
echo "ports: app $APP_PORT, jobsd http $HTTP_PORT grpc $GRPC_PORT"

PID=
RESULTS=$TMP/results.txt
NOTES=$TMP/notes.txt
: >"$RESULTS"
: >"$NOTES"
note() { echo "$*" | tee -a "$NOTES"; }
load1() { cut -d' ' -f1 /proc/loadavg; }

# Waits (bounded by LOAD_WAIT s) until the 1-min load average is at most MAX_LOAD, or the
# machine is idle right now (under QUIET cores busy over 3 s); sets LOAD and BUSY.
wait_load() {
  local waited=0
  while :; do
    BUSY=$(busy_cores 3)
    if awk -v l="$(load1)" -v m="$MAX_LOAD" -v b="$BUSY" -v q="$QUIET" \
      'BEGIN { exit !(l <= m || b < q) }'; then
      break
    fi
    if [ "$waited" -ge "$LOAD_WAIT" ]; then
      echo "   (still busy after ${LOAD_WAIT} s; measuring anyway)"
      break
    fi
    [ "$waited" = 0 ] && echo "   (waiting for a quieter machine: load $(load1), $BUSY cores busy)"
    sleep 2
    waited=$((waited + 5))
  done
  LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "   before the run: load average $LOAD, $BUSY cores busy (waited ${waited} s)"
}

e2e_spawn "$TMP/app.log" "$BENCH" app --port "$APP_PORT" --threads "$APP_THREADS"
APP_PID=$E2E_SPAWNED
e2e_wait_http "http://127.0.0.1:$APP_PORT/_count" 200 10 "$APP_PID" "bench app"

# start_jobsd DIR: sets PID and T0 (launch, unix ns).
start_jobsd() {
  T0=$(now_ns)
  # shellcheck disable=SC2086,SC2046
  e2e_spawn "$TMP/jobsd.log" "$JOBSD" --app-id myapp --app-port "$APP_PORT" --data-dir "$1" \
    --dapr-http-port "$HTTP_PORT" --dapr-grpc-port "$GRPC_PORT" \
    --dapr-listen-addresses 127.0.0.1 --log-level warn $(e2e_metrics_flags) $JOBSD_ARGS
  PID=$E2E_SPAWNED
}
wait_healthy() {
  e2e_wait_http "http://127.0.0.1:$HTTP_PORT/v1.0/healthz" 204 600 "$PID" jobsd || {
    tail "$TMP/jobsd.log"
    exit 1
  }
}
target() {
  echo --http "127.0.0.1:$HTTP_PORT" --grpc "127.0.0.1:$GRPC_PORT" --app "127.0.0.1:$APP_PORT" \
    --app-pid "$APP_PID" ${PID:+--jobsd-pid "$PID"}
}
# run_bench LABEL ARGS…: one measuring subcommand; output to the terminal and bench.log, its
# RESULT line (with the load it started at) to $RESULTS.
run_bench() {
  local label=$1
  shift
  # shellcheck disable=SC2046
  "$BENCH" "$@" $(target) --concurrency "$CREATE_C" --channels "$CREATE_CH" | tee "$TMP/last.log"
  cat "$TMP/last.log" >>"$TMP/bench.log"
  grep '^RESULT' "$TMP/last.log" | sed "s/\$/ load=${LOAD// /,} busy_before=$BUSY tag=$label/" >>"$RESULTS"
}
rss_of() {
  awk '/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 } END { printf "%.1f / %.1f", r / 1024, h / 1024 }' \
    "/proc/$1/status"
}

has() { [[ "$PARTS" == *"$1"* ]]; }
FILL_RSS=- TERM_RSS=- DATA_MIB=-

has a && echo "== (a) burst: $BURST_RUNS runs of $BURST_N one-shots due at one instant"
has a && for r in $(seq 1 "$BURST_RUNS"); do
  echo "-- run $r"
  wait_load
  start_jobsd "$TMP/burst-$r"
  wait_healthy
  if [ "$PERF" = 1 ] && [ "$r" = 1 ]; then
    perf record -e cpu-clock -F 999 -g -p "$PID" -o "$PERF_OUT" >"$TMP/perf.log" 2>&1 &
    PERF_PID=$!
  fi
  run_bench "burst-$r" burst -n "$BURST_N" --run-id "$r"
  if [ -n "${PERF_PID:-}" ]; then
    kill -INT "$PERF_PID"
    wait "$PERF_PID" || true
    PERF_PID=
    echo "   perf data: $PERF_OUT"
  fi
  bench_stop_jobsd
  rm -rf "$TMP/burst-$r"
done

if has b; then
echo "== (b) steady: $STEADY_RATE triggers/s for $STEADY_SECS s"
wait_load
start_jobsd "$TMP/steady"
wait_healthy
run_bench steady-recurring steady --rate "$STEADY_RATE" --secs "$STEADY_SECS" --kind recurring \
  --run-id r
bench_stop_jobsd
rm -rf "$TMP/steady"
if [ "$STEADY_ONESHOT" = 1 ]; then
  wait_load
  start_jobsd "$TMP/steady1"
  wait_healthy
  run_bench steady-oneshot steady --rate "$STEADY_RATE" --secs "$STEADY_SECS" --kind oneshot \
    --run-id o
  bench_stop_jobsd
  rm -rf "$TMP/steady1"
fi
fi

if has c || has d; then
echo "== (c) RSS with $FILL scheduled jobs"
FILL_DIR=${REUSE_DIR:-$TMP/fill}
wait_load
start_jobsd "$FILL_DIR"
wait_healthy
IDLE_RSS=$(rss_of "$PID")
if [ -n "$REUSE_DIR" ]; then
  note "reusing the jobs stored in $REUSE_DIR (no fill)"
elif [ "$MIX" = 1 ]; then
  run_bench fill fill -n "$FILL" --mix --due-in-hours 2 --batch "$FILL_BATCH"
else
  run_bench fill fill -n "$FILL" --batch "$FILL_BATCH"
fi
FILL_RSS=$(rss_of "$PID")
sync
DATA_MIB=$(du -sm "$FILL_DIR" | cut -f1)
note "idle RSS before the fill (VmRSS / VmHWM MiB): $IDLE_RSS"
note "after the fill: RSS $FILL_RSS MiB, data dir $DATA_MIB MiB"

# restart_case KIND: stores a probe job due 5 s ahead, stops jobsd (SIGTERM or kill -9),
# waits until the probe is due, restarts, and times launch → healthz and → probe delivered.
# (target's words are split on purpose: they are separate arguments.)
# shellcheck disable=SC2046
restart_case() {
  local kind=$1 due now healthz first early
  "$BENCH" clear $(target) >/dev/null
  due=$("$BENCH" probe --name "probe-$kind" --due-in-ms 5000 $(target))
  if [ "$kind" = sigterm ]; then bench_stop_jobsd; else bench_kill9_jobsd; STOP_MS=0; fi
  early=$("$BENCH" clear $(target))
  now=$(now_ns)
  if [ "$now" -gt "$due" ] || [ "$early" != 0 ]; then
    note "   INVALID: $kind: the probe was delivered before the stop, or the stop took past its due time"
  fi
  # Restart once the probe is 500 ms overdue.
  sleep "$(awk -v d="$due" -v n="$now" 'BEGIN { s = (d - n) / 1e9 + 0.5; print (s > 0 ? s : 0) }')"
  wait_load
  start_jobsd "$FILL_DIR"
  read -r healthz first < <("$BENCH" wait-restart --prefix "probe-$kind" $(target))
  HEALTHZ_MS=$(ms_between "$T0" "$healthz")
  FIRST_MS=$(ms_between "$T0" "$first")
  sleep 1
  RESTART_RSS=$(rss_of "$PID")
  note "$kind: stop ${STOP_MS} ms; launch → healthz 204 ${HEALTHZ_MS} ms; launch → first trigger at the app ${FIRST_MS} ms; RSS after reload $RESTART_RSS MiB (load $LOAD, $BUSY cores busy before)"
  echo "RESULT label=restart kind=$kind stop_ms=$STOP_MS healthz_ms=$HEALTHZ_MS first_ms=$FIRST_MS rss=${RESTART_RSS// /} load=${LOAD// /,}" >>"$RESULTS"
}

echo "== (d) restart to first trigger with $FILL jobs stored"
restart_case sigterm
TERM_RSS=$RESTART_RSS
restart_case kill9
if has e; then
  echo "== (e) steady $STEADY_RATE triggers/s and a burst of $BURST_N with $FILL jobs stored"
  wait_load
  run_bench steady-stored steady --rate "$STEADY_RATE" --secs "$STEADY_SECS" --kind recurring \
    --run-id s
  wait_load
  run_bench burst-stored burst -n "$BURST_N" --run-id s
  STORED_RSS=$(rss_of "$PID")
  note "after (e): RSS $STORED_RSS MiB"
fi
bench_stop_jobsd
fi

{
  echo
  echo "== summary ($(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
  echo
  echo "| run | deliveries/s N/(last−T) | first→last | lateness p50 / p99 / max ms | missing / dups | jobsd CPU (cores) | jobsd µs/trigger | app CPU | others' cores during | jobsd VmHWM MiB | load1 before |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  { grep ' label=burst ' "$RESULTS" || true; } | while read -r line; do
    wall=$(echo "$line" | field wall_ms)
    printf '| burst %s (%s jobs, %s) | %s | %s | %s / %s / %s | %s / %s | %.2f | %.1f | %.2f | %s | %s | %s |\n' \
      "$(echo "$line" | field run)" "$(echo "$line" | field n)" "$(echo "$line" | field tag)" \
      "$(echo "$line" | field rate_t)" "$(echo "$line" | field rate_fl)" \
      "$(echo "$line" | field p50_ms)" "$(echo "$line" | field p99_ms)" \
      "$(echo "$line" | field max_ms)" \
      "$(echo "$line" | field missing)" "$(echo "$line" | field dups)" \
      "$(awk -v c="$(echo "$line" | field jobsd_cpu_ms)" -v w="$wall" 'BEGIN { print c / w }')" \
      "$(awk -v c="$(echo "$line" | field jobsd_cpu_ms)" -v n="$(echo "$line" | field n)" 'BEGIN { print c * 1000 / n }')" \
      "$(awk -v c="$(echo "$line" | field app_cpu_ms)" -v w="$wall" 'BEGIN { print c / w }')" \
      "$(echo "$line" | field other_cores)" \
      "$(echo "$line" | field hwm_mib)" \
      "$(echo "$line" | field load | cut -d, -f1)"
  done
  echo "| burst median | $(grep ' label=burst ' "$RESULTS" | field rate_t | median) | | p99 $(grep ' label=burst ' "$RESULTS" | field p99_ms | median) | | | | | | | |"
  echo
  echo "| steady run | achieved triggers/s (per-second min–max) | lateness p50 / p99 / p99.9 / max ms | missing / dups | jobsd CPU (cores) | others' cores during | load1 before |"
  echo "|---|---|---|---|---|---|---|"
  { grep ' label=steady ' "$RESULTS" || true; } | while read -r line; do
    wall=$(echo "$line" | field wall_ms)
    printf '| %s %s, %s/s × %s s | %s (%s–%s) | %s / %s / %s / %s | %s / %s | %.2f | %s | %s |\n' \
      "$(echo "$line" | field tag)" "$(echo "$line" | field kind)" "$(echo "$line" | field rate)" "$(echo "$line" | field secs)" \
      "$(echo "$line" | field achieved)" "$(echo "$line" | field sec_min)" \
      "$(echo "$line" | field sec_max)" \
      "$(echo "$line" | field p50_ms)" "$(echo "$line" | field p99_ms)" \
      "$(echo "$line" | field p999_ms)" "$(echo "$line" | field max_ms)" \
      "$(echo "$line" | field missing)" "$(echo "$line" | field dups)" \
      "$(awk -v c="$(echo "$line" | field jobsd_cpu_ms)" -v w="$wall" 'BEGIN { print c / w }')" \
      "$(echo "$line" | field other_cores)" \
      "$(echo "$line" | field load | cut -d, -f1)"
  done
  echo
  echo "| $FILL jobs stored | value |"
  echo "|---|---|"
  echo "| fill rate (gRPC, $CREATE_C in flight) | $(grep ' label=fill ' "$RESULTS" | field create_rate) creates/s (the last 10 %: $(grep ' label=fill ' "$RESULTS" | field tail_rate)/s) |"
  echo "| RSS after the fill (VmRSS / VmHWM) | $FILL_RSS MiB |"
  echo "| RSS after SIGTERM + restart (jobs loaded from disk) | $TERM_RSS MiB |"
  echo "| data dir | $DATA_MIB MiB |"
  { grep ' label=restart ' "$RESULTS" || true; } | while read -r line; do
    echo "| $(echo "$line" | field kind) + restart: launch → healthz 204 / → first trigger at the app | $(echo "$line" | field healthz_ms) ms / $(echo "$line" | field first_ms) ms (stop took $(echo "$line" | field stop_ms) ms) |"
  done
  echo
  cat "$NOTES"
} | tee "$TMP/table.md"
