"""The HTTP app of e2e/steer_async.sh (async completion, README "Steer your jobs"): jobsd
delivers jobs to it (`POST /job/<name>`); jobs it takes "later" it answers `202 Accepted` with
`Jobsd-Async: true` and ends through jobsd's API, from a worker thread, as a real app would:

    python3 async_app.py --port PORT --jobsd http://127.0.0.1:HTTP_PORT --log EVENTS.jsonl

    async-done-*      202; the worker heartbeats every second (three times, so a 2 s lease is
                      outlived), then completes the execution
    async-failonce-*  202; the first delivery is failed with error "boom", later ones completed
    async-ignore-*    202 and nothing more: its lease runs out
    async-hold-*      202 and nothing more: the checks end it themselves (across a kill -9)
    plain202-*        a plain 202, no header: Dapr's success unless the job has policy.lease
    anything else     200

The execution id is the `Jobsd-Execution-Id` request header; a jobsd that does not send it yet
is served by deriving the id as jobsd does (a version 5 UUID of the job's key and nominal time),
from the nominal time the checks put in the job's data as `{"tick": "<RFC 3339>"}`. Standard
library only.

Every delivery and every call on jobsd's API is appended to EVENTS.jsonl as one JSON line:

    {"kind": "delivery", "t", "name", "id", "attempt", "status"}
    {"kind": "call", "t", "name", "id", "what": heartbeat|complete|fail, "status", "answer"}
"""

import argparse
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# jobsd's execution-id namespace (src/trigger.rs EXECUTION_NAMESPACE).
EXECUTION_NAMESPACE = uuid.UUID("6b2e0c4f-3a57-5d8e-9f41-2c7ad0e3b915")
KEY_PREFIX = "app||default||myapp||"
LOCK = threading.Lock()
LOG = None
JOBSD = ""
CALLS = {}  # name -> deliveries so far


def record(event: dict) -> None:
    event["t"] = time.time()
    line = json.dumps(event, separators=(",", ":")) + "\n"
    with LOCK:
        LOG.write(line)
        LOG.flush()


def derived_id(name: str, tick: str) -> str:
    """jobsd's id of the execution of job `name` at nominal time `tick` (RFC 3339 UTC, whole
    seconds or a fraction): uuid5 over `<key>@<tick with nine fraction digits>Z`."""
    base, _, frac = tick.rstrip("Z").partition(".")
    nanos = (frac + "000000000")[:9]
    return str(uuid.uuid5(EXECUTION_NAMESPACE, f"{KEY_PREFIX}{name}@{base}.{nanos}Z"))


def call(name: str, execution_id: str, what: str, body=None) -> int:
    """POST /jobsd/v1/executions/{id}/{what}; the status (recorded with the answer)."""
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request(f"{JOBSD}/jobsd/v1/executions/{execution_id}/{what}",
                                 data=data, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            status, answer = resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        status, answer = err.code, err.read().decode()
    except OSError as err:  # jobsd down (killed by the suite): recorded, not retried
        status, answer = 0, str(err)
    record({"kind": "call", "name": name, "id": execution_id, "what": what,
            "status": status, "answer": answer})
    return status


def work(name: str, execution_id: str, n: int) -> None:
    """What the app does after answering "later"."""
    if name.startswith("async-done-"):
        for _ in range(3):
            time.sleep(1.0)
            call(name, execution_id, "heartbeat")
        call(name, execution_id, "complete")
    elif name.startswith("async-failonce-"):
        time.sleep(0.2)
        if n == 1:
            call(name, execution_id, "fail", {"error": "boom"})
        else:
            call(name, execution_id, "complete")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass

    def do_GET(self):
        self.answer(200 if self.path == "/healthz" else 404, {})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if not self.path.startswith("/job/"):
            self.answer(404, {})
            return
        name = urllib.parse.unquote(self.path[len("/job/"):])
        execution_id = self.headers.get("Jobsd-Execution-Id")
        if not execution_id:
            try:
                execution_id = derived_id(name, json.loads(body)["tick"])
            except (ValueError, KeyError, TypeError):
                execution_id = None
        with LOCK:
            CALLS[name] = CALLS.get(name, 0) + 1
            n = CALLS[name]
        if name.startswith("async-"):
            status, headers = 202, {"Jobsd-Async": "true"}
        elif name.startswith("plain202-"):
            status, headers = 202, {}
        else:
            status, headers = 200, {}
        record({"kind": "delivery", "name": name, "id": execution_id,
                "attempt": self.headers.get("Jobsd-Attempt"), "status": status})
        self.answer(status, headers)
        if status == 202 and execution_id:
            threading.Thread(target=work, args=(name, execution_id, n), daemon=True).start()

    def answer(self, status: int, headers: dict) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()


def main() -> int:
    global LOG, JOBSD
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--jobsd", required=True, help="jobsd's HTTP API, http://host:port")
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    LOG = open(args.log, "a", encoding="utf-8")
    JOBSD = args.jobsd.rstrip("/")
    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"async app on 127.0.0.1:{args.port}, jobsd at {JOBSD}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
