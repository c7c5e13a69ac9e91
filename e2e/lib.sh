# shellcheck shell=bash
# Shared helpers for the end-to-end suites and the bench scripts: build the release jobsd,
# start/stop it on free loopback ports, wait for its health endpoint, make the Python venv the
# SDK suites use; run a suite's checks in phases and count them (run_phase, shell_check,
# e2e_suite_begin/e2e_suite_end); start etcd and wait for replicas; and the benches' measuring
# helpers (busy_cores, bench_wait_quiet, median, field…). Every function is documented where
# it is defined, and nothing is defined again in a script.
#
# Source it from a suite (`source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"`); it sets no shell
# options of its own. Every wait is bounded. A suite calls e2e_suite_begin (or sets
# `trap e2e_cleanup EXIT` itself) so that any process it started is killed and its temp dirs
# are removed, however it exits.

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E_ROOT="$(cd "$E2E_DIR/.." && pwd)"
E2E_VENV="$E2E_DIR/.venv"

# Seconds to wait for `GET /v1.0/healthz` → 204 after a start.
: "${E2E_HEALTH_TIMEOUT:=30}"
# Seconds to wait for jobsd to exit after SIGTERM.
: "${E2E_STOP_TIMEOUT:=15}"

# State of the one jobsd a suite runs at a time (set by jobsd_start).
JOBSD_PID=""
JOBSD_HTTP_PORT=""
JOBSD_GRPC_PORT=""
JOBSD_METRICS_PORT=""
JOBSD_LOG=""
# The temp dirs e2e_mktemp made, for e2e_cleanup.
E2E_TMPDIRS=()
# Helper processes (apps) started with e2e_spawn and not yet stopped, for e2e_cleanup.
E2E_BG_PIDS=()

