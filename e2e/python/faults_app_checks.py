"""Real-time checks of e2e/faults/app.sh: the app misbehaves (issue 15, item 2). jobsd's app is
faults_app_server.py, whose job names say how it misbehaves; it logs every call on arrival. The
in-process twin on a manual clock is tests/app_faults.rs. One phase per scenario:

  hang EVENTS           (jobsd with --app-call-timeout 3s) a job whose calls the app never
                        answers: each attempt ends at the timeout as timed_out, its failure
                        policy (1 retry) runs, exactly 2 calls; an `@every 1s` job due meanwhile
                        is delivered on time at every tick
  broken EVENTS PID     garbage bytes, a close in the middle of the headers, a 500 with a 50 MiB
                        body, a plain 500: each call a failed attempt, exactly 3 per job (2
                        retries), jobsd stops reading the huge body (bytes written ≪ 50 MiB) and
                        its peak RSS grows by less than 64 MiB; a 200 whose body is cut short is
                        a success (daprd ignores the body too)
  slow EVENTS PID       a 10 s handler, 3,000 one-shots due at 1,000/s: at most
                        `--app-max-concurrency` (default 1,024) calls in flight, RSS bounded
                        (printed), every job delivered exactly once, none before its due time
  flap EVENTS           (jobsd with app health checks every 1 s, the app healthy in even
                        seconds only) an `@every 1s` job: every tick delivered once, none lost
                        or doubled; a job failing with 500: exactly 4 calls (3 retries) —
                        ticks held while the app is unhealthy are staged, not attempts

Helpers come from policy_checks.py (jobsd's HTTP API, run history, app event log).
"""

import concurrent.futures
import json
import sys
import time

from harness import Suite, run_phase_of
from policy_checks import SECOND, contiguous, create, due_at, ns, read_events, runs, view, \
    wait_status, wait_until

WAIT = 60.0


def calls(events: str, name: str) -> list:
    return [e for e in read_events(events) if e.get("name") == name and "sent" not in e]


