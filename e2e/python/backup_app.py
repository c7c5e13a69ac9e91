"""The HTTP app of e2e/backup.sh: records every delivery with jobsd's execution context, so the
suite can tell that no execution attempt reached it twice across a move from one jobsd to
another.

    python3 backup_app.py --port PORT --log EVENTS.jsonl

    fail-*        500, always (jobs kept mid-retry)
    anything else 200
    GET /healthz  200, not recorded

Each delivery is appended to EVENTS.jsonl, flushed before the answer:

    {"name", "id": <Jobsd-Execution-Id>, "attempt": <Jobsd-Attempt>,
     "scheduled": <Jobsd-Scheduled-Time>, "trigger": <Jobsd-Trigger>, "status", "t"}

Standard library only.
"""

import argparse
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
LOG = None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass

    def _answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):  # noqa: N802 - http.server's naming
        self._answer(200 if self.path == "/healthz" else 404)

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if not self.path.startswith("/job/"):
            self._answer(404)
            return
        name = urllib.parse.unquote(self.path[len("/job/"):])
        status = 500 if name.startswith("fail-") else 200
        event = {
            "name": name,
            "id": self.headers.get("Jobsd-Execution-Id"),
            "attempt": self.headers.get("Jobsd-Attempt"),
            "scheduled": self.headers.get("Jobsd-Scheduled-Time"),
            "trigger": self.headers.get("Jobsd-Trigger"),
            "status": status,
            "t": time.time(),
        }
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with LOCK:
            LOG.write(line)
            LOG.flush()
        self._answer(status)


def main() -> None:
    global LOG
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    LOG = open(args.log, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
