#!/usr/bin/env bash
# Actors across hosts on `jobsd scheduler --placement-enabled` with real daprd sidecars
# (e2e/dapr/placement/run.py says what is checked and measured).
#
#   bash e2e/dapr/placement.sh [run.py flags]      e.g. --hosts 3 --actors 10000 --period 10
#   DAPRD_VERSION=v1.16.5 bash e2e/dapr/placement.sh ...   an older daprd (one of
#                                  DAPR_SKEW_VERSIONS, `bash e2e/dapr/build.sh --skew`): version skew
#
# JOBSD_BIN: the jobsd binary (default: target/release/jobsd, built if missing). The real
# daprd comes from e2e/dapr/build.sh (cached). CI runs a small version (e2e/dapr/ci.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
eval "$(DAPR_BUILD_CLI=0 bash "$here/build.sh" | sed 's/^/export /')"
if [ -z "${JOBSD_BIN:-}" ]; then
  JOBSD_BIN="$root/target/release/jobsd"
  (cd "$root" && cargo build --release --locked --bin jobsd)
fi
export JOBSD_BIN
. "$here/versions.env"
if [ -n "${DAPRD_VERSION:-}" ] && [ "$DAPRD_VERSION" != "$DAPR_VERSION" ]; then
  export DAPRD_BIN="$DAPR_CACHE/$DAPRD_VERSION/daprd"
  [ -x "$DAPRD_BIN" ] || { echo "placement.sh: no $DAPRD_BIN (bash e2e/dapr/build.sh --skew)" >&2; exit 1; }
fi
exec python3 "$here/placement/run.py" "$@"
