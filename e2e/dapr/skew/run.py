#!/usr/bin/env python3
"""Version skew (issue 38 item 6): one jobs + reminder smoke, the same checks on both sides.

A row is a sidecar in front of a Scheduler, with an app served by this script (HTTP: jobs
arrive as `POST /job/<name>`, the `Counter` actor as daprd's actor protocol):

  daprd-<v>@jobsd      real daprd <v> on one `jobsd scheduler --placement-enabled` replica
                       (its Scheduler and its placement service, embedded store)
  daprd-<v>@jobsd3     the same on three replicas sharing one etcd (every address given)
  jobsd@dapr-<v>       a jobsd sidecar in remote mode on the real Dapr Scheduler <v> (one
                       replica, its embedded etcd); actors on the sidecar alone (no placement)
  jobsd@jobsd          a jobsd sidecar on `jobsd scheduler` (the control of the refusals)
  daprd-<v>@dapr-<w>   real daprd <v> on the real Dapr Scheduler and placement <w> (the
                       baseline: what a daprd version does with Dapr's own)

Checks, through the sidecar's Dapr API (HTTP unless said):
  job.oneshot          POST /v1.0-alpha1/jobs/{name} dueTime 1s: the app gets it once, data intact
  job.repeat           schedule @every 1s, repeats 3: GET shows it; the app gets exactly 3
  job.delete           @every 1s: ticks, DELETE 204, GET not found, no more ticks
  job.nodata           a one-shot job without data: GET shows it, the app gets it once
  reminder             register (dueTime 1s, period 1s), GET, >= 3 ticks, DELETE, no more ticks
  jobs.list            gRPC ListJobsAlpha1          (newer APIs: "works" or "refused: <error>")
  jobs.delete_prefix   gRPC DeleteJobsByPrefixAlpha1
  jobsd.pause          POST /jobsd/v1/jobs/{name}/pause      (jobsd sidecars: what needs jobsd's
  jobsd.labels         POST /jobsd/v1/jobs/{name} with labels  scheduler; refused in front of a
  jobsd.if_match       POST /jobsd/v1/jobs/{name} with If-Match  Dapr Scheduler)
                       (the ETag from GET /jobsd/v1/jobs/{name}, or a made-up one when refused)

usage: run.py [--tsv OUT] [--logs DIR] ROW...
Needs JOBSD_BIN, DAPR_CACHE (e2e/dapr/skew.sh sets both), etcd for @jobsd3, grpcio and the
Dapr Python SDK's protos (e2e/.venv). Prints one line per check; exit 1 when a check fails.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from dapr.proto.runtime.v1 import dapr_pb2_grpc, jobs_pb2

APP_ID = "skew"
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


def http(method, url, body=None, headers=None, timeout=15):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return 0, str(e)


def until(check, seconds, step=0.2):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


# ------------------------------------------------------------------ the app


class App:
    """Records job triggers (name -> bodies) and reminder ticks (actor/reminder -> count)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.jobs = {}
        self.ticks = {}
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_):
                pass

            def answer(self, code, body=b""):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/dapr/config":
                    self.answer(200, json.dumps({"entities": ["Counter"], "actorIdleTimeout": "1h"}).encode())
                else:
                    self.answer(200 if self.path == "/healthz" else 404)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode(errors="replace") if n else ""
                parts = self.path.split("?")[0].strip("/").split("/")
                with app.lock:
                    if parts[0] == "job" and len(parts) == 2:
                        app.jobs.setdefault(parts[1], []).append(body)
                    elif parts[:2] == ["actors", "Counter"] and parts[3:5] == ["method", "remind"]:
                        key = f"{parts[2]}/{parts[5]}"
                        app.ticks[key] = app.ticks.get(key, 0) + 1
                    elif parts[:2] != ["actors", "Counter"]:
                        return self.answer(404)
                self.answer(200, b"{}")

            do_PUT = do_POST

            def do_DELETE(self):
                self.answer(200)

        ThreadingHTTPServer.daemon_threads = True
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def got(self, job):
        with self.lock:
            return list(self.jobs.get(job, []))

    def ticked(self, key):
        with self.lock:
            return self.ticks.get(key, 0)


