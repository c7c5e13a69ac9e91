#!/usr/bin/env python3
"""Actors across hosts on `jobsd scheduler --placement-enabled`, with real daprd sidecars.

One `jobsd scheduler` replica is both the Scheduler (reminders) and the placement service of
HOSTS sidecars (real daprd from DAPR_BIN_DIR, jobsd sidecars, or both: `--sidecars`), each
with its own Counter actor app
(counter_app.py, one app id shared by all hosts, as replicas of one app). ACTORS actors get a
reminder of PERIOD through the daprd sidecars, spread over them. Then:

1. steady: every host counts its actors' activations and reminder ticks; ticks/s is measured;
2. a host is killed (daprd and app, SIGKILL): its actors move to the others, and their
   reminders must fire there again;
3. a host joins: actors move to it (drained from their old hosts first).

Checked throughout: each actor active on one host at a time (the apps record when each actor
was activated and deactivated, on the machine's monotonic clock: any two intervals of one
actor on two hosts that overlap count), and no actor left without ticks. Measured: reminder
registrations/s, ticks/s across the hosts, and the cost of each rebalance (time until every
moved actor ticked again, and the longest gap between two ticks of one actor).

usage: run.py [--hosts 3] [--actors 10000] [--period 10] [--steady 30] [--after 40]
              [--sidecars daprd|jobsd|mixed] [--json OUT]
Needs: JOBSD_BIN, DAPR_BIN_DIR (e2e/dapr/placement.sh sets both); DAPRD_BIN, another daprd
than DAPR_BIN_DIR's (placement.sh sets it from DAPRD_VERSION). Exit 1 when a check fails.
"""

