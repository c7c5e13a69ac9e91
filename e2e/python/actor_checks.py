"""Actor checks of jobsd (issue 10), run by e2e/actors.sh against a running jobsd (DAPR_HTTP_PORT
set to its HTTP port) that fronts actor_app.py, a real actor service written with the PyPI Dapr
SDK. This script is the SDK's client side: it calls the actors with `ActorProxy` (RPC style,
through jobsd's `/v1.0/actors/<type>/<id>/method/<m>`); the actors register their reminders and
timers themselves with the SDK's `register_reminder` / `register_timer`; what the app received is
read from its JSON-lines events file (see actor_app.py). Phases:

  basics EVENTS       the app's types are hosted; a method call answers; a raising method is
                      ERR_ACTOR_INVOKE_METHOD; calls of one actor are turn-based; reminder of an
                      unhosted type 403, state 500; actor `r1` arms a reminder (due 1 s, every
                      1 s, binary data) and a timer (due 1 s, every 1 s, JSON data), actor
                      `once-1` a one-shot reminder: the ticks arrive with their data intact, GET
                      of the reminder answers it, the one-shot fires exactly once and is gone,
                      the unregistered timer stops, an idle actor is deactivated
  after-restart EVENTS T_KILL T_RESTART
                      jobsd was killed with SIGKILL at T_KILL and restarted on the same data dir
                      and ports (healthy at T_RESTART); nothing was registered again: `r1`'s
                      reminder ticks again, GET still answers it, the one-shot did not fire
                      again; then the reminder of `r1` unregistered by the actor (SDK
                      `unregister_reminder`) and one of `r2` deleted over HTTP both stop
  remote EVENTS       the same app through a sidecar of a 3-replica scheduler cluster: `basics`,
                      then the same unregister/delete checks

Times are wall-clock `time.time()` seconds (the app, this script and the shell's `date +%s.%N`
share the machine's clock); the checks assert counts with generous bounds, not latencies.
Every wait is bounded.
"""

import asyncio
import base64
import json
import os
import sys
import time

from dapr.actor import ActorId, ActorProxy
from dapr.clients.exceptions import DaprInternalError

from actor_app import ACTOR_TYPE, IDLE_TIMEOUT, ReminderActorInterface
from checks import request, wait_until
from harness import Suite

HTTP = f"http://{os.environ.get('DAPR_RUNTIME_HOST', '127.0.0.1')}:{os.environ.get('DAPR_HTTP_PORT', '3500')}"

# The reminder's state: bytes that are not UTF-8, so that base64 on the way in and out matters.
REMINDER_DATA = b"\x00\x01tick \xe2\x9c\x93 \xff\xfe"
ONCE_DATA = b"one-shot"
TIMER_DATA = {"k": 1, "s": "gr\u00fc\u00df", "l": [1, 2.5, None]}
# Upper bound for what should happen within a few seconds (a loaded 2-core machine).
WAIT = 30.0
# After an unregister returns: a tick already due may still arrive within GRACE seconds (at most
# LATE_TICKS of them); then none at all for QUIET seconds (three periods).
GRACE = 3.0
LATE_TICKS = 2
QUIET = 3.0


# ---------------------------------------------------------------- helpers


def http(method: str, path: str, body=None, timeout: float = 15):
    return request(HTTP + path, method, body, timeout)


def actor_path(actor_id: str, *rest: str, actor_type: str = ACTOR_TYPE) -> str:
    return "/".join([f"/v1.0/actors/{actor_type}/{actor_id}", *rest])


def proxy(actor_id: str):
    return ActorProxy.create(ACTOR_TYPE, ActorId(actor_id), ReminderActorInterface)


def call(actor_id: str, method: str, *args):
    """An RPC-style ActorProxy call (`POST /v1.0/actors/…/method/<method>` through jobsd)."""
    async def go():
        return await getattr(proxy(actor_id), method)(*args)

    return asyncio.run(go())


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


def events_of(path: str, kind: str, actor: str, name=None, after: float = 0.0) -> list:
    return [e for e in read_events(path)
            if e["kind"] == kind and e["actor"] == actor
            and (name is None or e.get("name") == name) and e["t"] > after]


def wait_count(path: str, kind: str, actor: str, name, n: int, after: float = 0.0,
               timeout: float = WAIT) -> list:
    """Waits until at least n such events are logged; returns them (fails when they do not
    come within `timeout`)."""
    got = []

    def enough():
        nonlocal got
        got = events_of(path, kind, actor, name, after)
        return len(got) >= n

    assert wait_until(enough, timeout, 0.2), (
        f"{len(got)} {kind} events of {actor}/{name} after {after:.2f}, want ≥ {n} within {timeout}s")
    return got


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def arm_reminder(actor_id: str, name: str, data: bytes, due_ms, period_ms) -> None:
    assert call(actor_id, "ArmReminder", {"name": name, "data_b64": b64(data), "due_ms": due_ms,
                                          "period_ms": period_ms}) is None


def get_reminder(actor_id: str, name: str):
    status, _, body = http("GET", actor_path(actor_id, "reminders", name))
    return status, body


