"""Differential checks: the same requests to the real daprd and to jobsd, compared exactly.

Started by e2e/dapr/differential.sh (which builds what is missing and passes the binaries):

    python differential.py --dapr-bin-dir DIR --jobsd-bin PATH [--seed N] [--scale F]
                           [--out TSV] [--deliberate TSV] [--bugs TSV] [--only CATEGORY,...]
                           [--scheduler-bin PATH] [--dump JSONL] [--keep-logs DIR]

What runs: the real Dapr Scheduler (embedded etcd), the real placement and the real daprd
(app id `diff`, an in-memory actor state store), and beside them jobsd (embedded scheduler,
app id `diff`); one tiny HTTP app serves both (`/dapr/config` with the actor types DiffActor
and Other, and 200 to every job and reminder delivery). Every case is a short sequence of
requests (HTTP to the Dapr HTTP API, raw gRPC to `dapr.proto.runtime.v1.Dapr`); each request
is sent to daprd, then the same bytes to jobsd, and the two answers are compared:

  HTTP   status; Content-Type and Traceparent values; the names of the other headers (Date,
         Content-Length, Connection and Transfer-Encoding aside); the body, as JSON compared
         structurally when both parse, else byte for byte.
  gRPC   status code; message; the error details of grpc-status-details-bin (google.rpc.Status:
         its code and message too, and every detail decoded: ErrorInfo, BadRequest, ...); the
         names of the response metadata keys; the response message field by field (an Any as
         type URL, value bytes and the message they decode to) and its wire bytes.

Normalised on both sides before comparing, and nothing else: RFC 3339 timestamps and UUIDs that
no request of the case contained (server-generated), and Dapr version strings; and the order of
the entries of a Struct inside Any value bytes (Go writes map entries in random order, so
daprd's own bytes differ run to run; the entries' bytes still count), for which the wire bytes
of a whole gRPC answer holding such a Value are not compared (its fields are).

Names: every case's job and reminder names start with its own prefix (`c00042-`), so no case
sees another's state even where both sides disagree; at the end of a case everything it
created is deleted (over gRPC, not compared). A GET after a create is only sent when the job
cannot have fired to its end meanwhile (see `settles_soon`): a one-shot job due now is gone
on one side and not yet on the other, which says nothing about either.

Left out on purpose: a schedule of only a `TZ=`/`CRON_TZ=` prefix (`"TZ=UTC"`): the pinned
Scheduler (v1.18.2) panics on it and every later case would fail (fixed in v1.18.3).

A second phase runs a few cases against a second pair of sidecars, both started with
DAPR_API_TOKEN and a 1 KiB --max-body-size (tokens, oversized bodies and messages).

Output: one TSV row per request pair (case, category, request, same|differs|deliberate, what
differs, with the ids of the bugs and deliberate differences it shows), the summary grouped by
cause (on stdout and in <out>-summary.txt), and the closing line `N passed, M failed`: a pair
passes when both answers are the same or every difference is listed in the deliberate file
(differential_deliberate.tsv, regex and why). Differences already reported as jobsd bugs
(differential_bugs.tsv, regex and label) still fail; the summary groups them by label, so
that a difference of a new kind stands out under "not yet triaged".
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any as TAny, Callable, Optional

import grpc
from google.protobuf import any_pb2, duration_pb2, empty_pb2, json_format, struct_pb2, timestamp_pb2
from google.protobuf import wrappers_pb2
from google.rpc import error_details_pb2, status_pb2

from dapr.proto.common.v1 import common_pb2
from dapr.proto.runtime.v1 import actors_pb2, jobs_pb2

APP_ID = "diff"
ACTOR = "DiffActor"
OTHER_ACTOR = "Other"
NOT_HOSTED = "Nope"
DAPR = "/dapr.proto.runtime.v1.Dapr/"
VALUE_URL = "type.googleapis.com/google.protobuf.Value"
RPC_TIMEOUT = 40

# ---------------------------------------------------------------- processes


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def log(msg: str):
    print(f"[diff {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class App:
    """The app behind both sidecars: actor config, and 200 to every delivery."""

    def __init__(self):
        self.port = free_ports(1)[0]
        self.deliveries = 0

        app = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self, code: int, body: bytes = b""):
                self.send_response(code)
                if body:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _drain(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)

            def do_GET(self):
                if self.path == "/dapr/config":
                    cfg = {"entities": [ACTOR, OTHER_ACTOR]}
                    self._answer(200, json.dumps(cfg).encode())
                else:
                    self._answer(200)

            def _delivery(self):
                self._drain()
                app.deliveries += 1
                self._answer(200)

            do_POST = do_PUT = do_DELETE = _delivery

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Procs:
    """The processes of one run: started in order, stopped in reverse (by their own Popen)."""

    def __init__(self, work: str):
        self.work = work
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def spawn(self, name: str, argv: list[str], env: Optional[dict] = None) -> subprocess.Popen:
        logf = open(os.path.join(self.work, f"{name}.log"), "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
        self.procs.append((name, p))
        return p

    def stop(self, only: Optional[str] = None):
        for name, p in reversed(self.procs):
            if only is not None and name != only:
                continue
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = [(n, p) for n, p in self.procs if p.poll() is None]

    def alive(self, name: str) -> bool:
        return any(n == name and p.poll() is None for n, p in self.procs)

    def tail(self, name: str, lines: int = 40) -> str:
        try:
            with open(os.path.join(self.work, f"{name}.log"), "rb") as f:
                return b"".join(f.readlines()[-lines:]).decode("utf-8", "replace")
        except OSError:
            return ""


def wait_until(what: str, fn: Callable[[], bool], timeout: float, procs: Procs, name: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if fn():
                return
        except Exception:
            pass
        if not procs.alive(name):
            raise SystemExit(f"{name} exited before {what}:\n{procs.tail(name)}")
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}:\n{procs.tail(name)}")


def http_status(port: int, path: str) -> int:
    return http_call(port, "GET", path.encode()).status


# ---------------------------------------------------------------- HTTP and gRPC calls


@dataclass
class HttpAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def http_call(port: int, method: str, path: bytes, body: Optional[bytes] = None,
              headers: tuple = ()) -> HttpAnswer:
    """One request on a fresh connection, the request target sent byte for byte."""
    head = [method.encode() + b" " + path + b" HTTP/1.1", f"Host: 127.0.0.1:{port}".encode()]
    for k, v in headers:
        head.append(k.encode() + b": " + v.encode("latin-1"))
    if body is not None:
        head.append(f"Content-Length: {len(body)}".encode())
    head.append(b"Connection: close")
    raw = b"\r\n".join(head) + b"\r\n\r\n" + (body or b"")
    with socket.create_connection(("127.0.0.1", port), timeout=RPC_TIMEOUT) as s:
        s.sendall(raw)
        resp = http.client.HTTPResponse(s, method=method)
        try:
            resp.begin()
            data = resp.read()
        except (http.client.HTTPException, ConnectionError, socket.timeout) as err:
            return HttpAnswer(-1, [], f"<no HTTP answer: {type(err).__name__}: {err}>".encode())
        return HttpAnswer(resp.status, list(resp.getheaders()), data)


@dataclass
class GrpcAnswer:
    code: str
    message: str
    details: Optional[bytes]  # grpc-status-details-bin
    response: Optional[bytes]
    metadata: list[str]  # names of initial + trailing metadata keys that matter


IGNORED_MD = {"content-type", "grpc-accept-encoding", "grpc-encoding", "date", "user-agent",
              "grpc-status-details-bin", "grpc-status", "grpc-message", "server"}


def grpc_call(channel: grpc.Channel, method: str, payload: bytes,
              metadata: tuple = ()) -> GrpcAnswer:
    fn = channel.unary_unary(DAPR + method if not method.startswith("/") else method,
                             request_serializer=lambda b: b, response_deserializer=lambda b: b)
    try:
        resp, call = fn.with_call(payload, timeout=RPC_TIMEOUT, metadata=metadata or None)
        md = sorted({k for k, _ in (call.initial_metadata() or ())} |
                    {k for k, _ in (call.trailing_metadata() or ())})
        return GrpcAnswer("OK", "", None, resp, [k for k in md if k not in IGNORED_MD])
    except grpc.RpcError as err:
        details = None
        md = set()
        for k, v in (err.trailing_metadata() or ()):
            md.add(k)
            if k == "grpc-status-details-bin":
                details = v
        for k, _ in (err.initial_metadata() or ()):
            md.add(k)
        return GrpcAnswer(err.code().name, err.details() or "", details, None,
                          sorted(k for k in md if k not in IGNORED_MD))


# ---------------------------------------------------------------- requests


@dataclass
class Http:
    method: str
    path: bytes
    body: Optional[bytes] = None
    headers: tuple = ()

    def summary(self) -> str:
        b = "" if self.body is None else " " + self.body.decode("utf-8", "backslashreplace")
        return f"HTTP {self.method} {self.path.decode('utf-8', 'backslashreplace')}{b}"

    def text(self) -> str:
        return self.path.decode("utf-8", "replace") + " " + (self.body or b"").decode(
            "utf-8", "replace")


@dataclass
class Rpc:
    method: str
    payload: bytes  # the request message, serialized (or raw bytes)
    shown: str  # what the summary shows of it
    response: Optional[type] = None  # message class of the answer
    metadata: tuple = ()

    def summary(self) -> str:
        return f"gRPC {self.method} {self.shown}"

    def text(self) -> str:
        return self.shown


def rpc(method: str, msg, response: Optional[type] = None, shown: Optional[str] = None) -> Rpc:
    return Rpc(method, msg.SerializeToString(), shown if shown is not None else show_msg(msg),
               response)


STRUCT_TYPES = {"google.protobuf.Value": "Value", "google.protobuf.Struct": "Struct",
                "google.protobuf.ListValue": "ListValue"}


def wire_fields(b: bytes) -> list[tuple[int, int, bytes]]:
    """A message's fields as (number, wire type, raw bytes of the whole field), in order."""
    out, i = [], 0
    while i < len(b):
        start = i
        key, i = read_varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            _, i = read_varint(b, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            n, i = read_varint(b, i)
            i += n
        else:
            raise ValueError(f"wire type {wt}")
        if i > len(b):
            raise ValueError("truncated")
        out.append((num, wt, b[start:i]))
    return out


def read_varint(b: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def payload(field: bytes) -> tuple[bytes, bytes]:
    """(key and length prefix, payload) of a length-delimited field."""
    _, i = read_varint(field, 0)
    _, j = read_varint(field, i)
    return field[:j], field[j:]


def canonical(kind: str, b: bytes) -> bytes:
    """`b` with the entries of every Struct map put in byte order, nothing else touched: Go
    writes map entries in random order, so only their order may differ between two runs of
    daprd; an entry's own bytes (a key left out, say) still count."""
    out = []
    for num, wt, raw in wire_fields(b):
        inner = None
        if wt == 2:
            if kind == "Value" and num == 5:
                inner = "Struct"
            elif kind == "Value" and num == 6:
                inner = "ListValue"
            elif kind == "ListValue" and num == 1:
                inner = "Value"
            elif kind == "Struct" and num == 1:
                inner = "Entry"
            elif kind == "Entry" and num == 2:
                inner = "Value"
        if inner is None:
            out.append((num, raw))
            continue
        head, body = payload(raw)
        body = canonical(inner, body)
        out.append((num, varint(num << 3 | 2) + varint(len(body)) + body))
    if kind == "Struct":
        entries = sorted(r for n, r in out if n == 1)
        rest = [r for n, r in out if n != 1]
        return b"".join(entries + rest)
    return b"".join(r for _, r in out)


def canonical_any_bytes(a) -> bytes:
    kind = STRUCT_TYPES.get(a.type_url.rsplit("/", 1)[-1])
    if kind is None:
        return a.value
    try:
        return canonical(kind, a.value)
    except (ValueError, IndexError):
        return a.value


def has_struct_any(v) -> bool:
    if isinstance(v, dict):
        if str(v.get("@type", "")).rsplit("/", 1)[-1] in STRUCT_TYPES:
            return True
        return any(has_struct_any(x) for x in v.values())
    if isinstance(v, list):
        return any(has_struct_any(x) for x in v)
    return False


def unpack_any(a) -> TAny:
    """The message in an Any as protojson (when Python's pool knows its type): so that two
    encodings of one message show as a difference of bytes only."""
    from google.protobuf import symbol_database
    try:
        cls = symbol_database.Default().GetSymbol(a.type_url.rsplit("/", 1)[-1])
        m = cls()
        m.ParseFromString(a.value)
        return json_format.MessageToDict(m)
    except Exception:  # noqa: BLE001 - unknown type or bytes that do not parse
        return None


def show_msg(msg) -> str:
    return json.dumps(pb_obj(msg, unpack=False), ensure_ascii=False, sort_keys=False)


def pb_obj(msg, unpack: bool = True) -> dict:
    """A message as a dict of the fields set, Any as type URL + value bytes (hex)."""
    out: dict = {}
    for fd, val in msg.ListFields():
        def one(v):
            if fd.message_type is None:
                return v.hex() if isinstance(v, bytes) else v
            if fd.message_type.full_name == "google.protobuf.Any":
                shown = {"@type": v.type_url, "hex": canonical_any_bytes(v).hex()}
                if unpack:
                    shown["unpacked"] = unpack_any(v)
                return shown
            if fd.message_type.full_name == "google.protobuf.Duration":
                return {"seconds": v.seconds, "nanos": v.nanos}
            return pb_obj(v, unpack)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            vfd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: (pb_obj(v) if vfd.message_type is not None else v)
                            for k, v in sorted(val.items())}
        elif fd.is_repeated:
            out[fd.name] = [one(v) for v in val]
        else:
            out[fd.name] = one(val)
    return out


# ---------------------------------------------------------------- observations and comparing

TS_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
VERSION_RE = re.compile(r"\b(?:ver|version|runtimeVersion)=\S+")


def normalise_str(s: str, request_text: str) -> str:
    # protobuf-go writes the space after "proto:" in its error texts as U+0020 or U+00A0,
    # chosen per binary (internal/detrand, so that callers do not match on the text): a
    # rebuilt daprd may flip it, and neither is a difference.
    s = s.replace("proto:\u00a0", "proto: ")
    s = TS_RE.sub(lambda m: m.group(0) if m.group(0) in request_text else "<timestamp>", s)
    s = UUID_RE.sub(lambda m: m.group(0) if m.group(0) in request_text else "<uuid>", s)
    return VERSION_RE.sub("<version>", s)


def normalise(v, request_text: str):
    if isinstance(v, str):
        return normalise_str(v, request_text)
    if isinstance(v, list):
        return [normalise(x, request_text) for x in v]
    if isinstance(v, dict):
        return {k: normalise(x, request_text) for k, x in v.items()}
    return v


def depth(v, n: int = 0) -> int:
    if n > 100:
        return n
    if isinstance(v, dict):
        return max([depth(x, n + 1) for x in v.values()], default=n + 1)
    if isinstance(v, list):
        return max([depth(x, n + 1) for x in v], default=n + 1)
    return n


SKIP_HEADERS = {"date", "content-length", "connection", "transfer-encoding", "keep-alive"}


def observe_http(a: HttpAnswer, case_text: str) -> dict:
    hdrs = {k.lower(): v for k, v in a.headers}
    obs: dict = {"status": a.status,
                 "content-type": hdrs.get("content-type"),
                 "traceparent": hdrs.get("traceparent"),
                 "header names": sorted(k for k in hdrs if k not in SKIP_HEADERS
                                        and k not in ("content-type", "traceparent"))}
    try:
        obs["body"] = json.loads(a.body) if a.body else ""
        obs["body kind"] = "json" if a.body else "empty"
        if a.body and depth(obs["body"]) > 100:
            raise ValueError("too deep to compare structurally")
    except (ValueError, RecursionError):
        obs["body"] = a.body.decode("utf-8", "backslashreplace")
        obs["body kind"] = "text"
    return normalise(obs, case_text)


DETAIL_TYPES = {
    "google.rpc.ErrorInfo": error_details_pb2.ErrorInfo,
    "google.rpc.BadRequest": error_details_pb2.BadRequest,
    "google.rpc.ResourceInfo": error_details_pb2.ResourceInfo,
    "google.rpc.RetryInfo": error_details_pb2.RetryInfo,
    "google.rpc.DebugInfo": error_details_pb2.DebugInfo,
    "google.rpc.QuotaFailure": error_details_pb2.QuotaFailure,
    "google.rpc.PreconditionFailure": error_details_pb2.PreconditionFailure,
    "google.rpc.RequestInfo": error_details_pb2.RequestInfo,
    "google.rpc.Help": error_details_pb2.Help,
    "google.rpc.LocalizedMessage": error_details_pb2.LocalizedMessage,
}


def decode_details(raw: Optional[bytes]):
    if raw is None:
        return None
    st = status_pb2.Status()
    try:
        st.ParseFromString(raw)
    except Exception as err:  # noqa: BLE001 - shown as the observation
        return {"undecodable": raw.hex(), "error": str(err)}
    details = []
    for d in st.details:
        cls = DETAIL_TYPES.get(d.type_url.rsplit("/", 1)[-1])
        if cls is None:
            details.append({"@type": d.type_url, "hex": d.value.hex()})
            continue
        m = cls()
        m.ParseFromString(d.value)
        details.append({"@type": d.type_url, **pb_obj(m)})
    return {"code": st.code, "message": st.message, "details": details}


def observe_grpc(a: GrpcAnswer, req: Rpc, case_text: str) -> dict:
    obs: dict = {"code": a.code, "message": a.message, "status details": decode_details(a.details),
                 "metadata": a.metadata}
    if a.response is not None:
        if req.response is not None:
            m = req.response()
            try:
                m.ParseFromString(a.response)
                obs["response"] = pb_obj(m)
            except Exception as err:  # noqa: BLE001
                obs["response"] = {"undecodable": str(err)}
        # The wire bytes of the whole answer, but not when it holds a Value or Struct (Go
        # writes map entries in random order: the data's bytes are compared, in canonical
        # order, field by field above).
        if not has_struct_any(obs.get("response")):
            obs["response bytes"] = a.response.hex()
    return normalise(obs, case_text)


ABSENT = object()


def diff(a, b, path: str = "") -> list[tuple[str, TAny, TAny]]:
    """What differs between daprd's observation `a` and jobsd's `b`: (path, daprd's, jobsd's)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            p = f"{path}.{k}" if path else str(k)
            out.extend(diff(a.get(k, ABSENT), b.get(k, ABSENT), p))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out.extend(diff(x, y, f"{path}[{i}]"))
        return out
    if a is ABSENT and b is ABSENT:
        return []
    numbers = (isinstance(a, (int, float)) and isinstance(b, (int, float))
               and not isinstance(a, bool) and not isinstance(b, bool))
    if (a == b and type(a) is type(b)) or (numbers and a == b):
        return []
    return [(path, a, b)]


def line(d: tuple) -> str:
    path, a, b = d
    if isinstance(a, str) and isinstance(b, str) and max(len(a), len(b)) > 300:
        # Long texts (a 600-byte name in a message): show where they part.
        i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        start = max(0, i - 100)
        cut = (lambda t: ("…" if start else "") + t[start:i + 200] + ("…" if len(t) > i + 200 else ""))
        return f"{path}: {json.dumps(cut(a), ensure_ascii=False)} ≠ {json.dumps(cut(b), ensure_ascii=False)}"
    return f"{path}: {short(a)} ≠ {short(b)}"


def short(v, n: int = 300) -> str:
    s = "(absent)" if v is ABSENT else json.dumps(v, ensure_ascii=False)
    return s if len(s) <= n else s[:n] + "…"


# ---------------------------------------------------------------- the corpus


@dataclass
class Case:
    id: str
    category: str
    steps: list = field(default_factory=list)
    # Names to delete after the case: ("job", name) or ("reminder", type, id, name).
    cleanup: list = field(default_factory=list)
    # Which sidecars answer it: "main" (daprd's defaults) or "auth" (an API token and a 1 KiB
    # body limit on both).
    phase: str = "main"


def q(s: str) -> bytes:
    """A name as one path segment, percent-encoded (UTF-8) where a URL needs it."""
    return urllib.parse.quote(s, safe="!$&'()*+,;=:@").encode()


def jbody(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


# Values tagged with how soon a job using them could be over: "far" (not within a case),
# "soon", or "bad" (refused by one side or both, so over at once or never created).
SCHEDULES_VALID = [
    "@every 1h", "@every 1s", "@every 100ms", "@every 1ms", "@every 0s", "@every 1h30m",
    "@every 1.5h", "@every 2562047h", "@every 1us", "@every 1µs", "@daily", "@midnight",
    "@hourly", "@weekly", "@monthly", "@yearly", "@annually", "* * * * * *", "0 * * * * *",
    "*/5 * * * * *", "0 30 9 * * MON-FRI", "0 0 0 1 1 *", "0 0 12 * * SUN", "0-59/15 * * * * *",
    "0 0 0 29 2 *", "0 0 0 31 2 *", "? * * * * *", "1,2,3 * * * * *", "0 0 0 * JAN-DEC *",
    "0 0 0 * jan *", "0 0 0 * * sun-sat", "0 0 0 1-31/2 * *", "0 5/10 * * * *", "0 0 0 * * 0",
    "0 0 0 * * 6", "TZ=UTC 0 0 0 * * *", "CRON_TZ=Europe/Berlin 0 0 12 * * *",
    "TZ=Asia/Tokyo @daily", "TZ=America/New_York 0 0 9 * * MON", "TZ=UTC @every 1h",
    "CRON_TZ=UTC @every 1s", "0 0 0 * * ?", "59 59 23 31 12 *", "0 0 0 L * *",
    "0 0 0 * * 5L", "0 0 0 ? * MON#1", "H * * * * *",
]
SCHEDULES_BAD = [
    "", " ", "* * * * *", "* * * * * * *", "61 * * * * *", "0 60 * * * *", "0 0 24 * * *",
    "0 0 0 0 * *", "0 0 0 32 * *", "0 0 0 * 13 *", "0 0 0 * * 7", "0 0 0 * * 8", "*/0 * * * * *",
    "5-1 * * * * *", "1-2-3 * * * * *", "*/2/3 * * * * *", "a * * * * *", "-1 * * * * *",
    "@foo", "@every", "@every ", "@every x", "@every -1s", "@every 1", "@every 1d", "@EVERY 1h",
    "@Daily", "R5/PT1S", "PT1S", "1h", " @daily", "@daily ", "0 0 0 * * * extra",
    "TZ=Not/AZone 0 0 0 * * *", "TZ= 0 0 0 * * *", "tz=UTC 0 0 0 * * *", "0 0 0 * FOO *",
    "0 0 0 * * FOO", "@every 9999999999h", "0,,1 * * * * *", "0 0 0 * * MON-", "\t* * * * * *",
    "* * * * * *\n", "@every 1h\u0000", "０ * * * * *", "@reboot",
]
DUES = [  # (value, kind)
    ("1000h", "far"), ("87600h0m9s0ms", "far"), ("2099-01-02T03:04:05Z", "far"),
    ("2099-01-01T00:00:00+02:00", "far"), ("2098-12-31T23:59:59.123+05:30", "far"),
    ("2099-06-01T00:00:00.5Z", "far"), ("P1Y", "far"), ("P1Y2M3DT4H5M6S", "far"), ("P10W", "far"),
    ("PT1000H", "far"), ("P400D", "far"), ("999999h", "far"), ("2562047h", "far"), ("P100Y", "far"),
    ("P1Y2", "far"), ("+1000h", "far"), ("1000h0.5s", "far"), ("P1M", "far"), ("PT100000M", "far"),
    ("0s", "soon"), ("1s", "soon"), ("10s", "soon"), ("-5s", "soon"), ("0m", "soon"),
    ("1.5s", "soon"), ("1ms", "soon"), ("1us", "soon"), ("1µs", "soon"), ("1ns", "soon"),
    ("PT1S", "soon"), ("P0D", "soon"), ("PT0S", "soon"), ("2020-01-01T00:00:00Z", "soon"),
    ("R0/PT1S", "soon"), ("-1000h", "soon"), ("P", "soon"), ("PT", "soon"), ("PT1S5", "soon"),
    ("1970-01-01T00:00:00Z", "soon"), ("0001-01-01T00:00:00Z", "soon"),
    ("", "bad"), ("tomorrow", "bad"), ("1", "bad"), ("1d", "bad"), ("1 h", "bad"),
    ("PT1.5S", "bad"), ("R5/PT1S", "bad"), ("R/PT1S", "bad"), ("2099-01-01", "bad"),
    ("2099-01-01T00:00:00", "bad"), ("2099-01-01 00:00:00Z", "bad"), ("9999999999h", "bad"),
    ("P1H", "bad"), (".5s", "bad"), ("5.s", "bad"), ("1e3s", "bad"), ("0", "bad"),
    ("0x10s", "bad"), ("2099-13-01T00:00:00Z", "bad"), ("2099-02-30T00:00:00Z", "bad"),
    ("2099-01-01T25:00:00Z", "bad"), ("2099-01-01t00:00:00z", "bad"), (" 1h", "bad"),
    ("1h ", "bad"), ("P-1Y", "bad"), ("-P1Y", "bad"), ("PT-1S", "bad"), ("@every 1h", "bad"),
    ("* * * * * *", "bad"), ("10000-01-01T00:00:00Z", "bad"), ("2099-01-01T00:00:00+24:00", "bad"),
]
TTLS = [  # (value, kind) — relative to the dueTime when there is one
    ("1000h", "far"), ("P2Y", "far"), ("2199-01-01T00:00:00Z", "far"), ("P9Y", "far"),
    ("3000h", "far"), ("2100-01-01T00:00:00Z", "far"),
    ("1h", "soon"), ("1s", "soon"), ("11s", "soon"), ("0s", "soon"), ("-1s", "soon"),
    ("PT1S", "soon"), ("2020-01-01T00:00:00Z", "soon"), ("2099-01-02T03:04:04Z", "soon"),
    ("", "bad"), ("x", "bad"), ("R2/PT1S", "bad"), ("1d", "bad"), ("PT1.5S", "bad"),
]
REPEATS_JSON = ["1", "3", "10", "0", "4294967295", "-1", "1.5", '"7"', '"x"', "4294967296",
                "true", "null", "1e2", "1.0", '""', '" 3"', "[]", "{}", "-0", "2e10"]
DATA_JSON = [
    '"Hello, World!"', "123", "1.5", "-0", "true", "false", "null", "{}", "[]", '{"a":1}',
    '[1,"x",null,true,{"y":[]}]', '{"@type":"type.googleapis.com/google.protobuf.StringValue","value":"x"}',
    '{"@type":"type.googleapis.com/google.protobuf.Value","value":"x"}',
    '{"@type":"type.googleapis.com/google.protobuf.Struct","value":{"a":1}}',
    '{"@type":"type.googleapis.com/google.protobuf.Duration","value":"1s"}', '{"@type":"","value":""}',
    '{"@type":"type.googleapis.com/google.protobuf.BytesValue","value":"aGk="}',
    '"ünïcödé ☃ 😀"', '"\\u0000"', '{"nested":{"deep":[{"x":[1,2,{"y":null}]}]}}',
    "18446744073709551616", "0.1", '""', "1e308", "-1e-7", '{"expression":"val"}', '"{\\"json\\":1}"',
    '{"a":1,"a":2}', "9007199254740993", '{"":""}', '["\\ud83d\\ude00"]', "1E2", "12345678901234567890",
]
POLICIES_JSON = [
    '{"drop":{}}', '{"constant":{}}', '{"constant":{"interval":"1s"}}',
    '{"constant":{"interval":"1.5s","maxRetries":5}}', '{"constant":{"maxRetries":0}}',
    '{"constant":{"interval":"0s"}}', '{"constant":{"interval":"-1s"}}',
    '{"constant":{"interval":"1m"}}', '{"constant":{"interval":"1.000000001s"}}',
    '{"constant":{"interval":"0.5s"}}', '{"constant":{"interval":"315576000000s"}}',
    '{"constant":{"interval":"315576000001s"}}', '{"constant":{"max_retries":2}}',
    '{"constant":{"maxRetries":-1}}', '{"drop":{},"constant":{}}', "{}", '{"exponential":{}}',
    "null", "[]", '"drop"', '{"drop":null}', '{"constant":{"interval":1}}',
    '{"constant":{"interval":"1.5s","maxRetries":"4"}}', '{"constant":{"interval":"3s","maxRetries":4294967295}}',
    '{"constant":{"interval":"1.0000000001s"}}', '{"constant":{"interval":"s"}}',
    '{"constant":{"interval":"1S"}}', '{"constant":null}', '{"drop":{"x":1}}',
    '{"constant":{"interval":"-0.5s","maxRetries":1}}',
]
OVERWRITE_JSON = ["true", "false", '"yes"', "null", "1", '"true"']


def settles_soon(has_schedule: bool, due_kind: Optional[str], ends: bool) -> bool:
    """Could the job (or reminder) have fired to its end within a case? Then a GET after its
    create is a race between the two sides' clocks, not a comparison."""
    if due_kind == "far":
        return False
    if not has_schedule:
        return True
    return ends


class Corpus:
    def __init__(self, seed: int, scale: float):
        self.rng = random.Random(seed)
        self.scale = scale
        self.cases: list[Case] = []

    def new(self, category: str) -> tuple[Case, str]:
        cid = f"c{len(self.cases):05d}"
        c = Case(cid, category)
        self.cases.append(c)
        return c, cid + "-"

    def n(self, base: int) -> int:
        return max(1, int(base * self.scale))

    # ---- helpers that make steps

    @staticmethod
    def post(route: str, seg: bytes, body: Optional[bytes], method: str = "POST",
             headers: tuple = ()) -> Http:
        return Http(method, route.encode() + seg, body, headers)

    @staticmethod
    def get(route: str, seg: bytes) -> Http:
        return Http("GET", route.encode() + seg)

    @staticmethod
    def delete(route: str, seg: bytes) -> Http:
        return Http("DELETE", route.encode() + seg)

    # ---- the categories

    def build(self, only: Optional[set]):
        parts = [
            ("tests", self.from_tests),
            ("routes", self.routes),
            ("names-http", self.names_http),
            ("names-grpc", self.names_grpc),
            ("bodies", self.bodies),
            ("schedules", self.schedules),
            ("durations", self.durations),
            ("policies", self.policies),
            ("data-http", self.data_http),
            ("grpc-jobs", self.grpc_jobs),
            ("grpc-data", self.grpc_data),
            ("overwrite", self.overwrite),
            ("missing", self.missing),
            ("list", self.lists),
            ("reminders-http", self.reminders_http),
            ("reminders-grpc", self.reminders_grpc),
            ("actor-state", self.actor_state),
            ("auth", self.auth),
        ]
        for name, fn in parts:
            if only and name not in only:
                continue
            fn()
        return self.cases

    def job_case(self, category: str, body: Optional[bytes], *, route: str = "/v1.0/jobs/",
                 name: str = "j", get: bool = True, headers: tuple = (), method: str = "POST"):
        """POST body, then (when it cannot have ended) GET over HTTP and gRPC, then DELETE."""
        c, p = self.new(category)
        full = p + name
        seg = q(full)
        c.steps.append(self.post(route, seg, body, method, headers))
        if get:
            c.steps.append(self.get(route, seg))
            c.steps.append(rpc("GetJob", jobs_pb2.GetJobRequest(name=full), jobs_pb2.GetJobResponse))
        c.steps.append(self.delete(route, seg))
        c.steps.append(self.get(route, seg))
        c.cleanup.append(("job", full))
        return c

    def from_tests(self):
        """The requests of tests/api_http.rs, tests/api_grpc.rs, e2e/python/jobs_api.py and
        tests/actors.rs, as they send them."""
        for route in ("/v1.0-alpha1/jobs/", "/v1.0/jobs/", "/v1.0/schedule/jobs/"):
            self.job_case("tests", b'{"schedule":"@every 1m","repeats":123,"dueTime":"1000s",'
                          b'"ttl":"9999s","data":"hello world"}', route=route, name="roundtrip")
        for body in [
            b'{"dueTime":"1000h","data":{"expression":"val","n":[1,2.5,true,null]}}',
            b'{"dueTime":"1000h","data":{"@type":"type.googleapis.com/google.protobuf.StringValue","value":"x"}}',
            b'{"schedule":"@daily"}', b'{"schedule":"@daily","data":null}',
            b'{"schedule":"@daily","due_time":"10s","failure_policy":{"constant":{"interval":"1.5s","max_retries":5}},"unknown":{"x":1}}',
            b'{"schedule":"@daily","failurePolicy":{"drop":{}}}',
            b'{"schedule":"@daily","failurePolicy":{"constant":{"interval":"0s"}}}',
            b'{"schedule":"@daily","repeats":"7"}',
            b'{"name":"x","schedule":"@daily"}', b'{"name":"","schedule":"@daily"}',
            b"{}", b"", b'{"repeats":3,"ttl":"1h"}', b'{"schedule":null}', b'{"schedule":""}',
            b'{"schedule":"* * *"}', b'{"dueTime":"nope"}', b'{"dueTime":"1s","ttl":"1h"}',
            b'{"schedule":"@daily","repeats":0}',
            b'{"schedule":"@daily","repeats":1}',
            b'{"dueTime":"1000h","data":{"k":"v","n":[1,2.5,true,null]},"failurePolicy":{"constant":{"interval":"2s","maxRetries":4}}}',
            b'{"schedule":"@daily","repeats":3,"due_time":"10s","ttl":"11s","data":"Hello, World!"}',
            b'{"dueTime":"1000h"}', b'{"schedule":"@daily","data":{"k":1}}',
            b'{"schedule":"@every 1h","data":{"k":1}}',
        ]:
            self.job_case("tests", body)
        for body in [b"[{}]", b'{"schedule":"@daily","repeats":-1}',
                     b'{"schedule":"@daily","repeats":1.5}', b'{"dueTime":5}',
                     b'{"schedule":"@daily","failurePolicy":{"constant":{"interval":"1m"}}}',
                     b'{"schedule":"@daily","overwrite":"yes"}', b'{"schedule":"@daily"',
                     b"not json"]:
            self.job_case("tests", body, headers=(("Content-Type", "application/json"),))
        for seg in ["%20", "+", "%09%20", "%20trimmed%20", "bad%zzname", "my%7C%7Cjob@name",
                    "my||job@name", "caf%C3%A9", "a+b", "bad%2Fname", "bad%23name", "bad%3Fname",
                    "bad%5Cname", "bad%00name", "bad%0Aname", "a" * 600, "bad%FFname"]:
            c, p = self.new("tests")
            path = b"/v1.0/jobs/" + p.encode() + seg.encode()
            for m, b in (("POST", b'{"schedule":"@daily"}'), ("GET", None), ("DELETE", None),
                         ("GET", None)):
                c.steps.append(Http(m, path, b))
            c.cleanup.append(("job", p + urllib.parse.unquote_plus(seg).strip()))
        # Raw paths (no prefix: they test the route itself).
        c, p = self.new("tests")
        for m, path, b in [("POST", f"/v1.0//jobs/{p}clean/", b'{"schedule":"@daily"}'),
                           ("GET", f"/v1.0/jobs/./{p}clean", None),
                           ("GET", f"/v1.0/jobs/x/../{p}clean", None),
                           ("GET", f"/v1.0/jobs/{p}clean", None),
                           ("DELETE", f"/v1.0/jobs/{p}clean", None),
                           ("GET", "/v1.0/healthz", None), ("GET", "/v1.0/healthz/outbound", None),
                           ("GET", "/v1.0/nothing", None), ("PUT", "/v1.0/jobs/x", b"{}"),
                           ("GET", "/v1.0/jobs/", None), ("GET", "/v1.0/jobs", None),
                           ("GET", "/v1.0/jobs?prefix=b-", None)]:
            c.steps.append(Http(m, path.encode(), b))
        c.cleanup.append(("job", p + "clean"))
        # Overwrite (api_http.rs overwrite_conflicts_and_replaces).
        c, p = self.new("tests")
        s = b"/v1.0/jobs/" + q(p + "ow")
        for m, b in (("POST", b'{"schedule":"@daily","repeats":1}'),
                     ("POST", b'{"schedule":"@hourly","repeats":2}'), ("GET", None),
                     ("POST", b'{"schedule":"@hourly","repeats":2,"overwrite":true}'), ("GET", None),
                     ("DELETE", None), ("DELETE", None)):
            c.steps.append(Http(m, s, b))
        c.cleanup.append(("job", p + "ow"))
        # gRPC (api_grpc.rs, jobs_api.py).
        sv = any_pb2.Any()
        sv.Pack(wrappers_pb2.StringValue(value="payload"))
        c, p = self.new("tests")
        j = jobs_pb2.Job(name=p + "stable", schedule="@every 1h", repeats=10, due_time="10s",
                         ttl="1h", data=sv)
        c.steps += [rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(job=j), empty_pb2.Empty),
                    rpc("GetJob", jobs_pb2.GetJobRequest(name=p + "stable"), jobs_pb2.GetJobResponse),
                    Http("GET", b"/v1.0/jobs/" + q(p + "stable")),
                    rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(job=j), empty_pb2.Empty),
                    rpc("DeleteJob", jobs_pb2.DeleteJobRequest(name=p + "stable"), empty_pb2.Empty),
                    rpc("GetJob", jobs_pb2.GetJobRequest(name=p + "stable"), jobs_pb2.GetJobResponse),
                    rpc("DeleteJob", jobs_pb2.DeleteJobRequest(name=p + "stable"), empty_pb2.Empty)]
        c.cleanup.append(("job", p + "stable"))
        c, p = self.new("tests")
        c.steps += [rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(), empty_pb2.Empty),
                    rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(job=jobs_pb2.Job()), empty_pb2.Empty),
                    rpc("ScheduleJobAlpha1", jobs_pb2.ScheduleJobRequest(
                        job=jobs_pb2.Job(name=p + "nosched", repeats=3)), empty_pb2.Empty),
                    rpc("GetJob", jobs_pb2.GetJobRequest(name=""), jobs_pb2.GetJobResponse),
                    rpc("DeleteJob", jobs_pb2.DeleteJobRequest(name=""), empty_pb2.Empty),
                    rpc("GetJobAlpha1", jobs_pb2.GetJobRequest(name=""), jobs_pb2.GetJobResponse),
                    rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(
                        job=jobs_pb2.Job(name=p + "bad", schedule="* * *")), empty_pb2.Empty),
                    rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(
                        job=jobs_pb2.Job(name=p + "bad/name", schedule="@daily")), empty_pb2.Empty),
                    rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(
                        job=jobs_pb2.Job(name=p + "my||job@name", schedule="@daily")), empty_pb2.Empty),
                    rpc("GetJob", jobs_pb2.GetJobRequest(name=p + "my||job@name"), jobs_pb2.GetJobResponse),
                    Rpc("GetState", b"", "(empty)", None)]
        c.cleanup += [("job", p + "my||job@name"), ("job", p + "bad")]
        # Python SDK shapes: an empty Any when there is no data; the SDK's policies.
        for extra in [dict(data=any_pb2.Any()),
                      dict(data=any_pb2.Any(value=json.dumps({"msg": "hi", "n": 1}).encode())),
                      dict(data=any_pb2.Any(type_url="type.googleapis.com/example.Blob",
                                            value=bytes(range(256)) * 64)),
                      dict(failure_policy=common_pb2.JobFailurePolicy(drop=common_pb2.JobFailurePolicyDrop())),
                      dict(failure_policy=common_pb2.JobFailurePolicy(constant=common_pb2.JobFailurePolicyConstant(
                          interval=duration_pb2.Duration(seconds=30)))),
                      dict(failure_policy=common_pb2.JobFailurePolicy(constant=common_pb2.JobFailurePolicyConstant(
                          max_retries=0)))]:
            self.grpc_job_case("tests", dict(due_time="1000h", **extra), "far")
        # Actor routes (tests/actors.rs actor_routes_answer_daprds_errors).
        c, p = self.new("tests")
        base = f"/v1.0/actors/{ACTOR}/1/reminders/"
        for m, path, b in [
            ("PUT", f"/v1.0/actors/{NOT_HOSTED}/1/reminders/{p}r", b'{"dueTime":"1s"}'),
            ("GET", base + p + "nope", None), ("PUT", base + p + "once", b'{"dueTime":"1h"}'),
            ("PUT", base + p + "once", b'{"dueTime":"1h","overwrite":false}'),
            ("PUT", base + p + "y", b'{"dueTime":"1s","period":"P1Y"}'),
            ("PUT", base + p + "e", b""), ("DELETE", base + p + "none", None),
            ("GET", base + p + "once", None), ("DELETE", base + p + "once", None),
            ("PUT", base + p + "keep", b'{"dueTime":"1000h","period":"R4/PT10S"}'),
            ("GET", base + p + "keep", None), ("DELETE", base + p + "keep", None),
        ]:
            c.steps.append(Http(m, path.encode(), b))
        c.cleanup += [("reminder", ACTOR, "1", p + n) for n in ("once", "y", "keep")]
        c, p = self.new("tests")
        c.steps += [
            rpc("RegisterActorReminder", actors_pb2.RegisterActorReminderRequest(
                actor_type=ACTOR, actor_id="g", name=p + "r", due_time="1000h", period="R2/PT5S",
                data=b"hi"), empty_pb2.Empty),
            rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                actor_type=ACTOR, actor_id="g", name=p + "r"), actors_pb2.GetActorReminderResponse),
            Http("GET", f"/v1.0/actors/{ACTOR}/g/reminders/{p}r".encode()),
            rpc("UnregisterActorReminder", actors_pb2.UnregisterActorReminderRequest(
                actor_type=ACTOR, actor_id="g", name=p + "r"), empty_pb2.Empty),
            rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                actor_type=ACTOR, actor_id="g", name=p + "r"), actors_pb2.GetActorReminderResponse),
            rpc("RegisterActorReminder", actors_pb2.RegisterActorReminderRequest(
                actor_type=NOT_HOSTED, actor_id="g", name=p + "r", due_time="1s"), empty_pb2.Empty),
        ]
        c.cleanup.append(("reminder", ACTOR, "g", p + "r"))

    def routes(self):
        """Methods, versions and path shapes around the jobs and reminder routes: one case per
        path (a job and a reminder named `r` exist), every method on it."""
        shapes = ["/v1.0/jobs/{p}r", "/v1.0-alpha1/jobs/{p}r", "/v1.0/schedule/jobs/{p}r",
                  "/v1.0/jobs/{p}r/", "/v1.0//jobs/{p}r", "/v1.0/jobs/./{p}r",
                  "/v1.0/jobs/x/../{p}r", "/v1.0/jobs/{p}r?x=1", "/v1.0/jobs/{p}r#frag",
                  "/V1.0/jobs/{p}r", "/v1.0/Jobs/{p}r", "/v1.0/jobs/{p}r/extra", "/v1.0/jobs",
                  "/v1.0/jobs/", "/v1.0-alpha1/jobs", "/v1.0-alpha1/jobs/", "/v1.0/jobs?prefix=c",
                  "/v1.0-beta1/jobs/{p}r", "/v1/jobs/{p}r", "/v1.0/jobs/%2e%2e", "/v1.0/jobs/..",
                  "/v1.0/jobs/.", "/v1.0/healthz", "/v1.0/healthz/outbound", "/v1.0/nothing", "/",
                  f"/v1.0/actors/{ACTOR}/1/reminders", f"/v1.0/actors/{ACTOR}/1/reminders/",
                  f"/v1.0/actors/{ACTOR}/1/reminders/{{p}}r", f"/v1.0/actors/{ACTOR}/1/reminders/{{p}}r/",
                  f"/v1.0-alpha1/actors/{ACTOR}/1/reminders/{{p}}r", f"/v1.0/actors/{ACTOR}//reminders/{{p}}r",
                  f"/v1.0/actors//1/reminders/{{p}}r", f"/v1.0/actors/{ACTOR}/1/reminders/{{p}}r?x=1",
                  f"/v1.0/actors/{ACTOR}/1/timers/{{p}}t", f"/V1.0/actors/{ACTOR}/1/reminders/{{p}}r"]
        for shape in shapes:
            c, p = self.new("routes")
            c.steps += [Http("POST", b"/v1.0/jobs/" + q(p + "r"), b'{"schedule":"@every 1h"}'),
                        Http("PUT", f"/v1.0/actors/{ACTOR}/1/reminders/{p}r".encode(), b'{"dueTime":"1000h"}')]
            path = shape.replace("{p}", p).encode()
            for method in ("GET", "HEAD", "OPTIONS", "PATCH", "PUT", "DELETE", "GET"):
                body = None if method in ("GET", "DELETE", "HEAD", "OPTIONS") else b"{}"
                c.steps.append(Http(method, path, body))
            c.steps.append(Http("POST", path, b'{"schedule":"@every 2h","dueTime":"1000h","period":"1h"}'))
            c.steps += [Http("GET", b"/v1.0/jobs/" + q(p + "r")),
                        Http("GET", f"/v1.0/actors/{ACTOR}/1/reminders/{p}r".encode())]
            c.cleanup += [("job", p + "r"), ("reminder", ACTOR, "1", p + "r")]
        # Headers: content types are ignored by daprd; an api token is not asked for.
        for hdrs in [(("Content-Type", "text/plain"),), (("Content-Type", "application/xml"),),
                     (("Content-Type", "application/json; charset=utf-16"),),
                     (("dapr-api-token", "whatever"),), (("Content-Encoding", "gzip"),),
                     (("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),),
                     (("Expect", "100-continue"),)]:
            c2, p2 = self.new("routes")
            c2.steps.append(Http("POST", b"/v1.0/jobs/" + q(p2 + "h"), b'{"schedule":"@every 1h"}', hdrs))
            c2.steps.append(Http("GET", b"/v1.0/jobs/" + q(p2 + "h"), None, hdrs))
            c2.steps.append(Http("DELETE", b"/v1.0/jobs/" + q(p2 + "h"), None, hdrs))
            c2.cleanup.append(("job", p2 + "h"))

    def name_pool(self, p: str) -> list[str]:
        """Name segments as sent in a URL path (percent-encoding already applied)."""
        pool = ["{p}job", "{p}my||job@name", "{p}my%7C%7Cjob@name", "{p}%C3%9Cn%C3%AF%20c%C3%B8d%C3%A9%20%E2%98%83",
                "{p}Ünï", "{p}a.b:c-d_e", "{p}a+b", "{p}a%20b", "%20{p}trim%20", "{p}bad%2Fname",
                "{p}bad%5Cname", "{p}bad%23name", "{p}bad%3Fname", "{p}bad%00name", "{p}bad%0Aname",
                "{p}bad%09name", "{p}bad%7Fname", "{p}bad%C2%85name", "{p}zw%E2%80%8Bsp",
                "{p}bad%FFname", "%20", "+", "%09%20", "{p}UPPER", "{p}@", "{p}%zz", "{p}%",
                "{p}a;b", "{p}a=b", "{p}a&b", "{p}a'b", "{p}a%22b", "{p}a%3Cb%3E", "{p}~",
                "{p}%2e%2e", "{p}..", "{p}.", "{p}a%25b", "{p}%7C%7C", "{p}||", "{p}a||b||c",
                "{p}app||default||other||x", "{p}%F0%9F%98%80", "{p}%E2%80%AE", "{p}%EF%BB%BF",
                "{p}a%2Fb%2Fc", "{p}%5C%5C", "{p}a%0Db", "{p}%C0%AE", "{p}a%20", "{p}%C2%A0nbsp",
                "{p}a!b", "{p}a$b", "{p}a(b)", "{p}a*b", "{p}a,b", "{p}[x]", "{p}%7Bx%7D", "{p}a%5Eb",
                "{p}a%60b", "{p}a:b", "{p}1", "{p}-", "{p}_"]
        # Length edges of the composed name app||default||diff||<name> (at most 512 bytes).
        composed = len(f"app||default||{APP_ID}||")
        for total in (511, 512, 513, 600):
            pool.append("{p}" + "a" * (total - composed - len(p)))
        pool.append("{p}" + "é" * 246)  # 492 bytes of UTF-8 with the prefix: over, in bytes
        pool.append("{p}" + "%C3%A9" * 200)
        return pool

    def names_http(self):
        c0, p0 = self.new("names-http")
        for tmpl in self.name_pool(p0):
            c, p = self.new("names-http")
            seg = tmpl.replace("{p}", p).replace("é", "%C3%A9").encode("utf-8")
            for route in ("/v1.0/jobs/", "/v1.0-alpha1/jobs/"):
                c.steps += [Http("POST", route.encode() + seg, b'{"schedule":"@every 1h"}'),
                            Http("GET", route.encode() + seg),
                            Http("POST", route.encode() + seg, b'{"schedule":"@every 2h"}'),
                            Http("DELETE", route.encode() + seg), Http("GET", route.encode() + seg)]
            raw = tmpl.replace("{p}", p)
            try:
                name = urllib.parse.unquote(raw.replace("+", " "), errors="strict").strip()
                c.cleanup.append(("job", name))
            except UnicodeDecodeError:
                pass
            # The same name as a reminder name and as an actor id.
            c.steps += [Http("PUT", f"/v1.0/actors/{ACTOR}/1/reminders/".encode() + seg, b'{"dueTime":"1000h"}'),
                        Http("GET", f"/v1.0/actors/{ACTOR}/1/reminders/".encode() + seg),
                        Http("DELETE", f"/v1.0/actors/{ACTOR}/1/reminders/".encode() + seg),
                        Http("PUT", f"/v1.0/actors/{ACTOR}/".encode() + seg + b"/reminders/" + p.encode() + b"r",
                             b'{"dueTime":"1000h"}'),
                        Http("GET", f"/v1.0/actors/{ACTOR}/".encode() + seg + b"/reminders/" + p.encode() + b"r"),
                        Http("DELETE", f"/v1.0/actors/{ACTOR}/".encode() + seg + b"/reminders/" + p.encode() + b"r")]
            try:
                name = urllib.parse.unquote(raw, errors="strict")
                c.cleanup += [("reminder", ACTOR, "1", name), ("reminder", ACTOR, name, p + "r")]
            except UnicodeDecodeError:
                pass
        # Raw (unencoded) UTF-8 and spaces in the request target.
        for raw in ["Ünï", "a b", "☃", "a\tb"]:
            c, p = self.new("names-http")
            seg = (p + raw).encode("utf-8")
            c.steps += [Http("POST", b"/v1.0/jobs/" + seg, b'{"schedule":"@every 1h"}'),
                        Http("GET", b"/v1.0/jobs/" + seg), Http("DELETE", b"/v1.0/jobs/" + seg)]
            c.cleanup.append(("job", p + raw))
        self.cases.remove(c0)

    def names_grpc(self):
        names = ["{p}job", "{p}my||job@name", "{p}Ünï cødé ☃", "{p}a/b", "{p}a\\b", "{p}a#b",
                 "{p}a?b", "{p}a\x00b", "{p}a\nb", "{p}a\tb", "{p}a\x7fb", "{p}a\u0085b",
                 "{p}a\u200bb", " {p}spaced ", "", " ", "\t", "{p}.", "{p}..", ".", "..", "{p}||",
                 "{p}a||", "||{p}", "{p}%2F", "{p}a+b", "{p}\U0001F600", "{p}\u202e", "{p}\ufeff",
                 "{p}a\rb", "{p}\u00a0", "{p}ǅ", "{p}\u2028"]
        for tmpl in names:
            c, p = self.new("names-grpc")
            name = tmpl.replace("{p}", p)
            self.grpc_name_steps(c, name)
            c.cleanup.append(("job", name))
        composed = len(f"app||default||{APP_ID}||")
        for total in (511, 512, 513, 600, 5000):
            c, p = self.new("names-grpc")
            name = p + "a" * (total - composed - len(p))
            self.grpc_name_steps(c, name)
            c.cleanup.append(("job", name))
        # Not UTF-8: raw wire bytes (a generated client cannot send these).
        for bad in [b"\xff", b"\xc0\xae", b"\xed\xa0\x80", b"a\x80b"]:
            c, p = self.new("names-grpc")
            name = p.encode() + bad
            job = pb_bytes(1, name) + pb_bytes(2, b"@every 1h")
            c.steps += [Rpc("ScheduleJob", pb_bytes(1, job), f"job.name={name!r}", empty_pb2.Empty),
                        Rpc("GetJob", pb_bytes(1, name), f"name={name!r}", jobs_pb2.GetJobResponse),
                        Rpc("DeleteJob", pb_bytes(1, name), f"name={name!r}", empty_pb2.Empty),
                        Rpc("DeleteJobsByPrefix", pb_bytes(1, name), f"name_prefix={name!r}", empty_pb2.Empty),
                        Rpc("GetActorReminder", pb_bytes(1, ACTOR.encode()) + pb_bytes(2, b"1") + pb_bytes(3, name),
                            f"name={name!r}", actors_pb2.GetActorReminderResponse)]

    def grpc_name_steps(self, c: Case, name: str):
        job = jobs_pb2.Job(name=name, schedule="@every 1h")
        c.steps += [rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(job=job), empty_pb2.Empty),
                    rpc("GetJob", jobs_pb2.GetJobRequest(name=name), jobs_pb2.GetJobResponse),
                    rpc("ScheduleJobAlpha1", jobs_pb2.ScheduleJobRequest(job=job), empty_pb2.Empty),
                    rpc("GetJobAlpha1", jobs_pb2.GetJobRequest(name=name), jobs_pb2.GetJobResponse),
                    rpc("DeleteJob", jobs_pb2.DeleteJobRequest(name=name), empty_pb2.Empty),
                    rpc("GetJob", jobs_pb2.GetJobRequest(name=name), jobs_pb2.GetJobResponse),
                    rpc("RegisterActorReminder", actors_pb2.RegisterActorReminderRequest(
                        actor_type=ACTOR, actor_id="1", name=name, due_time="1000h"), empty_pb2.Empty),
                    rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                        actor_type=ACTOR, actor_id="1", name=name), actors_pb2.GetActorReminderResponse),
                    rpc("UnregisterActorReminder", actors_pb2.UnregisterActorReminderRequest(
                        actor_type=ACTOR, actor_id="1", name=name), empty_pb2.Empty)]
        c.cleanup.append(("reminder", ACTOR, "1", name))

    def random_body(self, *, schedule_bad: float = 0.15, due_bad: float = 0.15) -> tuple[bytes, bool]:
        """A generated job body (JSON text) and whether a GET after it is a race."""
        r = self.rng
        fields: list[tuple[str, str]] = []
        has_schedule = r.random() < 0.7
        if has_schedule:
            s = r.choice(SCHEDULES_BAD if r.random() < schedule_bad else SCHEDULES_VALID)
            fields.append(("schedule", json.dumps(s, ensure_ascii=False)))
        due_kind = None
        if r.random() < (0.5 if has_schedule else 0.9):
            pool = [d for d in DUES if (d[1] == "bad") == (r.random() < due_bad)]
            v, due_kind = r.choice(pool)
            fields.append((r.choice(["dueTime", "dueTime", "due_time"]), json.dumps(v, ensure_ascii=False)))
        repeats = r.random() < 0.3
        if repeats:
            fields.append(("repeats", r.choice(REPEATS_JSON[:5] * 3 + REPEATS_JSON)))
        ttl = r.random() < 0.25
        if ttl:
            v, _ = r.choice(TTLS)
            fields.append(("ttl", json.dumps(v)))
            # A ttl counts from the dueTime (which may be long past): the job may end at once.
        if r.random() < 0.5:
            fields.append(("data", r.choice(DATA_JSON)))
        if r.random() < 0.3:
            fields.append((r.choice(["failurePolicy", "failure_policy"]), r.choice(POLICIES_JSON)))
        if r.random() < 0.15:
            fields.append(("overwrite", r.choice(OVERWRITE_JSON)))
        if r.random() < 0.05:
            fields.append((r.choice(["name", "unknown", "labels", "Schedule", "DUETIME", "@type"]),
                           r.choice(['"x"', '""', "1", "{}", "null"])))
        r.shuffle(fields)
        body = "{" + ",".join(f'"{k}":{v}' for k, v in fields) + "}"
        return body.encode(), settles_soon(has_schedule, due_kind, repeats or ttl)

    def bodies(self):
        """Generated job bodies, valid and not, and malformed JSON."""
        for _ in range(self.n(700)):
            body, soon = self.random_body()
            route = self.rng.choice(["/v1.0/jobs/", "/v1.0/jobs/", "/v1.0-alpha1/jobs/"])
            self.job_case("bodies", body, route=route, get=not soon)
        for body in [b"", b" ", b"\n", b"null", b"[]", b"[{}]", b'"x"', b"1", b"true", b"{",
                     b'{"schedule":"@daily"', b'{"schedule":"@daily"}x', b'{"schedule":"@daily"} ',
                     b'{"schedule":"@daily"}{"x":1}', b"{'schedule':'@daily'}",
                     b'{"schedule":"@daily",}', b'{schedule:"@daily"}', b'\xef\xbb\xbf{"schedule":"@daily"}',
                     b'{"schedule":"@daily","schedule":"@hourly"}', b'{"schedule":"\xff"}',
                     b'{"schedule":"\\ud800"}', b'{"dueTime":"1000h","data":"\\ud800"}',
                     b'{"schedule":"@daily","data":' + b"[" * 200 + b"]" * 200 + b"}",
                     b'{"schedule":"@daily","data":' + b"[" * 10001 + b"]" * 10001 + b"}",
                     b'{"schedule":"@daily","data":"' + b"x" * 100000 + b'"}',
                     b'{"schedule":"@daily","dueTime":null,"ttl":null,"repeats":null}',
                     b'{"schedule":"@daily","dueTime":""}', b'{"dueTime":"1000h","schedule":null}',
                     b'{"schedule":1}', b'{"schedule":["@daily"]}', b'{"schedule":{"x":1}}',
                     b'{"schedule":true}', b'{"ttl":5,"schedule":"@daily"}',
                     b'{"schedule":"@daily","failurePolicy":{"constant":{"interval":"1s"}},"failure_policy":{"drop":{}}}',
                     b'{"schedule":"@daily","dueTime":"1000h","due_time":"2000h"}',
                     b'{"\\u0073chedule":"@daily"}', b'{"schedule":"@daily"}\x00',
                     b'\t{"schedule" : "@daily" }\n', b'{"Schedule":"@daily"}',
                     b'{"schedule":"@daily","repeats":1e400}', b'{"schedule":"@daily","data":1e400}',
                     b'{"schedule":"@daily","data":NaN}', b'{"schedule":"@daily","data":-}',
                     b'{"schedule":"@daily","data":01}', b'{"schedule":"@daily","data":.5}',
                     b'{"schedule":"@daily","data":"\\x41"}', b'{"schedule":"@daily","data":"\t"}']:
            self.job_case("bodies", body, get=True)

    def schedules(self):
        for s in SCHEDULES_VALID + SCHEDULES_BAD:
            self.job_case("schedules", jbody({"schedule": s}))
            self.job_case("schedules", jbody({"schedule": s, "dueTime": "1000h", "repeats": 2}))
            self.grpc_job_case("schedules", dict(schedule=s), None)
        for _ in range(self.n(150)):
            fields = [self.rng.choice(["*", "?", "0", "5", "59", "60", "1-5", "*/2", "1,2", "MON",
                                       "jan", "1-", "-", "*/", "L", "0/5", "5/0", "01", "007",
                                       "2-1", "1-5/2", "*/60", "1,*", "SUN-SAT", "sat-sun", "24",
                                       "31", "32", "12", "13", "7", "0-6"]) for _ in range(
                                           self.rng.choice([5, 6, 6, 6, 6, 7]))]
            s = " ".join(fields)
            self.job_case("schedules", jbody({"schedule": s, "dueTime": "1000h"}))

    def durations(self):
        for v, kind in DUES:
            self.job_case("durations", jbody({"dueTime": v}), get=kind == "far")
            self.job_case("durations", jbody({"schedule": "@every 1h", "dueTime": v}))
            self.grpc_job_case("durations", dict(due_time=v), kind)
        for v, kind in TTLS:
            self.job_case("durations", jbody({"schedule": "@every 1h", "ttl": v}), get=kind == "far")
            self.job_case("durations", jbody({"schedule": "@every 1h", "dueTime": "1000h", "ttl": v}))
            self.job_case("durations", jbody({"dueTime": "1000h", "ttl": v}))
            self.grpc_job_case("durations", dict(schedule="@every 1h", due_time="1000h", ttl=v), "far")
        for _ in range(self.n(150)):
            due, dk = self.rng.choice(DUES)
            ttl, tk = self.rng.choice(TTLS)
            sched = self.rng.choice([None, "@every 1h", "@daily", "0 0 0 1 1 *"])
            body = {"dueTime": due, "ttl": ttl}
            if sched:
                body["schedule"] = sched
            self.job_case("durations", jbody(body), get=not settles_soon(bool(sched), dk, True))
        # Generated Go durations and ISO-8601 forms.
        for _ in range(self.n(150)):
            r = self.rng
            if r.random() < 0.5:
                parts = "".join(f"{r.choice(['', '-', '+'])}{r.choice(['0', '1', '1.5', '999', '.5', '2.'])}"
                                f"{r.choice(['h', 'm', 's', 'ms', 'us', 'µs', 'ns', 'd', ''])}"
                                for _ in range(r.choice([1, 1, 2, 3])))
            else:
                parts = (r.choice(["", "R5/", "R0/", "R/"]) + "P" +
                         "".join(f"{r.choice(['1', '0', '12', '1.5'])}{u}"
                                 for u in r.sample(["Y", "M", "W", "D"], r.choice([0, 1, 2]))) +
                         r.choice(["", "T", "T1H", "T1M", "T1S", "T1H1M1S", "T0.5S", "T1000H"]))
            self.job_case("durations", jbody({"schedule": "@every 1h", "dueTime": parts}))
            self.job_case("durations", jbody({"schedule": "@every 1h", "dueTime": "1000h", "ttl": parts}))

    def policies(self):
        for pol in POLICIES_JSON:
            for key in ("failurePolicy", "failure_policy"):
                self.job_case("policies", f'{{"schedule":"@every 1h","{key}":{pol}}}'.encode())
        C = common_pb2
        grpc_pols = [
            C.JobFailurePolicy(), C.JobFailurePolicy(drop=C.JobFailurePolicyDrop()),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant()),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(max_retries=0)),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(max_retries=4294967295)),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(interval=duration_pb2.Duration())),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(interval=duration_pb2.Duration(seconds=-1))),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(interval=duration_pb2.Duration(nanos=1))),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(interval=duration_pb2.Duration(nanos=-5))),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(interval=duration_pb2.Duration(seconds=1, nanos=500000000), max_retries=7)),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(interval=duration_pb2.Duration(seconds=315576000001))),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(interval=duration_pb2.Duration(seconds=1, nanos=-1))),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(interval=duration_pb2.Duration(seconds=0, nanos=1000000000))),
            C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(interval=duration_pb2.Duration(seconds=-9223372036854775808))),
        ]
        for pol in grpc_pols:
            self.grpc_job_case("policies", dict(schedule="@every 1h", failure_policy=pol), None)
            self.grpc_job_case("policies", dict(due_time="1000h", failure_policy=pol), "far")

    def data_http(self):
        for d in DATA_JSON:
            self.job_case("data-http", f'{{"dueTime":"1000h","data":{d}}}'.encode())
        for _ in range(self.n(120)):
            self.job_case("data-http", jbody({"schedule": "@every 1h", "data": self.random_json(4)}))

    def random_json(self, depth: int):
        r = self.rng
        kind = r.choice(["s", "n", "f", "b", "null", "o", "a"] if depth > 0 else ["s", "n", "f", "b", "null"])
        if kind == "s":
            return "".join(r.choice("ab ü☃\"\\\n\t/😀<>&'") for _ in range(r.randint(0, 8)))
        if kind == "n":
            return r.choice([0, 1, -1, 2 ** 31, 2 ** 53, 2 ** 53 + 1, 2 ** 64, -(2 ** 63), 10 ** 20])
        if kind == "f":
            return r.choice([0.5, -1.25, 1e-10, 1e100, 3.141592653589793, 1.7976931348623157e308, 5e-324])
        if kind == "b":
            return r.random() < 0.5
        if kind == "null":
            return None
        if kind == "o":
            return {"".join(r.choice("ab@ü_") for _ in range(r.randint(0, 4))): self.random_json(depth - 1)
                    for _ in range(r.randint(0, 4))}
        return [self.random_json(depth - 1) for _ in range(r.randint(0, 4))]

    def grpc_job_case(self, category: str, fields: dict, due_kind: Optional[str],
                      method: str = "ScheduleJob", overwrite: bool = False):
        c, p = self.new(category)
        name = p + "g"
        job = jobs_pb2.Job(name=name, **fields)
        c.steps.append(rpc(method, jobs_pb2.ScheduleJobRequest(job=job, overwrite=overwrite), empty_pb2.Empty))
        ends = job.HasField("repeats") or job.HasField("ttl")
        if not settles_soon(job.HasField("schedule"), due_kind, ends):
            get = "GetJobAlpha1" if method.endswith("Alpha1") else "GetJob"
            c.steps.append(rpc(get, jobs_pb2.GetJobRequest(name=name), jobs_pb2.GetJobResponse))
            c.steps.append(Http("GET", b"/v1.0/jobs/" + q(name)))
            c.steps.append(Http("GET", b"/v1.0-alpha1/jobs/" + q(name)))
        c.steps.append(rpc("DeleteJob", jobs_pb2.DeleteJobRequest(name=name), empty_pb2.Empty))
        c.cleanup.append(("job", name))
        return c

    def grpc_jobs(self):
        r = self.rng
        for _ in range(self.n(450)):
            fields: dict = {}
            if r.random() < 0.7:
                fields["schedule"] = r.choice(SCHEDULES_BAD if r.random() < 0.15 else SCHEDULES_VALID)
            due_kind = None
            if r.random() < 0.6 or "schedule" not in fields:
                if r.random() < 0.9:
                    v, due_kind = r.choice([d for d in DUES if (d[1] == "bad") == (r.random() < 0.15)])
                    fields["due_time"] = v
            if r.random() < 0.3:
                fields["repeats"] = r.choice([0, 1, 3, 10, 4294967295])
            if r.random() < 0.25:
                fields["ttl"] = r.choice(TTLS)[0]
            if r.random() < 0.5:
                fields["data"] = r.choice(self.any_pool())
            if r.random() < 0.3:
                C = common_pb2
                fields["failure_policy"] = r.choice([
                    C.JobFailurePolicy(drop=C.JobFailurePolicyDrop()),
                    C.JobFailurePolicy(constant=C.JobFailurePolicyConstant(
                        interval=duration_pb2.Duration(seconds=r.choice([0, 1, 3, 30])),
                        max_retries=r.choice([0, 1, 5]))),
                    C.JobFailurePolicy(constant=C.JobFailurePolicyConstant()), C.JobFailurePolicy()])
            method = r.choice(["ScheduleJob", "ScheduleJob", "ScheduleJobAlpha1"])
            self.grpc_job_case("grpc-jobs", fields, due_kind, method, overwrite=r.random() < 0.2)

    def any_pool(self) -> list:
        def packed(m):
            a = any_pb2.Any()
            a.Pack(m)
            return a
        st = struct_pb2.Struct()
        st.update({"a": 1, "b": [True, None, "x"], "c": {"d": 2.5}})
        job = jobs_pb2.Job(name="inner", schedule="@daily")
        return [
            any_pb2.Any(), any_pb2.Any(value=b'{"a":1}'), packed(wrappers_pb2.StringValue(value="hello")),
            packed(struct_pb2.Value(string_value="v")), packed(struct_pb2.Value(number_value=1.5)),
            packed(struct_pb2.Value()), packed(st), packed(wrappers_pb2.BytesValue(value=b"\x00\xff")),
            packed(wrappers_pb2.Int64Value(value=123)), packed(wrappers_pb2.BoolValue(value=True)),
            packed(wrappers_pb2.DoubleValue(value=float("inf"))),
            any_pb2.Any(type_url="type.googleapis.com/my.Custom", value=b"\x01\x02\x03"),
            any_pb2.Any(type_url=VALUE_URL, value=b""),
            any_pb2.Any(type_url="type.googleapis.com/google.protobuf.StringValue", value=b"\x0a\x02\xff\xfe"),
            any_pb2.Any(type_url="type.googleapis.com/google.protobuf.StringValue", value=b"\xff\xff"),
            any_pb2.Any(type_url="google.protobuf.StringValue", value=b"\x0a\x01x"),
            any_pb2.Any(type_url="x/y", value=b""), any_pb2.Any(type_url="/", value=b""),
            packed(duration_pb2.Duration(seconds=5)), packed(timestamp_pb2.Timestamp(seconds=1700000000)),
            packed(packed(wrappers_pb2.StringValue(value="nested"))), packed(empty_pb2.Empty()),
            packed(job), packed(common_pb2.JobFailurePolicy(drop=common_pb2.JobFailurePolicyDrop())),
            packed(error_details_pb2.ErrorInfo(reason="R", domain="d")),
            packed(struct_pb2.ListValue(values=[struct_pb2.Value(bool_value=True)])),
            packed(wrappers_pb2.StringValue(value="ü☃\x00")),
            any_pb2.Any(type_url="", value=b"plain text"),
            any_pb2.Any(type_url="type.googleapis.com/", value=b""),
            any_pb2.Any(type_url="http://example.com/google.protobuf.StringValue", value=b"\x0a\x01x"),
            packed(timestamp_pb2.Timestamp(seconds=253402300800)),
            packed(struct_pb2.Value(number_value=float("nan"))),
        ]

    def grpc_data(self):
        for a in self.any_pool():
            self.grpc_job_case("grpc-data", dict(due_time="1000h", data=a), "far")
            c, p = self.new("grpc-data")
            c.steps += [rpc("RegisterActorReminder", actors_pb2.RegisterActorReminderRequest(
                actor_type=ACTOR, actor_id="d", name=p + "r", due_time="1000h", data=a.value),
                empty_pb2.Empty),
                rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                    actor_type=ACTOR, actor_id="d", name=p + "r"), actors_pb2.GetActorReminderResponse),
                Http("GET", f"/v1.0/actors/{ACTOR}/d/reminders/{p}r".encode())]
            c.cleanup.append(("reminder", ACTOR, "d", p + "r"))

    def overwrite(self):
        seqs = [
            [('{"schedule":"@daily"}', True), ('{"schedule":"@hourly"}', True)],
            [('{"schedule":"@daily"}', True), ('{"schedule":"@hourly","overwrite":true}', True)],
            [('{"schedule":"@daily"}', True), ('{"schedule":"@hourly","overwrite":false}', True)],
            [('{"schedule":"@daily","overwrite":true}', True), ('{"schedule":"@hourly","overwrite":true}', True)],
            [('{"schedule":"@daily","repeats":3,"data":{"a":1},"failurePolicy":{"drop":{}}}', True),
             ('{"dueTime":"2000h","overwrite":true}', True)],
            [('{"schedule":"@daily"}', True), ('{"schedule":"bad","overwrite":true}', True)],
            [('{"schedule":"@daily"}', True), ('{"overwrite":true}', True)],
            [('{"schedule":"@daily"}', True), ('{"schedule":"@daily","overwrite":null}', True)],
            [('{"schedule":"@daily"}', True), ('{"schedule":"@daily","overwrite":"true"}', True)],
        ]
        for seq in seqs:
            c, p = self.new("overwrite")
            seg = b"/v1.0/jobs/" + q(p + "o")
            for body, _ in seq:
                c.steps += [Http("POST", seg, body.encode()), Http("GET", seg)]
            c.steps.append(Http("DELETE", seg))
            c.cleanup.append(("job", p + "o"))
        for ow in (False, True):
            c, p = self.new("overwrite")
            j1 = jobs_pb2.Job(name=p + "o", schedule="@daily", data=any_pb2.Any(value=b"first"))
            j2 = jobs_pb2.Job(name=p + "o", due_time="2000h")
            c.steps += [rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(job=j1), empty_pb2.Empty),
                        rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(job=j2, overwrite=ow), empty_pb2.Empty),
                        rpc("GetJob", jobs_pb2.GetJobRequest(name=p + "o"), jobs_pb2.GetJobResponse),
                        rpc("ScheduleJobAlpha1", jobs_pb2.ScheduleJobRequest(job=j1, overwrite=ow), empty_pb2.Empty),
                        rpc("GetJobAlpha1", jobs_pb2.GetJobRequest(name=p + "o"), jobs_pb2.GetJobResponse)]
            c.cleanup.append(("job", p + "o"))
        # Reminders overwrite by default (unless overwrite:false).
        for bodies in [('{"dueTime":"1000h"}', '{"dueTime":"2000h"}'),
                       ('{"dueTime":"1000h"}', '{"dueTime":"2000h","overwrite":false}'),
                       ('{"dueTime":"1000h"}', '{"dueTime":"2000h","overwrite":true}'),
                       ('{"dueTime":"1000h","overwrite":false}', '{"dueTime":"2000h","overwrite":null}')]:
            c, p = self.new("overwrite")
            path = f"/v1.0/actors/{ACTOR}/o/reminders/{p}r".encode()
            for b in bodies:
                c.steps += [Http("PUT", path, b.encode()), Http("GET", path)]
            c.cleanup.append(("reminder", ACTOR, "o", p + "r"))

    def missing(self):
        for _ in range(self.n(40)):
            c, p = self.new("missing")
            n = p + "".join(self.rng.choice("abc-_.|@é") for _ in range(self.rng.randint(1, 12)))
            for route in ("/v1.0/jobs/", "/v1.0-alpha1/jobs/"):
                c.steps += [Http("GET", route.encode() + q(n)), Http("DELETE", route.encode() + q(n))]
            c.steps += [rpc("GetJob", jobs_pb2.GetJobRequest(name=n), jobs_pb2.GetJobResponse),
                        rpc("GetJobAlpha1", jobs_pb2.GetJobRequest(name=n), jobs_pb2.GetJobResponse),
                        rpc("DeleteJob", jobs_pb2.DeleteJobRequest(name=n), empty_pb2.Empty),
                        rpc("DeleteJobAlpha1", jobs_pb2.DeleteJobRequest(name=n), empty_pb2.Empty),
                        Http("GET", f"/v1.0/actors/{ACTOR}/m/reminders/".encode() + q(n)),
                        Http("DELETE", f"/v1.0/actors/{ACTOR}/m/reminders/".encode() + q(n)),
                        Http("GET", f"/v1.0/actors/{NOT_HOSTED}/m/reminders/".encode() + q(n)),
                        Http("DELETE", f"/v1.0/actors/{NOT_HOSTED}/m/reminders/".encode() + q(n)),
                        rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                            actor_type=ACTOR, actor_id="m", name=n), actors_pb2.GetActorReminderResponse),
                        rpc("UnregisterActorReminder", actors_pb2.UnregisterActorReminderRequest(
                            actor_type=ACTOR, actor_id="m", name=n), empty_pb2.Empty),
                        rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                            actor_type=NOT_HOSTED, actor_id="m", name=n), actors_pb2.GetActorReminderResponse)]

    def lists(self):
        """ListJobs / DeleteJobsByPrefix over a known set (everything of the app deleted first)."""
        pre = ["", None, "a", "a-", "b", "zzz", "a||", "||", "/", "a/b", " ", "é", "A", "a-1", "a-10",
               "a-1-extra", "\x00", "a" * 600]
        for variant in range(self.n(len(pre) * 2)):
            c, p = self.new("list")
            c.steps.append(rpc("DeleteJobsByPrefix", jobs_pb2.DeleteJobsByPrefixRequest(), empty_pb2.Empty))
            names = ["a-1", "a-2", "a-10", "b-1", "c||1", "é-1", "A-1", "a-1-extra"]
            if variant % 3 == 0:
                names = names[:3]
            for n in names:
                c.steps.append(rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(
                    job=jobs_pb2.Job(name=p + n, schedule="@every 1h", data=any_pb2.Any(value=n.encode()))),
                    empty_pb2.Empty))
                c.cleanup.append(("job", p + n))
            # A reminder of the same app must not be listed as a job.
            c.steps.append(Http("PUT", f"/v1.0/actors/{ACTOR}/l/reminders/{p}a-1".encode(), b'{"dueTime":"1000h"}'))
            c.cleanup.append(("reminder", ACTOR, "l", p + "a-1"))
            c.steps += [rpc("ListJobs", jobs_pb2.ListJobsRequest(), jobs_pb2.ListJobsResponse),
                        rpc("ListJobsAlpha1", jobs_pb2.ListJobsRequestAlpha1(), jobs_pb2.ListJobsResponseAlpha1)]
            px = pre[variant % len(pre)]
            method = "DeleteJobsByPrefix" if variant % 2 == 0 else "DeleteJobsByPrefixAlpha1"
            req_cls = (jobs_pb2.DeleteJobsByPrefixRequest if variant % 2 == 0
                       else jobs_pb2.DeleteJobsByPrefixRequestAlpha1)
            if px is None:
                req = req_cls()
            elif px == "":
                req = req_cls(name_prefix="")
            else:
                req = req_cls(name_prefix=p + px if variant % 4 < 2 else px)
            c.steps += [rpc(method, req, empty_pb2.Empty),
                        rpc("ListJobs", jobs_pb2.ListJobsRequest(), jobs_pb2.ListJobsResponse),
                        Http("GET", f"/v1.0/actors/{ACTOR}/l/reminders/{p}a-1".encode()),
                        rpc("ListActorReminders", actors_pb2.ListActorRemindersRequest(actor_type=ACTOR, actor_id="l"),
                            actors_pb2.ListActorRemindersResponse)]
        # An empty list.
        c, p = self.new("list")
        c.steps += [rpc("DeleteJobsByPrefix", jobs_pb2.DeleteJobsByPrefixRequest(), empty_pb2.Empty),
                    rpc("ListJobs", jobs_pb2.ListJobsRequest(), jobs_pb2.ListJobsResponse),
                    rpc("ListJobsAlpha1", jobs_pb2.ListJobsRequestAlpha1(), jobs_pb2.ListJobsResponseAlpha1),
                    rpc("DeleteJobsByPrefixAlpha1", jobs_pb2.DeleteJobsByPrefixRequestAlpha1(), empty_pb2.Empty)]

    def reminder_body(self) -> tuple[bytes, bool]:
        r = self.rng
        fields = []
        due_kind = None
        if r.random() < 0.8:
            v, due_kind = r.choice(DUES)
            fields.append(("dueTime", json.dumps(v, ensure_ascii=False)))
        period = r.random() < 0.6
        if period:
            v = r.choice(["1h", "1s", "0s", "R5/PT1S", "R/PT1S", "R0/PT1S", "R1/PT1H", "PT1H", "P1Y",
                          "P1M", "P1D", "PT0S", "@every 1h", "", "x", "-1s", "1h30m", "100ms",
                          "R5/P1D", "R-1/PT1S", "R5/PT1.5S", "2099-01-01T00:00:00Z", "R5/", "1d"])
            # Only these surely repeat without end; with any other the reminder may be over
            # (or never made) by the time of a GET.
            period = v in ("1h", "1s", "0s", "PT1H", "PT0S", "1h30m", "100ms")
            fields.append(("period", json.dumps(v)))
        ttl_soon = False
        if r.random() < 0.3:
            v, _ = r.choice(TTLS)
            fields.append(("ttl", json.dumps(v)))
            ttl_soon = True  # counted from the dueTime, which may be long past
        if r.random() < 0.5:
            fields.append(("data", r.choice(DATA_JSON)))
        if r.random() < 0.2:
            fields.append(("overwrite", r.choice(OVERWRITE_JSON)))
        if r.random() < 0.15:
            fields.append((r.choice(["failure_policy", "failurePolicy"]), r.choice(POLICIES_JSON)))
        if r.random() < 0.05:
            fields.append((r.choice(["name", "actorType", "unknown"]), '"x"'))
        r.shuffle(fields)
        body = ("{" + ",".join(f'"{k}":{v}' for k, v in fields) + "}").encode()
        return body, settles_soon(period and due_kind != "bad", due_kind, ttl_soon)

    def actor_state(self):
        """Actor state transactions and reads: on an actor not active yet, then (after a method
        call activates it) every body form below, each followed by reads of the keys it names."""
        bodies = [
            b'[{"operation":"upsert","request":{"key":"a","value":1}}]',
            b'[{"operation":"upsert","request":{"key":"a","value":{"z":1.50,"b":[true,null,"<&>"],"b":2}}}]',
            b'[{"operation":"upsert","request":{"key":"a","value":12345678901234567890}}]',
            b'[{"operation":"upsert","request":{"key":"a","value":1e21}},{"operation":"upsert","request":{"key":"b","value":1.5e-7}}]',
            b'[{"operation":"upsert","request":{"key":"a","value":"\u00fc\u2028x"}}]',
            b'[{"operation":"upsert","request":{"key":"a"}}]',
            b'[{"OPERATION":"upsert","Request":{"KEY":"a","Value":"v"}}]',
            b'[{"operation":"upsert","request":{"key":"a","value":1}},{"operation":"delete","request":{"key":"a"}}]',
            b'[{"operation":"delete","request":{"key":"b"}}]',
            b'null', b'[]', b'', b'{}', b'["x"]', b'[null]', b'[{"operation":1}]',
            b'[{"operation":"upsert"}]', b'[{"request":{"key":"a"}}]',
            b'[{"operation":"merge","request":{"key":"a"}}]',
            b'[{"operation":"upsert","request":"a"}]', b'[{"operation":"upsert","request":{}}]',
            b'[{"operation":"upsert","request":{"key":1}}]',
            b'[{"operation":"upsert","request":{"key":"a","value":1,"metadata":{"ttlInSeconds":"9"}}}]',
            b'[{"operation":"upsert","request":{"key":"a","value":1}},{"operation":"upsert","request":{}}]',
            b'[{"operation":"upsert","request":{"key":"a","value":1}} trailing',
        ]
        for body in bodies:
            c, p = self.new("actor-state")
            base = f"/v1.0/actors/{ACTOR}/{p}s".encode()
            c.steps += [Http("POST", base + b"/state", body),
                        Http("PUT", base + b"/method/activate", b""),
                        Http(self.rng.choice(["POST", "PUT"]), base + b"/state", body),
                        Http("GET", base + b"/state/a"), Http("GET", base + b"/state/b"),
                        rpc("GetActorState", actors_pb2.GetActorStateRequest(
                            actor_type=ACTOR, actor_id=f"{p}s", key="a"), actors_pb2.GetActorStateResponse)]
        c, p = self.new("actor-state")
        c.steps += [Http("GET", f"/v1.0/actors/dapr.internal.default.diff.workflow/{p}/state/a".encode()),
                    Http("POST", f"/v1.0/actors/dapr.internal.default.diff.workflow/{p}/state".encode(), b"[]"),
                    Http("GET", f"/v1.0/actors/{NOT_HOSTED}/{p}/state/a".encode()),
                    Http("POST", f"/v1.0/actors/{NOT_HOSTED}/{p}/state".encode(), b"[]")]

    def reminders_http(self):
        for _ in range(self.n(400)):
            body, soon = self.reminder_body()
            c, p = self.new("reminders-http")
            atype = self.rng.choice([ACTOR] * 8 + [OTHER_ACTOR, NOT_HOSTED])
            aid = self.rng.choice(["1", "a b", "ü", "x||y", "id-" + p])
            path = f"/v1.0/actors/{atype}/".encode() + q(aid) + b"/reminders/" + q(p + "r")
            method = self.rng.choice(["PUT", "PUT", "POST"])
            c.steps.append(Http(method, path, body))
            if not soon:
                c.steps += [Http("GET", path), rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                    actor_type=atype, actor_id=aid, name=p + "r"), actors_pb2.GetActorReminderResponse)]
            c.steps += [Http("DELETE", path), Http("GET", path)]
            c.cleanup.append(("reminder", atype, aid, p + "r"))
        for body in [b"", b"{}", b"null", b"[]", b"{", b'{"dueTime":5}', b'{"period":5}',
                     b'{"dueTime":"1000h"}x', b'{"dueTime":"1000h","data":' + b"[" * 10001 + b"]" * 10001 + b"}",
                     b'{"dueTime":"1000h","unknown":1}', b'{"DueTime":"1000h"}', b'{"duetime":"1000h"}',
                     b'{"dueTime":"1000h","ttl":"500h"}', b'{"dueTime":"1000h","period":"1h","ttl":"1001h"}',
                     b'{"dueTime":"1000h","overwrite":1}', b'{"dueTime":"1000h","data":{"@type":"x"}}',
                     b'{"period":"1h"}', b'{"period":"R5/PT1H"}', b'{"ttl":"1000h"}',
                     b'{"dueTime":"","period":""}', b'{"dueTime":"1000h","period":"R0/PT1S"}',
                     b'\xef\xbb\xbf{"dueTime":"1000h"}', b'{"dueTime":"1000h","dueTime":"2000h"}',
                     b'{"dueTime":"1000h","data":"\\ud800"}', b'{"dueTime":"\xff"}',
                     b'{"dueTime":"1000h","failure_policy":{"constant":{"interval":"1m"}}}',
                     b'{"dueTime":"1000h","failure_policy":{"drop":{}}}',
                     b'{"dueTime":"1000h","failurePolicy":{"drop":{}}}',
                     b'{"dueTime":"1000h","failure_policy":{"constant":{"interval":"2s","maxRetries":3}}}']:
            c, p = self.new("reminders-http")
            path = f"/v1.0/actors/{ACTOR}/1/reminders/{p}r".encode()
            c.steps += [Http("PUT", path, body), Http("GET", path), Http("DELETE", path)]
            c.cleanup.append(("reminder", ACTOR, "1", p + "r"))
        # Other actor routes beside reminders, on a hosted and a not hosted type.
        c, p = self.new("reminders-http")
        for t in (ACTOR, NOT_HOSTED):
            for m, path, b in [("PUT", f"/v1.0/actors/{t}/1/timers/{p}t", b'{"dueTime":"1000h","period":"1h"}'),
                               ("PUT", f"/v1.0/actors/{t}/1/timers/{p}t2", b'{"dueTime":"1s","period":"nope"}'),
                               ("DELETE", f"/v1.0/actors/{t}/1/timers/{p}t", None),
                               ("GET", f"/v1.0/actors/{t}/1/timers/{p}t", None),
                               ("GET", f"/v1.0/actors/{t}/1/state/k", None)]:
                c.steps.append(Http(m, path.encode(), b))

    def reminders_grpc(self):
        r = self.rng
        for _ in range(self.n(200)):
            c, p = self.new("reminders-grpc")
            atype = r.choice([ACTOR] * 6 + [OTHER_ACTOR, NOT_HOSTED, ""])
            aid = r.choice(["1", "a b", "ü", "", "x||y"])
            name = p + r.choice(["r", "r||x", "r/x", "ü"])
            due, dk = r.choice(DUES + [("", "bad")] * 5)
            period = r.choice(["", "", "1h", "R5/PT1S", "P1Y", "R/PT1S", "x", "0s", "R1/PT1H"])
            ttl = r.choice(["", "", "", "1000h", "1s", "x", "P9Y"])
            req = actors_pb2.RegisterActorReminderRequest(
                actor_type=atype, actor_id=aid, name=name, due_time=due, period=period, ttl=ttl,
                data=r.choice([b"", b"hi", b'{"a":1}', b"\xff\x00", b'"s"']))
            if r.random() < 0.3:
                req.overwrite = r.random() < 0.5
            if r.random() < 0.2:
                req.failure_policy.CopyFrom(r.choice([
                    common_pb2.JobFailurePolicy(drop=common_pb2.JobFailurePolicyDrop()),
                    common_pb2.JobFailurePolicy(constant=common_pb2.JobFailurePolicyConstant(
                        interval=duration_pb2.Duration(seconds=2), max_retries=3))]))
            c.steps.append(rpc("RegisterActorReminder", req, empty_pb2.Empty))
            finite = period.startswith("R") and not period.startswith("R/")
            has_period = period not in ("", "x", "P1Y")
            if not settles_soon(has_period, dk, finite or bool(ttl)):
                c.steps += [rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                    actor_type=atype, actor_id=aid, name=name), actors_pb2.GetActorReminderResponse),
                    Http("GET", f"/v1.0/actors/{atype}/".encode() + q(aid) + b"/reminders/" + q(name)),
                    rpc("ListActorReminders", actors_pb2.ListActorRemindersRequest(actor_type=atype, actor_id=aid),
                        actors_pb2.ListActorRemindersResponse)]
            c.steps += [rpc("UnregisterActorReminder", actors_pb2.UnregisterActorReminderRequest(
                actor_type=atype, actor_id=aid, name=name), empty_pb2.Empty),
                rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                    actor_type=atype, actor_id=aid, name=name), actors_pb2.GetActorReminderResponse)]
            c.cleanup.append(("reminder", atype, aid, name))
        c, p = self.new("reminders-grpc")
        for t, i in [(ACTOR, None), (ACTOR, "zz" + p), (NOT_HOSTED, None), ("", None), (OTHER_ACTOR, "")]:
            req = actors_pb2.UnregisterActorRemindersByTypeRequest(actor_type=t)
            if i is not None:
                req.actor_id = i
            c.steps.append(rpc("ListActorReminders", actors_pb2.ListActorRemindersRequest(actor_type=t, actor_id=i or ""),
                               actors_pb2.ListActorRemindersResponse))
        c.steps.append(Rpc("UnregisterActorRemindersByType",
                           actors_pb2.UnregisterActorRemindersByTypeRequest(actor_type=NOT_HOSTED).SerializeToString(),
                           "actor_type=Nope", actors_pb2.UnregisterActorRemindersByTypeResponse))


