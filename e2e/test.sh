#!/usr/bin/env bash
# Every test of the project: unit and in-process integration tests, then the end-to-end
# suites that run the release binary against real peers. This is the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."

bash e2e/setup.sh

# A failing test's message and place, not a backtrace after them: CI shows the tail of what
# failed. JOBSD_TEST_BACKTRACE=1 brings backtraces back.
RUST_BACKTRACE="${JOBSD_TEST_BACKTRACE:-0}" cargo test --locked --all-targets

# End-to-end suites (each builds the release binary if needed and cleans up after itself).
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
