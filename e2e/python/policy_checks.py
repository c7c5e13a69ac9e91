"""Real-time checks of jobsd's per-job policies (README "Per-job policies"; the in-process twin
on a manual clock is tests/policies.rs). Run by e2e/policies.sh against the release jobsd
(DAPR_HTTP_PORT, DAPR_GRPC_PORT, DAPR_RUNTIME_HOST set) whose app is policy_http_app.py,
recording to a JSON-lines file; the job's name tells the app how to answer (`fail-*` 500,
`flaky<N>-*` 500 N times, `hang-*` no answer, `slow<S>-*` 200 after S seconds, logging the
calls of that name in flight). One phase per scenario:

  retries EVENTS          1. HTTP surface: `policy` + `labels` + `failurePolicy` (exponential,
                             delays) on /jobsd/v1/jobs; exact attempt counts in the run history,
                             the dropped tick in the status; Dapr's GET shows Dapr's fields only
  timeout EVENTS          2. `policy.timeout`: a hanging attempt fails as timed_out and is
                             retried; a job due at the same time on the same app is delivered
  grpc EVENTS             5. gRPC `jobsd.v1.Jobs` (stubs generated now, with grpcio-tools, from
                             proto/jobsd/v1/jobs.proto into a temp dir): ScheduleJob, GetJob,
                             ListRuns, DeleteJob
  overlap EVENTS          6. `policy.overlap` against a 3 s handler on `@every 1s`: serial, skip
                             and bufferOne one call at a time, allow + maxConcurrent 2 two at
                             once; skip / bufferOne pass over the ticks due meanwhile (skipped
                             records, counted as overlap); every call is a run in the history
  restart-setup STATE TAG 4. (before a stop) a job mid-retry, an `@every 1s` job with
                             `catchUp: latest` and a Dapr-default one; returns once the retry job
                             has failed twice, so the shell stops jobsd in its 3 s wait
  restart-verify STATE EVENTS T_STOPPED T_LAUNCH
                          4. (after jobsd was stopped at T_STOPPED, with SIGTERM or SIGKILL, and
                             started again on the same data dir at T_LAUNCH) the last attempt
                             happens, total exact; one catch-up run, not a replay; Dapr's
                             default replays every missed tick
  down-setup STATE        3. (jobsd started with app health checks, its app not listening)
                             `whileTargetDown: skip` skips and counts `target_down`; Dapr's
                             default `stage` and `latest` hold their tick
  down-verify STATE EVENTS T_UP
                          3. (the app started listening at T_UP) deliveries resume; `stage`
                             replays the held ticks, `latest` runs one of them (the rest
                             counted as target_down)

Times: jobsd's RFC 3339 stamps, the app's `time.time()` and the shell's `date +%s.%N` read the
same clock; they are compared as integer nanoseconds. The checks assert counts and orders with
generous bounds (every wait is bounded), never latencies.

To add a scenario: write a function returning a Suite (one check per thing a user would
notice), register it in PHASES, and run it from e2e/policies.sh with run_phase_of. Jobs are made
with `create` and waited for with `wait_runs` / `wait_status`; a new retry kind is one more
RetryCase in `retries_phase`.
"""

import calendar
import json
import math
import os
import re
import sys
import tempfile
import time
from decimal import Decimal

from checks import job_url, request, wait_until
from harness import Suite, run_phase_of

HOST = os.environ.get("DAPR_RUNTIME_HOST", "127.0.0.1")
HTTP = f"http://{HOST}:{os.environ.get('DAPR_HTTP_PORT', '3500')}"
GRPC = f"{HOST}:{os.environ.get('DAPR_GRPC_PORT', '50001')}"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# After the awaited runs are in, how long to wait for one too many: every retry in these checks
# comes at most 1.6 s after the previous attempt, and no job's next tick is that close.
QUIET = 2.0
# Upper bound for awaited runs and statuses (they normally take 1–5 s).
WAIT = 30.0
SECOND = 1_000_000_000
# The members of Dapr's job JSON (daprd's GET): anything else is jobsd's.
DAPR_JOB_KEYS = {"name", "schedule", "dueTime", "repeats", "ttl", "data", "failurePolicy",
                 "overwrite"}
# Labels every job made through jobsd's route here carries.
LABELS = {"suite": "policies", "team": "e2e"}


# ---------------------------------------------------------------- helpers


def http(method: str, path: str, body=None, timeout: float = 15):
    """(status, headers, body bytes) of a request to jobsd's HTTP API."""
    return request(HTTP + path, method, body, timeout)


def jobsd_url(name: str) -> str:
    return "/jobsd/v1/jobs/" + job_url(name)[len("/v1.0/jobs/"):]


def create(name: str, body: dict, route: str = "jobsd") -> None:
    """Creates a job through jobsd's route (`jobsd`) or Dapr's (`dapr`, /v1.0-alpha1)."""
    path = jobsd_url(name) if route == "jobsd" else "/v1.0-alpha1" + job_url(name)[len("/v1.0"):]
    status, _, answer = http("POST", path, body)
    assert status == 204, f"POST {path} {json.dumps(body)} → {status} {answer!r}"


def delete(name: str) -> None:
    status, _, answer = http("DELETE", jobsd_url(name))
    assert status == 204, f"DELETE {jobsd_url(name)} → {status} {answer!r}"


