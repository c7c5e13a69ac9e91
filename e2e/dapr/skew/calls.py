#!/usr/bin/env python3
"""Actor method calls through two real daprd hosts of one version, on `jobsd scheduler
--placement-enabled` or on Dapr's own Scheduler and placement of that version: how many calls
fail, and with what. It tells a daprd version's own errors from the placement service's: the
placement run (e2e/dapr/placement.sh) counts a failed call as a placement inconsistency.

Each host is a daprd (`--log-level warn`, as the placement run starts it) with
e2e/dapr/placement/counter_app.py; every actor a0..a<N-1> is called once through each host.

usage: calls.py VERSION jobsd|dapr [N]      e.g. calls.py v1.16.5 dapr 300
Needs JOBSD_BIN, DAPR_CACHE (as e2e/dapr/skew.sh sets them; run it with e2e/.venv's python).
"""

import collections
import os
import re
import sys

from run import Row, free_port, http

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    version, cp = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    row = Row(f"calls-{version}-{cp}", None)
    spawn = row.spawn
    row.spawn = lambda name, argv: spawn(name, ["warn" if a == "info" else a for a in argv])
    try:
        if cp == "jobsd":
            sched = placement = row.jobsd_scheduler(0)
        else:
            sched, placement = row.dapr_scheduler(version), row.dapr_placement(version)
        hosts = []
        for i in range(2):
            app = free_port()
            row.spawn(f"app-{i}", [sys.executable, os.path.join(HERE, "..", "placement", "counter_app.py"),
                                   str(app), f"host-{i}"])
            row.daprd(version, app, sched, placement)
            hosts.append(row.http)
        for p in hosts:
            row.need("healthz", lambda p=p: http("GET", f"http://127.0.0.1:{p}/v1.0/healthz")[0] == 204, 60)
            row.need("placement", lambda p=p: http("PUT", f"http://127.0.0.1:{p}/v1.0/actors/Counter/w/method/ping", {})[0] == 200, 60)
        errors = collections.Counter()
        for k in range(n):
            for p in hosts:
                code, body = http("PUT", f"http://127.0.0.1:{p}/v1.0/actors/Counter/a{k}/method/ping", {})
                if code != 200:
                    body = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<app port>", body)
                    errors[f"{code} " + re.sub(r"/Counter/a\d+/", "/Counter/<id>/", body)[:300]] += 1
        print(f"daprd {version} on {cp}: {2 * n} calls, {sum(errors.values())} failed")
        for e, c in errors.most_common(5):
            print(f"  {c} x {e}")
    finally:
        row.stop(False)


if __name__ == "__main__":
    main()
