#!/usr/bin/env bash
# What status, run history and metrics cost (issue 11) — run by hand, never part of CI.
#
#   bash e2e/bench/observe_cost.sh
#
# ROUNDS rounds, each running jobsd "on" (defaults: --history-limit 100, finished jobs kept
# 24 h, /metrics served) and "off" (--history-limit 0 --finished-retention 0
# --enable-metrics=false), in alternating order (on/off, then off/on, …) so that a machine
# getting busier or quieter does not favour one side. Each side measures:
#   creates: e2e/bench/api.sh with RUNS=1 CEILING=0 FILL=0 (HTTP, gRPC 1 channel, gRPC C channels)
#   burst:   e2e/bench/triggers.sh with PARTS=a BURST_RUNS=1 (BURST_N one-shots due at one instant)
# Every table goes to $OUT/<round>-<side>-{creates,burst}.md and to the terminal.
#
# Settings (environment): ROUNDS=2 BURST_N=100000 N=100000 OUT=$(mktemp -d)
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=${ROUNDS:-2}
OUT=${OUT:-$(mktemp -d)}
export BURST_N=${BURST_N:-100000} N=${N:-100000}
ON=""
OFF="--history-limit 0 --finished-retention 0 --enable-metrics=false"

run_side() { # round side args
  local round=$1 side=$2 args=$3
  echo "=== round $round, $side: ${args:-(defaults)}"
  JOBSD_ARGS="$args" RUNS=1 CEILING=0 FILL=0 bash e2e/bench/api.sh 2>&1 |
    sed -n '/== summary/,$p' | tee "$OUT/$round-$side-creates.md"
  JOBSD_ARGS="$args" PARTS=a BURST_RUNS=1 bash e2e/bench/triggers.sh 2>&1 |
    sed -n '/== summary/,$p' | tee "$OUT/$round-$side-burst.md"
}

for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then
    run_side "$round" on "$ON"
    run_side "$round" off "$OFF"
  else
    run_side "$round" off "$OFF"
    run_side "$round" on "$ON"
  fi
done
echo "tables in $OUT"
