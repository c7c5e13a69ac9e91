"""The HTTP app of e2e/policies.sh: jobsd delivers jobs to it (`POST /job/<name>`), and the job's
name tells it how to answer, so one app serves every scenario:

    python3 policy_http_app.py --port PORT --log EVENTS.jsonl

    fail-*        500, always
    flaky<N>-*    500 for the first N calls of that name, then 200 (e.g. `flaky2-x`)
    hang-*        no answer for HANG_SECONDS (jobsd's `policy.timeout` gives up first), then 200
    slow<S>-*     200 after S seconds (a whole number; e.g. `slow3-skip`): a handler slower
                  than its schedule, for `policy.overlap`
    anything else 200
    GET /healthz  200, not recorded (jobsd's app health probes, every second)

"Down" is this process not running: e2e/policies.sh stops it and starts it again on the same
port (given with --port, not picked here, so that jobsd's `--app-port` stays right; the listener
sets SO_REUSEADDR). Standard library only.

Every other request is appended to EVENTS.jsonl as one JSON line, flushed *before* the answer,
so a delivery jobsd saw answered is always in the log (a hanging one is logged on arrival):

    {"t": <arrival, time.time()>, "method", "path", "name": <decoded name after /job/ or null>,
     "status": <the status answered, or "hang">, "pid": <this process>}

A `slow<S>-*` call's line has one more member, `"inflight"`: how many calls of that name were
in flight on its arrival, itself included (so 1 when none overlapped it). A call counts as in
flight until just before its answer is written: jobsd cannot send the next call of a job it
runs one at a time before it has read that answer, so such a job always shows 1.
"""

import argparse
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANG_SECONDS = 60.0
FLAKY = re.compile(r"^flaky(\d+)-")
SLOW = re.compile(r"^slow(\d+)-")
LOCK = threading.Lock()
LOG = None  # the open events file
CALLS = {}  # name -> calls so far (for flaky<N>-*)
INFLIGHT = {}  # name -> calls in flight now (for slow<S>-*)


def record(event: dict) -> None:
    line = json.dumps(event, separators=(",", ":")) + "\n"
    with LOCK:
        LOG.write(line)
        LOG.flush()


def answer_for(name):
    """The status to answer a call for job `name` with, or "hang"."""
    if name is None:
        return 404
    if name.startswith("fail-"):
        return 500
    if name.startswith("hang-"):
        return "hang"
    if SLOW.match(name):
        return 200
    m = FLAKY.match(name)
    if m:
        with LOCK:
            CALLS[name] = CALLS.get(name, 0) + 1
            n = CALLS[name]
        return 500 if n <= int(m.group(1)) else 200
    return 200


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass  # the JSON-lines log is the record

    def _reply(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _handle(self):
        t = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        if self.command == "GET" and path == "/healthz":
            self._reply(200)
            return
        name = None
        if self.command == "POST" and path.startswith("/job/"):
            name = urllib.parse.unquote(path[len("/job/"):], errors="strict")
        status = answer_for(name)
        event = {"t": t, "method": self.command, "path": self.path, "name": name,
                 "status": status, "pid": os.getpid()}
        slow = SLOW.match(name or "")
        if slow:
            with LOCK:
                INFLIGHT[name] = INFLIGHT.get(name, 0) + 1
                event["inflight"] = INFLIGHT[name]
        try:
            record(event)
            if slow:
                time.sleep(int(slow.group(1)))
            elif status == "hang":
                # jobsd cancels the call (closes the connection) at its timeout; the answer
                # after the sleep then goes nowhere, which is fine.
                time.sleep(HANG_SECONDS)
                status = 200
        finally:
            if slow:
                with LOCK:
                    INFLIGHT[name] -= 1
        try:
            self._reply(status)
        except OSError:
            pass

    do_POST = _handle
    do_GET = _handle
    do_PUT = _handle
    do_DELETE = _handle


def main() -> int:
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    LOG = open(args.log, "a", encoding="utf-8")
    # A backlog of hundreds, as real app servers have (see trigger_http_app.py: with
    # http.server's 5, replayed ticks opening many connections at once stall on SYN retries).
    ThreadingHTTPServer.request_queue_size = 1024
    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"policy_http_app listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