def view(name: str) -> dict:
    """jobsd's view of a job: {"job": <Dapr's GET>, "labels", "policy", "failurePolicy",
    "status"}."""
    status, _, answer = http("GET", jobsd_url(name))
    assert status == 200, f"GET {jobsd_url(name)} → {status} {answer!r}"
    return json.loads(answer)


def runs(name: str) -> list:
    """The job's run history, oldest first."""
    path = jobsd_url(name) + "/runs?limit=1000"
    status, _, answer = http("GET", path)
    assert status == 200, f"GET {path} → {status} {answer!r}"
    return list(reversed(json.loads(answer)["runs"]))


def ns(stamp) -> int:
    """Integer nanoseconds since the epoch of an RFC 3339 UTC stamp (jobsd's, any fraction), or
    of `time.time()` / `date +%s.%N` seconds (a float or its text)."""
    if isinstance(stamp, (int, float)) or re.fullmatch(r"[0-9]+(\.[0-9]*)?", str(stamp)):
        return int(Decimal(str(stamp)) * SECOND)
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?Z", stamp)
    assert m, f"not an RFC 3339 UTC time: {stamp!r}"
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    frac = (m.group(7) or "").ljust(9, "0")[:9]
    return calendar.timegm((y, mo, d, h, mi, s)) * SECOND + int(frac)


def outcomes(rs: list, outcome: str) -> list:
    return [r for r in rs if r["outcome"] == outcome]


def wait_runs(name: str, n: int, outcome: str = None, timeout: float = WAIT,
              where=lambda r: True) -> list:
    """Waits until the job's history holds at least `n` runs (of `outcome`, matching `where`);
    returns the whole history, oldest first."""
    got = []

    def enough():
        got[:] = runs(name)
        return len([r for r in got if (outcome is None or r["outcome"] == outcome)
                    and where(r)]) >= n

    ok = wait_until(enough, timeout, interval=0.1)
    assert ok, (f"{name}: fewer than {n} {outcome or ''} runs after {timeout:.0f}s: "
                f"{summary(got)}")
    return got


def wait_status(name: str, pred, what: str, timeout: float = WAIT) -> dict:
    """Waits until `pred(view["status"])` holds; returns the view."""
    last = {}

    def holds():
        last.clear()
        last.update(view(name))
        return pred(last["status"])

    assert wait_until(holds, timeout, interval=0.1), (
        f"{name}: no {what} after {timeout:.0f}s; status {json.dumps(last.get('status'))}")
    return last


def summary(rs: list) -> str:
    """Runs in short: attempt/outcome@nominal(+started-nominal)."""
    out = []
    for r in rs:
        lag = ""
        if r.get("nominalTime") and r.get("started"):
            lag = f"+{(ns(r['started']) - ns(r['nominalTime'])) / SECOND:.2f}s"
        out.append(f"#{r['attempt']} {r['outcome']}"
                   f"{'(' + r['error'] + ')' if r.get('error') else ''}"
                   f"@{(r.get('nominalTime') or '?')[11:23]}{lag}")
    return "[" + ", ".join(out) + "]"