e2e_log() { printf '[e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
e2e_fail() {
  printf '[e2e %s] FAIL: %s\n' "$(date +%H:%M:%S)" "$*" >&2
  return 1
}

# e2e_python: the machine's python3 (not the venv's), for small helpers.
e2e_python() { command -v python3 || e2e_fail "python3 not found: run e2e/setup.sh"; }

# e2e_mktemp: make a temp dir that e2e_cleanup removes; its path is left in E2E_TMP.
E2E_TMP=""
e2e_mktemp() {
  E2E_TMP="$(mktemp -d "${TMPDIR:-/tmp}/jobsd-e2e.XXXXXX")"
  E2E_TMPDIRS+=("$E2E_TMP")
}

# free_ports N: print N distinct free TCP ports on 127.0.0.1, one per line. All N sockets are
# held open together while choosing, so the ports differ; the kernel does not hand a just-closed
# ephemeral port out again at once, and jobsd_start retries on the rare collision anyway.
free_ports() {
  "$(e2e_python)" - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print("\n".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# e2e_metrics_flags: print the flags that put one jobsd's metrics server (daprd's default:
# 0.0.0.0:9090) on a fresh free loopback port, for a command line (unquoted, so it splits):
# several jobsd processes run side by side here and each serves /metrics.
e2e_metrics_flags() {
  printf -- '--metrics-listen-address 127.0.0.1 --metrics-port %s' "$(free_ports 1)"
}

# jobsd_build: build the release binary (a no-op when it is up to date) and set JOBSD_BIN.
# Set JOBSD_BIN beforehand to test a prebuilt binary instead.
jobsd_build() {
  if [ -n "${JOBSD_BIN:-}" ]; then
    [ -x "$JOBSD_BIN" ] || e2e_fail "JOBSD_BIN=$JOBSD_BIN is not an executable"
    return
  fi
  e2e_log "cargo build --release --locked --bin jobsd"
  (cd "$E2E_ROOT" && cargo build --release --locked --bin jobsd) ||
    e2e_fail "cargo build of jobsd failed"
  local target_dir="${CARGO_TARGET_DIR:-$E2E_ROOT/target}"
  JOBSD_BIN="$target_dir/release/jobsd"
  [ -x "$JOBSD_BIN" ] || e2e_fail "no binary at $JOBSD_BIN after the build"
}

# _http_status URL: print the HTTP status of a GET (000 when nothing answers).
_http_status() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null || true
}

# _proc_gone PID: true when PID has exited (gone, or a zombie not yet reaped).
_proc_gone() {
  ! kill -0 "$1" 2>/dev/null && return 0
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo Z)"
  [ "$state" = Z ]
}

_dump_log() {
  [ -n "$JOBSD_LOG" ] && [ -f "$JOBSD_LOG" ] || return 0
  echo "----- jobsd log ($JOBSD_LOG) -----" >&2
  tail -n 200 "$JOBSD_LOG" >&2
  echo "----- end of jobsd log -----" >&2
}

# jobsd_start DATA_DIR LOG [EXTRA_ARGS...]: start jobsd (app id `myapp`) on three fresh free
# loopback ports (HTTP, gRPC, metrics), with its store in DATA_DIR, appending its output to
# LOG; wait until it serves (see _jobsd_launch). Sets JOBSD_PID, JOBSD_HTTP_PORT,
# JOBSD_GRPC_PORT, JOBSD_METRICS_PORT, JOBSD_LOG.
# If the ports were taken meanwhile (a race with another process), it retries with new ones.
# The environment does not leak into it: DAPR_API_TOKEN is unset, unless E2E_JOBSD_TOKEN is set
# (`E2E_JOBSD_TOKEN=t jobsd_start …`), which becomes its DAPR_API_TOKEN.
jobsd_start() {
  local data_dir="$1" log="$2"
  shift 2
  [ -n "${JOBSD_BIN:-}" ] || jobsd_build
  JOBSD_LOG="$log"
  local attempt rc
  for attempt in 1 2 3; do
    local ports
    mapfile -t ports < <(free_ports 3)
    [ "${#ports[@]}" -eq 3 ] || e2e_fail "could not pick free ports"
    JOBSD_HTTP_PORT="${ports[0]}"
    JOBSD_GRPC_PORT="${ports[1]}"
    JOBSD_METRICS_PORT="${ports[2]}"
    rc=0
    _jobsd_launch "$attempt" "$data_dir" "$log" "$@" || rc=$?
    [ "$rc" -eq 2 ] && [ "$attempt" -lt 3 ] && continue
    return "$((rc == 0 ? 0 : 1))"
  done
  e2e_fail "could not start jobsd"
}

# jobsd_restart DATA_DIR LOG [EXTRA_ARGS...]: start jobsd again on the ports of the previous
# jobsd_start (after jobsd_stop or jobsd_kill9), as a restarted daprd keeps its ports: an app's
# SDK that was given the sidecar's port keeps using it. Otherwise as jobsd_start; if the ports
# are still held (a socket lingering), it retries for a few seconds.
jobsd_restart() {
  local data_dir="$1" log="$2"
  shift 2
  if [ -z "$JOBSD_HTTP_PORT" ] || [ -z "$JOBSD_GRPC_PORT" ]; then
    e2e_fail "jobsd_restart before jobsd_start"
    return 1
  fi
  if [ -n "$JOBSD_PID" ]; then
    e2e_fail "jobsd_restart while jobsd (pid $JOBSD_PID) runs"
    return 1
  fi
  JOBSD_LOG="$log"
  local attempt rc
  for attempt in 1 2 3 4 5; do
    rc=0
    _jobsd_launch "restart $attempt" "$data_dir" "$log" "$@" || rc=$?
    if [ "$rc" -eq 2 ] && [ "$attempt" -lt 5 ]; then
      sleep 1
      continue
    fi
    return "$((rc == 0 ? 0 : 1))"
  done
  e2e_fail "could not restart jobsd"
}

# _jobsd_launch ATTEMPT DATA_DIR LOG [EXTRA_ARGS...]: start jobsd on JOBSD_HTTP_PORT,
# JOBSD_GRPC_PORT and JOBSD_METRICS_PORT and wait until it is healthy (status 0; sets JOBSD_PID). Status 2: it exited
# because a port was in use; 1: any other failure (its log is shown).
_jobsd_launch() {
  local attempt="$1" data_dir="$2" log="$3"
  shift 3
  echo "=== start (attempt $attempt): http=$JOBSD_HTTP_PORT grpc=$JOBSD_GRPC_PORT data=$data_dir" >>"$log"
  local mark
  mark="$(wc -l <"$log")"
  # NO_COLOR keeps ANSI escapes out of the log. jobsd also reads APP_ID, APP_PORT and
  # DAPR_*_PORT from the environment: the flags below (and no app, no API token unless the
  # suite sets E2E_JOBSD_TOKEN) are the whole configuration.
  env -u APP_PORT -u APP_ID -u DAPR_API_TOKEN \
    ${E2E_JOBSD_TOKEN:+DAPR_API_TOKEN="$E2E_JOBSD_TOKEN"} NO_COLOR=1 \
    "$JOBSD_BIN" --app-id myapp --data-dir "$data_dir" \
    --dapr-http-port "$JOBSD_HTTP_PORT" --dapr-grpc-port "$JOBSD_GRPC_PORT" \
    --dapr-listen-addresses 127.0.0.1 --metrics-listen-address 127.0.0.1 \
    --metrics-port "$JOBSD_METRICS_PORT" "$@" </dev/null >>"$log" 2>&1 &
  JOBSD_PID=$!
  e2e_log "jobsd pid $JOBSD_PID on http $JOBSD_HTTP_PORT / grpc $JOBSD_GRPC_PORT"

  # Serving means: the API answers (`/v1.0/healthz/outbound`, what the SDKs wait on) and, in
  # remote mode, the Scheduler replicas are known (`/v1.0/metadata`). Not `/v1.0/healthz`: as
  # daprd's, it also waits for the app's port and `/dapr/config`, and suites start their apps
  # after jobsd, or keep them down on purpose.
  local remote=""
  case " $* " in *" --scheduler-host-address "*) remote=1 ;; esac
  local deadline=$((SECONDS + E2E_HEALTH_TIMEOUT)) status=""
  while :; do
    status="$(_http_status "http://127.0.0.1:$JOBSD_HTTP_PORT/v1.0/healthz/outbound")"
    if [ "$status" = 204 ]; then
      [ -z "$remote" ] && return 0
      curl -s --max-time 2 "http://127.0.0.1:$JOBSD_HTTP_PORT/v1.0/metadata" |
        grep -q '"connected_addresses":\["' && return 0
      status="204 (outbound; no Scheduler replica known yet)"
    fi
    if _proc_gone "$JOBSD_PID"; then
      local rc=0
      wait "$JOBSD_PID" || rc=$?
      JOBSD_PID=""
      if tail -n "+$((mark + 1))" "$log" | grep -qiE 'address (already )?in use'; then
        e2e_log "port collision (attempt $attempt)"
        return 2
      fi
      _dump_log
      e2e_fail "jobsd exited with status $rc before becoming healthy"
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      _dump_log
      e2e_fail "jobsd not serving after ${E2E_HEALTH_TIMEOUT}s (last GET /v1.0/healthz/outbound status: ${status:-none})"
      return 1
    fi
    sleep 0.1
  done
}

