"""Real-time checks of steering jobs (README "Steer your jobs": the test clock, pause and resume
by name and in bulk, preview; the in-process twin on a manual clock is
tests/steer_controls.rs). Run by e2e/steer_clock.sh against the release jobsd (DAPR_HTTP_PORT,
DAPR_GRPC_PORT, DAPR_RUNTIME_HOST set) whose app is policy_http_app.py, recording every call it
gets to a JSON-lines file (any job name here is answered 200). One phase per jobsd:

  clock EVENTS METRICS_PORT  a jobsd started with --test-clock:
                               1. the clock stands at the real time and moves only when told;
                                  `@every 1h` advanced by 3h is exactly 3 deliveries, delivered
                                  before the advance answers, in seconds of real time
                               2. preview of `TZ=America/New_York 0 30 2 * * *` across the
                                  March 2027 gap (the clock moved to 2027-03-12 first): no tick
                                  on 03-14, said so; nothing stored; errors equal a create's
                               3. pause in bulk by label over three `@every 1m` ticks: three
                                  skipped each (status and `jobsd_ticks_skipped_total
                                  {reason="paused"}`), nothing delivered; resume by prefix:
                                  `catchUp: latest` runs one, the default none; then on
                               4. gRPC (stubs generated now from proto/jobsd/v1/jobs.proto):
                                  GetClock, AdvanceClock, Preview, PauseJobs, ResumeJobs
  off                        a jobsd without the flag: the clock routes answer 412
                             ERR_JOBSD_TEST_CLOCK_OFF, naming the flag
  on                         a jobsd started with JOBSD_TEST_CLOCK=true: the clock routes work

The checks count deliveries in the app's log after a quiet wait; they bound the real time an
advance takes generously (every wait is bounded), never latencies.
"""

import calendar
import json
import os
import sys
import tempfile
import time
import urllib.request

from checks import request, wait_until
from harness import Suite, run_phase_of

HOST = os.environ.get("DAPR_RUNTIME_HOST", "127.0.0.1")
HTTP = f"http://{HOST}:{os.environ.get('DAPR_HTTP_PORT', '3500')}"
GRPC = f"{HOST}:{os.environ.get('DAPR_GRPC_PORT', '50001')}"
# After an advance has answered, how long to wait for a delivery too many.
QUIET = 1.5
# An advance of a few ticks takes well under a second; this is the bound it must meet.
ADVANCE_BOUND = 15.0


def http(method: str, path: str, body=None, timeout: float = 60):
    """(status, parsed JSON or None) of a request to jobsd's HTTP API."""
    status, _, answer = request(HTTP + path, method, body, timeout)
    return status, (json.loads(answer) if answer else None)


def ok(method: str, path: str, body=None, want: int = 200):
    status, answer = http(method, path, body)
    assert status == want, f"{method} {path} {json.dumps(body)} → {status} {answer}"
    return answer


def calls(events: str, name: str) -> int:
    """How many times the app was called for job `name`."""
    with open(events) as f:
        return sum(1 for line in f if json.loads(line).get("name") == name)


def stable_calls(events: str, name: str) -> int:
    time.sleep(QUIET)
    return calls(events, name)


def advance(**body) -> tuple:
    """Advances the test clock; (answer, real seconds it took)."""
    t = time.monotonic()
    answer = ok("POST", "/jobsd/v1/clock/advance", body)
    return answer, time.monotonic() - t


def skipped_paused(name: str) -> int:
    return ok("GET", f"/jobsd/v1/jobs/{name}")["status"]["counters"]["skipped"].get("paused", 0)


def metric(port: str, name: str, labels: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} with {labels} in /metrics")