def read_events(path: str) -> list:
    """The app's JSON-lines log; a last line still being written is skipped."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.endswith("\n"):
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


def deliveries(events_path: str, name: str) -> list:
    return [e for e in read_events(events_path) if e.get("name") == name]


def due_at(after: float) -> str:
    """An absolute dueTime on a whole second, at least `after` seconds from now."""
    epoch = math.ceil(time.time() + after)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def contiguous(nominals: list, step: int = SECOND) -> bool:
    """True when the sorted nominal times follow each other `step` apart, none missing or
    repeated."""
    return all(b - a == step for a, b in zip(nominals, nominals[1:]))


def save(path: str, state: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, path)


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ---------------------------------------------------------------- 1. retries (HTTP surface)


class RetryCase:
    """A job of `failurePolicy` against the app, due in a second (then hourly, so it stays
    listed): exactly `attempts` attempts; the tick `dropped` (retries spent) or succeeded."""

    def __init__(self, name, failure_policy, attempts, dropped):
        self.name = name
        self.failure_policy = failure_policy
        self.attempts = attempts
        self.dropped = dropped


# Settings jobsd acts on, all of them Dapr's behaviour but the timeout. Other values have
# scenarios of their own (overlap: 6; whileTargetDown: 3; catchUp latest: 4).
RETRY_POLICY = {"timeout": "10s", "catchUp": "all", "whileTargetDown": "stage",
                "overlap": "serial"}


def retries_phase(events: str) -> Suite:
    s = Suite("retries")
    cases = [
        # Waits 200, 400, 800 ms: attempts at 0, 0.2, 0.6, 1.4 s, then dropped.
        RetryCase("fail-exp", {"exponential": {"initialInterval": "200ms", "multiplier": 2,
                                               "maxRetries": 3}}, attempts=4, dropped=True),
        # The table once (no repeatLast): attempts at 0, 0.1, 0.4 s, then dropped.
        RetryCase("fail-delays", {"delays": {"delays": ["100ms", "300ms"]}},
                  attempts=3, dropped=True),
        # Fails twice, the third attempt succeeds: retries stop at the first success.
        RetryCase("flaky2-exp", {"exponential": {"initialInterval": "200ms", "multiplier": 2,
                                                 "maxRetries": 3}}, attempts=3, dropped=False),
    ]

    @s.check
    def create_with_policy_labels_and_failure_policy():
        for c in cases:
            create(c.name, {"schedule": "@every 1h", "dueTime": "1s", "data": {"case": c.name},
                            "labels": LABELS, "policy": RETRY_POLICY,
                            "failurePolicy": c.failure_policy})

    @s.check
    def jobsd_get_shows_policy_labels_and_failure_policy():
        for c in cases:
            v = view(c.name)
            assert v["policy"] == RETRY_POLICY, f"{c.name}: policy {v['policy']}"
            assert v["labels"] == LABELS, f"{c.name}: labels {v['labels']}"
            assert v["failurePolicy"] == c.failure_policy, (
                f"{c.name}: failurePolicy {v['failurePolicy']}, want {c.failure_policy}")
            assert set(v["job"]) <= DAPR_JOB_KEYS, f"{c.name}: job {v['job']}"

    @s.check
    def dapr_get_shows_only_daprs_fields():
        for c in cases:
            path = "/v1.0-alpha1/jobs/" + c.name
            status, _, answer = http("GET", path)
            assert status == 200, f"GET {path} → {status} {answer!r}"
            job = json.loads(answer)
            extra = set(job) - DAPR_JOB_KEYS
            assert not extra, f"GET {path}: keys Dapr's job has not: {extra} in {job}"
            assert job["schedule"] == "@every 1h", job
            # jobsd's kinds are not Dapr's: Dapr's GET shows them as `drop` (README).
            assert job.get("failurePolicy") == {"drop": {}}, job

    @s.check
    def every_tick_is_done_then_quiet():
        for c in cases:
            want = (lambda st: st["counters"]["dropped"] == 1) if c.dropped else \
                (lambda st: st["counters"]["succeeded"] == 1)
            wait_status(c.name, want, "dropped tick" if c.dropped else "success")
        time.sleep(QUIET)

    def case_check(c: RetryCase):
        def check():
            rs = runs(c.name)
            assert len(rs) == c.attempts, (
                f"{c.name}: {len(rs)} runs, want exactly {c.attempts}: {summary(rs)}")
            assert [r["attempt"] for r in rs] == list(range(1, c.attempts + 1)), summary(rs)
            assert len({r["executionId"] for r in rs}) == 1, "one tick, one execution id"
            want = ["failed"] * c.attempts if c.dropped else \
                ["failed"] * (c.attempts - 1) + ["success"]
            assert [r["outcome"] for r in rs] == want, summary(rs)
            for r in outcomes(rs, "failed"):
                assert r["httpStatus"] == 500, r
            # Never before its time: each retry starts after the previous attempt did.
            starts = [ns(r["started"]) for r in rs]
            assert starts == sorted(starts), summary(rs)
            got = deliveries(events, c.name)
            assert len(got) == c.attempts, (
                f"{c.name}: the app was called {len(got)} times, want {c.attempts}")
            st = view(c.name)["status"]
            counters = st["counters"]
            failed = c.attempts - (0 if c.dropped else 1)
            assert counters["failedAttempts"] == failed, st
            assert counters["delivered"] == c.attempts, st
            assert st["ticks"] == 1, st
            assert st["state"] == "active", st  # hourly after its first tick
            if c.dropped:
                # The tick given up, and why: the last attempt's outcome and error.
                assert counters["dropped"] == 1 and counters["succeeded"] == 0, st
                assert st["lastOutcome"] == "failed", st
                assert "500" in (st["lastError"] or ""), st
            else:
                assert counters["dropped"] == 0 and counters["succeeded"] == 1, st
                assert st["lastOutcome"] == "success", st
        return check

    for c in cases:
        s.add(f"{c.name}:x{c.attempts}", case_check(c))

    @s.check
    def delete_the_jobs():
        for c in cases:
            delete(c.name)
            assert http("GET", jobsd_url(c.name))[0] == 404

    return s


# ---------------------------------------------------------------- 2. timeout


def timeout_phase(events: str) -> Suite:
    s = Suite("timeout")
    hang, ok = "hang-timeout", "ok-beside-hang"
    # Two attempts: at the due time and 200 ms after the first timed out.
    failure = {"delays": {"delays": ["200ms"]}}

    @s.check
    def create_a_hanging_job_and_a_plain_one_due_together():
        due = due_at(1.5)
        create(hang, {"dueTime": due, "policy": {"timeout": "1s"}, "failurePolicy": failure})
        create(ok, {"dueTime": due}, route="dapr")

    @s.check
    def the_hanging_job_is_timed_out_retried_then_dropped():
        wait_status(hang, lambda st: st["counters"]["dropped"] == 1, "dropped tick")
        time.sleep(QUIET)
        rs = runs(hang)
        assert [r["outcome"] for r in rs] == ["timed_out", "timed_out"], summary(rs)
        for r in rs:
            assert r["error"] == "attempt timed out after 1s", r
            assert r["httpStatus"] is None, r
        st = view(hang)["status"]
        assert st["lastOutcome"] == "timed_out", st
        assert st["counters"]["failedAttempts"] == 2 and st["counters"]["dropped"] == 1, st
        assert st["state"] == "finished", st
        got = deliveries(events, hang)
        assert len(got) == 2 and all(e["status"] == "hang" for e in got), (
            f"the app got {len(got)} calls for {hang}, want 2: {got}")

    @s.check
    def the_other_job_is_delivered_while_it_hangs():
        v = wait_status(ok, lambda st: st["counters"]["succeeded"] == 1, "success", 10)
        assert v["status"]["state"] == "finished", v["status"]
        done = runs(ok)
        assert [r["outcome"] for r in done] == ["success"], summary(done)
        first_hang = runs(hang)[0]
        # Both were due at the same second; the hanging attempt took its whole second.
        assert ns(done[0]["finished"]) < ns(first_hang["finished"]), (
            f"{ok} finished {done[0]['finished']}, after {hang}'s first attempt timed out "
            f"({first_hang['finished']})")
        got = deliveries(events, ok)
        assert [e["status"] for e in got] == [200], got

    @s.check
    def delete_the_jobs():
        delete(hang)
        delete(ok)

    return s


# ---------------------------------------------------------------- 5. gRPC surface


def generate_stubs(out_dir: str):
    """jobsd/v1/jobs_pb2(_grpc).py from proto/jobsd/v1/jobs.proto into out_dir (put first on
    sys.path). Dapr's messages it imports are the Dapr SDK's modules (the same .proto files,
    so the same names in the descriptor pool), and Google's come with protobuf."""
    import importlib.resources
    from grpc_tools import protoc
    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    proto_dir = os.path.join(ROOT, "proto")
    rc = protoc.main(["grpc_tools.protoc", f"-I{proto_dir}", f"-I{well_known}",
                      f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
                      os.path.join(proto_dir, "jobsd", "v1", "jobs.proto")])
    assert rc == 0, f"grpc_tools.protoc failed ({rc})"
    sys.path.insert(0, out_dir)
    from jobsd.v1 import jobs_pb2, jobs_pb2_grpc
    return jobs_pb2, jobs_pb2_grpc