# ------------------------------------------------------------------ processes


class Row:
    def __init__(self, name, logs_dir):
        self.name = name
        self.work = tempfile.mkdtemp(prefix="jobsd-skew-")
        self.logs_dir = logs_dir
        self.procs = []
        self.jobsd = os.environ["JOBSD_BIN"]
        self.cache = os.environ["DAPR_CACHE"]

    def spawn(self, name, argv):
        log = open(os.path.join(self.work, name + ".log"), "wb")
        env = {k: v for k, v in os.environ.items() if k not in ("DAPR_API_TOKEN", "APP_ID", "APP_PORT")}
        env["NO_COLOR"] = "1"
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.work, env=env)
        self.procs.append((name, p))
        return p

    def need(self, what, check, seconds):
        if not until(check, seconds):
            dead = [n for n, p in self.procs if p.poll() is not None]
            raise RuntimeError(f"{what} not within {seconds}s" + (f" (exited: {', '.join(dead)})" if dead else ""))

    def jobsd_scheduler(self, i, etcd=None, replicas=1):
        port, metrics = free_port(), free_port()
        argv = [self.jobsd, "scheduler", "--id", f"s{i}", "--listen-address", "127.0.0.1",
                "--port", str(port), "--metrics-listen-address", "127.0.0.1",
                "--metrics-port", str(metrics), "--healthz-port", str(free_port()),
                "--placement-enabled", "--data-dir", os.path.join(self.work, f"sched-{i}")]
        if etcd:
            argv += ["--etcd-endpoints", etcd]
        self.spawn(f"jobsd-scheduler-{i}", argv)
        self.need(f"jobsd scheduler s{i}", lambda: http("GET", f"http://127.0.0.1:{metrics}/metrics")[0] == 200, 60)
        return f"127.0.0.1:{port}"

    def etcd(self):
        client, peer = free_port(), free_port()
        self.spawn("etcd", ["etcd", "--name", "e0", "--data-dir", os.path.join(self.work, "etcd"),
                            "--listen-client-urls", f"http://127.0.0.1:{client}",
                            "--advertise-client-urls", f"http://127.0.0.1:{client}",
                            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                            "--initial-cluster", f"e0=http://127.0.0.1:{peer}"])
        url = f"http://127.0.0.1:{client}"
        self.need("etcd", lambda: http("GET", f"{url}/health")[0] == 200, 30)
        return url

    def dapr_scheduler(self, version):
        port, healthz, metrics, client, peer = (free_port() for _ in range(5))
        self.spawn(f"dapr-scheduler-{version}", [
            os.path.join(self.cache, version, "scheduler"), "--id", "sched0",
            "--listen-address", "127.0.0.1", "--port", str(port), "--healthz-port", str(healthz),
            "--metrics-port", str(metrics), "--etcd-data-dir", os.path.join(self.work, "etcd"),
            "--etcd-client-port", str(client), "--etcd-initial-cluster", f"sched0=http://127.0.0.1:{peer}",
            "--etcd-client-listen-address", "127.0.0.1"])
        self.need(f"dapr scheduler {version}", lambda: http("GET", f"http://127.0.0.1:{healthz}/healthz")[0] == 200, 60)
        return f"127.0.0.1:{port}"

    def dapr_placement(self, version):
        port, healthz, raft = free_port(), free_port(), free_port()
        self.spawn(f"dapr-placement-{version}", [
            os.path.join(self.cache, version, "placement"), "--id", "p0",
            "--listen-address", "127.0.0.1", "--port", str(port), "--healthz-port", str(healthz),
            "--metrics-port", str(free_port()), "--initial-cluster", f"p0=127.0.0.1:{raft}"])
        self.need(f"dapr placement {version}", lambda: http("GET", f"http://127.0.0.1:{healthz}/healthz")[0] == 200, 60)
        return f"127.0.0.1:{port}"

    def daprd(self, version, app_port, sched, placement):
        resources = os.path.join(self.work, "resources")
        os.makedirs(resources, exist_ok=True)
        with open(os.path.join(resources, "actorstore.yaml"), "w") as f:
            f.write(ACTOR_STORE)
        self.http, self.grpc = free_port(), free_port()
        self.spawn(f"daprd-{version}", [
            os.path.join(self.cache, version, "daprd"), "--mode", "standalone", "--app-id", APP_ID,
            "--app-port", str(app_port), "--app-channel-address", "127.0.0.1",
            "--dapr-listen-addresses", "127.0.0.1", "--dapr-http-port", str(self.http),
            "--dapr-grpc-port", str(self.grpc), "--dapr-internal-grpc-port", str(free_port()),
            "--metrics-port", str(free_port()), "--log-level", "info",
            "--scheduler-host-address", sched, "--placement-host-address", placement,
            "--resources-path", resources])

    def jobsd_sidecar(self, app_port, sched):
        self.http, self.grpc = free_port(), free_port()
        self.spawn("jobsd-sidecar", [
            self.jobsd, "--app-id", APP_ID, "--app-port", str(app_port),
            "--dapr-listen-addresses", "127.0.0.1", "--dapr-http-port", str(self.http),
            "--dapr-grpc-port", str(self.grpc), "--dapr-internal-grpc-port", str(free_port()),
            "--metrics-listen-address", "127.0.0.1", "--metrics-port", str(free_port()),
            "--data-dir", os.path.join(self.work, "sidecar"), "--scheduler-host-address", sched])

    def stop(self, failed):
        # The sidecar first, etcd last: what each logs is then about itself, not its peers going.
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        # The warnings and errors of every process, kept with the results (small).
        if self.logs_dir:
            os.makedirs(self.logs_dir, exist_ok=True)
            with open(os.path.join(self.logs_dir, self.name.replace("@", "_at_") + ".log"), "w") as out:
                for name, _ in self.procs:
                    lines = open(os.path.join(self.work, name + ".log"), errors="replace").read().splitlines()
                    keep = [l for l in lines if re.search(r"level=(warn|error|fatal)|\b(WARN|ERROR)\b|panic", l)]
                    out.write(f"== {name}: {len(lines)} lines, {len(keep)} warn/error (last 25)\n")
                    out.write("".join(l[:400] + "\n" for l in keep[-25:]))
        if failed and os.environ.get("E2E_KEEP_TMP") == "1":
            print(f"skew: logs kept in {self.work}", file=sys.stderr)
        else:
            shutil.rmtree(self.work, ignore_errors=True)


