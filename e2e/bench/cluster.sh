#!/usr/bin/env bash
# Scheduler-cluster benchmark (issue 5) — run by hand, never part of CI or e2e/test.sh.
#
#   bash e2e/bench/cluster.sh
#
# Builds the release jobsd and examples/bench_api + bench_triggers, and measures in one run,
# side by side, the 3-replica cluster (Debian etcd on loopback, 3 `jobsd scheduler
# --etcd-endpoints … --lease-ttl $LEASE_TTL`, 2 sidecars in remote mode, both given every
# replica) and the embedded mode (one sidecar with its own redb store):
#   (a) creates: RUNS runs of CREATES `POST /v1.0/jobs/…` from 16 HTTP clients through one
#       sidecar (examples/bench_api --mode http; nothing fires): creates/s, p50, p99. The
#       cluster and embedded runs alternate.
#   (b) burst: BURST_RUNS runs of BURST_N one-shots due at one instant T, created over gRPC
#       through sidecar 1 and delivered (cluster: through both sidecars) to the bench app
#       (examples/bench_triggers burst/app): deliveries/s = N / (last − T), lateness.
#   (c) failover: FAILOVER_JOBS `@every 1s` jobs (due times spread over a second) firing on the
#       cluster; FAILOVER_RUNS times: kill -9 one replica (s1, s2, s3 in turn) and measure,
#       per job, the time from the kill to its first delivery after it; the jobs whose gap
#       spans the kill by > 1.5 s are the killed replica's share, and the failover time is the
#       largest of their resume times. Then restart the replica (same --id), wait until it is
#       SERVING, and measure the pause its share sees while moving back (largest gap per job)
#       and the most deliveries of one job within 5 s (> 5 + 1 would be two owners at once).
#       With FAILOVER_STORED=N, N more jobs (bench_api's: due in a year) are stored first through
#       sidecar 1 (64 HTTP clients), so that a failover adopts its share of N + the ticking ones.
#   (d) batch creates: RUNS runs of BATCH_CREATES one-shots (due in 48 h) through one sidecar's
#       `jobsd.v1.Jobs/ScheduleJobs`, BATCH jobs per call, BATCH_C calls in flight
#       (examples/bench_triggers fill --batch): creates/s, cluster and embedded alternating.
#       BATCH=0 sends one Dapr `ScheduleJob` per call instead; BATCH_PACE=N offers N jobs/s
#       (each call sent at its own time, its latency counted from then) instead of sending
#       each call as soon as the one before it answers.
#   (e) bulk pause: RUNS runs of BULK_N one-shots (due in 48 h, filled as in (d)), then one
#       `POST /jobsd/v1/jobs:pause` by their prefix and one `jobs:resume` through sidecar 1
#       (cluster: each job paused at the replica that fires it): jobs changed, seconds, jobs/s.
# Each part runs on a fresh cluster (fresh etcd) and a fresh embedded data dir.
#
# Settings (environment): CREATES=20000 RUNS=3 CLIENTS=16 BURST_N=20000 BURST_RUNS=2
#   FAILOVER_JOBS=300 FAILOVER_RUNS=3 FAILOVER_WINDOW=12 (s observed after a kill)
#   FAILOVER_STORED=0 (jobs stored far ahead before the failover runs, e.g. 1000000)
#   HANDBACK_WINDOW=10 (s observed after the restart) LEASE_TTL=3s PARTITIONS= (--partitions
#   for the replicas; empty: their default) PARTS=abcde BULK_N=10000 BATCH_CREATES=200000 BATCH=256 BATCH_C=8 BATCH_PACE=0 QUIET=0.5 QUIET_WAIT=60 (before each timed
#   run, wait up to QUIET_WAIT s for other processes to use under QUIET cores) ETCD_BIN
#   JOBSD_BIN (another jobsd build to measure) BUILD=1 (0: use the binaries in target/ as they
#   are) ETCD_FLAGS="--max-txn-ops 10000" (Dapr 1.18's own etcd setting; "" for etcd's default,
#   128 ops per txn) KEEP=0 (1: keep the temp dir) REPLICA_ARGS="" (extra `jobsd scheduler` flags, e.g.
#   `--history-limit 0 --finished-retention 0`, or `--etcd-writers 1`) MODES="cluster embedded"
#   (the modes parts a, b and d measure; "cluster" alone skips the embedded runs)
#   APP_PROTOCOL=http (h2c: every sidecar calls the bench app over HTTP/2 without TLS).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=e2e/lib.sh
source e2e/lib.sh