def grpc_phase(events: str) -> Suite:
    import grpc
    from dapr.proto.runtime.v1 import jobs_pb2 as dapr_jobs

    s = Suite("grpc")
    name = "fail-grpc"
    ctx = {}
    stubs_dir = tempfile.TemporaryDirectory(prefix="jobsd-stubs-")

    @s.check
    def generate_stubs_from_the_proto():
        ctx["pb"], ctx["rpc"] = generate_stubs(stubs_dir.name)
        ctx["channel"] = grpc.insecure_channel(GRPC)
        ctx["jobs"] = ctx["rpc"].JobsStub(ctx["channel"])

    def pb():
        return ctx["pb"]

    def policy():
        return pb().JobPolicy(timeout="10s", overlap="serial", catch_up="all")

    def failure():
        # Waits 200 then 400 ms: three attempts.
        return pb().FailurePolicy(exponential=pb().ExponentialRetry(
            initial_interval="200ms", multiplier=2, max_retries=2))

    def get():
        return ctx["jobs"].GetJob(pb().GetJobRequest(name=name), timeout=10).job

    @s.check
    def schedule_job_with_policy_and_exponential_failure_policy():
        ctx["jobs"].ScheduleJob(pb().ScheduleJobRequest(
            job=dapr_jobs.Job(name=name, schedule="@every 1h", due_time="1s"),
            labels={"via": "grpc"}, policy=policy(), failure_policy=failure()), timeout=10)

    @s.check
    def get_job_shows_policy_labels_and_failure_policy():
        v = get()
        assert v.name == name, v
        assert v.policy == policy(), v.policy
        assert v.failure_policy == failure(), v.failure_policy
        assert dict(v.labels) == {"via": "grpc"}, v.labels
        # The Dapr job inside is what Dapr's GetJob answers: jobsd's kind shows as drop.
        assert v.job.schedule == "@every 1h", v.job
        assert v.job.failure_policy.WhichOneof("policy") == "drop", v.job.failure_policy

    @s.check
    def a_bad_policy_is_invalid_argument_naming_the_field():
        try:
            ctx["jobs"].ScheduleJob(pb().ScheduleJobRequest(
                job=dapr_jobs.Job(name="bad-grpc", schedule="@hourly"),
                policy=pb().JobPolicy(catch_up="sometimes")), timeout=10)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err
            assert err.details().startswith("policy.catchUp"), err.details()
        else:
            raise AssertionError("ScheduleJob with catch_up 'sometimes' succeeded")
        assert http("GET", jobsd_url("bad-grpc"))[0] == 404

    @s.check
    def list_runs_shows_the_three_attempts():
        deadline = time.monotonic() + WAIT
        while get().status.counters.dropped != 1:
            assert time.monotonic() < deadline, f"no dropped tick: {get().status}"
            time.sleep(0.1)
        time.sleep(QUIET)
        rs = ctx["jobs"].ListRuns(pb().ListRunsRequest(name=name, limit=100), timeout=10).runs
        assert [r.attempt for r in rs] == [3, 2, 1], rs  # newest first
        assert all(r.outcome == pb().RUN_OUTCOME_FAILED and r.http_status == 500 for r in rs), rs
        assert len({r.execution_id for r in rs}) == 1, rs
        st = get().status
        assert st.counters.failed_attempts == 3 and st.counters.dropped == 1, st
        assert st.last_outcome == "failed", st
        assert len(deliveries(events, name)) == 3

    @s.check
    def delete_job_then_get_job_is_not_found():
        ctx["jobs"].DeleteJob(pb().DeleteJobRequest(name=name), timeout=10)
        try:
            get()
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.NOT_FOUND, err
        else:
            raise AssertionError("GetJob after DeleteJob succeeded")
        ctx["channel"].close()
        stubs_dir.cleanup()

    return s


