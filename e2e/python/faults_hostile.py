"""Hostile clients against a running jobsd (e2e/faults/hostile.sh): oversized and broken
requests, slowloris, thousands of idle connections, HTTP/2 rapid reset. Every phase runs a
well-behaved client beside the attack and requires it to be served throughout; jobsd's memory
(VmRSS) is printed before and after and must stay bounded.

Standard library only (sockets, http.client, hand-built HTTP/2 frames), plus grpcio for the
gRPC checks.

    faults_hostile.py limits HTTP_PORT GRPC_PORT PID
    faults_hostile.py slowloris HTTP_PORT PID SECONDS
    faults_hostile.py idle HTTP_PORT GRPC_PORT PID CONNECTIONS
    faults_hostile.py rapid_reset HTTP_PORT GRPC_PORT PID SECONDS
"""

import http.client
import json
import socket
import struct
import sys
import threading
import time

from harness import Suite, run_phase_of

# jobsd's deadline for a connection's first byte and a request's headers (src/serve.rs
# HEADER_READ_TIMEOUT).
HEADER_TIMEOUT = 30
# How late a well-behaved call may be answered while an attack runs (generous: CI machines
# are small and shared).
PROMPT = 2.0


def rss_kib(pid: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def request(port: int, method: str, path: str, body: bytes = b"", headers=None, timeout=30):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def post_early_answered(port: int, path: str, body: bytes):
    """POSTs `body`, reading the answer while it is still being sent: jobsd answers an
    oversized body before reading it all and closes, so the send may fail midway."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)
    answer = bytearray()

    def read():
        try:
            while chunk := s.recv(65536):
                answer.extend(chunk)
        except OSError:
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                  "Connection: close\r\n\r\n".encode() + body)
    except OSError:
        pass  # the server stopped reading: its answer is what counts
    reader.join(30)
    s.close()
    head, _, rest = bytes(answer).partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0
    return status, rest


class Bystander:
    """A well-behaved client calling the API every 100 ms from its own thread: counts answers,
    failures and the slowest answer."""

    def __init__(self, port: int):
        self.port = port
        self.ok = 0
        self.failed = []
        self.slowest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        n = 0
        while not self._stop.is_set():
            n += 1
            started = time.monotonic()
            try:
                status, _ = request(self.port, "GET", "/v1.0/jobs", timeout=10)
                if status == 200:
                    self.ok += 1
                else:
                    self.failed.append(f"status {status}")
            except OSError as e:
                self.failed.append(repr(e))
            self.slowest = max(self.slowest, time.monotonic() - started)
            self._stop.wait(0.1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(15)

    def check(self, what: str):
        print(f"  bystander during {what}: {self.ok} answered, {len(self.failed)} failed, "
              f"slowest {self.slowest:.2f}s", flush=True)
        assert self.ok > 0, f"no call answered during {what}"
        assert not self.failed, f"{len(self.failed)} calls failed during {what}: {self.failed[:3]}"
        assert self.slowest < PROMPT, f"slowest call took {self.slowest:.2f}s during {what}"


def print_rss(pid: str, when: str) -> int:
    kib = rss_kib(pid)
    print(f"  jobsd RSS {when}: {kib / 1024:.1f} MiB", flush=True)
    return kib


# ---------------------------------------------------------------- limits

def limits(http_port: str, grpc_port: str, pid: str) -> Suite:
    suite = Suite("limits")
    port = int(http_port)

    @suite.check
    def ten_mib_body_is_refused_as_daprd_refuses_it():
        before = print_rss(pid, "before a 10 MiB body")
        body = b'{"schedule":"@every 1h","data":"' + b"x" * (10 << 20) + b'"}'
        # Dapr's route: daprd's answer (its body reader stops at --max-body-size).
        status, answer = post_early_answered(port, "/v1.0-alpha1/jobs/big", body)
        print_rss(pid, "after")
        assert status == 400, (status, answer[:200])
        assert json.loads(answer) == {
            "errorCode": "ERR_BODY_READ",
            "message": "failed to read request body: stream too large",
        }, answer
        assert request(port, "GET", "/v1.0-alpha1/jobs/big")[0] == 500  # daprd: not found
        # jobsd's own route: a 413 naming the limit.
        status, answer = post_early_answered(port, "/jobsd/v1/jobs/big", body)
        assert status == 413, (status, answer[:200])
        assert json.loads(answer)["errorCode"] == "ERR_REQUEST_BODY_TOO_LARGE", answer
        assert rss_kib(pid) - before < 64 << 10, "10 MiB body left more than 64 MiB behind"

    @suite.check
    def json_nested_64_levels_is_a_clear_400_and_32_levels_are_stored():
        # prost decodes at most 100 nested messages, and each JSON level of `data` costs 2 or
        # 3 of them: jobsd refuses at the door what it could not read back (daprd, on Go's
        # 10,000, would take it).
        for depth, want in ((32, 204), (64, 400), (100_000, 400)):
            data = "[" * depth + "1" + "]" * depth
            body = ('{"schedule":"@every 1h","data":' + data + "}").encode()
            status, answer = request(port, "POST", f"/v1.0-alpha1/jobs/deep{depth}", body)
            assert status == want, (depth, status, answer[:300])
            if want == 400:
                error = json.loads(answer)
                assert error["errorCode"] == "ERR_MALFORMED_REQUEST", answer[:300]
                assert "exceeded max recursion depth" in error["message"], answer[:300]
        status, answer = request(port, "GET", "/v1.0-alpha1/jobs/deep32")
        assert status == 200 and "[" * 32 + "1" in answer.decode().replace(" ", ""), answer[:200]

    @suite.check
    def hundred_thousand_char_name_is_refused_clearly():
        name = "n" * 100_000
        status, answer = request(port, "POST", f"/v1.0-alpha1/jobs/{name}",
                                 b'{"schedule":"@every 1h"}')
        # hyper refuses a request line this long (414) before any handler runs.
        assert status == 414, (status, answer[:300])
        name = "n" * 5_000
        status, answer = request(port, "POST", f"/v1.0-alpha1/jobs/{name}",
                                 b'{"schedule":"@every 1h"}')
        assert status == 500, (status, answer[:300])  # daprd's answer to a Scheduler refusal
        assert b"must be at most 512 characters" in answer, answer[:300]

    @suite.check
    def hundred_thousand_char_name_over_grpc_is_invalid():
        import grpc  # the venv's grpcio (the Dapr SDK's)

        def field(number: int, payload: bytes) -> bytes:
            return bytes([number << 3 | 2]) + varint(len(payload)) + payload

        job = field(1, b"n" * 100_000) + field(2, b"@every 1h")
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            call = channel.unary_unary("/dapr.proto.runtime.v1.Dapr/ScheduleJobAlpha1")
            try:
                call(field(1, job), timeout=10)
                raise AssertionError("a 100k-char name was stored")
            except grpc.RpcError as e:
                # daprd: Internal, the Scheduler's "job name is invalid … at most 512"; the
                # echoed name is cut in the middle to keep the trailer within what grpc
                # clients accept (16 KiB).
                assert e.code() == grpc.StatusCode.INTERNAL, (e.code(), e.details()[:200])
                assert e.details().endswith("must be at most 512 characters"), e.details()[-200:]
                assert len(e.details()) < 4096, len(e.details())

    @suite.check
    def invalid_utf8_is_refused_as_daprd_does():
        status, answer = request(port, "POST", "/v1.0-alpha1/jobs/bad-utf8",
                                 b'{"schedule":"@every 1h","data":"\xff\xfe"}')
        assert status == 400, (status, answer)
        assert json.loads(answer)["errorCode"] == "ERR_MALFORMED_REQUEST", answer
        status, answer = request(port, "POST", "/v1.0-alpha1/jobs/%ff%fe",
                                 b'{"schedule":"@every 1h"}')
        assert status == 500 and b"invalid UTF-8" in answer, (status, answer)
        status, answer = request(port, "GET", "/v1.0-alpha1/jobs/%ff")
        assert status == 500 and b"invalid UTF-8" in answer, (status, answer)

    @suite.check
    def nothing_refused_was_stored():
        status, answer = request(port, "GET", "/v1.0/jobs")
        names = sorted(j["name"] for j in json.loads(answer)["jobs"])
        assert names == ["deep32"], names

    return suite


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


# ---------------------------------------------------------------- slowloris

def slowloris(http_port: str, pid: str, seconds: str) -> Suite:
    suite = Suite("slowloris")
    port = int(http_port)
    duration = float(seconds)

    @suite.check
    def tricklers_are_cut_off_and_others_are_served():
        before = print_rss(pid, "before")
        head = b"POST /v1.0-alpha1/jobs/slow HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 10_000
        tricklers = 50
        lifetimes = []  # seconds each trickling connection lasted before the server cut it
        lock = threading.Lock()
        deadline = time.monotonic() + duration

        def trickle():
            # A slowloris client: one header byte every second, reconnecting when cut off.
            while time.monotonic() < deadline:
                s = socket.create_connection(("127.0.0.1", port))
                opened = time.monotonic()
                try:
                    for byte in head:
                        if time.monotonic() >= deadline:
                            return
                        s.sendall(bytes([byte]))
                        s.settimeout(1.0)
                        try:
                            s.recv(4096)  # closed (b"") or answered: cut off either way
                            break
                        except socket.timeout:
                            pass
                except OSError:
                    pass
                finally:
                    s.close()
                with lock:
                    lifetimes.append(time.monotonic() - opened)

        slow_body = {}

        def trickle_body():
            # Headers whole, then the body a byte every 2 s: the body deadline (30 s) ends it.
            s = socket.create_connection(("127.0.0.1", port))
            opened = time.monotonic()
            s.sendall(b"POST /v1.0-alpha1/jobs/slow-body HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 1000\r\n\r\n")
            s.settimeout(2.0)
            answer = b""
            try:
                while time.monotonic() < deadline + 10 and not answer:
                    s.sendall(b" ")
                    try:
                        answer = s.recv(4096) or b"<closed>"
                    except socket.timeout:
                        pass
            except OSError as e:
                answer = repr(e).encode()
            slow_body["after"] = time.monotonic() - opened
            slow_body["answer"] = answer
            s.close()

        threads = [threading.Thread(target=trickle, daemon=True) for _ in range(tricklers)]
        threads.append(threading.Thread(target=trickle_body, daemon=True))
        with Bystander(port) as bystander:
            for t in threads:
                t.start()
            for t in threads:
                t.join(duration + 30)
        print_rss(pid, "after")
        cut = sorted(lifetimes)
        print(f"  {len(cut)} trickling connections cut off; lifetime min {cut[0]:.1f}s, "
              f"max {cut[-1]:.1f}s", flush=True)
        print(f"  slow body answered after {slow_body.get('after', 0):.0f}s: "
              f"{slow_body.get('answer', b'')[:120]!r}", flush=True)
        bystander.check("slowloris")
        assert b" 400 " in slow_body.get("answer", b"") and b"ERR_BODY_READ" in slow_body["answer"]
        assert slow_body["after"] < 45, slow_body["after"]
        # Every trickler was cut near the header deadline (each lasts the whole run otherwise).
        assert len(cut) >= tricklers * int(duration // (HEADER_TIMEOUT + 3)), len(cut)
        assert cut[-1] < HEADER_TIMEOUT + 5, f"a trickler lasted {cut[-1]:.1f}s"
        assert rss_kib(pid) - before < 64 << 10

    return suite


# ---------------------------------------------------------------- idle connections

def idle(http_port: str, grpc_port: str, pid: str, connections: str) -> Suite:
    suite = Suite("idle")
    port, gport, n = int(http_port), int(grpc_port), int(connections)

    @suite.check
    def thousands_of_idle_connections_are_held_then_closed():
        before = print_rss(pid, "before")
        socks = []
        for i in range(n):
            # Half on the HTTP port, half on the gRPC port.
            socks.append(socket.create_connection(("127.0.0.1", port if i % 2 == 0 else gport)))
        opened = time.monotonic()
        held = print_rss(pid, f"with {n} idle connections")
        with Bystander(port) as bystander:
            import grpc
            with grpc.insecure_channel(f"127.0.0.1:{gport}") as channel:
                health = channel.unary_unary("/grpc.health.v1.Health/Check")
                started = time.monotonic()
                health(b"", timeout=5)  # an empty HealthCheckRequest
                grpc_latency = time.monotonic() - started
            time.sleep(HEADER_TIMEOUT + 3 - (time.monotonic() - opened))
        print(f"  gRPC health answered in {grpc_latency:.2f}s beside them", flush=True)
        bystander.check(f"{n} idle connections")
        assert grpc_latency < PROMPT
        # Both ports close a connection that sends nothing within the header deadline.
        closed = 0
        for s in socks:
            s.settimeout(0.5)
            try:
                # The gRPC port sends its HTTP/2 SETTINGS first; then the end of stream.
                while s.recv(4096):
                    pass
                closed += 1
            except ConnectionResetError:
                closed += 1
            except (socket.timeout, OSError):
                pass
        print(f"  {closed} of {n} idle connections closed by jobsd after "
              f"{time.monotonic() - opened:.0f}s", flush=True)
        for s in socks:
            s.close()
        time.sleep(1)
        after = print_rss(pid, "after closing them")
        assert closed == n, f"{n - closed} idle connections still open"
        assert held - before < 256 << 10, f"{(held - before) / 1024:.0f} MiB for {n} connections"
        assert after - before < 128 << 10

    return suite


# ---------------------------------------------------------------- HTTP/2 rapid reset

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(name: bytes, value: bytes) -> bytes:
    """HPACK literal header field without indexing, new name, no Huffman coding."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def rapid_reset(http_port: str, grpc_port: str, pid: str, seconds: str) -> Suite:
    suite = Suite("rapid_reset")
    duration = float(seconds)

    def attack(port: int, path: bytes, stats: dict, deadline: float):
        headers = (literal(b":method", b"POST") + literal(b":scheme", b"http")
                   + literal(b":path", path) + literal(b":authority", b"x")
                   + literal(b"content-type", b"application/grpc")
                   + literal(b"te", b"trailers"))
        while time.monotonic() < deadline:
            s = socket.create_connection(("127.0.0.1", port))
            stats["connections"] += 1
            s.setblocking(False)
            try:
                s.sendall(PREFACE + frame(0x4, 0, 0, b""))
                stream = 1
                while time.monotonic() < deadline and stream < 2**31 - 2:
                    burst = bytearray()
                    for _ in range(100):
                        burst += frame(0x1, 0x4, stream, headers)  # HEADERS, END_HEADERS
                        burst += frame(0x3, 0, stream, struct.pack(">I", 0x8))  # RST_STREAM CANCEL
                        stream += 2
                    s.setblocking(True)
                    s.settimeout(5)
                    s.sendall(bytes(burst))
                    s.setblocking(False)
                    stats["streams"] += 100
                    try:
                        # Whatever jobsd sends (SETTINGS, GOAWAY) is read and dropped; an
                        # end of stream is jobsd closing the connection.
                        if s.recv(65536) == b"":
                            stats["closed_by_server"] += 1
                            break
                    except BlockingIOError:
                        pass
            except OSError:
                stats["closed_by_server"] += 1
            finally:
                s.close()

    for label, port_arg, path in (
        ("grpc_port", grpc_port, b"/dapr.proto.runtime.v1.Dapr/GetJobAlpha1"),
        ("http_port", http_port, b"/v1.0/jobs"),
    ):
        def check(port_arg=port_arg, path=path, label=label):
            before = print_rss(pid, f"before rapid reset on the {label}")
            stats = {"connections": 0, "streams": 0, "closed_by_server": 0}
            deadline = time.monotonic() + duration
            attackers = [threading.Thread(target=attack, args=(int(port_arg), path, stats, deadline),
                                          daemon=True) for _ in range(2)]
            with Bystander(int(http_port)) as bystander:
                for t in attackers:
                    t.start()
                for t in attackers:
                    t.join(duration + 30)
            after = print_rss(pid, "after")
            print(f"  {stats['streams']} streams opened and reset on {stats['connections']} "
                  f"connections; jobsd closed {stats['closed_by_server']} of them", flush=True)
            bystander.check(f"rapid reset on the {label}")
            assert stats["closed_by_server"] > 0, "jobsd never closed an abusive connection"
            assert after - before < 64 << 10, f"RSS grew {(after - before) / 1024:.0f} MiB"

        suite.add(f"rapid_reset_on_the_{label}_is_cut_off_with_memory_bounded", check)
    return suite


if __name__ == "__main__":
    sys.exit(run_phase_of({
        "limits": (limits, 3),
        "slowloris": (slowloris, 3),
        "idle": (idle, 4),
        "rapid_reset": (rapid_reset, 4),
    }, sys.argv, __doc__))