AUTH_TOKEN = "s3cret"


def _auth(self):
    """With DAPR_API_TOKEN set and a 1 KiB body limit on both sidecars (tests/api_http.rs
    api_token_is_enforced_except_on_healthz, bodies_over_the_limit_are_413; tests/api_grpc.rs
    api_token_goes_in_metadata, messages_over_the_limit_are_refused)."""
    good = (("dapr-api-token", AUTH_TOKEN),)
    tokens = [(), good, (("dapr-api-token", "wrong"),), (("dapr-api-token", ""),),
              (("Dapr-Api-Token", AUTH_TOKEN),), (("dapr-api-token", AUTH_TOKEN + " "),),
              (("Authorization", "Bearer " + AUTH_TOKEN),)]
    for hdrs in tokens:
        c, p = self.new("auth")
        c.phase = "auth"
        job = b"/v1.0/jobs/" + q(p + "t")
        rem = f"/v1.0/actors/{ACTOR}/1/reminders/{p}r".encode()
        c.steps += [Http("POST", job, b'{"schedule":"@every 1h"}', hdrs), Http("GET", job, None, hdrs),
                    Http("GET", job, None, good), Http("DELETE", job, None, hdrs),
                    Http("POST", b"/v1.0-alpha1/jobs/" + q(p + "t"), b'{"schedule":"@every 1h"}', hdrs),
                    Http("PUT", rem, b'{"dueTime":"1000h"}', hdrs), Http("GET", rem, None, hdrs),
                    Http("DELETE", rem, None, hdrs), Http("GET", b"/v1.0/healthz", None, hdrs),
                    Http("GET", b"/v1.0/healthz/outbound", None, hdrs),
                    Http("GET", b"/v1.0/nowhere", None, hdrs), Http("GET", b"/v1.0/jobs", None, hdrs),
                    Http("PUT", b"/v1.0/jobs/" + q(p + "t"), b"{}", hdrs)]
        md = tuple((k.lower(), v) for k, v in hdrs if k.lower() == "dapr-api-token")
        for r in [rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(
                      job=jobs_pb2.Job(name=p + "g", schedule="@every 1h")), empty_pb2.Empty),
                  rpc("GetJob", jobs_pb2.GetJobRequest(name=p + "g"), jobs_pb2.GetJobResponse),
                  rpc("ListJobsAlpha1", jobs_pb2.ListJobsRequestAlpha1(), jobs_pb2.ListJobsResponseAlpha1),
                  rpc("ListJobs", jobs_pb2.ListJobsRequest(), jobs_pb2.ListJobsResponse),
                  rpc("DeleteJob", jobs_pb2.DeleteJobRequest(name=p + "g"), empty_pb2.Empty),
                  rpc("RegisterActorReminder", actors_pb2.RegisterActorReminderRequest(
                      actor_type=ACTOR, actor_id="1", name=p + "g", due_time="1000h"), empty_pb2.Empty),
                  rpc("GetActorReminder", actors_pb2.GetActorReminderRequest(
                      actor_type=ACTOR, actor_id="1", name=p + "g"), actors_pb2.GetActorReminderResponse)]:
            r.metadata = md
            r.shown += f" metadata={dict(md)}"
            c.steps.append(r)
        c.cleanup += [("job", p + "t"), ("job", p + "g"), ("reminder", ACTOR, "1", p + "r"),
                      ("reminder", ACTOR, "1", p + "g")]
    # Bodies at and over the limit (1 KiB), with the right token.
    for size in (1023, 1024, 1025, 2000, 100000):
        c, p = self.new("auth")
        c.phase = "auth"
        head = b'{"schedule":"@every 1h","data":"'
        body = head + b"x" * max(0, size - len(head) - 2) + b'"}'
        job = b"/v1.0/jobs/" + q(p + "b")
        rem = f"/v1.0/actors/{ACTOR}/1/reminders/{p}b".encode()
        rbody = b'{"dueTime":"1000h","data":"' + b"x" * max(0, size - 29) + b'"}'
        c.steps += [Http("POST", job, body, good), Http("GET", job, None, good),
                    Http("PUT", rem, rbody, good), Http("GET", rem, None, good)]
        blob = any_pb2.Any(type_url="type.googleapis.com/google.protobuf.BytesValue", value=b"\x07" * size)
        for r in [rpc("ScheduleJob", jobs_pb2.ScheduleJobRequest(
                      job=jobs_pb2.Job(name=p + "g", schedule="@every 1h", data=blob)), empty_pb2.Empty),
                  rpc("GetJob", jobs_pb2.GetJobRequest(name=p + "g"), jobs_pb2.GetJobResponse)]:
            r.metadata = good
            r.shown = r.shown[:200] + f"… ({size} data bytes) metadata={dict(good)}"
            c.steps.append(r)
        c.cleanup += [("job", p + "b"), ("job", p + "g"), ("reminder", ACTOR, "1", p + "b")]