# jobsd_stop: SIGTERM jobsd and require it to exit with status 0 within E2E_STOP_TIMEOUT.
jobsd_stop() {
  [ -n "$JOBSD_PID" ] || return 0
  local pid="$JOBSD_PID" started=$SECONDS
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + E2E_STOP_TIMEOUT))
  until _proc_gone "$pid"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      JOBSD_PID=""
      _dump_log
      e2e_fail "jobsd (pid $pid) did not exit within ${E2E_STOP_TIMEOUT}s of SIGTERM"
      return 1
    fi
    sleep 0.1
  done
  local rc=0
  wait "$pid" || rc=$?
  JOBSD_PID=""
  if [ "$rc" -ne 0 ]; then
    _dump_log
    e2e_fail "jobsd exited with status $rc after SIGTERM (expected 0)"
    return 1
  fi
  e2e_log "jobsd (pid $pid) exited 0 after SIGTERM in $((SECONDS - started))s"
}

# jobsd_kill9: SIGKILL jobsd (a crash) and reap it.
jobsd_kill9() {
  [ -n "$JOBSD_PID" ] || return 0
  local pid="$JOBSD_PID"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  JOBSD_PID=""
  e2e_log "jobsd (pid $pid) killed with SIGKILL"
}

# e2e_spawn LOG CMD...: start CMD in the background (stdin /dev/null, output appended to LOG)
# and leave its pid in E2E_SPAWNED. e2e_cleanup kills it if it is still running; stop it earlier
# with e2e_unspawn. Start the program itself (not a wrapper shell), so that the pid is its own.
E2E_SPAWNED=""
e2e_spawn() {
  local log="$1"
  shift
  "$@" </dev/null >>"$log" 2>&1 &
  E2E_SPAWNED=$!
  E2E_BG_PIDS+=("$E2E_SPAWNED")
}