def assert_reminder(actor_id: str, name: str, data: bytes) -> None:
    """GET of the reminder answers 200 with daprd's JSON: the registered dueTime as sent, the
    period as the scheduler's `@every` schedule, the data as the JSON string the SDK sent."""
    status, body = get_reminder(actor_id, name)
    assert status == 200, f"GET reminder {actor_id}/{name}: {status} {body!r}"
    got = json.loads(body)
    want = {"actorID": actor_id, "actorType": ACTOR_TYPE, "data": b64(data),
            "dueTime": "0h0m1s0ms0\u03bcs", "period": "@every 1s"}
    assert got == want, f"GET reminder {actor_id}/{name}: {got}, want {want}"


def assert_reminder_gone(actor_id: str, name: str) -> None:
    status, body = get_reminder(actor_id, name)
    assert status == 404, f"GET reminder {actor_id}/{name}: {status} {body!r}, want 404"
    code = json.loads(body).get("errorCode")
    assert code == "ERR_ACTOR_REMINDER_NOT_FOUND", f"errorCode {code!r} in {body!r}"


def assert_ticks(events: list, data: bytes) -> None:
    """Every delivery carries the reminder's data, and daprd's empty dueTime and period
    (a Scheduler-backed reminder's delivery body is {"data":…,"dueTime":"","period":""})."""
    for e in events:
        assert e["data_b64"] == b64(data), f"reminder data {e['data_b64']!r}, want {b64(data)!r}"
        assert e["due_time"] == "''" and e["period"] == "''", (
            f"dueTime {e['due_time']}, period {e['period']}: want '' and '' as daprd sends")


def assert_quiet_after(events_path: str, what: list, stopped_at: float) -> None:
    """Each (kind, actor, name) of `what` stops: at most LATE_TICKS deliveries in the GRACE
    seconds after `stopped_at` (ticks already due), then none for QUIET seconds."""
    time.sleep(GRACE)
    late = {w: len(events_of(events_path, *w, after=stopped_at)) for w in what}
    settled = time.time()
    time.sleep(QUIET)
    for w in what:
        assert late[w] <= LATE_TICKS, f"{w}: {late[w]} deliveries within {GRACE}s of the stop"
        after = events_of(events_path, *w, after=settled)
        assert not after, f"{w}: {len(after)} deliveries {GRACE}–{GRACE + QUIET}s after the stop"


# ---------------------------------------------------------------- phases


def basics(suite: Suite, events: str) -> None:
    @suite.check
    def types_hosted():
        # Before jobsd has read the app's /dapr/config a reminder call answers 403 (not hosted);
        # once it has, a missing reminder is 404.
        last = []

        def hosted():
            last[:] = get_reminder("probe", "none")
            return last[0] == 404

        assert wait_until(hosted, WAIT, 0.2), f"{ACTOR_TYPE} not hosted: last GET reminder {last}"
        assert_reminder_gone("probe", "none")

    @suite.check
    def method_call_answers():
        got = call("p1", "Ping", {"hello": "w\u00f6rld", "n": 1})
        assert got["pong"] == {"hello": "w\u00f6rld", "n": 1} and got["actor"] == "p1", got
        pings = events_of(events, "method", "p1", "Ping")
        assert len(pings) == 1, pings
        assert events_of(events, "activate", "p1"), "p1 was not activated"

    @suite.check
    def method_error_is_invoke_error():
        status, _, body = http("POST", actor_path("p2", "method", "Boom"))
        assert status == 500, f"Boom: {status} {body!r}"
        code = json.loads(body).get("errorCode")
        assert code == "ERR_ACTOR_INVOKE_METHOD", f"errorCode {code!r} in {body!r}"
        try:
            call("p2", "Boom")
        except DaprInternalError as e:
            assert e.error_code == "ERR_ACTOR_INVOKE_METHOD", e.as_dict()
        else:
            raise AssertionError("the SDK's Boom call did not raise")

    @suite.check
    def one_actor_is_turn_based():
        async def go():
            p = proxy("turns")
            return await asyncio.gather(*(p.Slow({"ms": 300, "i": i}) for i in range(4)))

        answers = asyncio.run(go())
        assert [a["concurrent"] for a in answers] == [1, 1, 1, 1], (
            f"calls of one actor overlapped in the app: {answers}")

    @suite.check
    def unhosted_type_and_state_answers():
        status, _, body = http("PUT", actor_path("x", "reminders", "r", actor_type="NotHosted"),
                               {"dueTime": "1s", "period": "1s"})
        assert status == 403, f"reminder of an unhosted type: {status} {body!r}"
        assert json.loads(body).get("errorCode") == "ERR_ACTOR_REMINDER_NON_HOSTED", body
        # Actor state is kept (embedded store or jobsd replicas): a key never written is 204, a
        # transaction for an actor not active on this host is daprd's 400.
        status, _, body = http("GET", actor_path("p1", "state", "never-written"))
        assert status == 204, f"GET state: {status} {body!r}"
        status, _, body = http("POST", actor_path("never-active", "state"),
                               [{"operation": "upsert", "request": {"key": "k", "value": 1}}])
        assert status == 400, f"state of an inactive actor: {status} {body!r}"
        assert json.loads(body).get("errorCode") == "ERR_ACTOR_INSTANCE_MISSING", body

    @suite.check
    def actors_register_reminders_and_timer():
        arm_reminder("r1", "tick", REMINDER_DATA, 1000, 1000)
        assert call("r1", "ArmTimer", {"name": "tock", "data": TIMER_DATA, "due_ms": 1000,
                                       "period_ms": 1000}) is None
        arm_reminder("once-1", "once", ONCE_DATA, 1000, None)

    @suite.check
    def reminder_ticks_with_data():
        assert_ticks(wait_count(events, "reminder", "r1", "tick", 3), REMINDER_DATA)

    @suite.check
    def timer_ticks_with_data():
        ticks = wait_count(events, "timer", "r1", "on_timer", 3)
        for e in ticks:
            assert e["data"] == TIMER_DATA, f"timer data {e['data']!r}, want {TIMER_DATA!r}"

    @suite.check
    def get_reminder_answers_it():
        assert_reminder("r1", "tick", REMINDER_DATA)

    @suite.check
    def one_shot_fires_exactly_once():
        first = wait_count(events, "reminder", "once-1", "once", 1)
        assert_ticks(first, ONCE_DATA)
        time.sleep(QUIET)
        got = events_of(events, "reminder", "once-1", "once")
        assert len(got) == 1, f"the one-shot fired {len(got)} times"
        assert_reminder_gone("once-1", "once")

    @suite.check
    def unregistered_timer_stops():
        assert call("r1", "DisarmTimer", "tock") is None
        assert_quiet_after(events, [("timer", "r1", "on_timer")], time.time())

    @suite.check
    def idle_actor_is_deactivated():
        # p1 was called once, long enough ago (more than IDLE_TIMEOUT) by now; jobsd sends the
        # app `DELETE /actors/ReminderActor/p1`, and the next call activates it again.
        wait_count(events, "deactivate", "p1", None, 1, timeout=IDLE_TIMEOUT.total_seconds() + WAIT)
        t = time.time()
        assert call("p1", "Ping", {"again": True})["actor"] == "p1"
        assert events_of(events, "activate", "p1", after=t), "p1 not activated again"
        # r1 has a reminder ticking every second: never idle that long.
        assert not events_of(events, "deactivate", "r1"), "r1 deactivated while its reminder ticks"


