#!/usr/bin/env bash
# Fault case (issue 15, item 3): hostile and broken clients against the release binary
# (embedded store in a temp --data-dir, no app). Checks in e2e/python/faults_hostile.py; each
# phase runs a well-behaved client beside the attack and requires it to be answered within 2 s
# every time, and prints jobsd's RSS before and after:
#
#   1. limits: a 10 MiB body (daprd's 400 on its route, 413 on jobsd's), JSON nested 32 deep (stored), 64 and 100,000 deep (400), a
#      100,000-char name over HTTP (414) and gRPC (Dapr's refusal), invalid UTF-8 in body and
#      path (daprd's answers); nothing refused is stored.
#   2. slowloris: 50 clients trickle header bytes one a second for HOSTILE_SLOWLORIS_SECONDS
#      (default 75; reconnecting when cut off): jobsd cuts each off at its 30 s header deadline;
#      one more sends its headers whole and trickles the body: a 400 at the 30 s body deadline.
#   3. idle: HOSTILE_IDLE_CONNECTIONS (default 5,000) idle connections, half on the HTTP port,
#      half on the gRPC port (ulimit -n raised for the test): the API answers beside them, and
#      jobsd closes them all at the 30 s first-byte deadline.
#   4. rapid_reset: two h2c clients open and reset streams in bursts of 100 (HEADERS +
#      RST_STREAM) for HOSTILE_RESET_SECONDS (default 15) on the gRPC port, then on the HTTP
#      port: jobsd closes those connections, memory stays bounded.
#
# Then: jobsd exits 0 on SIGTERM, and its log holds no panic. About 3 min in CI.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

PHASE_SCRIPT=faults_hostile.py
PHASE_TIMEOUT=240
: "${HOSTILE_SLOWLORIS_SECONDS:=75}"
: "${HOSTILE_IDLE_CONNECTIONS:=5000}"
: "${HOSTILE_RESET_SECONDS:=15}"

# The test's own clients hold thousands of sockets; jobsd raises its own soft limit to the
# hard one at start (as Go does for daprd).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((HOSTILE_IDLE_CONNECTIONS + 512)) ]; then
  ulimit -n $((HOSTILE_IDLE_CONNECTIONS + 512)) 2>/dev/null ||
    e2e_log "ulimit -n is $(ulimit -n): the idle phase may fail to open its connections"
fi

e2e_suite_begin

jobsd_start "$work/data" "$work/jobsd.log"
run_phase limits limits "$JOBSD_HTTP_PORT" "$JOBSD_GRPC_PORT" "$JOBSD_PID"
run_phase slowloris slowloris "$JOBSD_HTTP_PORT" "$JOBSD_PID" "$HOSTILE_SLOWLORIS_SECONDS"
run_phase idle idle "$JOBSD_HTTP_PORT" "$JOBSD_GRPC_PORT" "$JOBSD_PID" "$HOSTILE_IDLE_CONNECTIONS"
run_phase rapid_reset rapid_reset "$JOBSD_HTTP_PORT" "$JOBSD_GRPC_PORT" "$JOBSD_PID" \
  "$HOSTILE_RESET_SECONDS"
shell_check jobsd_exits_0_on_sigterm jobsd_stop
shell_check no_panic_in_jobsd_log no_panic_in_logs "$work/jobsd.log"

e2e_suite_end hostile