# e2e_unspawn PID: stop a process e2e_spawn started: SIGTERM, SIGKILL after 5 s, then reap it.
# The pid is only signalled while it is still an unreaped child of this shell, so never a
# recycled one.
e2e_unspawn() {
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    _proc_gone "$pid" && break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  _e2e_forget "$pid"
}

# e2e_wait_spawned PID: wait for a process e2e_spawn started to exit by itself; return its exit
# status. A trapped signal to the script interrupts the wait at once.
e2e_wait_spawned() {
  local pid="$1" rc=0
  wait "$pid" || rc=$?
  # Reaped now, so no longer ours to signal. (A trapped signal interrupts `wait` too, but the
  # suites' INT/TERM traps exit, so then this line is never reached and e2e_cleanup stops it.)
  _e2e_forget "$pid"
  return "$rc"
}

_e2e_forget() {
  local p kept=()
  for p in "${E2E_BG_PIDS[@]}"; do
    [ "$p" = "$1" ] || kept+=("$p")
  done
  E2E_BG_PIDS=(${kept[@]+"${kept[@]}"})
}

# e2e_wait_file FILE TIMEOUT [PID]: wait until FILE exists and is not empty; fail after TIMEOUT
# seconds, or as soon as PID (the process meant to write it) has exited.
e2e_wait_file() {
  local file="$1" timeout="$2" pid="${3:-}" deadline=$((SECONDS + $2))
  until [ -s "$file" ]; do
    if [ -n "$pid" ] && _proc_gone "$pid"; then
      e2e_fail "process $pid exited before writing $file"
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      e2e_fail "no $file after ${timeout}s"
      return 1
    fi
    sleep 0.1
  done
}

# e2e_wait_tcp PORT TIMEOUT [PID]: wait until 127.0.0.1:PORT accepts a TCP connection; fail
# after TIMEOUT seconds, or as soon as PID (the process meant to listen there) has exited.
e2e_wait_tcp() {
  local port="$1" timeout="$2" pid="${3:-}" deadline=$((SECONDS + $2))
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    if [ -n "$pid" ] && _proc_gone "$pid"; then
      e2e_fail "process $pid exited before listening on 127.0.0.1:$port"
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      e2e_fail "nothing listening on 127.0.0.1:$port after ${timeout}s"
      return 1
    fi
    sleep 0.1
  done
}

# e2e_start_app PORT LOG CMD...: spawn an app (as e2e_spawn, its pid in E2E_SPAWNED) and wait
# up to APP_START_TIMEOUT seconds (default 30) for it to listen on 127.0.0.1:PORT; on failure
# print its log and return 1.
e2e_start_app() {
  local port="$1" log="$2"
  shift 2
  e2e_spawn "$log" "$@"
  e2e_wait_tcp "$port" "${APP_START_TIMEOUT:-30}" "$E2E_SPAWNED" || {
    cat "$log" >&2
    return 1
  }
}

# e2e_now: the wall-clock time in seconds with a fraction, as Python's time.time() gives it.
e2e_now() { date +%s.%N; }

