"""Real-time checks of async completion (README "Steer your jobs"; the in-process twin on a
manual clock is tests/async_completion.rs). Run by e2e/steer_async.sh against the release jobsd
(DAPR_HTTP_PORT, DAPR_GRPC_PORT set) whose app is async_app.py (HTTP) or async_grpc_app.py
(gRPC), recording to a JSON-lines file; the job's name tells the app what to do. Every job is
a one-shot due at an absolute time, its nominal time also in its data (`{"tick": ...}`), so the
app can name the execution even without jobsd's execution headers. One phase per scenario:

  http EVENTS               heartbeats past a 2 s lease then complete → one success run with
                            the execution id, one delivery; fail "boom" → a failed run with the
                            error and a retry of the same execution, completed; a lease nobody
                            extends → failed attempts "lease expired", retried by the failure
                            policy, dropped; a plain 202 is Dapr's success; calls on unknown or
                            ended executions → 404 / 409; policy.lease out of bounds → 400
  kill-setup STATE          two executions held (leases 5 min and 2 s); returns once both are
  kill-verify STATE EVENTS  (jobsd was killed with SIGKILL and restarted on the same data dir
                            after a few seconds) the live one is still held, not delivered
                            again, and heartbeat + complete work → a success run; the 2 s lease
                            ran out meanwhile → a failed attempt "lease expired", dropped
  grpc EVENTS               the gRPC app answers with `jobsd-async: true` metadata and ends its
                            executions with jobsd.v1.Jobs Heartbeat / CompleteExecution /
                            FailExecution → runs success, and failed "grpc boom" then success
"""

import json
import sys

from harness import Suite, run_phase_of
from policy_checks import (create, deliveries, due_at, http, load, read_events, runs, save,
                           summary, view, wait_runs, wait_status)

WAIT = 30.0


def job(due: str, **extra) -> dict:
    """A one-shot due at `due`, its nominal time in its data."""
    return {"dueTime": due, "data": {"tick": due}, **extra}


def held(name: str) -> list:
    return view(name)["status"]["held"]


def calls(events: str, name: str, what: str = None) -> list:
    return [e for e in read_events(events)
            if e.get("kind") == "call" and e["name"] == name
            and (what is None or e["what"] == what)]


def delivered(events: str, name: str) -> list:
    return [e for e in deliveries(events, name) if e.get("kind") == "delivery"]


def execution(id_: str, what: str, body=None):
    status, _, answer = http("POST", f"/jobsd/v1/executions/{id_}/{what}", body)
    return status, (json.loads(answer) if answer else None)


def finished(name: str) -> dict:
    return wait_status(name, lambda s: s["state"] == "finished", "finished state")


# ---------------------------------------------------------------- HTTP app


def http_phase(events: str) -> Suite:
    s = Suite("http")
    due = due_at(2)
    names = {"done": "async-done-1", "fail": "async-failonce-1", "expire": "async-ignore-1",
             "plain": "plain202-1"}
    create(names["done"], job(due, policy={"lease": "2s"}))
    create(names["fail"], job(due, failurePolicy={"constant": {"interval": "1s",
                                                                "maxRetries": 2}}))
    create(names["expire"], job(due, policy={"lease": "1s"},
                                failurePolicy={"constant": {"interval": "1s", "maxRetries": 1}}))
    create(names["plain"], job(due))

    @s.check
    def heartbeats_outlive_the_lease_and_complete_records_one_success():
        name = names["done"]
        rs = wait_runs(name, 1, "success", timeout=WAIT)
        assert [r["outcome"] for r in rs] == ["success"], summary(rs)
        got = delivered(events, name)
        assert len(got) == 1, got
        assert rs[0]["executionId"] == got[0]["id"], (rs[0], got[0])
        beats = calls(events, name, "heartbeat")
        assert len(beats) == 3 and all(b["status"] == 200 for b in beats), beats
        done = calls(events, name, "complete")
        assert [c["status"] for c in done] == [200], done
        # Held ~3 s on a 2 s lease: only the heartbeats kept it.
        assert done[0]["t"] - got[0]["t"] > 2.5, (done, got)
        v = finished(name)
        assert v["status"]["held"] == [] and v["status"]["counters"]["succeeded"] == 1, v

    @s.check
    def fail_records_the_error_and_the_retry_keeps_the_execution_id():
        name = names["fail"]
        rs = wait_runs(name, 1, "success", timeout=WAIT)
        assert [r["outcome"] for r in rs] == ["failed", "success"], summary(rs)
        assert rs[0]["error"] == "boom" and [r["attempt"] for r in rs] == [1, 2], summary(rs)
        got = delivered(events, name)
        assert len(got) == 2 and got[0]["id"] == got[1]["id"] == rs[0]["executionId"], got
        assert rs[1]["executionId"] == rs[0]["executionId"]

    @s.check
    def an_expired_lease_is_a_failed_attempt_the_failure_policy_retries():
        name = names["expire"]
        v = finished(name)
        rs = runs(name)
        assert [r["outcome"] for r in rs] == ["failed", "failed"], summary(rs)
        assert all(r["error"] == "lease expired" for r in rs), summary(rs)
        assert v["status"]["counters"]["dropped"] == 1, v
        assert len(delivered(events, name)) == 2

    @s.check
    def a_plain_202_without_policy_lease_is_daprs_success():
        name = names["plain"]
        rs = wait_runs(name, 1, "success", timeout=WAIT)
        assert [r["outcome"] for r in rs] == ["success"], summary(rs)
        finished(name)
        assert calls(events, name) == []

    @s.check
    def unknown_and_ended_executions_are_refused_clearly():
        status, body = execution("6f1c1b7e-0000-5000-8000-000000000000", "complete")
        assert status == 404 and body["errorCode"] == "ERR_EXECUTION_NOT_FOUND", body
        ended = runs(names["done"])[0]["executionId"]
        status, body = execution(ended, "heartbeat")
        assert status == 404, body
        status, body = execution(ended, "complete")
        assert status == 200 and body["ended"] == "completed", body  # a retried complete
        status, body = execution(ended, "fail", {"error": "late"})
        assert status == 409 and body["errorCode"] == "ERR_EXECUTION_ENDED", body

    @s.check
    def policy_lease_is_bounded_naming_the_field():
        status, _, answer = http("POST", "/jobsd/v1/jobs/bad-lease",
                                 {"dueTime": "1h", "policy": {"lease": "25h"}})
        assert status == 400, answer
        assert json.loads(answer)["message"] == \
            'policy.lease: "25h" must be between 1s and 24h', answer

    return s


