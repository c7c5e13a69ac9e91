#!/usr/bin/env python3
"""`jobsd scheduler --placement-enabled` started with Dapr placement's command line, for
Dapr's own `placement/` tests (DAPR_INTEGRATION_PLACEMENT_PATH).

Dapr 1.18's placement is a binary of its own (`--port`, raft peers in `--initial-cluster`);
jobsd serves the same protocol from a Scheduler replica. The flags are given their meaning:

- `--port`, `--listen-address`, `--id`, `--healthz-port`, `--healthz-listen-address`,
  `--metrics-port`, `--metrics-listen-address`, `--enable-metrics`, `--log-level`,
  `--log-as-json`: the replica's own flags of the same name (placement and the Scheduler
  service share `--port`, as in Dapr 1.19's Scheduler).
- `--metadata-enabled`, `--replicationFactor`, `--disseminate-timeout`,
  `--disseminate-coalesce-window`: `--placement-metadata-enabled`,
  `--placement-replication-factor`, `--placement-disseminate-timeout`,
  `--placement-disseminate-coalesce-window`.
- `--initial-cluster` naming one peer: nothing (a single replica leads). Several raft peers
  are refused: jobsd's replicas share etcd, not raft (run `jobsd scheduler` replicas on one
  etcd; the first live member by id leads placement).
- `--tls-enabled=true` is refused: placement mTLS comes from Dapr's Sentry, which jobsd does
  not speak.
- `--mode`, `--trust-domain`, `--trust-anchors-file`, `--sentry-address`, `--keepalive-time`,
  `--keepalive-timeout`, `--max-api-level`, `--min-api-level`, `--inmem-store-enabled`,
  `--raft-logstore-path`: nothing.

The replica keeps its (empty) job store in a temporary folder, removed when it exits. Signals
are forwarded; the child dies with the wrapper (PR_SET_PDEATHSIG).
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scheduler_on_etcd import die_with_parent, flag_values  # noqa: E402

SAME = {
    "port", "listen-address", "id", "healthz-port", "healthz-listen-address", "metrics-port",
    "metrics-listen-address", "enable-metrics", "log-level", "log-as-json",
}
RENAMED = {
    "metadata-enabled": "placement-metadata-enabled",
    "replicationFactor": "placement-replication-factor",
    "disseminate-timeout": "placement-disseminate-timeout",
    "disseminate-coalesce-window": "placement-disseminate-coalesce-window",
}
DROPPED = {
    "mode", "trust-domain", "trust-anchors-file", "sentry-address", "keepalive-time",
    "keepalive-timeout", "max-api-level", "min-api-level", "inmem-store-enabled",
    "raft-logstore-path", "initial-cluster", "tls-enabled",
}


def main():
    flags = flag_values(sys.argv[1:])
    peers = [p for p in flags.get("initial-cluster", "").split(",") if p]
    if len(peers) > 1:
        sys.exit("placement_on_jobsd: several raft peers (--initial-cluster) are not supported: "
                 "jobsd replicas share etcd; run them on one etcd instead")
    if flags.get("tls-enabled", "false").lower() in ("true", "1", "t"):
        sys.exit("placement_on_jobsd: --tls-enabled needs Dapr's Sentry, which jobsd does not speak")
    unknown = sorted(set(flags) - SAME - set(RENAMED) - DROPPED)
    if unknown:
        sys.exit(f"placement_on_jobsd: flags not mapped: {', '.join(unknown)}")
    args = ["scheduler", "--placement-enabled"]
    for name, value in flags.items():
        if name in SAME:
            args.append(f"--{name}={value}")
        elif name in RENAMED:
            args.append(f"--{RENAMED[name]}={value}")
    data = tempfile.mkdtemp(prefix="jobsd-placement-")
    args.append(f"--data-dir={data}")
    child = subprocess.Popen([os.environ.get("JOBSD_BIN", "jobsd"), *args],
                             preexec_fn=die_with_parent)

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    code = child.wait()
    shutil.rmtree(data, ignore_errors=True)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