# ------------------------------------------------------------------ checks


def checks(row, app, jobsd_sidecar):
    """Yields (check, result, note); result pass | fail | works | refused | na."""
    api = f"http://127.0.0.1:{row.http}"
    jobs = f"{api}/v1.0-alpha1/jobs"

    # job.oneshot
    code, body = http("POST", f"{jobs}/skew-once", {"dueTime": "1s", "data": {"v": "once"}})
    if code != 204:
        yield "job.oneshot", "fail", f"create: {code} {body[:300]}"
    else:
        until(lambda: app.got("skew-once"), 20)
        time.sleep(2)
        got = app.got("skew-once")
        ok = len(got) == 1 and json.loads(got[0] or "null") == {"v": "once"}
        yield "job.oneshot", "pass" if ok else "fail", f"app got {got!r}"

    # job.repeat
    code, body = http("POST", f"{jobs}/skew-rep", {"schedule": "@every 1s", "dueTime": "2s", "repeats": 3,
                                                   "data": {"v": "rep"}})
    if code != 204:
        yield "job.repeat", "fail", f"create: {code} {body[:300]}"
    else:
        gcode, gbody = http("GET", f"{jobs}/skew-rep")
        until(lambda: len(app.got("skew-rep")) >= 3, 20)
        time.sleep(2.5)
        n = len(app.got("skew-rep"))
        got_ok = gcode == 200 and '"@every 1s"' in gbody and '"repeats":3' in gbody.replace(" ", "")
        yield "job.repeat", "pass" if got_ok and n == 3 else "fail", f"GET {gcode} {gbody[:200]}; app got {n}"

    # job.delete
    code, body = http("POST", f"{jobs}/skew-forever", {"schedule": "@every 1s", "data": {"v": "forever"}})
    if code != 204:
        yield "job.delete", "fail", f"create: {code} {body[:300]}"
    else:
        ticked = until(lambda: len(app.got("skew-forever")) >= 2, 20)
        dcode, dbody = http("DELETE", f"{jobs}/skew-forever")
        gcode, gbody = http("GET", f"{jobs}/skew-forever")
        n0 = len(app.got("skew-forever"))
        time.sleep(3)
        more = len(app.got("skew-forever")) - n0
        # daprd answers a job that is not there with 500 DAPR_SCHEDULER_GET_JOB (NotFound).
        gone = gcode == 404 or (gcode == 500 and "not found" in gbody.lower())
        ok = ticked and dcode == 204 and gone and more <= 1
        yield "job.delete", "pass" if ok else "fail", (f"ticks before {n0}, DELETE {dcode} {dbody[:100]}, "
                                                       f"GET {gcode} {gbody[:160]}, ticks after {more}")

    # job.nodata
    code, body = http("POST", f"{jobs}/skew-nodata", {"dueTime": "2s"})
    if code != 204:
        yield "job.nodata", "fail", f"create: {code} {body[:300]}"
    else:
        gcode, gbody = http("GET", f"{jobs}/skew-nodata")
        until(lambda: app.got("skew-nodata"), 15)
        time.sleep(2)
        n = len(app.got("skew-nodata"))
        yield "job.nodata", "pass" if gcode == 200 and n == 1 else "fail", f"GET {gcode} {gbody[:200]}; app got {n}"
    http("DELETE", f"{jobs}/skew-nodata")

    # reminder
    actor = f"{api}/v1.0/actors/Counter/r1"
    placed = until(lambda: http("PUT", f"{actor}/method/ping", {})[0] == 200, 60, 0.5)
    code, body = http("POST", f"{actor}/reminders/tick", {"dueTime": "1s", "period": "1s", "data": "x"})
    if not placed or code not in (200, 204):
        pc, pb = http("PUT", f"{actor}/method/ping", {})
        yield "reminder", "fail", f"actor call {pc} {pb[:200]}; register {code} {body[:300]}"
    else:
        gcode, gbody = http("GET", f"{actor}/reminders/tick")
        ticked = until(lambda: app.ticked("r1/tick") >= 3, 20)
        dcode, dbody = http("DELETE", f"{actor}/reminders/tick")
        n0 = app.ticked("r1/tick")
        time.sleep(3)
        more = app.ticked("r1/tick") - n0
        ok = gcode == 200 and ticked and dcode in (200, 204) and more <= 1
        yield "reminder", "pass" if ok else "fail", (f"GET {gcode} {gbody[:120]}, ticks {n0}, "
                                                     f"DELETE {dcode} {dbody[:100]}, ticks after {more}")

    # Newer APIs over gRPC: what a version lacks, and how it says so.
    stub = dapr_pb2_grpc.DaprStub(grpc.insecure_channel(f"127.0.0.1:{row.grpc}"))
    http("POST", f"{jobs}/skew-list", {"schedule": "@every 1h"})
    for check, call in (
            ("jobs.list", lambda: stub.ListJobsAlpha1(jobs_pb2.ListJobsRequestAlpha1(), timeout=15)),
            ("jobs.delete_prefix", lambda: stub.DeleteJobsByPrefixAlpha1(
                jobs_pb2.DeleteJobsByPrefixRequestAlpha1(name_prefix="skew-list"), timeout=15))):
        try:
            r = call()
            note = f"{len(r.jobs)} jobs" if check == "jobs.list" else "ok"
            if check == "jobs.delete_prefix":
                note += f"; GET after: {http('GET', f'{jobs}/skew-list')[0]}"
            yield check, "works", note
        except grpc.RpcError as e:
            yield check, "refused", f"{e.code().name}: {e.details()}"

    if not jobsd_sidecar:
        for check in ("jobsd.pause", "jobsd.labels", "jobsd.if_match"):
            yield check, "na", "daprd serves no /jobsd/v1 routes"
        return
    mine = f"{api}/jobsd/v1/jobs"
    http("POST", f"{jobs}/skew-p", {"schedule": "@every 1h"})
    code, body = http("POST", f"{mine}/skew-p/pause", {"note": "skew"})
    yield "jobsd.pause", "works" if code in (200, 204) else "refused", f"{code} {body[:300]}"
    code, body = http("POST", f"{mine}/skew-l", {"schedule": "@every 1h", "labels": {"team": "a"}})
    stored = http("GET", f"{jobs}/skew-l")[0]
    yield "jobsd.labels", "works" if code in (200, 201, 204) else "refused", f"{code} {body[:300]}; GET after: {stored}"
    # If-Match with the job's ETag from jobsd's GET (which a Dapr Scheduler cannot answer).
    gcode, gbody = http("GET", f"{mine}/skew-p")
    etag = json.loads(gbody).get("etag") if gcode == 200 else '"0123456789abcdef"'
    code, body = http("POST", f"{mine}/skew-p", {"schedule": "@every 2h", "overwrite": True}, {"If-Match": etag})
    yield "jobsd.if_match", "works" if code in (200, 201, 204) else "refused", f"GET {gcode}; {code} {body[:300]}"


