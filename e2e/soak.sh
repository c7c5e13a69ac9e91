#!/usr/bin/env bash
# The soak (issue 15, item 5) — run by hand, never part of CI or e2e/test.sh.
#
#   bash e2e/soak.sh                  # one hour
#   SOAK_SECONDS=120 bash e2e/soak.sh # a short try (restarts scaled down to fit)
#   bash e2e/soak.sh 600              # the duration as an argument
#
# A release jobsd (embedded store in a temp data dir) delivers to the soak app
# (examples/soak.rs `app`: a current-thread hyper HTTP app that records every delivery in a
# file before it answers 200). The driver (`soak drive`) creates RATE `@every 1s` jobs
# (RATE triggers/s, steady) and then, for the whole run, CHURN one-shots a second due 3–18 s
# ahead, deleting every fourth right after its create was answered. Meanwhile:
#   - the app is restarted every APP_EVERY s (kill -9 and SIGTERM alternately), first at
#     APP_EVERY/2;
#   - jobsd is restarted every JOBSD_EVERY s (SIGTERM and kill -9 alternately) on the same
#     data dir and ports;
#   - each minute: jobsd's pid, VmRSS, VmHWM, open fds and threads, the deliveries so far, and
#     the load average (other engineers' builds share this machine).
# After the run the driver stops, the recurring jobs go on for DRAIN s, jobsd is stopped, and
# `soak check` counts lost / early / duplicate deliveries for every tick due up to the end of
# the run (see examples/soak.rs). Exit status 1 when anything was lost or early.
#
# Settings (environment): SOAK_SECONDS=3600 RATE=5000 CHURN=100 DRAIN=30
#   APP_EVERY=300 JOBSD_EVERY=600 (both scaled to SOAK_SECONDS/4 and /3 under 20 min)
#   JOBSD_ARGS="" (extra jobsd flags) JOBSD_BIN=… SOAK_BIN=… (prebuilt copies: no build)
#   KEEP=0 (1: keep the temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=e2e/lib.sh
source e2e/lib.sh

SOAK_SECONDS=${1:-${SOAK_SECONDS:-3600}}
RATE=${RATE:-5000}
CHURN=${CHURN:-100}
DRAIN=${DRAIN:-30}
if [ "$SOAK_SECONDS" -ge 1200 ]; then
  APP_EVERY=${APP_EVERY:-300}
  JOBSD_EVERY=${JOBSD_EVERY:-600}
else
  APP_EVERY=${APP_EVERY:-$((SOAK_SECONDS / 4))}
  JOBSD_EVERY=${JOBSD_EVERY:-$((SOAK_SECONDS / 3))}
fi
JOBSD_ARGS=${JOBSD_ARGS:-}

bench_begin soak
echo "soak: ${SOAK_SECONDS} s, $RATE recurring triggers/s + $CHURN one-shots/s (¼ deleted);" \
  "app restarted every ${APP_EVERY} s, jobsd every ${JOBSD_EVERY} s"

# JOBSD_BIN and SOAK_BIN: prebuilt binaries (copies, so that a rebuild in the target dir
# during the hour does not change what the restarts run); without both, build them.
if [ -z "${JOBSD_BIN:-}" ] || [ -z "${SOAK_BIN:-}" ]; then
  echo "== build"
  cargo build --release --locked --bin jobsd --example soak
fi
JOBSD=${JOBSD_BIN:-${CARGO_TARGET_DIR:-target}/release/jobsd}
SOAK=${SOAK_BIN:-${CARGO_TARGET_DIR:-target}/release/examples/soak}

read -r APP_PORT HTTP_PORT GRPC_PORT < <(free_ports 3 | xargs)
METRICS_FLAGS=$(e2e_metrics_flags)
RECS=$TMP/app.rec
EVENTS=$TMP/events.txt
: >"$EVENTS"
event() { echo "$(($(now_ns) / 1000000)) $1" >>"$EVENTS"; }

APP_PID=
start_app() {
  e2e_start_app "$APP_PORT" "$TMP/app.log" "$SOAK" app --port "$APP_PORT" --log "$RECS"
  APP_PID=$E2E_SPAWNED
}
PID=
start_jobsd() {
  # shellcheck disable=SC2086
  e2e_spawn "$TMP/jobsd.log" "$JOBSD" --app-id soak --app-port "$APP_PORT" \
    --data-dir "$TMP/data" --dapr-http-port "$HTTP_PORT" --dapr-grpc-port "$GRPC_PORT" \
    --dapr-listen-addresses 127.0.0.1 --log-level warn $METRICS_FLAGS $JOBSD_ARGS
  PID=$E2E_SPAWNED
  e2e_wait_http "http://127.0.0.1:$HTTP_PORT/v1.0/healthz" 204 120 "$PID" jobsd || {
    tail -n 50 "$TMP/jobsd.log"
    exit 1
  }
}
# proc_line PID: VmRSS and VmHWM (MiB), open fds and threads of PID.
proc_line() {
  awk '/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 } /^Threads/ { t = $2 }
    END { printf "rss %.1f MiB, hwm %.1f MiB, threads %d", r / 1024, h / 1024, t }' \
    "/proc/$1/status"
  printf ', fds %s' "$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l)"
}

