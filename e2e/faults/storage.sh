#!/usr/bin/env bash
# Fault case (issue 15, item 1): storage faults of the embedded store, through the release
# binary, a recording HTTP app (e2e/python/trigger_http_app.py) and a data dir on a small tmpfs
# this case mounts (and unmounts on exit). Root only (mount); CI runs as root.
#
#   1. The disk fills: filler file leaves a few MiB, then creates until they fail → each failed
#      create is a 500 DAPR_SCHEDULER_SCHEDULE_JOB saying "disk full" and naming the data dir;
#      meanwhile GETs of stored jobs answer and `@every 1s` jobs keep being delivered; the filler
#      goes → creates succeed again, no restart.
#   2. A real ENOSPC (JOBSD_MIN_FREE_BYTES=0: no floor): creates until the disk is full, then
#      the filler goes → writes resume (the store reopens and replays its log), no restart.
#   3. kill -9 and restart → every create answered 2xx is there, none that failed is.
#   4. A read-only data dir (tmpfs remounted ro) → jobsd exits non-zero naming the dir, no panic.
#   5. A second jobsd on the same data dir → exits non-zero saying another jobsd holds it.
#
# Exits non-zero on any failure and closes with `storage: N passed, M failed`.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

e2e_suite_begin

[ "$(id -u)" -eq 0 ] || e2e_fail "storage faults mount a tmpfs: run as root"
mnt="$work/mnt"
mkdir -p "$mnt"
mount -t tmpfs -o size=48m jobsd-faults "$mnt"
# Stop jobsd before the unmount (a busy mount cannot go), then the usual cleanup.
storage_cleanup() {
  local rc=$?
  if [ -n "$JOBSD_PID" ]; then
    kill -KILL "$JOBSD_PID" 2>/dev/null || true
    wait "$JOBSD_PID" 2>/dev/null || true
    JOBSD_PID=""
  fi
  mountpoint -q "$mnt" && umount "$mnt"
  (exit "$rc")
  e2e_cleanup
}
trap storage_cleanup EXIT
data="$mnt/data"
log="$work/jobsd.log"

port_file="$work/app.port"
events="$work/events.jsonl"
: >"$events"
e2e_spawn "$work/app.log" "$E2E_PY" "$E2E_DIR/python/trigger_http_app.py" \
  --log "$events" --port-file "$port_file"
e2e_wait_file "$port_file" 30 "$E2E_SPAWNED" || exit 1
app_port="$(cat "$port_file")"

api() { echo "http://127.0.0.1:$JOBSD_HTTP_PORT/v1.0-alpha1/jobs/$1"; }
# create NAME BODY: POST the job; prints the status, the body in $work/last.body.
create() {
  curl -s -o "$work/last.body" -w '%{http_code}' -m 10 -X POST -H 'content-type: application/json' \
    --data "$2" "$(api "$1")" || echo 000
}
get_status() { curl -s -o /dev/null -w '%{http_code}' -m 10 "$(api "$1")" || echo 000; }
deliveries() { grep -c '"name":"tick-' "$events" || true; }
free_kib() { df --output=avail -k "$mnt" | tail -n 1 | tr -d ' '; }
acked="$work/acked.txt"
failed="$work/failed.txt"
: >"$acked"
: >"$failed"
payload="$(head -c 30000 /dev/zero | tr '\0' 'x')"
body="{\"dueTime\":\"1h\",\"data\":\"$payload\"}"

# fill PREFIX: creates PREFIX-N until one fails (then 3 more, all failing), bounded.
fill() {
  local prefix="$1" i status fails=0
  for ((i = 0; i < 20000 && fails < 4; i++)); do
    status="$(create "$prefix-$i" "$body")"
    if [ "${status:0:1}" = 2 ]; then
      echo "$prefix-$i" >>"$acked"
    else
      echo "$prefix-$i $status" >>"$failed"
      [ "$fails" -gt 0 ] || cp "$work/last.body" "$work/$prefix.fail.body"
      fails=$((fails + 1))
    fi
  done
  e2e_log "$prefix: $(grep -c "^$prefix-" "$acked" || true) created, then $fails refused ($(free_kib) KiB free)"
}

# until_created NAME: a create of NAME succeeds within 15 s (retried; the store heals itself).
until_created() {
  local deadline=$((SECONDS + 15)) status
  while [ "$SECONDS" -lt "$deadline" ]; do
    status="$(create "$1" "$body")"
    if [ "${status:0:1}" = 2 ]; then
      echo "$1" >>"$acked"
      return 0
    fi
    sleep 0.5
  done
  e2e_log "create of $1 still answers $status: $(cat "$work/last.body")"
  return 1
}

# ---- 1. the disk fills up (the floor refuses before redb meets ENOSPC) ----
jobsd_start "$data" "$log" --app-port "$app_port"
for i in 1 2 3; do
  [ "$(create "tick-$i" '{"schedule":"@every 1s"}')" = 204 ] || e2e_fail "tick-$i not created"