# ---------------------------------------------------------------- 6. overlap: a slow handler


# The manual-clock twin is tests/policy_ticks.rs::overlap_policies_with_a_slow_handler. Each call
# of a `slow3-*` job takes SLOW_SECONDS (the app sleeps), on an `@every 1s` schedule: about three
# ticks fall due while one is out.
SLOW_SECONDS = 3
# name -> (policy, the most calls of it the app may have in flight at once)
OVERLAP_JOBS = {
    "slow3-serial": ({}, 1),  # Dapr's default, serial
    "slow3-skip": ({"overlap": "skip"}, 1),
    "slow3-buffer": ({"overlap": "bufferOne"}, 1),
    "slow3-allow": ({"overlap": "allow", "maxConcurrent": 2}, 2),
}
# How long the jobs run, from their creation: the first tick is a second later, so each job
# gets two or three calls in.
OVERLAP_RUN = 8.0
# A run jobsd finished this long before its history was read is in it (results are written in
# batches a few milliseconds apart).
WRITTEN = 1.0


def delivered(rs: list) -> list:
    """The runs of a history that called the app (every outcome but skipped / undeliverable),
    by start."""
    return sorted((r for r in rs if r["outcome"] not in ("skipped", "undeliverable")),
                  key=lambda r: ns(r["started"]))


def overlap_phase(events: str) -> Suite:
    s = Suite("overlap")
    ctx = {}

    def calls(name: str) -> list:
        return sorted(deliveries(events, name), key=lambda e: e["t"])

    def in_flight(name: str) -> list:
        """What the app saw in flight (that call included) on each call's arrival."""
        return [e["inflight"] for e in calls(name)]

    @s.check
    def create_the_jobs_and_let_them_run():
        made = time.time()
        for name, (policy, _) in OVERLAP_JOBS.items():
            body = {"schedule": "@every 1s", "labels": LABELS}
            if policy:
                body["policy"] = policy
            create(name, body)
        for name, (policy, _) in OVERLAP_JOBS.items():
            shown = view(name)["policy"]
            assert {k: shown.get(k) for k in policy} == policy, f"{name}: policy {shown}"
        time.sleep(max(0.0, made + OVERLAP_RUN - time.time()))
        # Normally true by now (after the first call of each ended); bounded all the same.
        wait_status("slow3-skip", lambda st: st["counters"]["skipped"].get("overlap", 0) >= 2,
                    "2 ticks skipped as overlap")
        wait_status("slow3-buffer", lambda st: st["counters"]["skipped"].get("overlap", 0) >= 1,
                    "a tick skipped as overlap")
        ctx["read_at"] = ns(time.time())
        ctx["status_before"] = {name: view(name)["status"] for name in OVERLAP_JOBS}
        ctx["runs"] = {name: runs(name) for name in OVERLAP_JOBS}
        ctx["status"] = {name: view(name)["status"] for name in OVERLAP_JOBS}
        for name in OVERLAP_JOBS:
            delete(name)
        ctx["deleted_at"] = ns(time.time())
        for name in OVERLAP_JOBS:
            print(f"  {name}: in flight on arrival {in_flight(name)}; "
                  f"{summary(ctx['runs'][name])}")

    @s.check
    def serial_skip_and_buffer_have_one_call_in_flight_at_most():
        for name in ("slow3-serial", "slow3-skip", "slow3-buffer"):
            seen = in_flight(name)
            assert len(seen) >= 2, f"{name}: {len(seen)} calls: {seen}"
            assert max(seen) == 1, f"{name}: calls in flight on arrival {seen}"

    @s.check
    def allow_has_two_calls_in_flight_at_some_point_never_more():
        seen = in_flight("slow3-allow")
        assert max(seen, default=0) == 2, f"calls in flight on arrival {seen}"

    @s.check
    def serial_runs_every_tick_in_turn():
        rs = ctx["runs"]["slow3-serial"]
        assert rs and all(r["outcome"] == "success" for r in rs), summary(rs)
        assert contiguous([ns(r["nominalTime"]) for r in rs]), f"none skipped: {summary(rs)}"
        # The handler is slower than the schedule: a tick waited for the one before it.
        assert len(rs) >= 2 and ns(rs[1]["started"]) >= ns(rs[0]["finished"]), summary(rs)
        assert ns(rs[1]["started"]) - ns(rs[1]["nominalTime"]) >= SECOND, summary(rs)
        skipped = ctx["status"]["slow3-serial"]["counters"]["skipped"]
        assert "overlap" not in skipped, skipped

    def passed_over(name: str, buffered: bool) -> int:
        """`skip` / `bufferOne`: when a call ends, the ticks that fell due while it was out are
        passed over in one `skipped` record (error `overlap`; its nominal time the last of
        them, its start the moment jobsd acted on the end) and counted; the next tick runs:
        with `bufferOne` the latest of them, already due then, so at once; with `skip` the
        first one after that moment. Returns how many ticks were passed over."""
        rs = ctx["runs"][name]
        skips = outcomes(rs, "skipped")
        assert skips and all(r["error"] == "overlap" for r in skips), summary(rs)
        assert all(r["outcome"] in ("success", "skipped") for r in rs), summary(rs)
        passed = 0
        for i, r in enumerate(rs):
            if r["outcome"] != "skipped":
                continue
            assert i > 0 and rs[i - 1]["outcome"] == "success", summary(rs)
            before, last, acted = rs[i - 1], ns(r["nominalTime"]), ns(r["started"])
            assert acted >= ns(before["finished"]), summary(rs)
            passed += (last - ns(before["nominalTime"])) // SECOND
            if buffered:
                assert last + SECOND <= acted, f"the latest due was passed over: {summary(rs)}"
            else:
                assert last + SECOND > acted, f"a tick due was not passed over: {summary(rs)}"
            # Runs are written as they end: the run after a skipped record may still be out.
            if i + 1 < len(rs):
                after = rs[i + 1]
                assert after["outcome"] == "success", summary(rs)
                assert ns(after["nominalTime"]) == last + SECOND, summary(rs)
        counted = (ctx["status_before"][name]["counters"]["skipped"].get("overlap", 0),
                   ctx["status"][name]["counters"]["skipped"].get("overlap", 0))
        # The status was read just before and just after the history.
        assert counted[0] <= passed <= counted[1], (
            f"{name}: skipped.overlap {counted}, the records pass over {passed} ticks: "
            f"{summary(rs)}")
        print(f"  {name}: {passed} ticks passed over in {len(skips)} records")
        return passed

    @s.check
    def skip_passes_over_the_ticks_that_fell_due_meanwhile():
        assert passed_over("slow3-skip", buffered=False) >= 2

    @s.check
    def buffer_one_runs_the_latest_of_them_at_once():
        assert passed_over("slow3-buffer", buffered=True) >= 1

    @s.check
    def allow_runs_every_tick_two_at_once():
        rs = sorted(ctx["runs"]["slow3-allow"], key=lambda r: ns(r["started"]))
        assert rs and all(r["outcome"] == "success" for r in rs), summary(rs)
        nominal = sorted(ns(r["nominalTime"]) for r in rs)
        assert contiguous(nominal), f"every tick once, none skipped: {summary(rs)}"
        assert any(ns(b["started"]) < ns(a["finished"])
                   for a, b in zip(rs, rs[1:])), f"no two runs overlap: {summary(rs)}"
        skipped = ctx["status"]["slow3-allow"]["counters"]["skipped"]
        assert "overlap" not in skipped, skipped

    @s.check
    def every_call_the_app_got_is_a_run_in_the_history():
        # Calls and runs paired in order: each run's call arrived while the run was out, and
        # the calls left over are the last ones, still out (or not yet written) when the
        # history was read, or sent just before the delete.
        for name in OVERLAP_JOBS:
            got, ran = calls(name), delivered(ctx["runs"][name])
            assert len(got) >= len(ran), (
                f"{name}: {len(ran)} runs, the app got {len(got)} calls: {summary(ran)}")
            for r, e in zip(ran, got):
                assert ns(r["started"]) <= ns(e["t"]) <= ns(r["finished"]), (
                    f"{name}: a call at {e['t']} is not run {summary([r])} "
                    f"({r['started']} … {r['finished']})")
            out = got[len(ran):]
            late = ctx["read_at"] - (SLOW_SECONDS + WRITTEN) * SECOND
            assert all(ns(e["t"]) > late for e in out), (
                f"{name}: calls ended long before the history was read and not in it: "
                f"{[e['t'] for e in out if ns(e['t']) <= late]}; {summary(ran)}")
            assert len(out) <= OVERLAP_JOBS[name][1] + 1, f"{name}: {len(out)} calls out: {out}"

    @s.check
    def no_call_after_the_delete():
        time.sleep(QUIET)
        # Give or take a call sent just as the delete was answered.
        after_delete = ctx["deleted_at"] + SECOND // 2
        for name in OVERLAP_JOBS:
            after = [e["t"] for e in calls(name) if ns(e["t"]) > after_delete]
            assert not after, f"{name}: calls after the delete: {after}"

    return s