def rss_kib(pid: str, key: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {key} for pid {pid}")


def constant(retries: int) -> dict:
    return {"constant": {"interval": "1s", "maxRetries": retries}}


def dropped(name: str, timeout: float = WAIT) -> dict:
    return wait_status(name, lambda s: s["counters"]["dropped"] >= 1, "dropped tick", timeout)


# ---------------------------------------------------------------- hang


def hang_phase(events: str) -> Suite:
    s = Suite("faults-app-hang")

    @s.check
    def create_a_hanging_job_and_an_every_second_one():
        create("hang-1", {"dueTime": due_at(1), "failurePolicy": constant(1)})
        create("steady-1", {"schedule": "@every 1s", "dueTime": due_at(1), "repeats": 8})

    @s.check
    def each_attempt_ends_at_the_call_timeout_and_the_failure_policy_runs():
        v = dropped("hang-1")
        assert v["status"]["counters"]["failedAttempts"] == 2, v["status"]
        assert v["status"]["lastOutcome"] == "timed_out", v["status"]
        assert "--app-call-timeout" in (v["status"]["lastError"] or ""), v["status"]
        rs = runs("hang-1")
        assert [r["outcome"] for r in rs] == ["timed_out", "timed_out"], rs
        for r in rs:
            took = (ns(r["finished"]) - ns(r["started"])) / SECOND
            # 3 s on jobsd's clock; a loaded machine may add a little, never take any away.
            assert 3.0 <= took < 6.0, f"attempt took {took:.2f}s: {r}"
        got = calls(events, "hang-1")
        assert [c["attempt"] for c in got] == ["1", "2"], got

    @s.check
    def the_other_job_is_delivered_on_time_at_every_tick():
        assert wait_until(lambda: len(calls(events, "steady-1")) >= 8, WAIT, 0.1)
        time.sleep(1.5)
        got = calls(events, "steady-1")
        nominal = sorted(ns(c["scheduled"]) for c in got)
        assert len(got) == 8 and contiguous(nominal), got
        late = [ns(c["t"]) - ns(c["scheduled"]) for c in got]
        on_time = [d for d in late if 0 <= d < SECOND]
        print(f"   steady-1: {len(on_time)} of 8 ticks within 1 s of their due time, "
              f"max lateness {max(late) / 1e6:.0f} ms")
        assert len(on_time) == 8, late

    return s


# ---------------------------------------------------------------- broken answers

BROKEN = ["garbage-1", "cut-1", "huge-1", "fail-1"]


def broken_phase(events: str, pid: str) -> Suite:
    s = Suite("faults-app-broken")
    before = {}

    @s.check
    def create_one_job_per_kind_of_broken_answer():
        before["hwm"] = rss_kib(pid, "VmHWM")
        for name in BROKEN:
            create(name, {"dueTime": due_at(1), "failurePolicy": constant(2)})

    for name in BROKEN:
        def check(name=name):
            v = dropped(name)
            assert v["status"]["counters"]["failedAttempts"] == 3, (name, v["status"])
            assert v["status"]["counters"]["succeeded"] == 0, (name, v["status"])
            got = calls(events, name)
            assert [c["attempt"] for c in got] == ["1", "2", "3"], got
            print(f"   {name}: {v['status']['lastError']}")
        s.add(f"{name.split('-')[0]}_is_a_failed_attempt_3_calls_then_dropped", check)

    @s.check
    def a_200_cut_short_in_its_body_is_a_success_as_in_daprd():
        create("short-1", {"dueTime": due_at(1), "failurePolicy": constant(2)})
        v = wait_status("short-1", lambda st: st["counters"]["succeeded"] >= 1, "success", WAIT)
        assert v["status"]["counters"]["failedAttempts"] == 0, v["status"]
        time.sleep(1.5)
        assert len(calls(events, "short-1")) == 1, calls(events, "short-1")

    @s.check
    def jobsd_stops_reading_a_huge_body_and_its_memory_stays_bounded():
        sent = [e["sent"] for e in read_events(events) if e.get("name") == "huge-1" and "sent" in e]
        assert len(sent) == 3, sent
        assert all(n < 16 << 20 for n in sent), f"bytes the app got written: {sent}"
        hwm = rss_kib(pid, "VmHWM")
        print(f"   jobsd VmHWM {before['hwm'] / 1024:.1f} → {hwm / 1024:.1f} MiB; the app wrote "
              f"{[round(n / 2**20, 1) for n in sent]} MiB of each 50 MiB body")
        assert hwm - before["hwm"] < 64 << 10, (before, hwm)

    return s


# ---------------------------------------------------------------- slow app

SLOW_JOBS = 3000
SLOW_RATE = 1000  # due per second


def slow_phase(events: str, pid: str) -> Suite:
    s = Suite("faults-app-slow")
    state = {}

    @s.check
    def create_3000_one_shots_due_at_1000_per_second():
        start = time.time() + 8
        state["start"] = start

        def one(i):
            due = start + i / SLOW_RATE
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(due)) + \
                f".{int(due * 1000) % 1000:03d}Z"
            create(f"slow-{i}", {"dueTime": stamp})

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(one, range(SLOW_JOBS)))
        assert time.time() < start, "creating took past the first due time; raise the lead"

    @s.check
    def every_job_is_delivered_once_in_flight_and_memory_bounded():
        rss = []

        def done():
            rss.append(rss_kib(pid))
            return len(calls_of_slow()) >= SLOW_JOBS

        def calls_of_slow():
            return [e for e in read_events(events) if e.get("name", "").startswith("slow-")]

        assert wait_until(done, 150, 0.5), f"{len(calls_of_slow())} of {SLOW_JOBS} delivered"
        time.sleep(1)
        got = calls_of_slow()
        names = [c["name"] for c in got]
        inflight = max(c["inflight"] for c in got)
        took = max(c["t"] for c in got) - state["start"]
        print(f"   {SLOW_JOBS} calls of 10 s each: all arrived {took:.0f} s after the first due "
              f"time; at most {inflight} in flight; jobsd RSS max {max(rss) / 1024:.1f} MiB, "
              f"now {rss[-1] / 1024:.1f} MiB")
        assert len(names) == SLOW_JOBS and len(set(names)) == SLOW_JOBS, "lost or doubled"
        assert all(ns(c["t"]) >= ns(c["scheduled"]) for c in got), "a call before its due time"
        # The bound is reached (3,000 calls would be in flight without it) and held.
        assert 512 < inflight <= 1024, inflight
        assert max(rss) < 256 << 10, max(rss)

    return s


# ---------------------------------------------------------------- flapping health


def flap_phase(events: str) -> Suite:
    s = Suite("faults-app-flap")

    @s.check
    def create_an_every_second_job_and_a_failing_one():
        create("tick-1", {"schedule": "@every 1s", "dueTime": due_at(1), "repeats": 10})
        create("fail-flap", {"dueTime": due_at(1), "failurePolicy": constant(3)})

    @s.check
    def every_tick_is_delivered_once():
        v = wait_status("tick-1", lambda st: st["counters"]["succeeded"] >= 10, "10 ticks", WAIT)
        time.sleep(2)
        got = calls(events, "tick-1")
        nominal = sorted(ns(c["scheduled"]) for c in got)
        staged = v["status"]["counters"]["staged"]
        print(f"   tick-1: {len(got)} calls for 10 ticks; staged {staged} times while unhealthy")
        assert len(got) == 10 and contiguous(nominal), json.dumps(got)
        assert all(ns(c["t"]) >= ns(c["scheduled"]) for c in got), "a call before its due time"

    @s.check
    def the_failing_job_makes_exactly_its_4_attempts():
        v = dropped("fail-flap")
        assert v["status"]["counters"]["failedAttempts"] == 4, v["status"]
        time.sleep(2)
        got = calls(events, "fail-flap")
        assert [c["attempt"] for c in got] == ["1", "2", "3", "4"], got

    return s


PHASES = {
    "hang": (hang_phase, 1),
    "broken": (broken_phase, 2),
    "slow": (slow_phase, 2),
    "flap": (flap_phase, 1),
}

if __name__ == "__main__":
    sys.exit(run_phase_of(PHASES, sys.argv, __doc__))
