# shellcheck shell=bash
# Shared helpers for the end-to-end suites: build the release jobsd, start/stop it on free
# loopback ports, wait for its health endpoint, and make the Python venv the SDK suites use.
#
# Source it from a suite (`source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"`); it sets no shell
# options of its own. Every wait is bounded. A suite should `trap e2e_cleanup EXIT` so that any
# jobsd it started is killed and its temp dirs are removed, however it exits.

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
JOBSD_LOG=""
# The temp dirs e2e_mktemp made, for e2e_cleanup.
E2E_TMPDIRS=()

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

# jobsd_start DATA_DIR LOG [EXTRA_ARGS...]: start jobsd (app id `myapp`) on two fresh free
# loopback ports, with its store in DATA_DIR, appending its output to LOG; wait until
# `GET /v1.0/healthz` answers 204. Sets JOBSD_PID, JOBSD_HTTP_PORT, JOBSD_GRPC_PORT, JOBSD_LOG.
# If the ports were taken meanwhile (a race with another process), it retries with new ones.
jobsd_start() {
  local data_dir="$1" log="$2"
  shift 2
  [ -n "${JOBSD_BIN:-}" ] || jobsd_build
  JOBSD_LOG="$log"
  local attempt
  for attempt in 1 2 3; do
    local ports
    mapfile -t ports < <(free_ports 2)
    [ "${#ports[@]}" -eq 2 ] || e2e_fail "could not pick free ports"
    JOBSD_HTTP_PORT="${ports[0]}"
    JOBSD_GRPC_PORT="${ports[1]}"
    echo "=== start (attempt $attempt): http=$JOBSD_HTTP_PORT grpc=$JOBSD_GRPC_PORT data=$data_dir" >>"$log"
    # NO_COLOR keeps ANSI escapes out of the log. jobsd also reads APP_ID, APP_PORT and
    # DAPR_*_PORT from the environment: the flags below (and no app, no API token) are the
    # whole configuration.
    env -u APP_PORT -u APP_ID -u DAPR_API_TOKEN NO_COLOR=1 "$JOBSD_BIN" --app-id myapp --data-dir "$data_dir" \
      --dapr-http-port "$JOBSD_HTTP_PORT" --dapr-grpc-port "$JOBSD_GRPC_PORT" \
      --dapr-listen-addresses 127.0.0.1 "$@" </dev/null >>"$log" 2>&1 &
    JOBSD_PID=$!
    e2e_log "jobsd pid $JOBSD_PID on http $JOBSD_HTTP_PORT / grpc $JOBSD_GRPC_PORT"

    local deadline=$((SECONDS + E2E_HEALTH_TIMEOUT)) status=""
    while :; do
      status="$(_http_status "http://127.0.0.1:$JOBSD_HTTP_PORT/v1.0/healthz")"
      [ "$status" = 204 ] && return 0
      if _proc_gone "$JOBSD_PID"; then
        local rc=0
        wait "$JOBSD_PID" || rc=$?
        JOBSD_PID=""
        if grep -qiE 'address (already )?in use' "$log" && [ "$attempt" -lt 3 ]; then
          e2e_log "port collision, retrying with new ports"
          continue 2
        fi
        _dump_log
        e2e_fail "jobsd exited with status $rc before becoming healthy"
        return 1
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        _dump_log
        e2e_fail "jobsd not healthy after ${E2E_HEALTH_TIMEOUT}s (last GET /v1.0/healthz status: ${status:-none})"
        return 1
      fi
      sleep 0.1
    done
  done
  e2e_fail "could not start jobsd"
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

# e2e_cleanup: kill the jobsd this suite started if it is still running (JOBSD_PID is cleared
# as soon as a jobsd is reaped, so no recycled pid is ever signalled) and remove the temp dirs.
# Meant for `trap e2e_cleanup EXIT`; it keeps the exit status of the script.
e2e_cleanup() {
  local rc=$? dir
  if [ -n "$JOBSD_PID" ]; then
    kill -KILL "$JOBSD_PID" 2>/dev/null || true
    wait "$JOBSD_PID" 2>/dev/null || true
    JOBSD_PID=""
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
