"""Shared by the Python SDK side of the jobsd SDK matrix (e2e/dapr/sdk.sh): the events file
the apps write (one JSON object a line, flushed before the SDK answers) and the client reads,
and the RESULT lines the client prints.

Environment (set by sdk.sh): SDKM_PORT (the app's port), SDKM_EVENTS (its events file); for the
client SDKM_JOBS_GRPC / SDKM_ACTORS_HTTP / SDKM_ACTORS_GRPC (sidecar ports) and
SDKM_JOBS_EVENTS / SDKM_ACTOR_EVENTS.
"""

import base64
import json
import os
import threading
import time

_lock = threading.Lock()
_file = None


def record(kind: str, **fields) -> None:
    global _file
    with _lock:
        if _file is None:
            _file = open(os.environ["SDKM_EVENTS"], "a", encoding="utf-8")
        _file.write(json.dumps({"t": time.time(), "kind": kind, **fields}) + "\n")
        _file.flush()
        os.fsync(_file.fileno())


def b64(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode()


def read_events(path: str, keep) -> list:
    try:
        with open(path, encoding="utf-8") as f:
            events = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [e for e in events if keep(e)]


def wait_events(path: str, n: int, timeout: float, keep) -> list:
    deadline = time.monotonic() + timeout
    while True:
        got = read_events(path, keep)
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def quiet(path: str, seconds: float, keep) -> int:
    """How many events matching keep arrive within `seconds`."""
    before = len(read_events(path, keep))
    time.sleep(seconds)
    return len(read_events(path, keep)) - before


class Results:
    def __init__(self):
        self.failed = 0

    def emit(self, feature: str, status: str, note: str) -> None:
        note = " ".join(str(note).split())
        with _lock:  # the jobs and the actor checks run in two threads
            if status == "fail":
                self.failed += 1
            print(f"RESULT\t{feature}\t{status}\t{note}", flush=True)

    def run(self, feature: str, fn) -> bool:
        """fn returns the note of a pass or raises (a fail)."""
        try:
            note = fn()
        except Exception as e:  # noqa: BLE001 - every failure is a cell of the matrix
            self.emit(feature, "fail", f"{type(e).__name__}: {e}")
            return False
        self.emit(feature, "pass", note)
        return True