# e2e_cleanup: kill the jobsd this suite started if it is still running (JOBSD_PID is cleared
# as soon as a jobsd is reaped, so no recycled pid is ever signalled), and the helper processes
# e2e_spawn started, and remove the temp dirs.
# Meant for `trap e2e_cleanup EXIT`; it keeps the exit status of the script.
e2e_cleanup() {
  local rc=$? dir pid
  if [ -n "$JOBSD_PID" ]; then
    kill -KILL "$JOBSD_PID" 2>/dev/null || true
    wait "$JOBSD_PID" 2>/dev/null || true
    JOBSD_PID=""
  fi
  # SIGTERM first (`timeout` passes it on to the command it runs), SIGKILL what is left 2 s
  # later. These are unreaped children of this shell, so no pid here is a recycled one.
  if [ "${#E2E_BG_PIDS[@]}" -gt 0 ]; then
    local i alive
    kill -TERM "${E2E_BG_PIDS[@]}" 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
      alive=0
      for pid in "${E2E_BG_PIDS[@]}"; do
        _proc_gone "$pid" || alive=1
      done
      [ "$alive" -eq 1 ] || break
      sleep 0.1
    done
    for pid in "${E2E_BG_PIDS[@]}"; do
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    done
    E2E_BG_PIDS=()
  fi
  if [ "$rc" -ne 0 ] && [ -n "${E2E_KEEP_TMP:-}" ]; then
    e2e_log "keeping temp dirs: ${E2E_TMPDIRS[*]}"
  else
    for dir in "${E2E_TMPDIRS[@]}"; do rm -rf -- "$dir"; done
  fi
  return "$rc"
}

# e2e_venv REQUIREMENTS: make sure e2e/.venv exists with exactly REQUIREMENTS installed, and set
# E2E_PY to its python. The venv is made once, with the machine's `python3 -m venv`, and reused
# while the requirements file and the python3 version are unchanged; a stamp written last marks it
# complete, so an interrupted install is redone. Only PyPI is contacted.
e2e_venv() {
  local req="$1" py stamp want
  py="$(e2e_python)"
  want="$("$py" -c 'import sys; print(sys.version)' | tr '\n' ' ')|$(sha256sum "$req" | cut -d' ' -f1)"
  stamp="$E2E_VENV/.e2e-stamp"
  E2E_PY="$E2E_VENV/bin/python"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$E2E_PY" ]; then
    return 0
  fi
  e2e_log "creating $E2E_VENV from $req"
  # One creator at a time, should two suites run at once.
  exec {lock_fd}>"${TMPDIR:-/tmp}/jobsd-e2e-venv.lock"
  flock -w 600 "$lock_fd" || e2e_fail "timed out waiting for the venv lock"
  if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
    rm -rf -- "$E2E_VENV"
    if ! timeout 120 "$py" -m venv "$E2E_VENV"; then
      exec {lock_fd}>&-
      e2e_fail "'$py -m venv' failed: on Debian install python3-venv (e2e/setup.sh does)"
      return 1
    fi
    if ! PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
      timeout 600 "$E2E_PY" -m pip install --quiet --requirement "$req"; then
      exec {lock_fd}>&-
      e2e_fail "pip install -r $req failed"
      return 1
    fi
    printf '%s' "$want" >"$stamp"
  fi
  exec {lock_fd}>&-
}