def run_row(name, logs_dir):
    m = re.fullmatch(r"(jobsd|daprd-v[\d.]+)@(jobsd3?|dapr-v[\d.]+)", name)
    if not m:
        raise SystemExit(f"skew: unknown row {name} (SIDECAR@SCHEDULER: SIDECAR jobsd or daprd-<v>, "
                         "SCHEDULER jobsd, jobsd3 or dapr-<v>)")
    side, cp = m.groups()
    row, app = Row(name, logs_dir), App()
    load0 = os.getloadavg()[0]
    results, failed = [], True
    try:
        if cp == "jobsd3":
            etcd = row.etcd()
            sched = placement = ",".join(row.jobsd_scheduler(i, etcd) for i in range(3))
        elif cp == "jobsd":
            sched = placement = row.jobsd_scheduler(0)
        else:
            sched = row.dapr_scheduler(cp[len("dapr-"):])
            placement = None if side == "jobsd" else row.dapr_placement(cp[len("dapr-"):])
        if side == "jobsd":
            row.jobsd_sidecar(app.port, sched)
        else:
            row.daprd(side[len("daprd-"):], app.port, sched, placement)
        row.need("sidecar healthz", lambda: http("GET", f"http://127.0.0.1:{row.http}/v1.0/healthz")[0] == 204, 60)
        for check, result, note in checks(row, app, side == "jobsd"):
            results.append((check, result, note))
            print(f"{name}\t{check}\t{result}\t{note}".replace("\n", " "), flush=True)
        failed = any(r == "fail" for _, r, _ in results)
    except RuntimeError as e:
        results.append(("start", "fail", str(e)))
        print(f"{name}\tstart\tfail\t{e}", flush=True)
    finally:
        row.stop(failed)
        app.server.shutdown()
    load = f"load {load0:.2f} -> {os.getloadavg()[0]:.2f} (1-min, {os.cpu_count()} cores)"
    results.append(("load", "na", load))
    print(f"{name}\tload\tna\t{load}", flush=True)
    return [(name, *r) for r in results]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsv", help="append the results to this file (row, check, result, note)")
    ap.add_argument("--logs", help="keep each row's warnings and errors here")
    ap.add_argument("rows", nargs="+")
    args = ap.parse_args()
    rows = []
    for name in args.rows:
        rows += run_row(name, args.logs)
    if args.tsv:
        with open(args.tsv, "a") as f:
            for r in rows:
                f.write("\t".join(x.replace("\t", " ").replace("\n", " ") for x in r) + "\n")
    sys.exit(1 if any(r[2] == "fail" for r in rows) else 0)


if __name__ == "__main__":
    main()