Corpus.auth = _auth


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_bytes(num: int, b: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(b)) + b


# ---------------------------------------------------------------- running


@dataclass
class Side:
    name: str
    http_port: int
    grpc_port: int
    channel: Optional[grpc.Channel] = None
    token: Optional[str] = None  # the sidecar's DAPR_API_TOKEN, sent on the harness's own calls

    def connect(self):
        self.channel = grpc.insecure_channel(
            f"127.0.0.1:{self.grpc_port}",
            options=[("grpc.max_receive_message_length", 64 << 20),
                     ("grpc.max_metadata_size", 4 << 20),
                     ("grpc.max_send_message_length", 64 << 20)])

    def send(self, req):
        if isinstance(req, Http):
            return http_call(self.http_port, req.method, req.path, req.body, req.headers)
        return grpc_call(self.channel, req.method, req.payload, req.metadata)

    def cleanup(self, items):
        # Everything of the app, whatever a case left behind (on one side only, too): every
        # job, and the reminders of both hosted actor types.
        sweep = [("DeleteJobsByPrefix", jobs_pb2.DeleteJobsByPrefixRequest())]
        sweep += [("UnregisterActorRemindersByType", actors_pb2.UnregisterActorRemindersByTypeRequest(actor_type=t))
                  for t in (ACTOR, OTHER_ACTOR)]
        md = (("dapr-api-token", self.token),) if self.token else ()
        for method, msg in sweep:
            grpc_call(self.channel, method, msg.SerializeToString(), md)
        for item in items:
            try:
                if item[0] == "job":
                    grpc_call(self.channel, "DeleteJob", jobs_pb2.DeleteJobRequest(name=item[1]).SerializeToString(), md)
                else:
                    _, t, i, n = item
                    grpc_call(self.channel, "UnregisterActorReminder", actors_pb2.UnregisterActorReminderRequest(
                        actor_type=t, actor_id=i, name=n).SerializeToString(), md)
            except ValueError:
                pass