# e2e_tally_phase LABEL OUT RC ARRAY: adds the closing `N passed, M failed` line of a checks
# phase's output file OUT to the globals total_passed / total_failed (a missing closing line,
# or a non-zero exit RC with no failure counted, counts as one failure) and appends
# "LABEL (exit RC)" to the array named ARRAY when RC is not 0 (124: the phase timed out).
e2e_tally_phase() {
  local label="$1" out="$2" rc="$3" closing passed failed
  local -n _failures="$4"
  closing="$(tail -n 1 "$out")"
  if [[ "$closing" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    passed="${BASH_REMATCH[1]}"
    failed="${BASH_REMATCH[2]}"
  else
    passed=0
    failed=1
  fi
  [ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -ne 124 ] || e2e_log "phase $label timed out after ${PHASE_TIMEOUT}s"
    _failures+=("$label (exit $rc)")
  fi
}

# ---------------------------------------------------------------- checks suites
# A suite (jobs_api.sh, triggers.sh, cluster.sh) runs its Python checks in phases and a few
# checks of its own, counts them all together and closes with `<suite>: N passed, M failed`.

# Upper bound for one Python phase, in seconds (a suite may set it before sourcing this file).
: "${PHASE_TIMEOUT:=90}"
# The suite's checks script in e2e/python, and extra NAME=VALUE settings for it (an array).
PHASE_SCRIPT=""
PHASE_ENV=()
# Counts of the checks run so far, and the labels of the failed ones.
total_passed=0
total_failed=0
failures=()

# e2e_suite_begin: the prelude of a suite: clean up on exit (e2e_cleanup), exit on INT/TERM,
# build the release jobsd, make the venv, and make the suite's temp dir, left in `work`.
e2e_suite_begin() {
  trap e2e_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  suite_start=$SECONDS
  jobsd_build
  e2e_venv "$E2E_DIR/python/requirements.txt"
  e2e_mktemp
  work="$E2E_TMP"
  suite_ready=$SECONDS
}

# run_phase LABEL ARGS...: run e2e/python/$PHASE_SCRIPT ARGS, bounded by PHASE_TIMEOUT, with
# PHASE_ENV and, while a jobsd of jobsd_start runs, the Dapr SDK's settings pointing at it; add
# its counts to the totals. A phase that crashes, times out or prints no closing line counts as
# a failure, and a jobsd that died meanwhile ends the suite. The phase runs in the background and
# is waited for, so that a signal to the suite is acted on at once and e2e_cleanup stops the
# phase too; its output (in $work/LABEL.out) is shown when it ends.
run_phase() {
  local label="$1"
  shift
  local out="$work/$label.out" rc=0 settings=(${PHASE_ENV[@]+"${PHASE_ENV[@]}"})
  if [ -n "$JOBSD_PID" ]; then
    settings+=(DAPR_HTTP_PORT="$JOBSD_HTTP_PORT" DAPR_GRPC_PORT="$JOBSD_GRPC_PORT"
      DAPR_RUNTIME_HOST=127.0.0.1 DAPR_HEALTH_TIMEOUT=10 DAPR_API_TIMEOUT_SECONDS=15)
  fi
  e2e_log "phase $label: $PHASE_SCRIPT $*"
  e2e_spawn "$out" env -u DAPR_API_TOKEN -u DAPR_GRPC_ENDPOINT -u DAPR_HTTP_ENDPOINT \
    ${settings[@]+"${settings[@]}"} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    timeout -k 5 "$PHASE_TIMEOUT" "$E2E_PY" "$E2E_DIR/python/$PHASE_SCRIPT" "$@"
  e2e_wait_spawned "$E2E_SPAWNED" || rc=$?
  cat "$out"
  e2e_tally_phase "$label" "$out" "$rc" failures
  if [ -n "$JOBSD_PID" ] && _proc_gone "$JOBSD_PID"; then
    _dump_log
    e2e_fail "jobsd died during phase $label"
  fi
  return 0
}

# shell_check LABEL CMD...: a check done by the suite's shell, counted with the Python ones.
shell_check() {
  local label="$1"
  shift
  if "$@"; then
    total_passed=$((total_passed + 1))
    echo "ok   shell/$label"
  else
    total_failed=$((total_failed + 1))
    failures+=("$label")
    echo "FAIL shell/$label"
  fi
}

# skip_failed LABEL: count a phase that could not run (its setup failed) as one failure.
skip_failed() {
  failures+=("$1")
  total_failed=$((total_failed + 1))
}

# e2e_alive PID: true while PID runs.
e2e_alive() { ! _proc_gone "$1"; }

# no_panic_in_logs FILE...: no FILE logs a panic (the lines are shown if one does).
no_panic_in_logs() {
  local f bad=0
  for f in "$@"; do
    if grep -n -i 'panicked' "$f" >&2; then
      e2e_log "a panic is logged (above) in $f"
      bad=1
    fi
  done
  [ "$bad" -eq 0 ]
}

# e2e_suite_end NAME [CMD...]: log the time taken and the failures (then run CMD, e.g. to show
# logs), print the closing line `NAME: N passed, M failed`; the status is 0 only when nothing
# failed, so the suite ends with it.
e2e_suite_end() {
  local name="$1"
  shift
  e2e_log "suite took $((SECONDS - suite_start))s ($((SECONDS - suite_ready))s after build and venv)"
  if [ "$total_failed" -ne 0 ]; then
    e2e_log "failed: ${failures[*]}"
    [ "$#" -eq 0 ] || "$@"
  fi
  echo "$name: $total_passed passed, $total_failed failed"
  [ "$total_failed" -eq 0 ]
}

# e2e_wait_http URL WANT TIMEOUT PID NAME: wait until GET URL answers status WANT; fail after
# TIMEOUT seconds, or as soon as PID (NAME, the process meant to answer) has exited.
e2e_wait_http() {
  local url="$1" want="$2" timeout="$3" pid="$4" name="$5" deadline=$((SECONDS + $3)) status=""
  while :; do
    status="$(_http_status "$url")"
    [ "$status" = "$want" ] && return 0
    if _proc_gone "$pid"; then
      e2e_fail "$name (pid $pid) exited before GET $url answered $want"
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      e2e_fail "$name: GET $url → ${status:-nothing}, not $want, after ${timeout}s"
      return 1
    fi
    sleep 0.1
  done
}

# ---------------------------------------------------------------- etcd and replicas

# e2e_start_etcd DATA_DIR LOG CLIENT_PORT PEER_PORT TIMEOUT [CA CERT KEY]: start a one-member
# etcd (ETCD_BIN, Debian's by default) on loopback and wait until it reports itself healthy; sets
# ETCD_PID and ETCD_URL. Fails after TIMEOUT seconds or as soon as etcd exits. With CA, CERT and
# KEY (PEM files), etcd serves its clients over TLS with CERT and KEY and requires a client
# certificate signed by CA (`--client-cert-auth`); ETCD_URL is then https, and the health check
# presents CERT. ETCD_FLAGS (word-split) are passed on to etcd.
ETCD_BIN="${ETCD_BIN:-/usr/bin/etcd}"
ETCD_PID=""
ETCD_URL=""
e2e_start_etcd() {
  local data_dir="$1" log="$2" peer="http://127.0.0.1:$4" deadline=$((SECONDS + $5))
  local tls=() curl_tls=()
  ETCD_URL="http://127.0.0.1:$3"
  if [ "$#" -ge 8 ]; then
    ETCD_URL="https://127.0.0.1:$3"
    tls=(--trusted-ca-file "$6" --cert-file "$7" --key-file "$8" --client-cert-auth)
    curl_tls=(--cacert "$6" --cert "$7" --key "$8")
  fi
  # shellcheck disable=SC2086 # ETCD_FLAGS are words
  e2e_spawn "$log" "$ETCD_BIN" --name default --data-dir "$data_dir" \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "default=$peer" "${tls[@]}" ${ETCD_FLAGS:-}
  ETCD_PID=$E2E_SPAWNED
  until curl -s --max-time 2 "${curl_tls[@]}" "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"'; do
    if _proc_gone "$ETCD_PID" || [ "$SECONDS" -ge "$deadline" ]; then
      e2e_fail "etcd not healthy on $ETCD_URL (log: $log)"
      return 1
    fi
    sleep 0.1
  done
}

# e2e_new_ca DIR NAME: a self-signed CA (EC P-256, valid one day) made with openssl:
# DIR/NAME.crt and DIR/NAME.key. Certificates are made per run, never committed.
e2e_new_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj "/CN=$2" -keyout "$1/$2.key" -out "$1/$2.crt" 2>/dev/null
}

# e2e_new_cert DIR CA NAME SAN: a certificate for SAN (openssl's syntax, e.g.
# `IP:127.0.0.1,DNS:localhost`) signed by CA (made by e2e_new_ca in DIR): DIR/NAME.crt and
# DIR/NAME.key. No extended key usage, so it serves as a server and as a client certificate.
e2e_new_cert() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$3" \
    -keyout "$1/$3.key" -out "$1/$3.csr" 2>/dev/null &&
    printf 'subjectAltName=%s\n' "$4" >"$1/$3.ext" &&
    openssl x509 -req -in "$1/$3.csr" -CA "$1/$2.crt" -CAkey "$1/$2.key" -CAcreateserial \
      -days 1 -extfile "$1/$3.ext" -out "$1/$3.crt" 2>/dev/null
}

