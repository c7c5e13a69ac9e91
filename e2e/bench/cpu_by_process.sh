#!/usr/bin/env bash
# CPU seconds by process while a command runs — run by hand, never part of CI.
#
#   bash e2e/bench/cpu_by_process.sh [JOBS=N] <command…>
#   e.g. JOBS=100000 bash e2e/bench/cpu_by_process.sh \
#          env BUILD=0 MODES=cluster PARTS=a RUNS=1 CREATES=100000 bash e2e/bench/cluster.sh
#
# Every second it reads utime + stime (/proc/<pid>/stat) of every etcd, jobsd and bench
# process, then prints, per kind (etcd, replicas = `jobsd scheduler`, sidecars = other jobsd,
# each bench example), the CPU each used between the first and the last time it was seen
# (startup included), and with JOBS=N the microseconds per job. The figures of
# `e2e/bench/RESULTS.md` "What a create costs, process by process" come from this.
set -euo pipefail
[ "$#" -gt 0 ] || {
  echo "usage: [JOBS=N] $0 <command…>" >&2
  exit 2
}
samples=$(mktemp)
trap 'rm -f "$samples"' EXIT
tick=$(getconf CLK_TCK)
(
  while :; do
    for pid in $(pgrep -f 'etcd|jobsd|bench_api|bench_triggers|bench_actors' || true); do
      stat=$(cut -d' ' -f14,15 "/proc/$pid/stat" 2>/dev/null) || continue
      cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-200) || continue
      echo "$pid $stat $cmd"
    done
    sleep 1
  done
) >"$samples" &
sampler=$!
status=0
"$@" || status=$?
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
python3 - "$samples" "$tick" "${JOBS:-0}" <<'PY'
import collections, sys
path, tick, jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
first, last, kind = {}, {}, {}
def kind_of(cmd):
    exe = cmd.split()[0].rsplit("/", 1)[-1] if cmd.split() else ""
    if exe == "etcd":
        return "etcd"
    if "jobsd" in exe:
        return "replicas" if " scheduler " in f" {cmd} " else "sidecars"
    if exe.startswith("bench_"):
        return exe
    return None
for line in open(path):
    parts = line.split(None, 3)
    if len(parts) < 4:
        continue
    pid, utime, stime, cmd = parts
    k = kind_of(cmd)
    if k is None:
        continue
    seconds = (int(utime) + int(stime)) / tick
    first.setdefault(pid, seconds)
    last[pid], kind[pid] = seconds, k
totals = collections.Counter()
for pid, seconds in last.items():
    totals[kind[pid]] += seconds - first[pid]
print("| process | CPU s |" + (" µs per job |" if jobs else ""))
print("|---|---|" + ("---|" if jobs else ""))
for k, seconds in totals.most_common():
    print(f"| {k} | {seconds:.2f} |" + (f" {seconds / jobs * 1e6:.0f} |" if jobs else ""))
total = sum(totals.values())
print(f"| total | {total:.2f} |" + (f" {total / jobs * 1e6:.0f} |" if jobs else ""))
PY
exit "$status"