def stop_both(suite: Suite, events: str) -> None:
    """r1's reminder is unregistered by the actor itself (SDK), r2's (armed here) deleted over
    HTTP; both stop, and both are gone."""
    @suite.check
    def second_reminder_ticks():
        arm_reminder("r2", "tick", REMINDER_DATA, 1000, 1000)
        assert_ticks(wait_count(events, "reminder", "r2", "tick", 2), REMINDER_DATA)

    @suite.check
    def unregister_and_delete_stop_reminders():
        assert call("r1", "DisarmReminder", "tick") is None
        status, _, body = http("DELETE", actor_path("r2", "reminders", "tick"))
        assert status == 204, f"DELETE reminder r2/tick: {status} {body!r}"
        assert_quiet_after(events, [("reminder", "r1", "tick"), ("reminder", "r2", "tick")],
                           time.time())
        assert_reminder_gone("r1", "tick")
        assert_reminder_gone("r2", "tick")


def after_restart(suite: Suite, events: str, t_kill: float, t_restart: float) -> None:
    @suite.check
    def types_hosted_again():
        last = []

        def hosted():
            last[:] = get_reminder("probe", "none")
            return last[0] == 404

        assert wait_until(hosted, WAIT, 0.2), f"{ACTOR_TYPE} not hosted: last GET reminder {last}"

    @suite.check
    def reminder_ticks_resume():
        before = events_of(events, "reminder", "r1", "tick")
        assert any(e["t"] < t_kill for e in before), "r1's reminder did not tick before the kill"
        assert_ticks(wait_count(events, "reminder", "r1", "tick", 3, after=t_restart), REMINDER_DATA)

    @suite.check
    def nothing_registered_again():
        again = [e for e in events_of(events, "method", "r1", after=t_kill)
                 if e["name"] == "ArmReminder"]
        assert not again, f"the reminder was registered again: {again}"

    @suite.check
    def get_reminder_after_restart():
        assert_reminder("r1", "tick", REMINDER_DATA)

    @suite.check
    def one_shot_not_fired_again():
        got = events_of(events, "reminder", "once-1", "once")
        assert len(got) == 1, f"the one-shot fired {len(got)} times"
        assert_reminder_gone("once-1", "once")

    stop_both(suite, events)


def main() -> int:
    phase, args = sys.argv[1], sys.argv[2:]
    suite = Suite(phase)
    if phase == "basics":
        basics(suite, args[0])
    elif phase == "after-restart":
        after_restart(suite, args[0], float(args[1]), float(args[2]))
    elif phase == "remote":
        basics(suite, args[0])
        stop_both(suite, args[0])
    else:
        print(f"unknown phase {phase!r}", file=sys.stderr)
        return 2
    return suite.run()


if __name__ == "__main__":
    sys.exit(main())