# ---------------------------------------------------------------- 4. a restart in the middle


def restart_names(tag: str) -> dict:
    return {"retry": f"fail-midretry-{tag}", "latest": f"latest-{tag}",
            "dapr": f"dapr-every-{tag}"}


def restart_setup(state_path: str, tag: str) -> Suite:
    s = Suite(f"restart-setup-{tag}")
    names = restart_names(tag)

    @s.check
    def every_second_jobs_run():
        create(names["latest"], {"schedule": "@every 1s", "policy": {"catchUp": "latest"},
                                 "labels": LABELS})
        create(names["dapr"], {"schedule": "@every 1s"}, route="dapr")
        for n in (names["latest"], names["dapr"]):
            wait_runs(n, 2, "success")

    @s.check
    def a_job_fails_twice_and_waits_3s_for_its_last_attempt():
        create(names["retry"], {"dueTime": "0s", "labels": LABELS,
                                "failurePolicy": {"delays": {"delays": ["200ms", "3s"]}}})
        rs = wait_runs(names["retry"], 2, "failed")
        assert len(rs) == 2, summary(rs)
        latest = view(names["latest"])["status"]["counters"]["skipped"]
        save(state_path, {"names": names, "catch_up_before": latest.get("catch_up", 0)})

    return s


def restart_verify(state_path: str, events: str, t_stopped: str, t_launch: str) -> Suite:
    state = load(state_path)
    names = state["names"]
    stopped, launch = ns(t_stopped), ns(t_launch)
    s = Suite("restart-verify")

    @s.check
    def jobsd_was_down_long_enough():
        assert launch - stopped >= 4 * SECOND, (launch - stopped) / SECOND

    @s.check
    def the_retry_job_makes_its_last_attempt_after_the_restart():
        name = names["retry"]
        wait_status(name, lambda st: st["counters"]["dropped"] == 1, "dropped tick")
        time.sleep(QUIET)
        rs = runs(name)
        assert [(r["attempt"], r["outcome"]) for r in rs] == \
            [(1, "failed"), (2, "failed"), (3, "failed")], summary(rs)
        assert ns(rs[1]["started"]) < stopped < launch <= ns(rs[2]["started"]), summary(rs)
        assert len({r["executionId"] for r in rs}) == 1, "one tick, one execution id"
        assert len(deliveries(events, name)) == 3, deliveries(events, name)
        st = view(name)["status"]
        assert st["counters"]["failedAttempts"] == 3 and st["state"] == "finished", st

    @s.check
    def catch_up_latest_runs_one_tick_for_all_it_missed():
        name = names["latest"]
        # Ticks run again after the restart (the catch-up one and two regular ones).
        rs = wait_runs(name, 3, "success", where=lambda r: ns(r["started"]) >= launch)
        before = [r for r in outcomes(rs, "success") if ns(r["started"]) < launch]
        assert before, summary(rs)
        last_before = ns(before[-1]["nominalTime"])
        after = [r for r in rs if ns(r["started"]) >= launch]
        skips = [r for r in after if r["outcome"] == "skipped"]
        # One record, or on a slow start a second one: the latest missed tick was due again
        # behind a newer one before it could go, and `latest` passed it over too.
        assert skips and all(r["error"] == "catch_up" for r in skips) and len(skips) <= 2, (
            f"want one skipped record (catch_up) after the restart: {summary(after)}")
        skipped_to = max(ns(r["nominalTime"]) for r in skips)
        # The records stand for every tick from the one after the last run to the last one.
        missed = (skipped_to - last_before) // SECOND
        counted = view(name)["status"]["counters"]["skipped"].get("catch_up", 0) - \
            state["catch_up_before"]
        assert counted == missed, (f"skipped.catch_up went up by {counted}, the record "
                                   f"passes over {missed} ticks: {summary(after)}")
        assert missed >= 3, f"only {missed} ticks passed over: {summary(rs)}"
        ran = [ns(r["nominalTime"]) for r in outcomes(after, "success")]
        # No missed tick ran; the latest one (right after the passed-over ones) ran once, then
        # the schedule went on second by second.
        assert not [t for t in ran if last_before < t <= skipped_to], summary(after)
        assert ran[0] == skipped_to + SECOND and contiguous(ran), summary(after)
        print(f"  {name}: {missed} missed ticks passed over in {len(skips)} record(s), the latest ran once")

    @s.check
    def dapr_default_replays_every_missed_tick():
        name = names["dapr"]
        # Until a tick due after the restart ran: the replays (serial, oldest first) are done.
        rs = wait_runs(name, 1, "success", where=lambda r: ns(r["nominalTime"]) > launch)
        ran = [ns(r["nominalTime"]) for r in outcomes(rs, "success")]
        assert contiguous(ran), f"every tick once, none missing: {summary(rs)}"
        # Ticks due while jobsd was down, run after it was back.
        replayed = [r for r in outcomes(rs, "success")
                    if ns(r["nominalTime"]) < launch <= ns(r["started"])]
        assert len(replayed) >= 4, f"{len(replayed)} replayed: {summary(rs)}"
        assert len(deliveries(events, name)) >= len(ran)
        print(f"  {name}: {len(replayed)} missed ticks replayed")

    @s.check
    def delete_the_jobs():
        for n in names.values():
            delete(n)

    return s


