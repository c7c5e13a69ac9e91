#!/usr/bin/env python3
"""An actor app for the multi-host placement run: hosts actor type `Counter` and counts, per
actor, activations, method calls and reminder ticks (with their times), answering what it
saw on `GET /stats`. Plain HTTP (stdlib), as daprd's actor protocol is:
`GET /dapr/config`, `GET /healthz`, `PUT /actors/Counter/<id>/method/<m>` (reminders come as
`method/remind/<name>`), `DELETE /actors/Counter/<id>` (deactivation).

usage: counter_app.py PORT HOST_NAME
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
active = set()          # actors active here now
activations = 0         # actors activated here (first call while not active)
deactivations = 0
ticks = {}              # actor -> [monotonic seconds of each tick]
calls = 0
intervals = []          # [actor, activated at, deactivated at or None] (monotonic seconds)
open_interval = {}      # actor -> its open entry in intervals
host_name = sys.argv[2]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args):
        pass

    def answer(self, code, body=b"", ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        if self.path == "/dapr/config":
            self.answer(200, json.dumps({
                "entities": ["Counter"],
                "actorIdleTimeout": "1h",
                "drainOngoingCallTimeout": "5s",
                "drainRebalancedActors": True,
            }).encode())
        elif self.path == "/healthz":
            self.answer(200)
        elif self.path.startswith("/stats"):
            with lock:
                body = {
                    "host": host_name,
                    "active": sorted(active),
                    "activations": activations,
                    "deactivations": deactivations,
                    "calls": calls,
                    "ticks": {a: t for a, t in ticks.items()},
                    "intervals": intervals,
                    "now": time.monotonic(),
                }
            self.answer(200, json.dumps(body).encode())
        else:
            self.answer(404)

    def do_PUT(self):
        global activations, calls
        parts = self.path.split("?")[0].strip("/").split("/")
        self.body()
        if len(parts) >= 4 and parts[0] == "actors" and parts[2]:
            actor = parts[2]
            with lock:
                if actor not in active:
                    active.add(actor)
                    activations += 1
                    entry = [actor, time.monotonic(), None]
                    intervals.append(entry)
                    open_interval[actor] = entry
                calls += 1
                if parts[3] == "method" and len(parts) >= 6 and parts[4] == "remind":
                    ticks.setdefault(actor, []).append(time.monotonic())
            self.answer(200, json.dumps({"host": host_name}).encode())
        else:
            self.answer(404)

    def do_POST(self):
        self.do_PUT()

    def do_DELETE(self):
        global deactivations
        parts = self.path.strip("/").split("/")
        self.body()
        if len(parts) == 3 and parts[0] == "actors":
            with lock:
                if parts[2] in active:
                    active.discard(parts[2])
                    deactivations += 1
                    open_interval.pop(parts[2])[2] = time.monotonic()
        self.answer(200)


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 1024
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
