#!/usr/bin/env python3
"""`jobsd scheduler` started with the Dapr Scheduler's command line, for Dapr's own tests.

Dapr's integration framework starts its Scheduler binary (DAPR_INTEGRATION_SCHEDULER_PATH)
with an embedded etcd: `--etcd-data-dir`, `--etcd-client-port` and `--etcd-initial-cluster`
say where that etcd keeps its data and listens, and tests read the Scheduler's etcd there
(`dapr/jobs/...`, `dapr/leadership/...`). jobsd embeds no etcd: it is a client of one. This
wrapper gives those flags their meaning the way an operator would, with Debian's etcd:

- `--etcd-embed` true (the Scheduler's default): an etcd member is started with the
  Scheduler's `--id` as its name, its data in `<etcd-data-dir>/<id>-etcd`, clients on
  127.0.0.1:`--etcd-client-port`, peers on the URL `--etcd-initial-cluster` gives this id (the
  same cluster as Dapr's embedded one: three Schedulers make a three-member etcd), then
  `jobsd scheduler --etcd-endpoints 127.0.0.1:<client port>`.
- `--etcd-embed=false`: `--etcd-client-endpoints` go to jobsd as they are; no etcd is started.

Every other flag goes to `jobsd scheduler` unchanged: jobsd accepts the Scheduler's whole
command line (src/config/daprd_compat.rs says flag by flag what it does with each).

The wrapper forwards SIGINT/SIGTERM to jobsd, stops its etcd once jobsd has exited and exits
with jobsd's code. Both children die with the wrapper if it is killed (PR_SET_PDEATHSIG), so a
test's `Kill` + `Run` finds the ports free and the data where it was left.

JOBSD_BIN names the jobsd binary; ETCD_BIN the etcd binary (default: etcd on PATH).
"""

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1


def die_with_parent():
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def flag_values(argv):
    """The Scheduler's flags as pflag reads them (`--f=v`, `--f v`, a bare bool `--f`)."""
    values = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            values[k] = v
        elif a.startswith("--"):
            k = a[2:]
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                values[k] = argv[i + 1]
                i += 1
            else:
                values[k] = "true"
        i += 1
    return values


def without(argv, names):
    """argv less the flags in `names` (either syntax)."""
    out = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        name = a[2:].split("=", 1)[0] if a.startswith("--") else None
        if name in names:
            if "=" not in a and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                skip = True
            continue
        out.append(a)
    return out


def wait_port(port, proc, seconds, stopped):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None or stopped():
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


def main():
    # Signals are caught from the start: the framework may interrupt while etcd starts.
    state = {"child": None, "signal": None}

    def forward(signum, _frame):
        state["signal"] = signum
        child = state["child"]
        if child is not None:
            try:
                child.send_signal(signum)
            except ProcessLookupError:
                pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)

    argv = sys.argv[1:]
    flags = flag_values(argv)
    jobsd = os.environ.get("JOBSD_BIN", "jobsd")
    etcd_bin = os.environ.get("ETCD_BIN", "etcd")
    sid = flags.get("id", "dapr-scheduler-server-0")
    embed = flags.get("etcd-embed", "true").lower() in ("true", "1", "t")

    etcd = None
    jobsd_args = without(argv, {"etcd-client-port", "etcd-initial-cluster", "etcd-embed"})
    if embed:
        client_port = int(flags.get("etcd-client-port", "2379"))
        cluster = [e.split("=", 1) for e in flags.get("etcd-initial-cluster", "").split(",") if e]
        cluster = [(name, url.replace("https://", "http://")) for name, url in cluster]
        peer = dict(cluster).get(sid)
        if peer is None:
            sys.exit(f"scheduler_on_etcd: --etcd-initial-cluster names no member {sid!r}")
        data_dir = os.path.join(flags.get("etcd-data-dir", "./data"), sid + "-etcd")
        etcd = subprocess.Popen(
            [
                etcd_bin,
                "--name", sid,
                "--data-dir", data_dir,
                "--listen-client-urls", f"http://127.0.0.1:{client_port}",
                "--advertise-client-urls", f"http://127.0.0.1:{client_port}",
                "--listen-peer-urls", peer,
                "--initial-advertise-peer-urls", peer,
                "--initial-cluster", ",".join(f"{n}={u}" for n, u in cluster),
                "--initial-cluster-state", "new",
                # As Dapr's embedded etcd is configured (pkg/scheduler/server/internal/etcd):
                # requests of any size, --etcd-max-txn-ops operations per txn.
                "--max-request-bytes", str(2**31 - 1),
                "--max-txn-ops", flags.get("etcd-max-txn-ops", "10000"),
                "--log-level", "error",
            ],
            preexec_fn=die_with_parent,
            stdout=subprocess.DEVNULL,
        )
        # A member of a multi-member cluster answers only once a quorum is up, which needs
        # the other wrappers: jobsd retries its etcd calls, so only the port is awaited.
        if not wait_port(client_port, etcd, 30, lambda: state["signal"] is not None):
            etcd.kill()
            if state["signal"] is not None:
                sys.exit(0)
            sys.exit(f"scheduler_on_etcd: etcd did not listen on {client_port}")
        jobsd_args = without(jobsd_args, {"etcd-client-endpoints"})
        jobsd_args.append(f"--etcd-endpoints=127.0.0.1:{client_port}")

    code = 0
    if state["signal"] is None:
        child = subprocess.Popen([jobsd, "scheduler", *jobsd_args], preexec_fn=die_with_parent)
        state["child"] = child
        if state["signal"] is not None:
            child.send_signal(state["signal"])
        code = child.wait()
    if etcd is not None:
        etcd.terminate()
        try:
            etcd.wait(10)
        except subprocess.TimeoutExpired:
            etcd.kill()
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
