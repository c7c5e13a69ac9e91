#!/usr/bin/env bash
# The SDK matrix (issue 36, item 4): each official Dapr SDK, unchanged and pinned in
# e2e/dapr/versions.env, as a client and as an app, on three paths:
#
#   i    jobsd embedded: `jobsd --app-id …` with its own store, no scheduler
#   ii   jobsd → the real Dapr Scheduler: `jobsd --scheduler-host-address` to DAPR_BIN_DIR/scheduler
#   iii  real daprd → `jobsd scheduler`: DAPR_BIN_DIR/daprd with `--scheduler-host-address` and
#        `--placement-host-address` to one `jobsd scheduler --placement-enabled` replica
#        (embedded store), which is its Scheduler and its actor placement service
#        (PLACEMENT=dapr: Dapr's own placement binary instead)
#
#   bash e2e/dapr/sdk.sh [PATH...]       PATH: i ii iii (default: all three)
#   SDKS="go js" bash e2e/dapr/sdk.sh i  only some SDKs (default: python go js java)
#
# Per SDK and path two sidecars run, started as `dapr run` starts them (sidecar first, the app
# right after): one for the SDK's jobs app (gRPC: the SDKs' job handlers are gRPC ones) and one
# for its actor app (HTTP), each with its own app id. The SDK's client then runs the checks
# (e2e/dapr/sdk/<sdk>/…): schedule / get / list / delete a job, receive it with its data intact,
# a repeating job's exact count, overwrite, a failure policy; an actor call, register / get /
# unregister a reminder and its ticks, a timer, actor state (the actor's methods keep it with the
# SDK's actor state manager; the client reads it back through its actor proxy and, raw, over the
# sidecar's GET …/state/{key}; on ii, where a Dapr Scheduler keeps no actor state, N/A once the
# sidecar is seen to answer daprd's ERR_ACTOR_RUNTIME_NOT_FOUND). The jobs and the actor checks
# run side by side.
# Each check prints `RESULT<TAB>feature<TAB>pass|fail|na<TAB>note`; a feature with no line
# counts as failed. On every path the JS SDK's first-call check also runs: an
# actor app (`DaprServer` + `AbstractActor` + `ActorProxyBuilder`) started with its sidecar,
# no waits, whose very first actor call must succeed (js.first_call).
#
# Results: e2e/dapr/results/sdk.tsv (sdk, path, feature, result, note) and, generated from it,
# e2e/dapr/results/sdk.md (the table for the docs); rows of paths not run this time are kept. Closing line: `N passed, N failed, N skipped`
# (skipped = not applicable to that SDK, with the reason in the note).
#
# What it needs, all fetched by the project's own files from the registries on first use (then
# cached): the Go SDK (`go build`, modules from the Go proxy, binary cached under
# ~/.cache/jobsd/sdk), the JS SDK (`npm ci` from e2e/dapr/sdk/js/package-lock.json), the Java
# SDK (`mvn -q package`, Maven Central; e2e/dapr/sdk/java/target), the Python SDK (e2e/.venv,
# e2e/python/requirements.txt); for ii and iii the real Dapr (e2e/dapr/build.sh).
# Settings: JOBSD_BIN (a prebuilt jobsd instead of the release build), E2E_KEEP_TMP=1 (keep the
# logs of a failed run), SDK_CLIENT_TIMEOUT (seconds for one SDK's client, default 240).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/lib.sh
source "$here/../lib.sh"
# shellcheck source=e2e/dapr/versions.env
source "$here/versions.env"
sdk_dir="$here/sdk"
results_dir="$here/results"
results="$results_dir/sdk.tsv"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/jobsd/sdk"
START_TIMEOUT="${SDK_START_TIMEOUT:-60}"
CLIENT_TIMEOUT="${SDK_CLIENT_TIMEOUT:-240}"

paths=("$@")
[ "${#paths[@]}" -gt 0 ] || paths=(i ii iii)
for p in "${paths[@]}"; do
  case "$p" in i | ii | iii) ;; *) echo "sdk.sh: unknown path $p (i, ii, iii)" >&2; exit 2 ;; esac
done
read -r -a sdks <<<"${SDKS:-python go js java}"