CREATES=${CREATES:-20000}
REPLICA_ARGS=${REPLICA_ARGS:-}
RUNS=${RUNS:-3}
CLIENTS=${CLIENTS:-16}
BURST_N=${BURST_N:-20000}
BURST_RUNS=${BURST_RUNS:-2}
FAILOVER_JOBS=${FAILOVER_JOBS:-300}
FAILOVER_RUNS=${FAILOVER_RUNS:-3}
FAILOVER_WINDOW=${FAILOVER_WINDOW:-12}
FAILOVER_STORED=${FAILOVER_STORED:-0}
BATCH_CREATES=${BATCH_CREATES:-200000}
BATCH=${BATCH:-256}
BATCH_C=${BATCH_C:-8}
BATCH_PACE=${BATCH_PACE:-0}
BULK_N=${BULK_N:-10000}
export ETCD_FLAGS=${ETCD_FLAGS---max-txn-ops 10000}
HANDBACK_WINDOW=${HANDBACK_WINDOW:-10}
LEASE_TTL=${LEASE_TTL:-3s}
PARTITIONS=${PARTITIONS:-}
PARTS=${PARTS:-abcde}
MODES=${MODES:-cluster embedded}
APP_PROTOCOL=${APP_PROTOCOL:-http}
QUIET=${QUIET:-0.5}
QUIET_WAIT=${QUIET_WAIT:-60}

bench_begin cluster-bench
echo "etcd: $("$ETCD_BIN" --version | head -1) ${ETCD_FLAGS:-(default flags)}"

echo "== build"
if [ "${BUILD:-1}" = 1 ]; then
  cargo build --release --locked --bin jobsd --example bench_api --example bench_triggers
fi
JOBSD=${JOBSD_BIN:-${CARGO_TARGET_DIR:-target}/release/jobsd}
BENCH_API=${CARGO_TARGET_DIR:-target}/release/examples/bench_api
BENCH_TRIG=${CARGO_TARGET_DIR:-target}/release/examples/bench_triggers
e2e_venv e2e/python/requirements.txt # grpcio, for the replicas' gRPC health

RESULTS=$TMP/results.txt
: >"$RESULTS"

