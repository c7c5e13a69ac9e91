#!/usr/bin/env bash
# End-to-end suite: the web console (docs/console.md, `/jobsd/ui/`) of the release binary
# (embedded store in a temp --data-dir) in a real headless browser: Debian's chromium (installed
# by e2e/setup.sh) driven by Python Playwright (e2e/python/requirements.txt; Playwright's own
# browser download is never used). The app is e2e/python/policy_http_app.py; checks in
# e2e/python/console_checks.py:
#
#   1. browse: the list shows the jobs the test created and the filters narrow it as the server
#      does; a job page shows its spec and, after it fired, its history; Pause / Resume change
#      its state and the server agrees; Run now runs it; live refresh pauses and resumes; no
#      script error, CSP violation or request elsewhere.
#   2. token: with DAPR_API_TOKEN the page shows no data without the token, works with it.
#   3. `--console=false` and JOBSD_CONSOLE=false: /jobsd/ui/ is 404, the API unchanged.
#
# Screenshots go to target/console-screenshots/ (kept as CI artifacts). With
# E2E_UPDATE_DOCS=1 the list's screenshot also replaces docs/console.png (the README's and docs/console.md's).
#
# Every wait is bounded; the app and jobsd are killed on exit. Runnable from any directory (the
# release binary is built with `cargo build --release`, in CARGO_TARGET_DIR when set; or set
# JOBSD_BIN); exits non-zero on any failure and closes with `console: N passed, M failed`. Set
# CHROMIUM to use another chromium binary.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

# Upper bound for one Python phase, in seconds (browse normally takes ~40 s, token ~5 s).
PHASE_TIMEOUT=180
PHASE_SCRIPT=console_checks.py
APP_START_TIMEOUT=30
: "${CHROMIUM:=/usr/bin/chromium}"
export CHROMIUM
TOKEN="console-e2e-token"
SHOTS="$E2E_ROOT/target/console-screenshots"

e2e_suite_begin

if [ ! -x "$CHROMIUM" ]; then
  e2e_fail "no chromium at $CHROMIUM: run e2e/setup.sh (Debian's chromium package)"
  exit 1
fi
rm -rf "$SHOTS"
mkdir -p "$SHOTS"

app_port="$(free_ports 1)"
events="$work/app-events.jsonl"
e2e_start_app "$app_port" "$work/app.log" "$E2E_PY" "$E2E_DIR/python/policy_http_app.py" \
  --port "$app_port" --log "$events" || exit 1
app_pid=$E2E_SPAWNED

# ---------------------------------------------------------------- 1: browse
t=$SECONDS
jobsd_start "$work/data-browse" "$work/jobsd-browse.log" --app-port "$app_port"
run_phase browse browse "$SHOTS" "$events"
shell_check browse_jobsd_exits_0_on_sigterm jobsd_stop
shell_check browse_no_panic_in_jobsd_log no_panic_in_logs "$work/jobsd-browse.log"
if [ "${E2E_UPDATE_DOCS:-0}" = 1 ] && [ -s "$SHOTS/readme.png" ]; then
  mkdir -p "$E2E_ROOT/docs"
  cp "$SHOTS/readme.png" "$E2E_ROOT/docs/console.png"
  e2e_log "docs/console.png updated"
fi
e2e_log "scenario 1 took $((SECONDS - t))s"

# ---------------------------------------------------------------- 2: token
E2E_JOBSD_TOKEN="$TOKEN" jobsd_start "$work/data-token" "$work/jobsd-token.log" \
  --app-port "$app_port"
run_phase token token "$TOKEN" "$SHOTS"
shell_check token_jobsd_exits_0_on_sigterm jobsd_stop

# ---------------------------------------------------------------- 3: off
# console_off: /jobsd/ui/ and its files are 404 while the API answers.
console_off() {
  local base="http://127.0.0.1:$JOBSD_HTTP_PORT" path status
  for path in /jobsd/ui/ /jobsd/ui/console.js; do
    status="$(_http_status "$base$path")"
    [ "$status" = 404 ] || {
      echo "GET $path → $status, want 404" >&2
      return 1
    }
  done
  status="$(_http_status "$base/jobsd/v1/jobs")"
  [ "$status" = 200 ] || {
    echo "GET /jobsd/v1/jobs → $status, want 200" >&2
    return 1
  }
}
jobsd_start "$work/data-off" "$work/jobsd-off.log" --console=false
shell_check console_false_serves_no_console console_off
shell_check off_jobsd_exits_0_on_sigterm jobsd_stop

JOBSD_CONSOLE=false jobsd_start "$work/data-env" "$work/jobsd-env.log"
shell_check env_console_false_serves_no_console console_off
shell_check env_jobsd_exits_0_on_sigterm jobsd_stop

shell_check app_still_running e2e_alive "$app_pid"
e2e_unspawn "$app_pid"
e2e_log "screenshots: $(ls "$SHOTS" | tr '\n' ' ')"
e2e_suite_end console
