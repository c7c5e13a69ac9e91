#!/usr/bin/env bash
# Every test of the project: unit and in-process integration tests, then the end-to-end
# suites that run the jobsd binary against real peers. This is the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."

bash e2e/setup.sh

# A failing test's message and place, not a backtrace after them: CI shows the tail of what
# failed. JOBSD_TEST_BACKTRACE=1 brings backtraces back.
RUST_BACKTRACE="${JOBSD_TEST_BACKTRACE:-0}" cargo test --locked --all-targets

# End-to-end suites, each cleaning up after itself. They run the jobsd binary `cargo test`
# has just built (the same code as the release build, with debug assertions and overflow
# checks on), which spares CI a second full build; JOBSD_BIN=<path> tests another binary
# (the release one: `cargo build --release` first).
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
case "$target_dir" in /*) ;; *) target_dir="$PWD/$target_dir" ;; esac
export JOBSD_BIN="${JOBSD_BIN:-$target_dir/debug/jobsd}"
bash e2e/jobs_api.sh
bash e2e/triggers.sh
bash e2e/policies.sh
bash e2e/steer_clock.sh
bash e2e/cluster.sh
bash e2e/actors.sh
bash e2e/steer_idempotency.sh
bash e2e/steer_async.sh
bash e2e/cli.sh
bash e2e/backup.sh
bash e2e/console.sh
bash e2e/faults/run.sh
# The real Dapr (daprd, Scheduler, placement built from Dapr's Go modules) and the official SDKs
# against jobsd: the CI-sized part; the full suites are one command each (docs/dapr-real.md).
bash e2e/dapr/ci.sh