import argparse
import concurrent.futures as cf
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ACTOR_STORE = """apiVersion: dapr.io/v1alpha1
kind: Component
metadata:
  name: actorstore
spec:
  type: state.in-memory
  version: v1
  metadata:
    - name: actorStateStore
      value: "true"
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError as e:
        return 0, str(e).encode()


def wait(what, check, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise SystemExit(f"placement run: {what} not within {seconds}s")


class Run:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="jobsd-placement-run-")
        self.procs = []
        self.hosts = []  # dicts: app port, http port, procs, alive
        self.jobsd = os.environ["JOBSD_BIN"]
        self.daprd = os.environ.get("DAPRD_BIN") or os.path.join(os.environ["DAPR_BIN_DIR"], "daprd")

    def spawn(self, name, argv):
        log = open(os.path.join(self.work, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.work,
                             env={k: v for k, v in os.environ.items() if k != "DAPR_API_TOKEN"})
        self.procs.append(p)
        return p

    def start_scheduler(self):
        self.sched_port = free_port()
        self.metrics_port = free_port()
        self.spawn("jobsd-scheduler", [
            self.jobsd, "scheduler", "--id", "s0", "--listen-address", "127.0.0.1",
            "--port", str(self.sched_port), "--data-dir", os.path.join(self.work, "sched"),
            "--metrics-listen-address", "127.0.0.1", "--metrics-port", str(self.metrics_port),
            "--placement-enabled", "--log-level", "warn",
        ])
        wait("jobsd scheduler", lambda: http("GET", f"http://127.0.0.1:{self.metrics_port}/metrics")[0] == 200, 30)

    def kind(self, i):
        """The sidecar of host `i`: daprd or jobsd (`--sidecars mixed`: alternating)."""
        if self.args.sidecars == "mixed":
            return "jobsd" if i % 2 else "daprd"
        return self.args.sidecars

    def start_host(self, i):
        app_port, http_port, grpc_port, internal, metrics = (free_port() for _ in range(5))
        app = self.spawn(f"app-{i}", [sys.executable, os.path.join(HERE, "counter_app.py"),
                                      str(app_port), f"host-{i}"])
        if self.kind(i) == "jobsd":
            sidecar = self.spawn(f"jobsd-{i}", [
                self.jobsd, "--app-id", "counter", "--app-port", str(app_port),
                "--dapr-listen-addresses", "127.0.0.1", "--dapr-http-port", str(http_port),
                "--dapr-grpc-port", str(grpc_port), "--dapr-internal-grpc-port", str(internal),
                "--metrics-listen-address", "127.0.0.1", "--metrics-port", str(metrics),
                "--log-level", "warn", "--data-dir", os.path.join(self.work, f"jobsd-{i}"),
                "--placement-host-address", f"127.0.0.1:{self.sched_port}",
                "--scheduler-host-address", f"127.0.0.1:{self.sched_port}",
            ])
            return self.started(i, app_port, http_port, [sidecar, app])
        daprd = self.spawn(f"daprd-{i}", [
            self.daprd, "--mode", "standalone", "--app-id", "counter",
            "--app-port", str(app_port), "--app-channel-address", "127.0.0.1",
            "--dapr-listen-addresses", "127.0.0.1", "--dapr-http-port", str(http_port),
            "--dapr-grpc-port", str(grpc_port), "--dapr-internal-grpc-port", str(internal),
            "--metrics-port", str(metrics), "--log-level", "warn",
            "--placement-host-address", f"127.0.0.1:{self.sched_port}",
            "--scheduler-host-address", f"127.0.0.1:{self.sched_port}",
            "--resources-path", os.path.join(self.work, "resources"),
        ])
        return self.started(i, app_port, http_port, [daprd, app])

    def started(self, i, app_port, http_port, procs):
        host = {"i": i, "name": f"host-{i}", "app": app_port, "http": http_port,
                "procs": procs, "alive": True, "kind": self.kind(i)}
        self.hosts.append(host)
        wait(f"{host['kind']} {i}", lambda: http("GET", f"http://127.0.0.1:{http_port}/v1.0/healthz")[0] == 204, 60)
        return host

    def call(self, host, actor, method="ping"):
        return http("PUT", f"http://127.0.0.1:{host['http']}/v1.0/actors/Counter/{actor}/method/{method}", {})

    def stats(self):
        out = {}
        for h in self.hosts:
            if h["alive"]:
                code, body = http("GET", f"http://127.0.0.1:{h['app']}/stats", timeout=30)
                if code == 200:
                    out[h["name"]] = json.loads(body)
        return out

    def kill(self, host):
        for p in host["procs"]:
            p.send_signal(signal.SIGKILL)
        for p in host["procs"]:
            p.wait()
        host["alive"] = False

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if os.environ.get("E2E_KEEP_TMP") != "1":
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            print(f"placement run: logs kept in {self.work}", file=sys.stderr)


def overlaps(intervals_by_host, until):
    """Pairs of intervals of one actor on two hosts that overlap in time."""
    by_actor = {}
    for host, intervals in intervals_by_host.items():
        for actor, on, off in intervals:
            by_actor.setdefault(actor, []).append((on, off if off is not None else until, host))
    bad = []
    for actor, spans in by_actor.items():
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            if a[2] != b[2] and b[0] < a[1]:
                bad.append((actor, a, b))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--actors", type=int, default=10000)
    ap.add_argument("--period", type=int, default=10)
    ap.add_argument("--steady", type=float, default=30)
    ap.add_argument("--after", type=float, default=40)
    ap.add_argument("--sidecars", choices=["daprd", "jobsd", "mixed"], default="daprd",
                    help="the hosts' sidecars: real daprd, jobsd, or both alternating")
    ap.add_argument("--json")
    args = ap.parse_args()
    run = Run(args)
    # daprd hosts actors only with an actor state store (the Counter keeps no state).
    os.makedirs(os.path.join(run.work, "resources"), exist_ok=True)
    with open(os.path.join(run.work, "resources", "actorstore.yaml"), "w") as f:
        f.write(ACTOR_STORE)
    result = {"hosts": args.hosts, "actors": args.actors, "period_s": args.period,
              "sidecars": args.sidecars, "daprd": run.daprd}
    failures = []
    try:
        run.start_scheduler()
        for i in range(args.hosts):
            run.start_host(i)
        # Every host routes actor calls once the placement tables reached it.
        for h in run.hosts:
            wait(f"actor calls through {h['name']}", lambda h=h: run.call(h, "warmup")[0] == 200, 60)
        # Reminders, spread over the sidecars.
        actors = [f"a{i}" for i in range(args.actors)]

        def register(k):
            h = run.hosts[k % len(run.hosts)]
            due = random.uniform(1, args.period)
            for _ in range(5):
                code, body = http("POST", f"http://127.0.0.1:{h['http']}/v1.0/actors/Counter/{actors[k]}/reminders/tick",
                                  {"dueTime": f"{due:.3f}s", "period": f"{args.period}s"})
                if code in (200, 204):
                    return True
                time.sleep(0.5)
            print(f"register {actors[k]}: {code} {body[:200]!r}", file=sys.stderr)
            return False

        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(32) as pool:
            ok = sum(pool.map(register, range(args.actors)))
        took = time.monotonic() - t0
        result["registrations_per_s"] = round(args.actors / took, 1)
        if ok != args.actors:
            failures.append(f"{args.actors - ok} reminders not registered")
        print(f"placement run: {ok} reminders registered in {took:.1f}s ({args.actors / took:.0f}/s)")

        # 1. Steady: wait one period for every actor to tick, then measure.
        time.sleep(args.period + 2)
        s0 = time.monotonic()
        time.sleep(args.steady)
        s1 = time.monotonic()
        st = run.stats()
        ticks = sum(1 for h in st.values() for ts in h["ticks"].values() for t in ts if s0 <= t < s1)
        result["steady_ticks_per_s"] = round(ticks / (s1 - s0), 1)
        result["steady_expected_ticks_per_s"] = round(args.actors / args.period, 1)
        per_host = {name: len(h["active"]) for name, h in st.items()}
        result["active_per_host"] = per_host
        print(f"placement run: steady {ticks / (s1 - s0):.0f} ticks/s (expected {args.actors / args.period:.0f}); active per host {per_host}")
        never = [a for a in actors if not any(a in h["ticks"] for h in st.values())]
        if never:
            failures.append(f"{len(never)} actors never ticked (e.g. {never[:3]})")

        # Method calls through every sidecar: each actor answers from one host, whichever
        # sidecar the call came in through (calls cross sidecars on the internal API).
        sample = actors[: min(100, len(actors))]

        def answered_by(pair):
            h, a = pair
            code, body = run.call(h, a)
            return a, (json.loads(body).get("host") if code == 200 else f"error {code} {body.decode(errors='replace')[:300]}")

        with cf.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(answered_by, [(h, a) for h in run.hosts for a in sample]))
        by_actor = {}
        for a, who in answers:
            by_actor.setdefault(a, set()).add(who)
        # Answered from two hosts (placement disagrees) apart from calls that failed (the error
        # says whose: an older daprd's own app channel fails some calls whatever the placement).
        split = {a: w for a, w in by_actor.items() if len({x for x in w if not x.startswith("error")}) > 1}
        errors = {}  # error (app port and actor id left out) -> calls
        for _, who in answers:
            if who.startswith("error"):
                key = re.sub(r"/Counter/[^/]+/", "/Counter/<id>/", re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", who))
                errors[key] = errors.get(key, 0) + 1
        failed = sum(errors.values())
        remote = sum(1 for h in run.hosts for a in sample if a not in st.get(h["name"], {}).get("active", []))
        result["calls"] = {"made": len(answers), "through_another_sidecar": remote, "inconsistent": len(split),
                           "failed": failed, "errors": errors}
        print(f"placement run: {len(answers)} method calls through {len(run.hosts)} sidecars "
              f"({remote} to an actor hosted behind another sidecar): {len(split)} inconsistent, {failed} failed")
        if failed:
            failures.append(f"{failed} calls failed: {errors}")
        if split:
            failures.append(f"{len(split)} actors answered from several hosts (e.g. {list(split.items())[:2]})")

        # 2. Kill the last host.
        victim = run.hosts[-1]
        moved = set(st[victim["name"]]["active"]) & set(actors)
        kept_intervals = {victim["name"]: st[victim["name"]]["intervals"]}
        t_kill = time.monotonic()
        run.kill(victim)
        time.sleep(args.after)
        st = run.stats()
        kept_intervals[victim["name"]] = [[a, on, off if off is not None else t_kill]
                                          for a, on, off in kept_intervals[victim["name"]]]
        first_after = {}
        for h in st.values():
            for a, ts in h["ticks"].items():
                if a in moved:
                    later = [t for t in ts if t > t_kill]
                    if later:
                        first_after[a] = min(first_after.get(a, later[0]), later[0])
        stuck = sorted(moved - set(first_after))
        delays = sorted(t - t_kill for t in first_after.values())
        result["kill"] = {
            "moved_actors": len(moved),
            "ticked_again": len(first_after),
            "first_tick_after_kill_s": {
                "p50": round(delays[len(delays) // 2], 2) if delays else None,
                "max": round(delays[-1], 2) if delays else None,
            },
        }
        print(f"placement run: killed {victim['name']} ({len(moved)} actors): {len(first_after)} ticked again elsewhere, "
              f"first tick after p50 {result['kill']['first_tick_after_kill_s']['p50']}s max {result['kill']['first_tick_after_kill_s']['max']}s")
        if stuck:
            failures.append(f"{len(stuck)} moved actors never ticked again (e.g. {stuck[:3]})")

        # 3. A host joins.
        t_join = time.monotonic()
        newcomer = run.start_host(args.hosts)
        time.sleep(args.after)
        st = run.stats()
        got = len(st[newcomer["name"]]["active"])
        first = min((min(ts) for ts in st[newcomer["name"]]["ticks"].values() if ts), default=None)
        result["join"] = {
            "actors_moved_to_new_host": got,
            "first_tick_on_new_host_s": round(first - t_join, 2) if first else None,
        }
        print(f"placement run: {newcomer['name']} joined: {got} actors active on it, first tick after "
              f"{result['join']['first_tick_on_new_host_s']}s")
        if got == 0:
            failures.append("no actor moved to the host that joined")

        # Gaps: the longest time between two ticks of one actor, all hosts merged.
        merged = {}
        for h in st.values():
            for a, ts in h["ticks"].items():
                merged.setdefault(a, []).extend(ts)
        gaps = []
        missed = 0
        for a, ts in merged.items():
            ts.sort()
            for x, y in zip(ts, ts[1:]):
                gaps.append(y - x)
                missed += max(0, round((y - x) / args.period) - 1)
        gaps.sort()
        result["tick_gap_s"] = {"p50": round(gaps[len(gaps) // 2], 2), "p99": round(gaps[int(len(gaps) * 0.99)], 2),
                                "max": round(gaps[-1], 2)} if gaps else {}
        result["missed_periods_surviving_hosts"] = missed
        # One host at a time: every interval on every host, the killed one's closed at its death.
        intervals = {name: h["intervals"] for name, h in st.items()}
        intervals.update(kept_intervals)
        bad = overlaps(intervals, time.monotonic())
        result["overlapping_activations"] = len(bad)
        print(f"placement run: tick gaps {result['tick_gap_s']}, periods missed {missed}, overlapping activations {len(bad)}")
        if bad:
            failures.append(f"{len(bad)} actors active on two hosts at once (e.g. {bad[:2]})")
    finally:
        run.stop()
    result["failures"] = failures
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    for f in failures:
        print(f"placement run: FAIL {f}", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