def clock_phase(events: str, metrics_port: str) -> Suite:
    s = Suite("clock")
    ctx = {}

    @s.check
    def the_clock_stands_at_the_real_time():
        now = ok("GET", "/jobsd/v1/clock")["now"]
        at = calendar.timegm(time.strptime(now[:19], "%Y-%m-%dT%H:%M:%S"))
        assert abs(at - time.time()) < 120, f"clock {now}, real {time.time()}"
        time.sleep(1.2)
        assert ok("GET", "/jobsd/v1/clock")["now"] == now, "it moved by itself"

    @s.check
    def advancing_3h_delivers_an_hourly_job_exactly_3_times_in_seconds():
        ok("POST", "/jobsd/v1/jobs/hourly", {"schedule": "@every 1h"}, want=204)
        assert stable_calls(events, "hourly") == 0
        answer, took = advance(by="3h")
        assert took < ADVANCE_BOUND, f"the advance took {took:.1f}s"
        print(f"     advance by 3h: {took * 1000:.0f} ms of real time, 3 deliveries")
        # Delivered before the advance answered.
        assert calls(events, "hourly") == 3, calls(events, "hourly")
        assert stable_calls(events, "hourly") == 3
        prev, now = answer["previous"], answer["now"]
        assert now > prev and ok("GET", "/jobsd/v1/clock")["now"] == now
        # Each at its own instant, an hour apart, not three at the end.
        starts = {r["started"] for r in ok("GET", "/jobsd/v1/jobs/hourly/runs")["runs"]}
        assert len(starts) == 3, starts
        ok("DELETE", "/jobsd/v1/jobs/hourly", want=204)

    @s.check
    def a_preview_across_the_march_gap_says_the_0230_tick_is_skipped():
        advance(to="2027-03-12T12:00:00Z")
        p = ok("POST", "/jobsd/v1/preview?name=nightly",
               {"schedule": "TZ=America/New_York 0 30 2 * * *", "count": 3})
        assert p["zone"] == "America/New_York", p
        assert [t["time"] for t in p["ticks"]] == [
            "2027-03-13T07:30:00Z", "2027-03-15T06:30:00Z", "2027-03-16T06:30:00Z"], p
        assert [t["abbreviation"] for t in p["ticks"]] == ["EST", "EDT", "EDT"]
        note = p["ticks"][1]["notes"][0]
        assert note.startswith("02:30 on 2027-03-14 does not exist in America/New_York"), note
        assert "skipped" in note, note
        assert p["job"]["failurePolicy"] == {"constant": {"interval": "1s", "maxRetries": 3}}
        status, _ = http("GET", "/jobsd/v1/jobs/nightly")
        assert status == 404, "a preview stores nothing"

    @s.check
    def a_preview_refuses_a_bad_job_exactly_as_a_create_does():
        for body in ({"schedule": "bogus"}, {"schedule": "@daily", "policy": {"overlap": "x"}},
                     {}):
            created = http("POST", "/jobsd/v1/jobs/bad", body)
            previewed = http("POST", "/jobsd/v1/preview?name=bad", body)
            assert created[0] >= 400 and previewed == created, (body, created, previewed)

    @s.check
    def a_bulk_pause_skips_and_counts_three_ticks():
        for name, policy in (("p-latest", {"catchUp": "latest"}), ("p-default", None)):
            body = {"schedule": "@every 1m", "labels": {"group": "p"}}
            if policy:
                body["policy"] = policy
            ok("POST", f"/jobsd/v1/jobs/{name}", body, want=204)
        advance(by="90s")
        assert [stable_calls(events, n) for n in ("p-latest", "p-default")] == [1, 1]
        empty = http("POST", "/jobsd/v1/jobs:pause", {})
        assert empty[0] == 400 and "all" in empty[1]["message"], empty
        paused = ok("POST", "/jobsd/v1/jobs:pause", {"label": "group=p", "note": "e2e"})
        assert paused == {"count": 2, "names": ["p-default", "p-latest"], "truncated": False}
        advance(by="3m")
        assert [stable_calls(events, n) for n in ("p-latest", "p-default")] == [1, 1]
        assert [skipped_paused(n) for n in ("p-latest", "p-default")] == [3, 3]
        assert ok("GET", "/jobsd/v1/jobs/p-latest")["status"]["pausedNote"] == "e2e"

    @s.check
    def a_bulk_resume_runs_one_under_catch_up_latest_and_none_by_default():
        resumed = ok("POST", "/jobsd/v1/jobs:resume?prefix=p-")
        assert resumed["count"] == 2, resumed
        assert wait_until(lambda: calls(events, "p-latest") == 2, 10)
        assert [stable_calls(events, n) for n in ("p-latest", "p-default")] == [2, 1]
        assert [skipped_paused(n) for n in ("p-latest", "p-default")] == [3, 3]
        labels = 'reason="paused"'
        assert metric(metrics_port, "jobsd_ticks_skipped_total", labels) == 6.0
        advance(by="1m")
        assert [stable_calls(events, n) for n in ("p-latest", "p-default")] == [3, 2]

    @s.check
    def the_grpc_service_reads_and_advances_the_clock_and_previews():
        import grpc
        from dapr.proto.runtime.v1 import jobs_pb2 as dapr_jobs
        from policy_checks import generate_stubs
        ctx["dir"] = tempfile.TemporaryDirectory(prefix="jobsd-stubs-")
        pb, rpc = generate_stubs(ctx["dir"].name)
        jobs = rpc.JobsStub(grpc.insecure_channel(GRPC))
        before = jobs.GetClock(pb.GetClockRequest(), timeout=10).now.seconds
        moved = jobs.AdvanceClock(pb.AdvanceClockRequest(by="2m"), timeout=60)
        assert moved.now.seconds - before == 120, moved
        assert [stable_calls(events, n) for n in ("p-latest", "p-default")] == [5, 4]
        p = jobs.Preview(pb.PreviewRequest(job=dapr_jobs.Job(schedule="@every 90s"), count=2),
                         timeout=10)
        assert [t.time.seconds - before for t in p.ticks] == [120 + 90, 120 + 180], p
        paused = jobs.PauseJobs(pb.PauseJobsRequest(prefix="p-"), timeout=10)
        assert paused.count == 2 and list(paused.names) == ["p-default", "p-latest"]
        resumed = jobs.ResumeJobs(pb.ResumeJobsRequest(labels={"group": "p"}), timeout=10)
        assert resumed.count == 2, resumed

    return s


def off_phase() -> Suite:
    s = Suite("off")

    @s.check
    def the_clock_routes_refuse_naming_the_flag():
        for method, path, body in (("GET", "/jobsd/v1/clock", None),
                                   ("POST", "/jobsd/v1/clock/advance", {"by": "1h"})):
            status, answer = http(method, path, body)
            assert status == 412, (status, answer)
            assert answer["errorCode"] == "ERR_JOBSD_TEST_CLOCK_OFF", answer
            assert "--test-clock" in answer["message"], answer

    return s


def on_phase() -> Suite:
    s = Suite("on")

    @s.check
    def the_environment_variable_turns_the_test_clock_on():
        before = ok("GET", "/jobsd/v1/clock")["now"]
        answer, _ = advance(by="24h")
        assert answer["previous"] == before and answer["now"] > before, answer

    return s


PHASES = {
    "clock": (clock_phase, 2),
    "off": (off_phase, 0),
    "on": (on_phase, 0),
}


if __name__ == "__main__":
    sys.exit(run_phase_of(PHASES, sys.argv, __doc__))