start_app
start_jobsd
e2e_spawn "$TMP/drive.log" "$SOAK" drive --grpc "127.0.0.1:$GRPC_PORT" --recurring "$RATE" \
  --churn "$CHURN" --secs "$SOAK_SECONDS" --log "$TMP/drive.txt"
DRIVE_PID=$E2E_SPAWNED
echo "ports: app $APP_PORT, jobsd http $HTTP_PORT grpc $GRPC_PORT; temp dir $TMP"

MINUTES=$TMP/minutes.txt
: >"$MINUTES"
T0=$SECONDS
APP_N=0 JOBSD_N=0 MIN=0 LAST_RECS=0
echo "== run"
while ! _proc_gone "$DRIVE_PID"; do
  sleep 1
  t=$((SECONDS - T0))
  if [ "$t" -ge $((APP_EVERY / 2 + APP_N * APP_EVERY)) ] && [ "$t" -lt "$SOAK_SECONDS" ]; then
    APP_N=$((APP_N + 1))
    if [ $((APP_N % 2)) = 1 ]; then sig=KILL; else sig=TERM; fi
    event app-restart
    kill "-$sig" "$APP_PID"
    wait "$APP_PID" 2>/dev/null || true
    _e2e_forget "$APP_PID"
    start_app
    echo "   t=${t}s: app restarted (SIG$sig)"
  fi
  if [ "$t" -ge $(((JOBSD_N + 1) * JOBSD_EVERY)) ] && [ "$t" -lt "$SOAK_SECONDS" ]; then
    JOBSD_N=$((JOBSD_N + 1))
    t1=$(now_ns)
    if [ $((JOBSD_N % 2)) = 1 ]; then
      event sigterm
      bench_stop_jobsd
      how="SIGTERM (stop took ${STOP_MS} ms)"
    else
      event kill9
      bench_kill9_jobsd
      how="kill -9"
    fi
    start_jobsd
    echo "   t=${t}s: jobsd restarted after $how; down $(ms_between "$t1" "$(now_ns)") ms"
  fi
  if [ "$t" -ge $(((MIN + 1) * 60)) ]; then
    MIN=$((MIN + 1))
    recs=$(($(stat -c %s "$RECS") / 24))
    line="min $MIN: jobsd pid $PID $(proc_line "$PID"); deliveries $((recs - LAST_RECS))/min; load $(cut -d' ' -f1-3 /proc/loadavg)"
    LAST_RECS=$recs
    echo "$line" | tee -a "$MINUTES"
  fi
done
e2e_wait_spawned "$DRIVE_PID" || {
  cat "$TMP/drive.log"
  exit 1
}
cat "$TMP/drive.log"
echo "== drain ${DRAIN} s, then stop"
sleep "$DRAIN"
bench_stop_jobsd
e2e_unspawn "$APP_PID"

echo "== check"
rc=0
"$SOAK" check --app-log "$RECS" --drive-log "$TMP/drive.txt" --events "$EVENTS" |
  tee "$TMP/check.txt" || rc=$?
{
  echo
  echo "== summary ($(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; load now $(cut -d' ' -f1-3 /proc/loadavg))"
  echo "events: $(awk '{ print $2 }' "$EVENTS" | sort | uniq -c | xargs)"
  for key in rss hwm fds threads; do
    # first / last / max of each minute's value (over all jobsd processes).
    sed -n "s/.* $key \([0-9.]*\).*/\1/p" "$MINUTES" |
      awk -v k="$key" 'NR == 1 { f = $1 } { l = $1; if ($1 > m) m = $1 }
        END { printf "jobsd %s per minute: first %s, last %s, max %s\n", k, f, l, m }'
  done
  awk '{ for (i = 1; i <= NF; i++) if ($i == "load") print $(i + 1) }' "$MINUTES" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "load1 per minute: min %s, median %s, max %s\n", v[1], v[int((NR + 1) / 2)], v[NR] }'
  grep -c 'panicked' "$TMP/jobsd.log" | sed 's/^/panics in the jobsd log: /' || true
} | tee -a "$TMP/check.txt"
exit "$rc"
