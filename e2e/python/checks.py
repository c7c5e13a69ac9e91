"""Helpers shared by the e2e checks scripts (jobs_api.py, trigger_checks.py, cluster_checks.py):
plain HTTP requests to a sidecar, job URLs and bounded waits. Standard library only, so that
cluster_checks.py keeps running without the venv's packages.
"""

import json
import time
import urllib.error
import urllib.parse
import urllib.request


def request(url: str, method: str, body=None, timeout: float = 15, headers=None):
    """(status, headers, body bytes) of a request; `body` is sent as JSON, with `headers`
    (a dict) beside it. An HTTP error status is an answer like any other, not an exception."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def job_url(name: str) -> str:
    """The path of job `name` on the Dapr HTTP API, the name percent-encoded."""
    return "/v1.0/jobs/" + urllib.parse.quote(name, safe="")


def wait_until(pred, timeout: float, interval: float = 0.1) -> bool:
    """Polls `pred` until it holds (True) or `timeout` seconds have passed (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
