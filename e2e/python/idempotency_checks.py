"""Real-time checks of idempotent creates and compare-and-set (README "Steer your jobs",
`Idempotency-Key` and `If-Match`; the in-process twin on a manual clock is
tests/conditional_writes.rs). Run by e2e/steer_idempotency.sh against the release jobsd
(DAPR_HTTP_PORT, DAPR_GRPC_PORT, DAPR_RUNTIME_HOST set) whose app is policy_http_app.py (it
answers 200 to every job named here). One phase per scenario:

  http             a retried create with `overwrite: true` under one Idempotency-Key gets the
                   first answer (204, same ETag, `Idempotent-Replayed: true`) and the job's
                   progress goes on; the key with another body is 422; a create-only retry on
                   Dapr's route is no 409; a stale If-Match is 412 and changes nothing; the
                   etag read makes the overwrite (new etag); a stale If-Match deletes nothing
  grpc             the same through gRPC metadata: Dapr's `ScheduleJobAlpha1` (the Dapr SDK's
                   generated stubs) and `jobsd.v1.Jobs` (stubs generated now from the proto)
  restart-setup STATE
                   (before jobsd is killed) a create-only job made under a key; its etag saved
  restart-verify STATE
                   (after kill -9 and a start on the same data dir) the retry is answered as
                   the first was: 204 replayed with the first etag, not 409

The checks assert statuses, headers and counts (every wait is bounded), never latencies.
"""

import json
import os
import sys
import tempfile

from checks import request, wait_until
from harness import Suite
from policy_checks import generate_stubs

HOST = os.environ.get("DAPR_RUNTIME_HOST", "127.0.0.1")
HTTP = f"http://{HOST}:{os.environ.get('DAPR_HTTP_PORT', '3500')}"
GRPC = f"{HOST}:{os.environ.get('DAPR_GRPC_PORT', '50001')}"
# Upper bound for awaited runs (they normally take 1–3 s).
WAIT = 30.0


def http(method: str, path: str, body=None, headers=None):
    """(status, headers, body bytes) of a request to jobsd's HTTP API."""
    return request(HTTP + path, method, body, 15, headers)


def view(name: str) -> dict:
    status, headers, answer = http("GET", f"/jobsd/v1/jobs/{name}")
    assert status == 200, f"GET {name} → {status} {answer!r}"
    body = json.loads(answer)
    assert headers["ETag"] == body["etag"], (headers["ETag"], body["etag"])
    return body


def delivered(name: str) -> int:
    return view(name)["status"]["counters"]["delivered"]


def error(answer: bytes) -> dict:
    return json.loads(answer)


def http_phase() -> Suite:
    s = Suite("http")
    name = "idem-every"
    path = f"/jobsd/v1/jobs/{name}"
    body = {"schedule": "@every 1s", "overwrite": True, "data": {"n": 1}}
    key = {"Idempotency-Key": "e2e-create-1"}
    ctx = {}

    @s.check
    def first_create_answers_an_etag_and_the_job_runs():
        status, headers, answer = http("POST", path, body, key)
        assert status == 204, (status, answer)
        assert headers.get("Idempotent-Replayed") is None
        ctx["etag"] = headers["ETag"]
        assert wait_until(lambda: delivered(name) >= 2, WAIT), view(name)["status"]

    @s.check
    def a_retry_gets_the_first_answer_and_progress_goes_on():
        before = delivered(name)
        status, headers, answer = http("POST", path, body, key)
        assert (status, answer) == (204, b""), (status, answer)
        assert headers["ETag"] == ctx["etag"]
        assert headers["Idempotent-Replayed"] == "true"
        v = view(name)
        assert v["etag"] == ctx["etag"]
        assert v["status"]["counters"]["delivered"] >= before, v["status"]
        assert wait_until(lambda: delivered(name) >= before + 1, WAIT)

    @s.check
    def the_key_with_another_body_is_refused():
        other = dict(body, data={"n": 2})
        data = view(name)["job"]["data"]
        status, _, answer = http("POST", path, other, key)
        assert status == 422, (status, answer)
        e = error(answer)
        assert e["errorCode"] == "ERR_IDEMPOTENCY_KEY_REUSED", e
        assert e["message"].startswith('Idempotency-Key: "e2e-create-1"'), e
        v = view(name)
        assert (v["etag"], v["job"]["data"]) == (ctx["etag"], data), v

    @s.check
    def a_create_only_retry_on_daprs_route_is_no_409():
        once = {"dueTime": "1h"}
        k = {"Idempotency-Key": "e2e-dapr-1"}
        for replayed in (None, "true"):
            status, headers, answer = http("POST", "/v1.0-alpha1/jobs/idem-once", once, k)
            assert status == 204, (status, answer)
            assert headers.get("Idempotent-Replayed") == replayed
        status, _, _ = http("POST", "/v1.0-alpha1/jobs/idem-once", once)
        assert status == 409, "without the header: Dapr's answer"

    @s.check
    def a_stale_if_match_changes_nothing():
        stale = {"If-Match": '"0000000000000001"'}
        status, _, answer = http("POST", path, dict(body, schedule="@every 2s"), stale)
        assert status == 412, (status, answer)
        e = error(answer)
        assert e["errorCode"] == "ERR_PRECONDITION_FAILED", e
        assert ctx["etag"] in e["message"], e
        assert view(name)["job"]["schedule"] == "@every 1s"

    @s.check
    def the_etag_read_makes_the_overwrite():
        status, headers, answer = http("POST", path, dict(body, schedule="@every 2s"),
                                       {"If-Match": ctx["etag"]})
        assert status == 204, (status, answer)
        assert headers["ETag"] != ctx["etag"]
        v = view(name)
        assert (v["etag"], v["job"]["schedule"]) == (headers["ETag"], "@every 2s")
        ctx["new"] = headers["ETag"]

    @s.check
    def delete_under_if_match():
        status, _, _ = http("DELETE", path, headers={"If-Match": ctx["etag"]})
        assert status == 412
        assert view(name)["etag"] == ctx["new"]
        status, _, _ = http("DELETE", path, headers={"If-Match": ctx["new"]})
        assert status == 204
        status, _, _ = http("GET", path)
        assert status == 404

    return s


