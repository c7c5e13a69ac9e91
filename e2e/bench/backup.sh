#!/usr/bin/env bash
# Backup and restore at scale (issue 14) — run by hand, never part of CI or e2e/test.sh:
#
#   bash e2e/bench/backup.sh
#
# Runs the e2e suite e2e/backup.sh with JOBS=100000 (the mix, the handover export, the import
# into a fresh jobsd on another data dir, the comparison of every job's GET and next 3 fire
# times, no execution attempt delivered twice) and prints its `RESULT backup …` line: export
# and import rates through `jobsd jobs export|import` (wall time of the CLI, file written and
# read), with the load average at each. Figures go to e2e/bench/RESULTS.md.
#
# Settings (environment): JOBS=100000 RUN_AFTER=15 PHASE_TIMEOUT=1800; JOBSD_BIN as for the
# suites.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "== uptime before: $(uptime)"
JOBS="${JOBS:-100000}" RUN_AFTER="${RUN_AFTER:-15}" PHASE_TIMEOUT="${PHASE_TIMEOUT:-1800}" \
  bash e2e/backup.sh
echo "== uptime after: $(uptime)"