# The features every SDK is asked for, in this order.
FEATURES=(job.schedule job.get job.list job.delete job.receive job.repeats job.overwrite job.failure_policy
  actor.invoke reminder.register reminder.get reminder.ticks reminder.unregister actor.timer actor.state)

trap e2e_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
t_begin=$SECONDS
e2e_mktemp
work="$E2E_TMP"
rows="$work/rows.tsv"
: >"$rows"

# ------------------------------------------------------------------ builds (cached)

# prepare_go: the Go SDK binary (apps and client), rebuilt only when its sources change.
prepare_go() {
  local src="$sdk_dir/go" sum
  grep -q "github.com/dapr/go-sdk $GO_SDK_VERSION\$" "$src/go.mod" ||
    e2e_fail "e2e/dapr/sdk/go/go.mod does not require github.com/dapr/go-sdk $GO_SDK_VERSION (versions.env)" || return 1
  sum=$(cat "$src"/go.mod "$src"/go.sum "$src"/*.go | sha256sum | cut -c1-16)
  GO_BIN="$cache/go/$sum/sdkmatrix"
  [ -x "$GO_BIN" ] && return 0
  e2e_log "go: go mod download + go build (Go SDK $GO_SDK_VERSION)"
  (cd "$src" && go mod download && CGO_ENABLED=0 go build -trimpath -o "$GO_BIN.tmp" .) || return 1
  mv "$GO_BIN.tmp" "$GO_BIN"
}

# prepare_js: node_modules from the committed package-lock.json (`npm ci`), redone only when
# the lock file changes.
prepare_js() {
  local src="$sdk_dir/js" want
  grep -q "\"@dapr/dapr\": \"$JS_SDK_VERSION\"" "$src/package.json" ||
    e2e_fail "e2e/dapr/sdk/js/package.json does not pin @dapr/dapr $JS_SDK_VERSION (versions.env)" || return 1
  want=$(sha256sum "$src/package-lock.json" | cut -c1-16)
  [ "$(cat "$src/node_modules/.sdkm-stamp" 2>/dev/null)" = "$want" ] && return 0
  e2e_log "js: npm ci (@dapr/dapr $JS_SDK_VERSION)"
  (cd "$src" && npm ci --no-audit --no-fund --loglevel=error) || return 1
  echo "$want" >"$src/node_modules/.sdkm-stamp"
}

# prepare_java: classes and target/lib (the SDK's jars) by `mvn -q package`, redone only when
# the pom or a source changes.
prepare_java() {
  local src="$sdk_dir/java" want
  want=$(cat "$src/pom.xml" $(find "$src/src" -name '*.java' | sort) | sha256sum | cut -c1-16)
  want="$want-$JAVA_SDK_VERSION"
  JAVA_CP="$src/target/classes:$src/target/lib/*"
  [ "$(cat "$src/target/.sdkm-stamp" 2>/dev/null)" = "$want" ] && return 0
  e2e_log "java: mvn -q package (io.dapr:dapr-sdk $JAVA_SDK_VERSION)"
  (cd "$src" && mvn -q -B -Dstyle.color=never package -DskipTests -Ddapr.java.sdk.version="$JAVA_SDK_VERSION") \
    >"$work/java-build.log" 2>&1 || { cat "$work/java-build.log" >&2; return 1; }
  echo "$want" >"$src/target/.sdkm-stamp"
}

prepare_python() {
  grep -qE "^dapr(\[[^]]*\])?==$PYTHON_SDK_VERSION\$" "$E2E_DIR/python/requirements.txt" ||
    e2e_fail "e2e/python/requirements.txt does not pin dapr==$PYTHON_SDK_VERSION (versions.env)" || return 1
  e2e_venv "$E2E_DIR/python/requirements.txt"
}

t_build=$SECONDS
jobsd_build
declare -A ready=()
for sdk in "${sdks[@]}"; do
  t=$SECONDS
  if "prepare_$sdk"; then
    ready[$sdk]=1
    e2e_log "$sdk ready ($((SECONDS - t)) s)"
  else
    e2e_log "$sdk: build failed; its cells fail"
  fi
done
need_dapr=0
for p in "${paths[@]}"; do [ "$p" = i ] || need_dapr=1; done
if [ "$need_dapr" = 1 ]; then
  eval "$(bash "$here/build.sh" | grep -E '^DAPR_(BIN_DIR|CLI)=')"
  for b in daprd scheduler placement; do
    [ -x "$DAPR_BIN_DIR/$b" ] || { e2e_fail "no $DAPR_BIN_DIR/$b after e2e/dapr/build.sh"; exit 1; }
  done
fi
e2e_log "builds took $((SECONDS - t_build)) s"

# ------------------------------------------------------------------ control plane per path

CP_GEN=0          # how many control planes were started (each gets fresh data dirs)
CP_PIDS=()        # the control plane of this path (scheduler, placement): checked between SDKs
SCHED_ADDR=""     # the Scheduler the sidecars of this path use (ii, iii)
PLACEMENT_ADDR="" # the placement service (iii)
RESOURCES=""      # daprd's resources dir (iii): the actor state store

# wait_http URL WANT PID NAME: as e2e_wait_http with START_TIMEOUT.
wait_http() { e2e_wait_http "$1" "$2" "$START_TIMEOUT" "$3" "$4"; }

start_path() {
  local path=$1 ports
  SCHED_ADDR="" PLACEMENT_ADDR="" RESOURCES="" CP_PIDS=()
  CP_GEN=$((CP_GEN + 1))
  local cp="$work/$path-cp$CP_GEN"
  case "$path" in
    ii)
      # The real Dapr Scheduler, embedded etcd, as Dapr's integration framework starts it.
      mapfile -t ports < <(free_ports 5)
      mkdir -p "$cp-scheduler"
      e2e_spawn "$work/ii-scheduler.log" "$DAPR_BIN_DIR/scheduler" --id sched0 \
        --listen-address 127.0.0.1 --port "${ports[0]}" --healthz-port "${ports[1]}" \
        --metrics-port "${ports[2]}" --etcd-data-dir "$cp-scheduler" \
        --etcd-client-port "${ports[3]}" --etcd-initial-cluster "sched0=http://127.0.0.1:${ports[4]}" \
        --etcd-client-listen-address 127.0.0.1
      CP_PIDS+=("$E2E_SPAWNED")
      wait_http "http://127.0.0.1:${ports[1]}/healthz" 200 "$E2E_SPAWNED" "dapr scheduler" || return 1
      SCHED_ADDR="127.0.0.1:${ports[0]}"
      e2e_log "path ii: Dapr Scheduler $DAPR_VERSION on $SCHED_ADDR"
      ;;
    iii)
      mapfile -t ports < <(free_ports 5)
      local placed=()
      [ "${PLACEMENT:-jobsd}" = jobsd ] && placed=(--placement-enabled)
      e2e_spawn "$work/iii-jobsd-scheduler.log" env NO_COLOR=1 "$JOBSD_BIN" scheduler \
        --id s0 --listen-address 127.0.0.1 --port "${ports[0]}" --data-dir "$cp-jobsd-scheduler" \
        --metrics-listen-address 127.0.0.1 --metrics-port "${ports[1]}" "${placed[@]}"
      CP_PIDS+=("$E2E_SPAWNED")
      e2e_wait_tcp "${ports[0]}" "$START_TIMEOUT" "$E2E_SPAWNED" || return 1
      SCHED_ADDR="127.0.0.1:${ports[0]}"
      PLACEMENT_ADDR=$SCHED_ADDR
      if [ "${PLACEMENT:-jobsd}" != jobsd ]; then
        e2e_spawn "$work/iii-placement.log" "$DAPR_BIN_DIR/placement" --id p0 \
          --listen-address 127.0.0.1 --port "${ports[2]}" --healthz-port "${ports[3]}" \
          --metrics-port "$(free_ports 1)" --initial-cluster "p0=127.0.0.1:${ports[4]}"
        CP_PIDS+=("$E2E_SPAWNED")
        wait_http "http://127.0.0.1:${ports[3]}/healthz" 200 "$E2E_SPAWNED" "dapr placement" || return 1
        PLACEMENT_ADDR="127.0.0.1:${ports[2]}"
      fi
      RESOURCES="$cp-resources"
      mkdir -p "$RESOURCES"
      cat >"$RESOURCES/statestore.yaml" <<'YAML'
apiVersion: dapr.io/v1alpha1
kind: Component
metadata:
  name: actorstore
spec:
  type: state.in-memory
  version: v1
  metadata:
    - name: actorStateStore
      value: "true"
YAML
      e2e_log "path iii: jobsd scheduler on $SCHED_ADDR, placement (${PLACEMENT:-jobsd}) on $PLACEMENT_ADDR"
      ;;
  esac
}

# ------------------------------------------------------------------ sidecars and apps

# start_sidecar PATH NAME APP_ID APP_PORT PROTOCOL: start the path's sidecar for one app (not
# waiting for it); sets SC_PID, SC_HTTP, SC_GRPC.
start_sidecar() {
  local path=$1 name=$2 app_id=$3 app_port=$4 proto=$5 ports log="$work/$1-$2-sidecar.log"
  mapfile -t ports < <(free_ports 4)
  SC_HTTP=${ports[0]} SC_GRPC=${ports[1]}
  case "$path" in
    i | ii)
      local remote=()
      [ "$path" = ii ] && remote=(--scheduler-host-address "$SCHED_ADDR")
      e2e_spawn "$log" env -u APP_PORT -u APP_ID -u DAPR_API_TOKEN NO_COLOR=1 "$JOBSD_BIN" \
        --app-id "$app_id" --app-port "$app_port" --app-protocol "$proto" \
        --data-dir "$work/$path-$name-data" --dapr-http-port "$SC_HTTP" --dapr-grpc-port "$SC_GRPC" \
        --dapr-listen-addresses 127.0.0.1 --metrics-listen-address 127.0.0.1 \
        --metrics-port "${ports[2]}" "${remote[@]}"
      ;;
    iii)
      e2e_spawn "$log" env -u DAPR_API_TOKEN "$DAPR_BIN_DIR/daprd" --mode standalone \
        --app-id "$app_id" --app-port "$app_port" --app-protocol "$proto" \
        --app-channel-address 127.0.0.1 --dapr-listen-addresses 127.0.0.1 \
        --dapr-http-port "$SC_HTTP" --dapr-grpc-port "$SC_GRPC" \
        --dapr-internal-grpc-port "${ports[3]}" --metrics-port "${ports[2]}" \
        --placement-host-address "$PLACEMENT_ADDR" --scheduler-host-address "$SCHED_ADDR" \
        --resources-path "$RESOURCES" --log-level info
      ;;
  esac
  SC_PID=$E2E_SPAWNED
}

# app_cmd SDK ROLE: the command line of an SDK's app (ROLE: jobs | actors | first-call), into APP_CMD.
app_cmd() {
  case "$1:$2" in
    go:jobs) APP_CMD=("$GO_BIN" jobs-app) ;;
    go:actors) APP_CMD=("$GO_BIN" actor-app) ;;
    python:jobs) APP_CMD=("$E2E_PY" "$sdk_dir/python/jobs_app.py") ;;
    python:actors) APP_CMD=("$E2E_PY" "$sdk_dir/python/actor_app.py") ;;
    js:jobs) APP_CMD=(node "$sdk_dir/js/jobs_app.js") ;;
    js:actors) APP_CMD=(node "$sdk_dir/js/actor_app.js") ;;
    js:first-call) APP_CMD=(node "$sdk_dir/js/first_call.js") ;;
    java:jobs) APP_CMD=(java -cp "$JAVA_CP" sdkmatrix.JobsApp) ;;
    java:actors) APP_CMD=(java -cp "$JAVA_CP" sdkmatrix.ActorApp) ;;
  esac
}

client_cmd() {
  case "$1" in
    go) CLIENT_CMD=("$GO_BIN" client) ;;
    python) CLIENT_CMD=("$E2E_PY" "$sdk_dir/python/client.py") ;;
    js) CLIENT_CMD=(node "$sdk_dir/js/client.js") ;;
    java) CLIENT_CMD=(java -cp "$JAVA_CP" sdkmatrix.Client) ;;
  esac
}

# sdk_env: the environment every SDK process gets (the SDKs read DAPR_* themselves).
sdk_env() {
  SDK_ENV=(env -u DAPR_API_TOKEN -u APP_API_TOKEN -u DAPR_HTTP_ENDPOINT -u DAPR_GRPC_ENDPOINT
    DAPR_RUNTIME_HOST=127.0.0.1 DAPR_HOST=127.0.0.1 DAPR_SIDECAR_IP=127.0.0.1
    DAPR_HEALTH_TIMEOUT=60 DAPR_HTTP_TIMEOUT_SECONDS=30 DAPR_API_TIMEOUT_SECONDS=30
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$sdk_dir/python")
}

# start_pair PATH SDK ROLE PROTOCOL: sidecar, then at once the app (as `dapr run` does); sets
# PAIR_* (ports, pids, events file).
start_pair() {
  local path=$1 sdk=$2 role=$3 proto=$4 app_port
  app_port=$(free_ports 1)
  PAIR_EVENTS="$work/$path-$sdk-$role-events.jsonl"
  : >"$PAIR_EVENTS"
  start_sidecar "$path" "$sdk-$role" "sdkm-$sdk-$role" "$app_port" "$proto"
  app_cmd "$sdk" "$role"
  sdk_env
  e2e_spawn "$work/$path-$sdk-$role-app.log" "${SDK_ENV[@]}" DAPR_HTTP_PORT="$SC_HTTP" \
    DAPR_GRPC_PORT="$SC_GRPC" APP_PORT="$app_port" SDKM_PORT="$app_port" \
    SDKM_EVENTS="$PAIR_EVENTS" "${APP_CMD[@]}"
  PAIR_APP_PID=$E2E_SPAWNED PAIR_SC_PID=$SC_PID PAIR_HTTP=$SC_HTTP PAIR_GRPC=$SC_GRPC
  PAIR_APP_PORT=$app_port
}

# wait_pair: the app listens and its sidecar answers /v1.0/healthz with 204.
wait_pair() {
  e2e_wait_tcp "$PAIR_APP_PORT" "$START_TIMEOUT" "$PAIR_APP_PID" &&
    wait_http "http://127.0.0.1:$PAIR_HTTP/v1.0/healthz" 204 "$PAIR_SC_PID" sidecar
}

row() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$rows"; }

# collect SDK PATH OUT NOTE: the RESULT lines of OUT into rows; every feature with no line
# fails with NOTE.
collect() {
  local sdk=$1 path=$2 out=$3 why=$4 f line
  for f in "${FEATURES[@]}"; do
    line=$(grep -P "^RESULT\t\Q$f\E\t" "$out" 2>/dev/null | tail -n 1 || true)
    if [ -n "$line" ]; then
      IFS=$'\t' read -r _ _ st note <<<"$line"
      row "$sdk" "$path" "$f" "$st" "$note"
    else
      row "$sdk" "$path" "$f" fail "$why"
    fi
  done
  # Checks of one SDK only (js.grpc_client_start, …), as they came.
  grep -P '^RESULT\t' "$out" 2>/dev/null | while IFS=$'\t' read -r _ f st note; do
    [[ " ${FEATURES[*]} " == *" $f "* ]] || row "$sdk" "$path" "$f" "$st" "$note"
  done
}

show_logs() {
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    echo "----- $f (last 25 lines) -----" >&2
    tail -n 25 "$f" >&2
  done
}

# run_sdk PATH SDK: both pairs, the client, the rows.
run_sdk() {
  local path=$1 sdk=$2 out="$work/$1-$2-client.out" rc=0 pids=()
  if [ -z "${ready[$sdk]:-}" ]; then
    collect "$sdk" "$path" /dev/null "the $sdk SDK's build failed"
    return
  fi
  local t=$SECONDS
  start_pair "$path" "$sdk" jobs grpc
  local j_http=$PAIR_HTTP j_grpc=$PAIR_GRPC j_ev=$PAIR_EVENTS j_app=$PAIR_APP_PORT j_apid=$PAIR_APP_PID j_spid=$PAIR_SC_PID
  pids+=("$PAIR_APP_PID" "$PAIR_SC_PID")
  local ok=1
  start_pair "$path" "$sdk" actors http
  local a_http=$PAIR_HTTP a_grpc=$PAIR_GRPC a_ev=$PAIR_EVENTS
  pids+=("$PAIR_APP_PID" "$PAIR_SC_PID")
  wait_pair || ok=0
  PAIR_APP_PORT=$j_app PAIR_APP_PID=$j_apid PAIR_SC_PID=$j_spid PAIR_HTTP=$j_http
  [ "$ok" = 0 ] || wait_pair || ok=0
  if [ "$ok" = 0 ]; then
    show_logs "$work/$path-$sdk"-*.log
    collect "$sdk" "$path" /dev/null "the apps or sidecars did not start (see the log)"
  else
    client_cmd "$sdk"
    sdk_env
    e2e_log "$sdk on path $path: apps and sidecars up in $((SECONDS - t)) s; client"
    # The SDKs' own settings (DAPR_*_PORT) point at the actor app's sidecar; the jobs client
    # is given the jobs sidecar's address explicitly.
    e2e_spawn "$out" "${SDK_ENV[@]}" DAPR_HTTP_PORT="$a_http" DAPR_GRPC_PORT="$a_grpc" \
      SDKM_JOBS_HTTP="$j_http" SDKM_JOBS_GRPC="$j_grpc" SDKM_JOBS_EVENTS="$j_ev" \
      SDKM_ACTORS_HTTP="$a_http" SDKM_ACTORS_GRPC="$a_grpc" SDKM_ACTOR_EVENTS="$a_ev" SDKM_PATH="$path" \
      timeout -k 5 "$CLIENT_TIMEOUT" "${CLIENT_CMD[@]}"
    e2e_wait_spawned "$E2E_SPAWNED" || rc=$?
    grep -P '^RESULT\t' "$out" | cut -f2- | sed "s/^/  $sdk $path /" >&2 || true
    collect "$sdk" "$path" "$out" "no result: the client exited with status $rc"
    [ "$rc" = 0 ] || show_logs "$out" "$work/$path-$sdk"-*.log
  fi
  local p
  for p in "${pids[@]}"; do e2e_unspawn "$p"; done
  e2e_log "$sdk on path $path took $((SECONDS - t)) s"
}

# first_call PATH: the JS SDK first-call check (issue 36): sidecar and app started together as
# `dapr run` does, no wait in between; the app's first actor call must succeed. The race it
# catches depends on timing (how soon the app listens and calls, how soon the sidecar has read
# /dapr/config), so it is run FIRST_CALL_TRIES times, each with a fresh sidecar and app, and
# passes only if every first call succeeds.
FIRST_CALL_TRIES="${FIRST_CALL_TRIES:-5}"
first_call() {
  local path=$1 try ok=0 bad=0 first_bad="" note_ok=""
  if [ -z "${ready[js]:-}" ]; then
    row js "$path" js.first_call fail "the js SDK's build failed"
    return
  fi
  for ((try = 1; try <= FIRST_CALL_TRIES; try++)); do
    local rc=0 log="$work/$path-js-first-call-app.log" verdict st note
    start_pair "$path" js first-call http
    local app=$PAIR_APP_PID sc=$PAIR_SC_PID
    e2e_wait_spawned "$app" || rc=$?
    verdict=$(grep -aP '^RESULT\t' "$log" | tail -n 1 || true)
    st=fail note="the app exited with status $rc and no verdict"
    [ -z "$verdict" ] || IFS=$'\t' read -r _ _ st note <<<"$verdict"
    if [ "$st" = pass ]; then
      ok=$((ok + 1))
      note_ok=$note
    else
      bad=$((bad + 1))
      if [ -z "$first_bad" ]; then
        first_bad="try $try: $note"
        show_logs "$log" "$work/$path-js-first-call-sidecar.log"
      fi
    fi
    mv "$log" "$log.$try"
    mv "$work/$path-js-first-call-sidecar.log" "$work/$path-js-first-call-sidecar.log.$try"
    e2e_unspawn "$sc"
  done
  if [ "$bad" = 0 ]; then
    row js "$path" js.first_call pass "$ok/$FIRST_CALL_TRIES first calls succeeded (last: $note_ok)"
  else
    row js "$path" js.first_call fail "$bad/$FIRST_CALL_TRIES first calls failed; $first_bad"
  fi
}

# ------------------------------------------------------------------ the run

for path in "${paths[@]}"; do
  t=$SECONDS
  if ! start_path "$path"; then
    show_logs "$work/$path"-*.log
    for sdk in "${sdks[@]}"; do collect "$sdk" "$path" /dev/null "path $path's control plane did not start"; done
    continue
  fi
  for sdk in "${sdks[@]}"; do
    run_sdk "$path" "$sdk"
    [ "$sdk" != js ] || first_call "$path"
    # A control-plane process that died during this SDK's run is shown (its log names the
    # cause; that SDK's cells already record what failed) and the path's control plane is
    # started again for the next SDK.
    for p in ${CP_PIDS[@]+"${CP_PIDS[@]}"}; do
      if _proc_gone "$p"; then
        e2e_log "path $path: control-plane process $p exited during the $sdk run; restarting the control plane"
        show_logs "$work/$path"-*scheduler*.log "$work/$path"-placement.log
        for q in "${CP_PIDS[@]}"; do e2e_unspawn "$q"; done
        start_path "$path" || { e2e_fail "path $path: control plane did not restart"; break 2; }
        break
      fi
    done
  done
  for p in ${CP_PIDS[@]+"${CP_PIDS[@]}"}; do e2e_unspawn "$p"; done
  e2e_log "path $path took $((SECONDS - t)) s"
done

# Results: this run's rows replace those of the same (sdk, path); the others are kept. Rows are
# ordered by path, then SDK, so that a partial run leaves a small diff.
mkdir -p "$results_dir"
"$(e2e_python)" - "$results" "$rows" "$work/sdk.tsv" <<'PY'
import os, sys
old_path, new_path, out_path = sys.argv[1:4]
def load(path):
    if not os.path.exists(path):
        return []
    lines = open(path, encoding="utf-8").read().splitlines()
    return [l.split("\t") for l in lines if l and not l.startswith("sdk\tpath\t")]
new = load(new_path)
ran = {(r[0], r[1]) for r in new}
rows = [r for r in load(old_path) if (r[0], r[1]) not in ran] + new
paths, sdks = ["i", "ii", "iii"], ["python", "go", "js", "java"]
rank = lambda v, order: order.index(v) if v in order else len(order)
rows.sort(key=lambda r: (rank(r[1], paths), rank(r[0], sdks)))  # stable: features keep their order
with open(out_path, "w", encoding="utf-8") as f:
    f.write("sdk\tpath\tfeature\tresult\tnote\n")
    f.writelines("\t".join(r) + "\n" for r in rows)
PY
mv "$work/sdk.tsv" "$results"

# The same as a table for the docs: SDK × feature rows, one column per path; every fail and
# N/A cell's reason listed under it.
"$(e2e_python)" - "$results" "$results_dir/sdk.md" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], encoding="utf-8"), delimiter="\t"))
paths = [p for p in ("i", "ii", "iii") if any(r["path"] == p for r in rows)]
title = {"i": "(i) jobsd embedded", "ii": "(ii) jobsd → Dapr Scheduler", "iii": "(iii) daprd → jobsd scheduler"}
mark = {"pass": "pass", "fail": "**FAIL**", "na": "N/A"}
cells, order, notes = {}, [], []
for r in rows:
    key = (r["sdk"], r["feature"])
    if key not in cells:
        cells[key] = {}
        order.append(key)
    cells[key][r["path"]] = r
out = ["<!-- generated by e2e/dapr/sdk.sh from results/sdk.tsv -->",
       "| SDK | feature | " + " | ".join(title[p] for p in paths) + " |",
       "|---|---|" + "---|" * len(paths)]
for key in order:
    line = []
    for p in paths:
        r = cells[key].get(p)
        if r is None:
            line.append("")
            continue
        line.append(mark.get(r["result"], r["result"]))
        if r["result"] != "pass":
            notes.append(f"- {key[0]} / {key[1]} / {p}: {r['result']}: {r['note']}")
    out.append(f"| {key[0]} | {key[1]} | " + " | ".join(line) + " |")
if notes:
    out += ["", "Not passing, and why:", ""] + notes
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")
PY

passed=$(awk -F'\t' '$4 == "pass"' "$rows" | wc -l)
failed=$(awk -F'\t' '$4 == "fail"' "$rows" | wc -l)
skipped=$(awk -F'\t' '$4 == "na"' "$rows" | wc -l)
echo
column -t -s $'\t' "$rows" | cut -c1-200
e2e_log "sdk matrix took $((SECONDS - t_begin)) s (paths: ${paths[*]}; sdks: ${sdks[*]}); results in ${results#"$E2E_ROOT"/}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