def grpc_phase() -> Suite:
    import grpc
    from dapr.proto.runtime.v1 import dapr_pb2_grpc
    from dapr.proto.runtime.v1 import jobs_pb2 as dapr_jobs

    s = Suite("grpc")
    stubs_dir = tempfile.TemporaryDirectory(prefix="jobsd-stubs-")
    ctx = {}

    @s.check
    def daprs_schedule_job_takes_the_metadata():
        ctx["channel"] = grpc.insecure_channel(GRPC)
        dapr = dapr_pb2_grpc.DaprStub(ctx["channel"])
        req = dapr_jobs.ScheduleJobRequest(
            job=dapr_jobs.Job(name="idem-grpc-once", due_time="1h"))
        md = (("idempotency-key", "e2e-grpc-1"),)
        _, first = dapr.ScheduleJobAlpha1.with_call(req, metadata=md, timeout=15)
        _, again = dapr.ScheduleJobAlpha1.with_call(req, metadata=md, timeout=15)
        first, again = dict(first.initial_metadata()), dict(again.initial_metadata())
        assert first.get("idempotent-replayed") is None, first
        assert again.get("idempotent-replayed") == "true", again
        assert len(first["etag"]) == 18 and again["etag"] == first["etag"], (first, again)
        try:
            dapr.ScheduleJobAlpha1(req, timeout=15)
            raise AssertionError("without the metadata a repeat is AlreadyExists")
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.ALREADY_EXISTS, err

    @s.check
    def jobsd_schedule_job_answers_the_etag_and_replays():
        pb, rpc = generate_stubs(stubs_dir.name)
        jobs = rpc.JobsStub(ctx["channel"])
        req = pb.ScheduleJobRequest(job=dapr_jobs.Job(name="idem-grpc", schedule="@every 1s"),
                                    overwrite=True)
        md = (("idempotency-key", "e2e-grpc-2"),)
        first, call = jobs.ScheduleJob.with_call(req, metadata=md, timeout=15)
        assert len(first.etag) == 18, first
        assert dict(call.initial_metadata()).get("idempotent-replayed") is None
        again, call = jobs.ScheduleJob.with_call(req, metadata=md, timeout=15)
        assert again.etag == first.etag
        assert dict(call.initial_metadata()).get("idempotent-replayed") == "true"
        got = jobs.GetJob(pb.GetJobRequest(name="idem-grpc"), timeout=15)
        assert got.job.etag == first.etag
        try:
            jobs.ScheduleJob(req, metadata=(("if-match", '"0000000000000001"'),), timeout=15)
            raise AssertionError("a stale if-match is refused")
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err
            assert err.details().startswith("If-Match: "), err.details()
        jobs.DeleteJob(pb.DeleteJobRequest(name="idem-grpc"),
                       metadata=(("if-match", first.etag),), timeout=15)

    return s


def restart_setup(state_path: str) -> Suite:
    s = Suite("restart-setup")

    @s.check
    def create_under_a_key():
        status, headers, answer = http("POST", "/jobsd/v1/jobs/idem-durable", {"dueTime": "1h"},
                                       {"Idempotency-Key": "e2e-durable"})
        assert status == 204, (status, answer)
        with open(state_path, "w") as f:
            json.dump({"etag": headers["ETag"]}, f)

    return s


def restart_verify(state_path: str) -> Suite:
    s = Suite("restart-verify")

    @s.check
    def the_retry_after_kill_9_is_answered_as_the_first_was():
        with open(state_path) as f:
            etag = json.load(f)["etag"]
        status, headers, answer = http("POST", "/jobsd/v1/jobs/idem-durable", {"dueTime": "1h"},
                                       {"Idempotency-Key": "e2e-durable"})
        assert status == 204, (status, answer)
        assert headers["ETag"] == etag
        assert headers["Idempotent-Replayed"] == "true"
        assert view("idem-durable")["etag"] == etag

    return s


PHASES = {
    "http": (http_phase, 0),
    "grpc": (grpc_phase, 0),
    "restart-setup": (restart_setup, 1),
    "restart-verify": (restart_verify, 1),
}


def main(argv) -> int:
    phase = argv[1] if len(argv) > 1 else ""
    if phase in PHASES and len(argv) == 2 + PHASES[phase][1]:
        return PHASES[phase][0](*argv[2:]).run()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