done
# Leave 12 MiB: the floor on a 48 MiB disk is 6 MiB, so a few MiB of creates fit.
fallocate -l "$(($(free_kib) - 12 * 1024))KiB" "$mnt/filler"
fill floor
fail_body="$(cat "$work/floor.fail.body" 2>/dev/null || true)"
echo "first refusal: $fail_body"
shell_check "full disk: creates were acknowledged before it filled" \
  test "$(grep -c '^floor-' "$acked")" -gt 5
shell_check "full disk: a create answers 500" grep -q ' 500$' "$failed"
shell_check "full disk: the error is Dapr's schedule error and says disk full, naming the dir" \
  bash -c '[[ "$1" == *DAPR_SCHEDULER_SCHEDULE_JOB* && "$1" == *"disk full"* && "$1" == *"$2"* ]]' _ "$fail_body" "$data"
before="$(deliveries)"
sleep 3
shell_check "full disk: GETs of stored jobs answer 200" \
  bash -c 'for n in floor-0 floor-5 tick-1; do [ "$(curl -s -o /dev/null -w "%{http_code}" -m 5 "$1/$n")" = 200 ] || exit 1; done' \
  _ "http://127.0.0.1:$JOBSD_HTTP_PORT/v1.0-alpha1/jobs"
shell_check "full disk: @every 1s jobs are still delivered ($before → $(deliveries))" \
  test "$(deliveries)" -ge $((before + 6))
rm -f "$mnt/filler"
shell_check "space freed: creates succeed again without a restart" until_created after-floor

# ---- 2. a real ENOSPC inside the store: it reopens and replays once there is room ----
jobsd_stop
JOBSD_MIN_FREE_BYTES=0 jobsd_restart "$data" "$log" --app-port "$app_port"
fallocate -l "$(($(free_kib) - 3 * 1024))KiB" "$mnt/filler"
fill enospc
enospc_body="$(cat "$work/enospc.fail.body" 2>/dev/null || true)"
echo "first refusal: $enospc_body"
shell_check "ENOSPC: the refusal is a 500 naming a file of the data dir" \
  bash -c '[[ "$1" == *DAPR_SCHEDULER_SCHEDULE_JOB* && "$1" == *"$2"* ]]' _ "$enospc_body" "$data"
rm -f "$mnt/filler"
shell_check "ENOSPC: space freed, creates succeed again without a restart" until_created after-enospc
before="$(deliveries)"
sleep 3
shell_check "ENOSPC: deliveries go on after the store reopened" test "$(deliveries)" -ge $((before + 6))

# ---- 3. crash and restart: every acknowledged create is there, no refused one ----
jobsd_kill9
jobsd_restart "$data" "$log" --app-port "$app_port"
missing=0
while read -r name; do
  [ "$(get_status "$name")" = 200 ] || { e2e_log "acked $name missing"; missing=$((missing + 1)); }
done <"$acked"
half=0
while read -r name _; do
  [ "$(get_status "$name")" = 500 ] || { e2e_log "refused $name is there"; half=$((half + 1)); }
done <"$failed"
shell_check "restart: all $(wc -l <"$acked") acknowledged creates are there" test "$missing" -eq 0
shell_check "restart: none of the $(wc -l <"$failed") refused creates is there" test "$half" -eq 0
jobsd_stop

# ---- 4. read-only data dir: a clear refusal at start ----
mount -o remount,ro "$mnt"
ro_rc=0
timeout 20 env NO_COLOR=1 "$JOBSD_BIN" --app-id myapp --data-dir "$data" \
  --dapr-http-port "$(free_ports 1)" --dapr-grpc-port "$(free_ports 1)" \
  --metrics-port "$(free_ports 1)" >"$work/ro.log" 2>&1 </dev/null || ro_rc=$?
echo "read-only start (exit $ro_rc): $(tail -n 3 "$work/ro.log")"
shell_check "read-only data dir: jobsd exits non-zero (not killed, not hung)" \
  bash -c '[ "$1" -ne 0 ] && [ "$1" -lt 124 ]' _ "$ro_rc"
shell_check "read-only data dir: the error names the data dir" grep -q "$data" "$work/ro.log"
mount -o remount,rw "$mnt"

# ---- 5. a second jobsd on the same data dir ----
jobsd_restart "$data" "$log" --app-port "$app_port"
second_rc=0
timeout 20 env NO_COLOR=1 "$JOBSD_BIN" --app-id myapp --data-dir "$data" \
  --dapr-http-port "$(free_ports 1)" --dapr-grpc-port "$(free_ports 1)" \
  --metrics-port "$(free_ports 1)" >"$work/second.log" 2>&1 </dev/null || second_rc=$?
echo "second start (exit $second_rc): $(tail -n 3 "$work/second.log")"
shell_check "second jobsd: exits non-zero" bash -c '[ "$1" -ne 0 ] && [ "$1" -lt 124 ]' _ "$second_rc"
shell_check "second jobsd: says another jobsd holds the data dir" \
  bash -c 'grep -q "another jobsd holds" "$1" && grep -q "$2" "$1"' _ "$work/second.log" "$data"
shell_check "the first jobsd still answers" test "$(get_status tick-1)" = 200
jobsd_stop

shell_check "no panic in any log" no_panic_in_logs "$log" "$work/ro.log" "$work/second.log"
e2e_suite_end storage
