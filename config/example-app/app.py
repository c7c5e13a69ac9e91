"""A minimal app for the compose examples: answers jobsd's job triggers (`POST /job/<name>`)
with 200 and prints each one with its execution context. Standard library only."""

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path.startswith("/job/"):
            print(json.dumps({
                "job": self.path[len("/job/"):],
                "executionId": self.headers.get("Jobsd-Execution-Id"),
                "attempt": self.headers.get("Jobsd-Attempt"),
                "scheduledTime": self.headers.get("Jobsd-Scheduled-Time"),
                "data": body.decode("utf-8", "replace"),
            }), flush=True)
            self.send_response(200)
        else:
            self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):  # the trigger line above says enough
        pass


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8080)
    port = parser.parse_args().port
    print(f"example app listening on :{port}", flush=True)
    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
