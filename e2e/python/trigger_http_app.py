"""A recording HTTP app for e2e/triggers.sh: the app jobsd delivers jobs to (`POST /job/<name>`).

    python3 trigger_http_app.py --log EVENTS.jsonl --port-file PORT_FILE

Standard library only. It listens on 127.0.0.1 on a port the kernel picks, writes that port to
PORT_FILE (atomically, once listening), and appends one JSON line per request to EVENTS.jsonl,
flushed *before* it answers, so a delivery jobsd saw acknowledged is always in the log:

    {"t": <arrival, time.time()>, "method": "POST", "path": <raw request target>,
     "name": <path-decoded name after /job/, or null>, "headers": [[name, value], ...],
     "body_hex": <raw body bytes, hex>, "status": <the status answered>}

Answers (by the decoded job name): `fail-*` → 500, `gone-*` → 404, anything else under /job/
→ 200; any other path or method → 404 (recorded too, with "name": null, so strays show up).
HTTP/1.1 keep-alive, one thread per connection, as jobsd keeps a pool of connections.
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
LOG = None  # the open events file


def record(event: dict) -> None:
    line = json.dumps(event, separators=(",", ":")) + "\n"
    with LOCK:
        LOG.write(line)
        LOG.flush()


def status_for(name):
    if name is None:
        return 404
    if name.startswith("fail-"):
        return 500
    if name.startswith("gone-"):
        return 404
    return 200


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass  # the JSON-lines log is the record; keep stderr for errors

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()  # CRLF after the chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self):
        t = time.time()
        body = self._read_body()
        name = None
        path = self.path.split("?", 1)[0]
        if self.command == "POST" and path.startswith("/job/"):
            name = urllib.parse.unquote(path[len("/job/"):], errors="strict")
        status = status_for(name)
        record({
            "t": t,
            "method": self.command,
            "path": self.path,
            "name": name,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_hex": body.hex(),
            "status": status,
        })
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = _handle
    do_GET = _handle
    do_PUT = _handle
    do_DELETE = _handle


def main() -> int:
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    LOG = open(args.log, "a", encoding="utf-8")
    # http.server listens with a backlog of 5: when a burst of deliveries opens dozens of
    # connections at once (a replica's share taken over, replayed ticks) the kernel drops the
    # SYNs beyond it and the client retries only after 1, 3, 7, 15, 31 s (measured: stalls of
    # up to 33 s). Real app servers listen with a backlog of hundreds, as this one does.
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, args.port_file)
    print(f"trigger_http_app listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