def observe(req, answer, case_text: str) -> dict:
    """The answer as compared; timestamps and ids that no request of the case contained are
    normalised (`case_text`: every request of the case)."""
    return observe_http(answer, case_text) if isinstance(req, Http) else observe_grpc(answer, req, case_text)


def route_of(req) -> str:
    """The request's route with the case's names, actor types and ids abstracted."""
    if isinstance(req, Rpc):
        return f"gRPC {req.method}"
    path = req.path.decode("utf-8", "replace").split("?")[0]
    path = re.sub(r"(/actors/)[^/]*/[^/]*/(reminders|timers|state)/.*$", r"\1{type}/{id}/\2/{name}", path)
    path = re.sub(r"(/jobs/).+$", r"\1{name}", path)
    path = re.sub(r"c\d{5}-[^/]*", "{name}", path)
    return f"HTTP {req.method} {path}"


def causes_of(route: str, a: dict, b: dict, diffs: list) -> list[tuple[str, list]]:
    """The pair's differences grouped into causes, each named by the route and by what kind of
    answer each side gave (status or code, error code): a missing or extra header is a cause
    of its own; answers of different kinds are one cause; answers of the same kind have a cause
    per differing field."""
    out = []
    rest = []
    for d in diffs:
        if d[0] in ("traceparent", "header names", "metadata"):
            out.append((f"{route} | {d[0]} {short(d[1])}≠{short(d[2])}", [d]))
        else:
            rest.append(d)
    if not rest:
        return out

    def err(o):
        body = o.get("body")
        return body.get("errorCode") if isinstance(body, dict) else None
    if "code" in a:  # gRPC
        kind = (f"code {a['code']}≠{b['code']}" if a["code"] != b["code"] else f"code {a['code']}")
        if a["code"] != "OK" and a["code"] == b["code"]:
            da = (a.get("status details") or {}).get("details") or []
            db = (b.get("status details") or {}).get("details") or []
            ra = [x.get("reason") for x in da if "reason" in x]
            rb = [x.get("reason") for x in db if "reason" in x]
            kind += f", reason {ra}" if ra == rb else f", reason {ra}≠{rb}"
    else:
        kind = (f"status {a['status']}≠{b['status']}" if a["status"] != b["status"]
                else f"status {a['status']}")
        ea, eb = err(a), err(b)
        if ea != eb:
            kind += f", errorCode {ea}≠{eb}"
        elif ea:
            kind += f", errorCode {ea}"
    if any(d[0] in ("status", "code") for d in rest) or ("code" not in a and err(a) != err(b)):
        # One cause: the rest of the answers differ because they are different answers.
        out.append((f"{route} | {kind}", rest))
        return out
    # Same kind of answer: each differing field is a cause of its own (the wire bytes of a
    # gRPC answer only when nothing else differs: then the encoding alone differs).
    fields: dict[str, list] = {}
    for d in rest:
        f = re.sub(r"\[\d+\]", "[]", d[0])
        if f == "status details.message":
            f = "message"  # the same text as the status message
        elif f.startswith("status details"):
            f = "status details"
        elif f in ("body kind", "content-type"):
            f = "body"  # one answer body: its type, kind and text
        else:
            f = ".".join(f.split(".")[:3])
        fields.setdefault(f, []).append(d)
    if len(fields) > 1:
        fields.pop("response bytes", None)
    for f, ds in fields.items():
        out.append((f"{route} | {kind}; differs in {f}", ds))
    return out


