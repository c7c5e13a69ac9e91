"""The app behind the sidecars of e2e/dapr/cli.sh: a minimal Dapr app (standard library only)
that hosts two actor types and takes every job and reminder it is sent.

    python3 cli_app.py --port PORT --log EVENTS.jsonl

- `GET /dapr/config`: `{"entities": ["ReminderActor", "OtherActor"]}`, so the sidecar takes
  reminders for those types and asks the Scheduler for their triggers;
- `POST /job/<name>` (a job's trigger) and `PUT /actors/<type>/<id>/method/remind/<name>` (a
  reminder's): 200, recorded;
- any other `PUT`/`POST`/`DELETE` under `/actors/` (activation, deactivation): 200;
- `GET /healthz`: 200.

Every request is appended to EVENTS as one JSON line, flushed before the answer:
`{"t": time.time(), "method", "path", "kind": "job"|"reminder"|"other", "name"}` (name: the
job's name, or `<type>/<id>/<reminder>`).
"""

import argparse
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ACTOR_TYPES = ["ReminderActor", "OtherActor"]
LOCK = threading.Lock()
LOG = None


def record(event: dict) -> None:
    with LOCK:
        LOG.write(json.dumps(event, separators=(",", ":")) + "\n")
        LOG.flush()


def classify(method: str, path: str):
    parts = [urllib.parse.unquote(p) for p in path.split("?")[0].split("/") if p]
    if method == "POST" and len(parts) == 2 and parts[0] == "job":
        return "job", parts[1]
    # /actors/<type>/<id>/method/remind/<name>
    if len(parts) == 6 and parts[0] == "actors" and parts[3:5] == ["method", "remind"]:
        return "reminder", f"{parts[1]}/{parts[2]}/{parts[5]}"
    return "other", None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass

    def _answer(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _handle(self) -> None:
        self._body()
        kind, name = classify(self.command, self.path)
        record({"t": time.time(), "method": self.command, "path": self.path, "kind": kind,
                "name": name})
        if self.command == "GET" and self.path.startswith("/dapr/config"):
            self._answer(200, json.dumps({"entities": ACTOR_TYPES}).encode())
        elif self.command == "GET" and self.path.startswith("/healthz"):
            self._answer(200)
        elif kind != "other" or self.path.startswith("/actors/"):
            self._answer(200)
        else:
            self._answer(404)

    do_GET = do_POST = do_PUT = do_DELETE = _handle


def main() -> int:
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    LOG = open(args.log, "a", encoding="utf-8")
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