# ---------------------------------------------------------------- 3. while the app is down


DOWN_NAMES = {"skip": "skip-while-down", "stage": "stage-while-down",
              "latest": "latest-while-down"}


def down_setup(state_path: str) -> Suite:
    s = Suite("down-setup")
    skip, stage, latest = DOWN_NAMES["skip"], DOWN_NAMES["stage"], DOWN_NAMES["latest"]

    @s.check
    def create_while_the_app_is_down():
        create(skip, {"schedule": "@every 1s", "policy": {"whileTargetDown": "skip"},
                      "labels": LABELS})
        create(stage, {"schedule": "@every 1s"}, route="dapr")
        create(latest, {"schedule": "@every 1s", "policy": {"whileTargetDown": "latest"},
                        "labels": LABELS})
        time.sleep(4.0)

    @s.check
    def skip_counts_target_down_and_runs_nothing():
        v = wait_status(skip, lambda st: st["counters"]["skipped"].get("target_down", 0) >= 3,
                        "3 ticks skipped as target_down")
        rs = runs(skip)
        assert rs and all((r["outcome"], r["error"]) == ("skipped", "target_down")
                          for r in rs), summary(rs)
        st = v["status"]
        assert st["counters"]["delivered"] == 0 and st["ticks"] == 0, st
        assert st["lastOutcome"] == "skipped" and st["lastError"] == "target_down", st
        assert st["staged"] is False, st
        save(state_path, {"skipped_before": len(rs)})
        print(f"  {skip}: {len(rs)} ticks skipped as target_down")

    @s.check
    def stage_holds_its_tick():
        st = view(stage)["status"]
        assert st["staged"] is True, st
        assert st["counters"]["delivered"] == 0, st
        assert not outcomes(runs(stage), "success"), summary(runs(stage))

    @s.check
    def latest_holds_its_tick():
        st = view(latest)["status"]
        assert st["staged"] is True, st
        assert st["counters"]["delivered"] == 0, st
        rs = runs(latest)
        assert not outcomes(rs, "success") and not outcomes(rs, "skipped"), summary(rs)

    return s