# wait_healthz PORT PID: GET /v1.0/healthz → 204 within 30 s.
wait_healthz() {
  e2e_wait_http "http://127.0.0.1:$1/v1.0/healthz" 204 30 "$2" "sidecar on $1" || {
    tail -n 30 "$TMP"/*.log
    exit 1
  }
}

# wait_serving ADDR...: grpc.health.v1 SERVING (cluster_checks.py serving), within 30 s.
wait_serving() {
  e2e_wait_serving "$TMP/serving.out" 30 "$@" || {
    tail -n 30 "$TMP"/replica-*.log
    exit 1
  }
}

# ---------------------------------------------------------------- the bench app
APP_PORT=$(free_ports 1)
# shellcheck disable=SC2046
e2e_spawn "$TMP/app.log" "$BENCH_TRIG" app --port "$APP_PORT" $([ "$APP_PROTOCOL" = h2c ] && echo --h2c)
APP_PID=$E2E_SPAWNED
e2e_wait_tcp "$APP_PORT" 30 "$APP_PID"
APP=127.0.0.1:$APP_PORT

# ---------------------------------------------------------------- cluster
REPLICA_PORTS=()
REPLICA_PIDS=()
REPLICA_METRICS=()
SC_HTTP=()
SC_GRPC=()
SC_PIDS=()
# start_replica I: replica s<I+1> of the current cluster (again after a kill: same id, port).
start_replica() {
  local i=$1
  REPLICA_METRICS[i]=$(free_ports 1)
  # shellcheck disable=SC2086
  e2e_spawn "$TMP/replica-$CLUSTER_TAG-s$((i + 1)).log" "$JOBSD" scheduler \
    --etcd-endpoints "$ETCD_URL" --id "s$((i + 1))" --listen-address 127.0.0.1 \
    --port "${REPLICA_PORTS[$i]}" --lease-ttl "$LEASE_TTL" ${PARTITIONS:+--partitions $PARTITIONS} \
    --log-level warn --metrics-listen-address 127.0.0.1 --metrics-port "${REPLICA_METRICS[$i]}" \
    $REPLICA_ARGS
  REPLICA_PIDS[i]=$E2E_SPAWNED
}
# replica_store_totals: "<etcd txns> <reads before a commit>" summed over the live replicas'
# /metrics (a build without the reads counter reports 0 reads).
replica_store_totals() {
  local port
  for port in "${REPLICA_METRICS[@]}"; do
    curl -sf "http://127.0.0.1:$port/metrics" || true
  done | awk '$1 ~ /^jobsd_store_commit_duration_seconds_count/ { t += $2 }
    $1 ~ /^jobsd_store_reads_before_commit_total/ { r += $2 }
    END { printf "%d %d\n", t, r }'
}
replica_addr() { echo "127.0.0.1:${REPLICA_PORTS[$1]}"; }

# cluster_up TAG: fresh etcd, 3 replicas, 2 sidecars (app id myapp, every replica given).
cluster_up() {
  CLUSTER_TAG=$1
  local ports i
  mapfile -t ports < <(free_ports 9)
  REPLICA_PORTS=("${ports[2]}" "${ports[3]}" "${ports[4]}")
  SC_HTTP=("${ports[5]}" "${ports[6]}")
  SC_GRPC=("${ports[7]}" "${ports[8]}")
  e2e_start_etcd "$TMP/etcd-$CLUSTER_TAG" "$TMP/etcd-$CLUSTER_TAG.log" "${ports[0]}" "${ports[1]}" 30 ||
    { tail "$TMP/etcd-$CLUSTER_TAG.log"; exit 1; }
  for i in 0 1 2; do start_replica "$i"; done
  wait_serving "$(replica_addr 0)" "$(replica_addr 1)" "$(replica_addr 2)"
  local all
  all="$(replica_addr 0),$(replica_addr 1),$(replica_addr 2)"
  for i in 0 1; do
    # shellcheck disable=SC2046
    e2e_spawn "$TMP/sidecar-$CLUSTER_TAG-$((i + 1)).log" env -u APP_PORT -u APP_ID -u DAPR_API_TOKEN \
      "$JOBSD" --app-id myapp --app-port "$APP_PORT" --dapr-http-port "${SC_HTTP[$i]}" \
      --dapr-grpc-port "${SC_GRPC[$i]}" --dapr-listen-addresses 127.0.0.1 \
      --scheduler-host-address "$all" --data-dir "$TMP/unused" --log-level warn $(e2e_metrics_flags) \
      --app-protocol "$APP_PROTOCOL"
    SC_PIDS[i]=$E2E_SPAWNED
  done
  for i in 0 1; do wait_healthz "${SC_HTTP[$i]}" "${SC_PIDS[$i]}"; done
  # Both sidecars hold streams to all 3 replicas before anything is measured.
  for i in 0 1; do
    for _ in $(seq 1 300); do
      [ "$(curl -s "http://127.0.0.1:${SC_HTTP[$i]}/v1.0/metadata" | grep -o '127\.0\.0\.1:[0-9]*' | sort -u | wc -l)" -ge 3 ] && break
      sleep 0.1
    done
  done
  echo "   cluster $CLUSTER_TAG up: etcd $ETCD_URL, replicas $all, sidecars http ${SC_HTTP[*]}"
}
cluster_down() {
  local p
  for p in "${SC_PIDS[@]}" "${REPLICA_PIDS[@]}" "$ETCD_PID"; do e2e_unspawn "$p"; done
  SC_PIDS=()
  REPLICA_PIDS=()
  ETCD_PID=
}

# ---------------------------------------------------------------- embedded
EMB_PID=
EMB_HTTP=
EMB_GRPC=
embedded_up() {
  [[ "$MODES" == *embedded* ]] || return 0
  read -r EMB_HTTP EMB_GRPC < <(free_ports 2 | xargs)
  # shellcheck disable=SC2046
  e2e_spawn "$TMP/embedded-$1.log" env -u APP_PORT -u APP_ID -u DAPR_API_TOKEN \
    -u DAPR_SCHEDULER_HOST_ADDRESS_DNS_A "$JOBSD" --app-id myapp --app-port "$APP_PORT" \
    --dapr-http-port "$EMB_HTTP" --dapr-grpc-port "$EMB_GRPC" --dapr-listen-addresses 127.0.0.1 \
    --data-dir "$TMP/embedded-$1" --log-level warn $(e2e_metrics_flags) --app-protocol "$APP_PROTOCOL"
  EMB_PID=$E2E_SPAWNED
  wait_healthz "$EMB_HTTP" "$EMB_PID"
}
embedded_down() {
  [ -n "$EMB_PID" ] || return 0
  e2e_unspawn "$EMB_PID"
  EMB_PID=
  rm -rf "$TMP/embedded-$1"
}

has() { [[ "$PARTS" == *"$1"* ]]; }
tag() { sed "s/\$/ mode=$1 busy_before=$BUSY/"; }

# bench_trig_target MODE: bench_triggers' flags for sidecar 1 (cluster) or the embedded jobsd.
bench_trig_target() {
  if [ "$1" = cluster ]; then
    echo --http "127.0.0.1:${SC_HTTP[0]}" --grpc "127.0.0.1:${SC_GRPC[0]}" --jobsd-pid "${SC_PIDS[0]}"
  else
    echo --http "127.0.0.1:$EMB_HTTP" --grpc "127.0.0.1:$EMB_GRPC" --jobsd-pid "$EMB_PID"
  fi
}

# ---------------------------------------------------------------- (a) creates
if has a; then
  echo "== (a) creates: $RUNS runs of $CREATES from $CLIENTS HTTP clients, cluster vs embedded"
  cluster_up a
  embedded_up a
  for r in $(seq 1 "$RUNS"); do
    for mode in $MODES; do
      echo "-- run $r, $mode"
      bench_wait_quiet
      if [ "$mode" = cluster ]; then http=${SC_HTTP[0]} pid=${SC_PIDS[0]}; else http=$EMB_HTTP pid=$EMB_PID; fi
      "$BENCH_API" --mode http --http "127.0.0.1:$http" --server-pid "$pid" -n "$CREATES" \
        -c "$CLIENTS" --run-id "$mode$r" | tee "$TMP/last.log" | grep -v '^RESULT'
      grep '^RESULT' "$TMP/last.log" | tag "$mode" >>"$RESULTS"
    done
  done
  embedded_down a
  cluster_down
fi

# ---------------------------------------------------------------- (b) burst
if has b; then
  echo "== (b) burst: $BURST_RUNS runs of $BURST_N one-shots due at one instant, cluster vs embedded"
  cluster_up b
  embedded_up b
  for r in $(seq 1 "$BURST_RUNS"); do
    for mode in $MODES; do
      echo "-- run $r, $mode"
      bench_wait_quiet
      # shellcheck disable=SC2046
      set -- $(bench_trig_target "$mode")
      if [ "$mode" = cluster ]; then read -r txns0 reads0 < <(replica_store_totals); fi
      "$BENCH_TRIG" burst -n "$BURST_N" --run-id "${mode:0:1}$r" --app "$APP" --app-pid "$APP_PID" \
        "$@" | tee "$TMP/last.log"
      grep '^RESULT' "$TMP/last.log" | tag "$mode" >>"$RESULTS"
      if [ "$mode" = cluster ]; then
        read -r txns1 reads1 < <(replica_store_totals)
        echo "   replicas' etcd txns in the run (creates and results): $((txns1 - txns0)), reads before a commit: $((reads1 - reads0))"
      fi
    done
  done
  embedded_down b
  cluster_down
fi

# ---------------------------------------------------------------- (c) failover
# failover.py create SIDECAR_HTTP... / analyse KILL_NS END_NS / handback START_NS END_NS:
# records are taken from the bench app (`POST /_take`: `<ns> <name>` lines).
failover_py() {
  "$E2E_PY" - "$@" <<'PY'
import json, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

mode, args = sys.argv[1], sys.argv[2:]
app = "http://" + args[0]

def take():
    with urllib.request.urlopen(urllib.request.Request(app + "/_take", method="POST"), timeout=30) as r:
        out = {}
        for line in r.read().decode().splitlines():
            ns, name = line.split(" ", 1)
            out.setdefault(name, []).append(int(ns) / 1e9)
        return {n: sorted(ts) for n, ts in out.items()}

def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")

if mode == "create":  # APP N SIDECAR_HTTP...
    n, sidecars = int(args[1]), args[2:]
    start = time.time() + 3
    def one(i):
        due = datetime.fromtimestamp(start + i / n, timezone.utc).isoformat(timespec="milliseconds")
        body = json.dumps({"schedule": "@every 1s", "dueTime": due.replace("+00:00", "Z")}).encode()
        req = urllib.request.Request(f"http://{sidecars[i % len(sidecars)]}/v1.0/jobs/f-{i}",
                                     data=body, method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 204, r.status
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))
    time.sleep(max(0.0, start + 2 - time.time()))
elif mode == "take":
    take()
elif mode == "kill":  # APP N T_KILL: after a kill at T_KILL (s)
    n, t_kill = int(args[1]), float(args[2])
    got = take()
    resume, gaps, unresumed = {}, {}, []
    for i in range(n):
        ts = got.get(f"f-{i}", [])
        before = [t for t in ts if t < t_kill]
        after = [t for t in ts if t >= t_kill]
        if not after:
            unresumed.append(f"f-{i}")
            continue
        resume[i] = after[0] - t_kill
        gaps[i] = after[0] - (before[-1] if before else t_kill)
    hit = [i for i, g in gaps.items() if g > 1.5]
    rs = [resume[i] for i in hit]
    print(f"   {len(hit)} of {n} jobs paused > 1.5 s (the killed replica's share); resumed "
          f"after the kill: p50 {pct(rs, .5):.2f} s, max {max(rs, default=float('nan')):.2f} s; "
          f"largest gap {max(gaps.values(), default=float('nan')):.2f} s; {len(unresumed)} not resumed")
    print(f"RESULT label=failover affected={len(hit)} resume_p50_s={pct(rs, .5):.3f} "
          f"resume_max_s={max(rs, default=float('nan')):.3f} gap_max_s={max(gaps.values(), default=float('nan')):.3f} "
          f"unresumed={len(unresumed)}")
elif mode == "handback":  # APP N T_START T_END: the share moving back to the restarted replica
    n, t0, t1 = int(args[1]), float(args[2]), float(args[3])
    got = take()
    gaps, most = {}, {}
    for i in range(n):
        ts = [t for t in got.get(f"f-{i}", []) if t <= t1]
        before = [t for t in ts if t < t0]
        seq = [before[-1] if before else t0] + [t for t in ts if t >= t0] + [t1]
        gaps[i] = max(b - a for a, b in zip(seq, seq[1:]))
        inside = [t for t in ts if t >= t0]
        most[i] = max((sum(1 for u in inside if t <= u < t + 5) for t in inside), default=0)
    paused = sum(1 for g in gaps.values() if g > 1.5)
    print(f"   handback: largest gap {max(gaps.values()):.2f} s ({paused} jobs paused > 1.5 s); "
          f"most deliveries of one job in 5 s: {max(most.values())}")
    print(f"RESULT label=handback gap_max_s={max(gaps.values()):.3f} paused={paused} "
          f"most_5s={max(most.values())}")
PY
}

if has c; then
  echo "== (c) failover: $FAILOVER_JOBS @every 1s jobs, kill -9 one replica, $FAILOVER_RUNS times (lease ttl $LEASE_TTL)"
  cluster_up c
  if [ "$FAILOVER_STORED" -gt 0 ]; then
    echo "-- storing $FAILOVER_STORED jobs due in a year through sidecar 1"
    "$BENCH_API" --fill "$FAILOVER_STORED" --fill-concurrency 64 --http "127.0.0.1:${SC_HTTP[0]}" \
      --run-id stored --progress-secs 20 | tee "$TMP/last.log" | grep -v '^RESULT'
    grep '^RESULT' "$TMP/last.log" | sed 's/$/ label2=stored/' >>"$RESULTS"
    STORED_RSS=$(for pid in "${REPLICA_PIDS[@]}"; do
      awk '/^VmRSS/ { printf "%.0f ", $2 / 1024 }' "/proc/$pid/status"
    done | sed 's/ $//; s/ / · /g')
    echo "   replica RSS after storing them: $STORED_RSS MiB"
  fi
  failover_py create "$APP" "$FAILOVER_JOBS" "127.0.0.1:${SC_HTTP[0]}" "127.0.0.1:${SC_HTTP[1]}"
  for r in $(seq 1 "$FAILOVER_RUNS"); do
    v=$(((r - 1) % 3))
    echo "-- run $r: kill -9 s$((v + 1))"
    BUSY=$(busy_cores)
    failover_py take "$APP"
    sleep 3
    kill -KILL "${REPLICA_PIDS[$v]}"
    t_kill=$(e2e_now)
    wait "${REPLICA_PIDS[$v]}" 2>/dev/null || true
    _e2e_forget "${REPLICA_PIDS[$v]}"
    sleep "$FAILOVER_WINDOW"
    failover_py kill "$APP" "$FAILOVER_JOBS" "$t_kill" | tee "$TMP/last.log" | grep -v '^RESULT'
    grep '^RESULT' "$TMP/last.log" | sed "s/\$/ run=$r victim=s$((v + 1)) busy_before=$BUSY/" >>"$RESULTS"
    failover_py take "$APP"
    t_start=$(e2e_now)
    start_replica "$v"
    wait_serving "$(replica_addr "$v")"
    t_serving=$(e2e_now)
    sleep "$HANDBACK_WINDOW"
    t_end=$(e2e_now)
    failover_py handback "$APP" "$FAILOVER_JOBS" "$t_start" "$t_end" | tee "$TMP/last.log" | grep -v '^RESULT'
    serving_ms=$(awk -v a="$t_start" -v b="$t_serving" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
    echo "   restart → SERVING: $serving_ms ms"
    grep '^RESULT' "$TMP/last.log" | sed "s/\$/ run=$r victim=s$((v + 1)) serving_ms=$serving_ms/" >>"$RESULTS"
  done
  cluster_down
fi

# ---------------------------------------------------------------- (d) batch creates
if has d; then
  echo "== (d) batch creates: $RUNS runs of $BATCH_CREATES, $BATCH per call (0: one ScheduleJob each), $BATCH_C calls in flight, paced at $BATCH_PACE/s (0: unpaced), cluster vs embedded"
  cluster_up d
  embedded_up d
  for r in $(seq 1 "$RUNS"); do
    for mode in $MODES; do
      echo "-- run $r, $mode"
      bench_wait_quiet
      # shellcheck disable=SC2046
      set -- $(bench_trig_target "$mode")
      "$BENCH_TRIG" fill -n "$BATCH_CREATES" --run-id "${mode:0:1}$r" --app "$APP" \
        --batch "$BATCH" --concurrency "$BATCH_C" --pace "$BATCH_PACE" "$@" | tee "$TMP/last.log" | grep -v '^RESULT'
      grep '^RESULT' "$TMP/last.log" | tag "$mode" >>"$RESULTS"
    done
  done
  embedded_down d
  cluster_down
fi

# ---------------------------------------------------------------- (e) bulk pause
# bulk_call PORT ROUTE PREFIX: one bulk call, as "RESULT label=<route> count=… secs=…".
bulk_call() {
  local out
  out=$(curl -sS -o "$TMP/bulk.json" -w '%{http_code} %{time_total}' -X POST \
    "http://127.0.0.1:$1/jobsd/v1/jobs:$2" -d "{\"prefix\":\"$3\"}")
  [ "${out%% *}" = 200 ] || { echo "jobs:$2 answered $out: $(cat "$TMP/bulk.json")"; exit 1; }
  echo "RESULT label=$2 count=$(grep -o '"count":[0-9]*' "$TMP/bulk.json" | cut -d: -f2) secs=${out#* }"
}
if has e; then
  echo "== (e) bulk pause: $RUNS runs of $BULK_N jobs paused and resumed by one call each, cluster vs embedded"
  cluster_up e
  embedded_up e
  for r in $(seq 1 "$RUNS"); do
    for mode in $MODES; do
      echo "-- run $r, $mode"
      # shellcheck disable=SC2046
      set -- $(bench_trig_target "$mode")
      "$BENCH_TRIG" fill -n "$BULK_N" --run-id "e${mode:0:1}$r" --app "$APP" \
        --batch "$BATCH" --concurrency "$BATCH_C" "$@" | grep -v '^RESULT'
      if [ "$mode" = cluster ]; then http=${SC_HTTP[0]}; else http=$EMB_HTTP; fi
      bench_wait_quiet
      for route in pause resume; do
        bulk_call "$http" "$route" "fe${mode:0:1}$r-" | tee "$TMP/last.log"
        tag "$mode" <"$TMP/last.log" >>"$RESULTS"
      done
    done
  done
  embedded_down e
  cluster_down
fi

# ---------------------------------------------------------------- summary
{
  echo
  echo "== summary ($(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); lease ttl $LEASE_TTL${PARTITIONS:+, $PARTITIONS partitions})"
  if has a; then
    echo
    echo "(a) creates, HTTP/1.1, $CLIENTS clients, $CREATES per run, through one sidecar:"
    echo
    echo "| mode | creates/s (median) | p50 ms | p99 ms | creates/s per run | p99 ms per run | others' cores before each run |"
    echo "|---|---|---|---|---|---|---|"
    for mode in $MODES; do
      lines=$(grep "^RESULT label=http .* mode=$mode " "$RESULTS" || true)
      printf '| %s | %s | %s | %s | %s | %s | %s |\n' \
        "$([ "$mode" = cluster ] && echo "3-replica etcd cluster" || echo "embedded (redb)")" \
        "$(echo "$lines" | field rate | median | awk '$1 == "-" { print; next } { printf "%.0f", $1 }')" "$(echo "$lines" | field p50_ms | median)" \
        "$(echo "$lines" | field p99_ms | median)" \
        "$(echo "$lines" | field rate | xargs printf '%.0f ' | sed 's/ $//')" \
        "$(echo "$lines" | field p99_ms | xargs | sed 's/ /, /g')" \
        "$(echo "$lines" | field busy_before | xargs | sed 's/ /, /g')"
    done
  fi
  if has b; then
    echo
    echo "(b) burst of $BURST_N one-shots due at one instant T (cluster: delivered through 2 sidecars):"
    echo
    echo "| mode | deliveries/s N/(last−T) (median) | per run | lateness p50 / p99 / max ms (per run) | missing / dups (per run) | create rate/s |"
    echo "|---|---|---|---|---|---|"
    for mode in $MODES; do
      lines=$(grep "^RESULT label=burst .* mode=$mode " "$RESULTS" || true)
      printf '| %s | %s | %s | %s | %s | %s |\n' \
        "$([ "$mode" = cluster ] && echo "3-replica etcd cluster" || echo "embedded (redb)")" \
        "$(echo "$lines" | field rate_t | median)" \
        "$(echo "$lines" | field rate_t | xargs | sed 's/ /, /g')" \
        "$(echo "$lines" | while read -r l; do [ -n "$l" ] && printf '%s / %s / %s; ' "$(echo "$l" | field p50_ms)" "$(echo "$l" | field p99_ms)" "$(echo "$l" | field max_ms)"; done | sed 's/; $//')" \
        "$(echo "$lines" | while read -r l; do [ -n "$l" ] && printf '%s / %s; ' "$(echo "$l" | field missing)" "$(echo "$l" | field dups)"; done | sed 's/; $//')" \
        "$(echo "$lines" | field create_rate | xargs | sed 's/ /, /g')"
    done
  fi
  if has d; then
    echo
    echo "(d) batch creates through one sidecar's jobsd.v1.Jobs/ScheduleJobs, $BATCH per call, $BATCH_C calls in flight, $BATCH_CREATES per run:"
    echo
    echo "| mode | creates/s (median) | creates/s per run | a call's p50 / p99 ms per run | errors per run | others' cores before each run |"
    echo "|---|---|---|---|---|---|"
    for mode in $MODES; do
      lines=$(grep "^RESULT label=fill .* mode=$mode " "$RESULTS" || true)
      printf '| %s | %s | %s | %s | %s | %s |\n' \
        "$([ "$mode" = cluster ] && echo "3-replica etcd cluster" || echo "embedded (redb)")" \
        "$(echo "$lines" | field create_rate | median)" \
        "$(echo "$lines" | field create_rate | xargs | sed 's/ /, /g')" \
        "$(paste -d/ <(echo "$lines" | field call_p50_ms) <(echo "$lines" | field call_p99_ms) | xargs | sed 's/ /, /g')" \
        "$(echo "$lines" | field errors | xargs | sed 's/ /, /g')" \
        "$(echo "$lines" | field busy_before | xargs | sed 's/ /, /g')"
    done
  fi
  if has e; then
    echo
    echo "(e) bulk pause and resume of $BULK_N jobs by one call each (by prefix), through one sidecar:"
    echo
    echo "| mode | call | jobs changed per run | seconds per run | jobs/s (median) |"
    echo "|---|---|---|---|---|"
    for mode in $MODES; do
      for route in pause resume; do
        lines=$(grep "^RESULT label=$route .* mode=$mode " "$RESULTS" || true)
        printf '| %s | %s | %s | %s | %s |\n' \
          "$([ "$mode" = cluster ] && echo "3-replica etcd cluster" || echo "embedded (redb)")" \
          "jobs:$route" \
          "$(echo "$lines" | field count | xargs | sed 's/ /, /g')" \
          "$(echo "$lines" | field secs | xargs | sed 's/ /, /g')" \
          "$(echo "$lines" | awk '{for(i=1;i<=NF;i++){split($i,a,"=");v[a[1]]=a[2]} if(v["secs"]>0) print int(v["count"]/v["secs"])}' | median)"
      done
    done
  fi
  if has c; then
    echo
    echo "(c) failover, $FAILOVER_JOBS @every 1s jobs$([ "$FAILOVER_STORED" -gt 0 ] && echo " (+ $FAILOVER_STORED stored far ahead; replica RSS after storing them: ${STORED_RSS:-?} MiB)"), kill -9 of one replica:"
    echo
    echo "| run | killed | jobs paused (its share) | failover: kill → every paused job delivered again | resume p50 | largest gap | not resumed in ${FAILOVER_WINDOW} s | restart → SERVING | handback: largest gap / jobs paused > 1.5 s | most deliveries of a job in 5 s |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for r in $(seq 1 "$FAILOVER_RUNS"); do
      k=$(grep "^RESULT label=failover .* run=$r " "$RESULTS" || true)
      h=$(grep "^RESULT label=handback .* run=$r " "$RESULTS" || true)
      printf '| %s | %s | %s | %s s | %s s | %s s | %s | %s ms | %s s / %s | %s |\n' "$r" \
        "$(echo "$k" | field victim)" "$(echo "$k" | field affected)" \
        "$(echo "$k" | field resume_max_s)" "$(echo "$k" | field resume_p50_s)" \
        "$(echo "$k" | field gap_max_s)" "$(echo "$k" | field unresumed)" \
        "$(echo "$h" | field serving_ms)" "$(echo "$h" | field gap_max_s)" \
        "$(echo "$h" | field paused)" "$(echo "$h" | field most_5s)"
    done
  fi
} | tee "$TMP/table.md"