# e2e_wait_serving OUT TIMEOUT ADDR...: wait until every replica at ADDR answers grpc.health.v1
# SERVING (cluster_checks.py serving, from the venv); fail after TIMEOUT seconds, with the
# checker's output (written to OUT) shown.
e2e_wait_serving() {
  local out="$1" timeout="$2" rc=0
  shift 2
  e2e_spawn "$out" env PYTHONDONTWRITEBYTECODE=1 timeout -k 5 $((timeout + 10)) \
    "$E2E_PY" "$E2E_DIR/python/cluster_checks.py" serving "$timeout" "$@"
  e2e_wait_spawned "$E2E_SPAWNED" || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$out" >&2
    e2e_fail "replicas $* not SERVING"
    return 1
  fi
}

# ---------------------------------------------------------------- benchmarks
# The bench scripts (e2e/bench/*.sh) print figures; these are their shared measuring helpers.

# bench_machine: what the figures were measured on (to the terminal).
bench_machine() {
  echo "== machine"
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  echo "nproc: $(nproc)"
  free -m | sed -n 1,2p
  grep -m1 'model name' /proc/cpuinfo
  echo "kernel: $(uname -r); $(rustc --version)"
  echo "tree: $(git -C "$E2E_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') ($(git -C "$E2E_ROOT" status --porcelain 2>/dev/null | wc -l) paths changed or untracked)"
  echo "uptime: $(uptime)"
}