def down_verify(state_path: str, events: str, t_up: str) -> Suite:
    state = load(state_path)
    up = ns(t_up)
    skip, stage, latest = DOWN_NAMES["skip"], DOWN_NAMES["stage"], DOWN_NAMES["latest"]
    s = Suite("down-verify")

    @s.check
    def skip_delivers_again_once_the_app_is_back():
        rs = wait_runs(skip, 2, "success")
        assert all(r["outcome"] in ("skipped", "success") for r in rs), summary(rs)
        assert all(ns(r["started"]) >= up for r in outcomes(rs, "success")), summary(rs)
        # Every tick either skipped or run, once: none held while the app was down and
        # replayed later, none lost.
        assert len(outcomes(rs, "skipped")) >= state["skipped_before"], summary(rs)
        assert contiguous([ns(r["nominalTime"]) for r in rs]), summary(rs)
        st = view(skip)["status"]
        assert st["counters"]["skipped"]["target_down"] >= state["skipped_before"], st
        assert st["counters"]["succeeded"] >= 2 and st["staged"] is False, st
        assert len(deliveries(events, skip)) >= 2

    @s.check
    def stage_replays_every_held_tick():
        # Until a tick due after the app came back ran: the held ones were replayed before it.
        rs = wait_runs(stage, 1, "success", where=lambda r: ns(r["nominalTime"]) > up + SECOND)
        ran = outcomes(rs, "success")
        nominal = [ns(r["nominalTime"]) for r in ran]
        assert contiguous(nominal), f"every tick once, none missing: {summary(rs)}"
        held = [r for r in ran if ns(r["nominalTime"]) < up]
        assert len(held) >= 3, f"{len(held)} held ticks replayed: {summary(rs)}"
        assert all(ns(r["started"]) >= up for r in held), summary(held)
        assert not [r for r in rs if r["outcome"] == "skipped"], summary(rs)
        st = view(stage)["status"]
        assert st["staged"] is False and st["counters"]["skipped"] == {}, st
        assert len(deliveries(events, stage)) >= len(ran)
        print(f"  {stage}: {len(held)} held ticks replayed")

    @s.check
    def latest_delivers_one_held_tick_then_every_second():
        # Until two ticks due after the app came back ran: the held one ran before them.
        rs = wait_runs(latest, 2, "success", where=lambda r: ns(r["nominalTime"]) > up + SECOND)
        print(f"  {latest}: {summary(rs)}")
        assert all(r["outcome"] in ("undeliverable", "skipped", "success") for r in rs), \
            summary(rs)
        skips = outcomes(rs, "skipped")
        assert [r["error"] for r in skips] == ["target_down"], (
            f"want one skipped record (target_down): {summary(rs)}")
        passed_to, acted = ns(skips[0]["nominalTime"]), ns(skips[0]["started"])
        ran = outcomes(rs, "success")
        nominal = [ns(r["nominalTime"]) for r in ran]
        # The held tick run is the latest due when jobsd saw the app back (`acted`), right
        # after the ones passed over; then the schedule goes on second by second.
        assert nominal[0] == passed_to + SECOND and contiguous(nominal), summary(rs)
        assert nominal[0] <= acted < nominal[0] + SECOND, summary(rs)
        assert all(ns(r["started"]) >= acted for r in ran), summary(rs)
        # Not a replay: of the ticks due before the app came back one ran at most.
        assert len([t for t in nominal if t < up]) <= 1, summary(rs)
        # The record stands for every tick from the first (which found the app down: the
        # oldest record) to its nominal time.
        held = (passed_to - ns(rs[0]["nominalTime"])) // SECOND + 1
        st = view(latest)["status"]
        assert st["staged"] is False, st
        counted = st["counters"]["skipped"].get("target_down", 0)
        assert counted == held, (f"skipped.target_down {counted}, the record passes over "
                                 f"{held} ticks: {summary(rs)}")
        assert counted >= 2, st
        got = deliveries(events, latest)
        assert all(ns(e["t"]) >= acted for e in got), got
        # The last call may be out still (or its run not yet written).
        assert len(ran) <= len(got) <= len(ran) + 1, (
            f"{len(got)} calls, {len(ran)} runs: {summary(rs)}")
        print(f"  {latest}: {counted} held ticks passed over in one record, the latest ran once")

    @s.check
    def delete_the_jobs():
        delete(skip)
        delete(stage)
        delete(latest)

    return s


# ---------------------------------------------------------------- main

PHASES = {
    "retries": (retries_phase, 1),
    "timeout": (timeout_phase, 1),
    "grpc": (grpc_phase, 1),
    "overlap": (overlap_phase, 1),
    "restart-setup": (restart_setup, 2),
    "restart-verify": (restart_verify, 4),
    "down-setup": (down_setup, 1),
    "down-verify": (down_verify, 3),
}


if __name__ == "__main__":
    sys.exit(run_phase_of(PHASES, sys.argv, __doc__))
