#!/usr/bin/env bash
# The CI-sized part of "jobsd against the real Dapr" (e2e/test.sh runs it; docs/dapr-real.md
# has the full suites, each one command):
#   1. the real daprd, Scheduler and placement, built from Dapr's Go modules (e2e/dapr/build.sh,
#      cached; no CLI);
#   2. the SDK matrix on path (i), jobsd embedded, every SDK (e2e/dapr/sdk.sh i);
#   3. two smokes with the Python SDK: jobsd -> the real Dapr Scheduler (ii) and the real
#      daprd -> `jobsd scheduler` (iii, which is their placement service too);
#   4. actors across hosts on `jobsd scheduler --placement-enabled`, real daprd and jobsd
#      sidecars side by side (calls crossing between them), a host killed and one joining
#      (e2e/dapr/placement.sh --sidecars mixed, 300 actors);
#   5. a jobsd sidecar idle on the real Dapr Scheduler keeps its connection (no GOAWAY
#      too_many_pings; e2e/dapr/keepalive.sh).
# JOBSD_BIN: the jobsd binary to test (e2e/test.sh passes the one `cargo test` built).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

t0=$SECONDS
export DAPR_BUILD_CLI=0
bash "$here/build.sh" >/dev/null
echo "dapr ci: the real Dapr built (or cached) in $((SECONDS - t0)) s" >&2

t1=$SECONDS
bash "$here/sdk.sh" i
echo "dapr ci: SDK matrix, path (i), in $((SECONDS - t1)) s" >&2

t2=$SECONDS
SDKS=python bash "$here/sdk.sh" ii iii
echo "dapr ci: smokes (ii, iii) in $((SECONDS - t2)) s" >&2

t3=$SECONDS
bash "$here/placement.sh" --hosts 3 --actors 300 --period 5 --steady 10 --after 20 --sidecars mixed
echo "dapr ci: actors across hosts in $((SECONDS - t3)) s" >&2
t4=$SECONDS
IDLE=20 bash "$here/keepalive.sh"
echo "dapr ci: keepalive on the real Scheduler in $((SECONDS - t4)) s; all in $((SECONDS - t0)) s" >&2