def load_deliberate(path: str) -> list[tuple[re.Pattern, str]]:
    out = []
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            pat, _, why = line.partition("\t")
            out.append((re.compile(pat), why.strip()))
    return out


def tsv(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def run(args) -> int:
    t_start = time.time()
    corpus = Corpus(args.seed, args.scale)
    cases = corpus.build(set(args.only.split(",")) if args.only else None)
    n_req = sum(len(c.steps) for c in cases)
    log(f"corpus: {len(cases)} cases, {n_req} requests per side (seed {args.seed})")

    work = args.keep_logs or tempfile.mkdtemp(prefix="jobsd-diff.")
    os.makedirs(work, exist_ok=True)
    procs = Procs(work)
    app = App()
    try:
        cp = start_control_plane(args, procs, work)

        def sidecars(phase: str) -> tuple[Side, Side]:
            procs.stop("jobsd")
            procs.stop("daprd")
            t0 = time.time()
            sides = start_sidecars(args, procs, app, work, cp, phase)
            log(f"sidecars for phase {phase} up in {time.time() - t0:.1f} s; logs in {work}")
            return sides

        rc = compare_all(args, cases, sidecars, procs, t_start)
    finally:
        procs.stop()
        app.server.shutdown()
        if not args.keep_logs:
            shutil.rmtree(work, ignore_errors=True)
    return rc


PHASES = {
    "main": {"token": None, "max_body": None},
    "auth": {"token": AUTH_TOKEN, "max_body": "1Ki"},
}


def start_control_plane(args, procs: Procs, work: str) -> dict:
    """The real Scheduler (embedded etcd) and placement; their addresses."""
    bdir = args.dapr_bin_dir
    s_port, s_health, s_metrics, s_etcd, s_peer, p_port, p_health, p_metrics, p_raft = free_ports(9)
    procs.spawn("scheduler", [
        args.scheduler_bin or f"{bdir}/scheduler", "--id", "diff-scheduler-0", "--port", str(s_port),
        "--healthz-port", str(s_health), "--healthz-listen-address", "127.0.0.1",
        "--metrics-port", str(s_metrics), "--metrics-listen-address", "127.0.0.1",
        "--listen-address", "127.0.0.1", "--etcd-data-dir", os.path.join(work, "etcd"),
        "--etcd-client-port", str(s_etcd), "--etcd-client-listen-address", "127.0.0.1",
        "--etcd-initial-cluster", f"diff-scheduler-0=http://127.0.0.1:{s_peer}",
        "--identity-directory-write", os.path.join(work, "tls"), "--log-level", "warn"])
    procs.spawn("placement", [
        f"{bdir}/placement", "--id", "diff-placement-0", "--port", str(p_port),
        "--listen-address", "127.0.0.1", "--healthz-port", str(p_health),
        "--healthz-listen-address", "127.0.0.1", "--metrics-port", str(p_metrics),
        "--metrics-listen-address", "127.0.0.1",
        "--initial-cluster", f"diff-placement-0=127.0.0.1:{p_raft}", "--tls-enabled=false",
        "--log-level", "warn"])
    wait_until("the Scheduler's healthz", lambda: http_status(s_health, "/healthz") == 200, 60, procs, "scheduler")
    wait_until("placement's healthz", lambda: http_status(p_health, "/healthz") == 200, 60, procs, "placement")
    res = os.path.join(work, "resources")
    os.makedirs(res, exist_ok=True)
    with open(os.path.join(res, "actorstore.yaml"), "w") as f:
        f.write("apiVersion: dapr.io/v1alpha1\nkind: Component\nmetadata:\n  name: actorstore\n"
                "spec:\n  type: state.in-memory\n  version: v1\n  metadata:\n"
                "  - name: actorStateStore\n    value: \"true\"\n")
    return {"scheduler": f"127.0.0.1:{s_port}", "placement": f"127.0.0.1:{p_port}", "resources": res}


def start_sidecars(args, procs: Procs, app: App, work: str, cp: dict, phase: str) -> tuple[Side, Side]:
    """daprd (the real Scheduler and placement behind it) and jobsd (embedded), app id `diff`,
    both serving the app, configured for `phase`; returns once both host the actor types."""
    cfg = PHASES[phase]
    d_http, d_grpc, d_int, d_metrics, d_prof, d_pub, j_http, j_grpc, j_metrics = free_ports(9)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPR_", "APP_"))}
    env["NAMESPACE"] = "default"
    if cfg["token"]:
        env["DAPR_API_TOKEN"] = cfg["token"]
    limit = ["--max-body-size", cfg["max_body"]] if cfg["max_body"] else []
    procs.spawn("daprd", [
        f"{args.dapr_bin_dir}/daprd", "--app-id", APP_ID, "--app-port", str(app.port),
        "--dapr-http-port", str(d_http), "--dapr-grpc-port", str(d_grpc),
        "--dapr-internal-grpc-port", str(d_int), "--dapr-internal-grpc-listen-address", "127.0.0.1",
        "--dapr-listen-addresses", "127.0.0.1", "--metrics-port", str(d_metrics),
        "--metrics-listen-address", "127.0.0.1", "--profile-port", str(d_prof),
        "--dapr-public-port", str(d_pub), "--dapr-public-listen-address", "127.0.0.1",
        "--placement-host-address", cp["placement"], "--scheduler-host-address", cp["scheduler"],
        "--resources-path", cp["resources"], "--log-level", "warn", *limit], env=env)
    procs.spawn("jobsd", [
        args.jobsd_bin, "--app-id", APP_ID, "--app-port", str(app.port),
        "--dapr-http-port", str(j_http), "--dapr-grpc-port", str(j_grpc),
        "--dapr-listen-addresses", "127.0.0.1", "--metrics-port", str(j_metrics),
        "--metrics-listen-address", "127.0.0.1", "--data-dir", os.path.join(work, f"jobsd-data-{phase}"),
        "--log-level", "warn", *limit], env=dict(env, NO_COLOR="1"))
    daprd = Side("daprd", d_http, d_grpc, token=cfg["token"])
    jobsd = Side("jobsd", j_http, j_grpc, token=cfg["token"])
    hdrs = (("dapr-api-token", cfg["token"]),) if cfg["token"] else ()
    for s in (daprd, jobsd):
        wait_until(f"{s.name} healthz", lambda s=s: http_status(s.http_port, "/v1.0/healthz") == 204,
                   90, procs, s.name)
        s.connect()
        probe = f"/v1.0/actors/{ACTOR}/probe/reminders/probe".encode()
        wait_until(f"{s.name} hosting {ACTOR}", lambda s=s: http_call(
            s.http_port, "PUT", probe, b'{"dueTime":"1000h"}', hdrs).status == 204, 90, procs, s.name)
        http_call(s.http_port, "DELETE", probe, None, hdrs)
        wait_until(f"{s.name} hosting {OTHER_ACTOR}", lambda s=s: http_call(
            s.http_port, "DELETE", f"/v1.0/actors/{OTHER_ACTOR}/probe/reminders/probe".encode(), None,
            hdrs).status == 204, 90, procs, s.name)
    return daprd, jobsd


def mutating(req) -> bool:
    """Could the request have changed a side's state (so that later answers of the case may
    differ only because of it)?"""
    if isinstance(req, Http):
        return req.method not in ("GET", "HEAD", "OPTIONS")
    return not req.method.startswith(("Get", "List"))


JOB_ROUTE = re.compile(rb"/jobs/")


MONTH_DAYS = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


def never_fires(schedule) -> bool:
    """A 6-field cron spec whose day of month the month never has ("0 0 0 31 2 *")."""
    f = schedule.split() if isinstance(schedule, str) else []
    return (len(f) == 6 and f[3].isdigit() and f[4].isdigit() and f[5] in ("*", "?")
            and int(f[4]) in MONTH_DAYS and int(f[3]) > MONTH_DAYS[int(f[4])])


def case_tags(case: Case) -> list[str]:
    """Facts about a case's requests that a pattern (deliberate or bug) may need beyond the
    request whose answers differ: `http-job-without-data` when a job is created over HTTP
    without a `data` member (daprd <= 1.18 then stores an Any of an empty Value);
    `schedule-never-fires` when a job is created with a schedule that never fires."""
    tags = []
    for req in case.steps:
        if isinstance(req, Http) and req.method == "POST" and JOB_ROUTE.search(req.path):
            try:
                body = json.loads(req.body) if req.body and req.body.strip() else {}
            except (ValueError, RecursionError):
                continue
            if isinstance(body, dict) and "data" not in body:
                tags.append("http-job-without-data")
            if isinstance(body, dict) and never_fires(body.get("schedule")):
                tags.append("schedule-never-fires")
        elif isinstance(req, Rpc) and req.method.startswith("ScheduleJob"):
            m = re.search(r'"schedule": ("[^"]*")', req.shown)
            if m and never_fires(json.loads(m.group(1))):
                tags.append("schedule-never-fires")
    return sorted(set(tags))


def compare_all(args, cases: list[Case], sidecars: Callable[[str], tuple[Side, Side]], procs: Procs,
                t_start: float) -> int:
    phase = None
    deliberate = load_deliberate(args.deliberate)
    bugs = load_deliberate(args.bugs)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    rows = []
    counts = collections.Counter()
    # cause -> [(pair id, request summary, what)] for pairs that fail / are kept as deliberate
    causes: dict[str, list] = collections.defaultdict(list)
    kept: dict[str, list] = collections.defaultdict(list)
    reasons: dict[str, str] = {}
    t0 = time.time()
    sent = only_b1 = 0
    dump = open(args.dump, "w", encoding="utf-8", errors="backslashreplace") if args.dump else None
    cases = sorted(cases, key=lambda c: list(PHASES).index(c.phase))
    for ci, case in enumerate(cases):
        if case.phase != phase:
            phase = case.phase
            daprd, jobsd = sidecars(phase)
        if ci and ci % 250 == 0:
            log(f"{ci}/{len(cases)} cases, {sent} pairs, {counts['differs']} differ, "
                f"{counts['deliberate']} deliberate ({time.time() - t0:.0f} s)")
        # The first answer to a request that changes state which differed in kind (status or
        # code) in this case: later answers may differ only because the two sides' state
        # diverged there.
        diverged: Optional[tuple[str, bool]] = None
        tags = case_tags(case)
        case_text = "\n".join(r.text() for r in case.steps)
        for si, req in enumerate(case.steps):
            sid = f"{case.id}.{si}"
            summary = req.summary()
            if len(summary) > 400:
                summary = summary[:400] + "…"
            a = observe(req, daprd.send(req), case_text)
            b = observe(req, jobsd.send(req), case_text)
            sent += 1
            if dump is not None:
                dump.write(json.dumps({"pair": sid, "request": summary, "daprd": a, "jobsd": b},
                                      ensure_ascii=False, default=str) + "\n")
            diffs = diff(a, b)
            if not diffs:
                counts["same"] += 1
                rows.append((sid, case.category, summary[:200], "same", ""))
                continue
            route = route_of(req)
            failing, kept_here, texts = [], [], []
            status_cause = None  # (cause, kept) of the difference in kind of answer, if any
            for cause, ds in causes_of(route, a, b, diffs):
                dtexts = [line(d) for d in ds]
                texts += dtexts
                why = None
                # What a deliberate pattern is matched against: the case's tags, the request,
                # and every difference of this cause.
                subject = f"[{' '.join(tags)}] {summary}\t" + "; ".join(dtexts)
                for pat, reason in deliberate:
                    if pat.search(cause) or pat.search(subject):
                        why = reason
                        break
                header_only = all(d[0] in ("traceparent", "header names", "metadata") for d in ds)
                if why is None and diverged is not None and not header_only:
                    first, first_deliberate = diverged
                    cause = f"after an earlier difference in the case: {first}"
                    if first_deliberate:
                        why = "follows from a deliberate difference earlier in the case"
                if why is None:
                    if not cause.startswith("after an earlier difference"):
                        for pat, label in bugs:
                            if pat.search(cause) or pat.search(subject):
                                cause = f"jobsd bug: {label}"
                                break
                    failing.append(cause)
                else:
                    kept_here.append(cause)
                    reasons[cause] = why
                if any(d[0] in ("status", "code") for d in ds) and status_cause is None:
                    status_cause = (cause, why is not None)
            if diverged is None and mutating(req) and status_cause is not None:
                diverged = status_cause
            what = "; ".join(texts)
            if len(what) > 2000:
                what = what[:2000] + "…"
            status = "differs" if failing else "deliberate"
            counts[status] += 1
            if failing and all(c.startswith("jobsd bug: B1 ") for c in failing):
                only_b1 += 1
            for cause in dict.fromkeys(failing):
                causes[cause].append((sid, summary, what))
            for cause in dict.fromkeys(kept_here):
                kept[cause].append((sid, summary, what))
            # The row names bugs and deliberate differences by their ids (B…, D…; the summary
            # and the two .tsv files say what they are); a follow-on says so.
            ids = [label_id(c) for c in failing] + [label_id(reasons[c]) for c in kept_here]
            ids = [i for i in dict.fromkeys(ids) if i]
            note = f" [{', '.join(ids)}]" if ids else ""
            rows.append((sid, case.category, summary[:200], status, what[:600] + note))
        daprd.cleanup(case.cleanup)
        jobsd.cleanup(case.cleanup)
        for name in ("scheduler", "placement", "daprd", "jobsd"):
            if not procs.alive(name):
                log(f"{name} died during case {case.id}:\n{procs.tail(name)}")
                counts["differs"] += 1
                rows.append((case.id, case.category, f"{name} died", "differs", procs.tail(name, 10)))
                write_tsv(args.out, rows)
                print(f"{counts['same'] + counts['deliberate']} passed, {counts['differs']} failed")
                return 1
    write_tsv(args.out, rows)
    elapsed = time.time() - t_start
    version = os.path.basename(os.path.normpath(args.dapr_bin_dir))
    sched = f" (Scheduler {args.scheduler_bin})" if args.scheduler_bin else ""
    out = [f"== differential: real daprd + Scheduler {version}{sched} vs jobsd "
           f"({os.path.basename(args.jobsd_bin)}), seed {args.seed}, scale {args.scale}",
           f"cases: {len(cases)}; requests sent: {sent} to each side ({2 * sent} in all); "
           f"same: {counts['same']}; differ: {counts['differs']}; kept as deliberate: {counts['deliberate']}",
           f"of the pairs that differ, {only_b1} differ only in the Traceparent header (B1)",
           f"results: {args.out}; took {elapsed:.0f} s"]
    known = {c: v for c, v in causes.items() if "jobsd bug: " in c}
    other = {c: v for c, v in causes.items() if c not in known}
    for title, group in ((f"jobsd bugs found earlier ({os.path.basename(args.bugs)}), still there", known),
                         ("differences by cause, not yet triaged", other)):
        if not group:
            continue
        out.append(f"\n-- {title}: {len(group)} causes, by the pairs that show them (a pair may show several)")
        for cause, items in sorted(group.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            out.append(f"{len(items):5d}  {cause}")
            for sid, summary, what in items[:2]:
                out.append(f"         e.g. {sid} {summary[:200]}")
                out.append(f"              {what[:500]}")
    if kept:
        out.append(f"\n-- kept as deliberate ({os.path.basename(args.deliberate)}): {len(kept)} causes")
        for cause, items in sorted(kept.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            out.append(f"{len(items):5d}  {cause}\n         why: {reasons[cause]}")
    out.append(f"\n{counts['same'] + counts['deliberate']} passed, {counts['differs']} failed")
    text = "\n".join(out)
    print("\n" + text)
    with open(os.path.splitext(args.out)[0] + "-summary.txt", "w", encoding="utf-8",
              errors="backslashreplace") as f:
        f.write(text + "\n")
    return 1 if counts["differs"] else 0


def label_id(text: str) -> Optional[str]:
    """The id (B7, D2) of a bug or deliberate label in a cause or reason, if any; "after Bn"
    for a follow-on."""
    m = re.search(r"\b([BD]\d+)\b", text)
    if m is None:
        return "follows D" if text.startswith("follows from a deliberate") else None
    return ("after " if text.startswith("after an earlier") else "") + m.group(1)


def write_tsv(path: str, rows):
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write("case\tcategory\trequest\tresult\twhat differs (daprd ≠ jobsd)\n")
        for r in rows:
            f.write("\t".join(tsv(str(x)) for x in r) + "\n")


def main() -> int:
    sys.stdout.reconfigure(errors="backslashreplace")
    sys.stderr.reconfigure(errors="backslashreplace")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dapr-bin-dir", required=True)
    ap.add_argument("--jobsd-bin", required=True)
    ap.add_argument("--scheduler-bin", help="another Dapr Scheduler binary (default: the one in --dapr-bin-dir)")
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the generated case counts")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "differential.tsv"))
    ap.add_argument("--deliberate", default=os.path.join(os.path.dirname(__file__), "differential_deliberate.tsv"))
    ap.add_argument("--bugs", default=os.path.join(os.path.dirname(__file__), "differential_bugs.tsv"),
                    help="differences already reported as jobsd bugs (regex, tab, label): still failures, "
                         "but grouped under their label")
    ap.add_argument("--dump", help="write both answers of every pair to this file (JSON lines)")
    ap.add_argument("--only", help="comma-separated categories to run")
    ap.add_argument("--keep-logs", help="a dir for the processes' logs and data, kept")
    return run(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