# ---------------------------------------------------------------- kill -9


def kill_setup(state_path: str) -> Suite:
    s = Suite("kill-setup")
    due = due_at(1)
    live, short = "async-hold-live", "async-hold-short"
    create(live, job(due, policy={"lease": "5m"}))
    create(short, job(due, policy={"lease": "2s"}, failurePolicy={"drop": {}}))

    @s.check
    def both_are_held():
        state = {}
        for name in (live, short):
            v = wait_status(name, lambda st: len(st["held"]) == 1, "a held execution")
            state[name] = v["status"]["held"][0]["executionId"]
        save(state_path, state)

    return s


def kill_verify(state_path: str, events: str) -> Suite:
    s = Suite("kill-verify")
    state = load(state_path)
    live, short = "async-hold-live", "async-hold-short"

    @s.check
    def the_live_lease_kept_its_execution_in_flight():
        h = held(live)
        assert [x["executionId"] for x in h] == [state[live]], h
        assert len(delivered(events, live)) == 1, "not delivered again while held"
        assert runs(live)[0]["outcome"] == "running", summary(runs(live))

    @s.check
    def heartbeat_and_complete_work_after_the_restart():
        status, body = execution(state[live], "heartbeat", {"lease": "1m"})
        assert status == 200 and body["leaseUntil"], body
        status, body = execution(state[live], "complete")
        assert status == 200 and body["ended"] == "completed", body
        rs = wait_runs(live, 1, "success")
        assert [r["outcome"] for r in rs] == ["success"], summary(rs)
        assert rs[0]["executionId"] == state[live]
        finished(live)

    @s.check
    def the_lease_that_ran_out_while_down_failed_its_attempt():
        v = finished(short)
        rs = runs(short)
        assert [(r["outcome"], r["error"]) for r in rs] == [("failed", "lease expired")], \
            summary(rs)
        assert rs[0]["executionId"] == state[short]
        assert v["status"]["counters"]["dropped"] == 1, v
        assert len(delivered(events, short)) == 1

    return s


# ---------------------------------------------------------------- gRPC app


def grpc_phase(events: str) -> Suite:
    s = Suite("grpc")
    due = due_at(2)
    done, fail = "async-gdone-1", "async-gfail-1"
    create(done, job(due))
    create(fail, job(due, failurePolicy={"constant": {"interval": "1s", "maxRetries": 1}}))

    @s.check
    def metadata_holds_and_grpc_heartbeat_and_complete_end_it():
        rs = wait_runs(done, 1, "success")
        assert [r["outcome"] for r in rs] == ["success"], summary(rs)
        got = [e for e in delivered(events, done)]
        assert len(got) == 1 and got[0]["id"] == rs[0]["executionId"], got
        made = [(c["what"], c["status"]) for c in calls(events, done)]
        assert made == [("heartbeat", "OK"), ("complete", "OK")], made

    @s.check
    def grpc_fail_records_the_error_and_the_retry_completes():
        rs = wait_runs(fail, 1, "success")
        assert [r["outcome"] for r in rs] == ["failed", "success"], summary(rs)
        assert rs[0]["error"] == "grpc boom", summary(rs)
        assert rs[0]["executionId"] == rs[1]["executionId"]

    return s


PHASES = {
    "http": (http_phase, 1),
    "kill-setup": (kill_setup, 1),
    "kill-verify": (kill_verify, 2),
    "grpc": (grpc_phase, 1),
}


if __name__ == "__main__":
    sys.exit(run_phase_of(PHASES, sys.argv, __doc__))
