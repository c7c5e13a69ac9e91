"""The misbehaving app of e2e/faults/app.sh: jobsd delivers jobs to it (`POST /job/<name>`) and
the job's name says how it misbehaves. A raw asyncio TCP server, so that it can answer things no
HTTP framework would send:

    python3 faults_app_server.py --port PORT --log EVENTS.jsonl [--flap]

    hang-*      reads the request and never answers (the connection stays open)
    garbage-*   answers bytes that are not HTTP, then closes
    cut-*       closes in the middle of the status line and headers
    short-*     answers 200 with a body shorter than its Content-Length, then closes
    huge-*      answers 500 with a 50 MiB body, written until jobsd stops reading (the bytes
                it managed to write are logged when the connection ends)
    slow-*      answers 200 after 10 s; logs how many slow calls were in flight on arrival
    fail-*      answers 500 with a short body
    anything else answers 200 at once
    GET /healthz  200; with --flap, 200 and 503 in turn, probe by probe (not logged): by
                  count rather than by the clock, so that probes a whole number of
                  seconds apart cannot all land on the unhealthy side

Every job call is appended to EVENTS.jsonl on arrival, flushed before any answer:
    {"t": <time.time()>, "name", "attempt": <Jobsd-Attempt>, "scheduled": <Jobsd-Scheduled-Time>,
     "inflight": <slow calls in flight, this one included>}
and `{"t", "name", "sent": <bytes>}` when a huge answer ends. Standard library only.
"""

import argparse
import asyncio
import json
import time
import urllib.parse

HUGE = 50 << 20
# Health probes answered so far (--flap alternates on it).
PROBES = {"n": 0}
CHUNK = b"x" * (64 << 10)
LOG = None
INFLIGHT = {"slow": 0}
FLAP = False


def record(event: dict) -> None:
    LOG.write(json.dumps(event, separators=(",", ":")) + "\n")
    LOG.flush()


async def read_request(reader):
    """(method, path, headers) of the next request, its body read; None at the end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0") or 0)
    if n:
        await reader.readexactly(n)
    return method, path, headers


def status(code: int, reason: str, body: bytes = b"") -> bytes:
    return (f"HTTP/1.1 {code} {reason}\r\nContent-Length: {len(body)}\r\n"
            f"Content-Type: text/plain\r\n\r\n").encode() + body


async def serve(reader, writer):
    try:
        while True:
            req = await read_request(reader)
            if req is None:
                return
            method, path, headers = req
            if method == "GET" and path == "/healthz":
                ok = not FLAP or PROBES["n"] % 2 == 0
                PROBES["n"] += 1
                writer.write(status(200, "OK") if ok else status(503, "Unavailable"))
                await writer.drain()
                continue
            name = urllib.parse.unquote(path[len("/job/"):]) if path.startswith("/job/") else ""
            event = {"t": time.time(), "name": name, "attempt": headers.get("jobsd-attempt"),
                     "scheduled": headers.get("jobsd-scheduled-time")}
            if name.startswith("slow-"):
                INFLIGHT["slow"] += 1
                event["inflight"] = INFLIGHT["slow"]
            record(event)
            if name.startswith("hang-"):
                # Wait for jobsd to give up (it closes the connection).
                await reader.read()
                return
            if name.startswith("garbage-"):
                writer.write(b"this is not HTTP at all\r\n\r\n\x00\xff")
                await writer.drain()
                return
            if name.startswith("cut-"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Le")
                await writer.drain()
                return
            if name.startswith("short-"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
                await writer.drain()
                return
            if name.startswith("huge-"):
                sent = 0
                try:
                    writer.write(f"HTTP/1.1 500 Internal Server Error\r\nContent-Length: {HUGE}"
                                 "\r\nContent-Type: text/plain\r\n\r\n".encode())
                    while sent < HUGE:
                        writer.write(CHUNK)
                        await writer.drain()
                        sent += len(CHUNK)
                except ConnectionError:
                    pass
                record({"t": time.time(), "name": name, "sent": sent})
                return
            if name.startswith("slow-"):
                try:
                    await asyncio.sleep(10)
                finally:
                    INFLIGHT["slow"] -= 1
            if name.startswith("fail-"):
                writer.write(status(500, "Internal Server Error", b"failed on purpose"))
            else:
                writer.write(status(200, "OK"))
            await writer.drain()
    except ConnectionError:
        return
    finally:
        writer.close()


async def main():
    global LOG, FLAP
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--flap", action="store_true")
    args = p.parse_args()
    FLAP = args.flap
    LOG = open(args.log, "a", encoding="utf-8")
    server = await asyncio.start_server(serve, "127.0.0.1", args.port, backlog=4096,
                                        reuse_address=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