now_ns() { date +%s%N; }
# ms_between A_NS B_NS: milliseconds from A to B.
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) / 1e6 }'; }
# field NAME: the value of NAME=value in each RESULT line on stdin.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
# median: the median of the numbers on stdin, one a line (`-` when there are none).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }

# busy_cores [SECS]: cores busy machine-wide over SECS (2) seconds, from /proc/stat. Called while
# nothing of the bench runs, so it is the other tenants' load right now (the load average lags
# by a minute and also counts the bench's previous run).
busy_cores() {
  local secs="${1:-2}" a b
  a=$(head -1 /proc/stat)
  sleep "$secs"
  b=$(head -1 /proc/stat)
  awk -v a="$a" -v b="$b" -v s="$secs" 'BEGIN {
    split(a, x); split(b, y)
    busy = (y[2]+y[3]+y[4]+y[7]+y[8]) - (x[2]+x[3]+x[4]+x[7]+x[8])
    printf "%.2f", busy / 100 / s }'
}

# bench_wait_quiet: wait (up to QUIET_WAIT seconds) until other processes use under QUIET cores;
# sets BUSY (the cores they used just before the run) and prints it.
bench_wait_quiet() {
  local waited=0
  while :; do
    BUSY=$(busy_cores 2)
    awk -v c="$BUSY" -v q="$QUIET" 'BEGIN { exit !(c < q) }' && break
    if [ "$waited" -ge "$QUIET_WAIT" ]; then
      echo "   (still $BUSY cores busy after ${QUIET_WAIT} s; measuring anyway)"
      break
    fi
    [ "$waited" = 0 ] && echo "   (waiting for a quieter machine: $BUSY cores busy)"
    waited=$((waited + 2))
  done
  echo "   before the run: $BUSY cores busy, load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# bench_stop_jobsd: SIGTERM the jobsd in PID (started with e2e_spawn) and reap it; sets STOP_MS
# (signal until the process is gone).
bench_stop_jobsd() {
  local t0
  t0=$(now_ns)
  kill -TERM "$PID"
  wait "$PID" || echo "   (jobsd exited with status $?)"
  # shellcheck disable=SC2034 # read by the bench scripts
  STOP_MS=$(ms_between "$t0" "$(now_ns)")
  _e2e_forget "$PID"
  PID=
}

# bench_kill9_jobsd: SIGKILL the jobsd in PID (started with e2e_spawn) and reap it.
bench_kill9_jobsd() {
  kill -9 "$PID"
  wait "$PID" 2>/dev/null || true
  _e2e_forget "$PID"
  PID=
}

# bench_begin NAME: the prelude of a bench script after its settings: print the machine, make
# its temp dir TMP (removed on exit unless KEEP=1), and stop every process it started with
# e2e_spawn on exit, INT or TERM.
bench_begin() {
  bench_machine
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/jobsd-$1.XXXXXX")
  [ "${KEEP:-0}" = 1 ] || E2E_TMPDIRS+=("$TMP")
  df -hT "$TMP" | tail -1
  trap 'e2e_cleanup; [ "${KEEP:-0}" != 1 ] || echo "kept $TMP"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
