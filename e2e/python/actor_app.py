"""The actor app of e2e/actors.sh: a real Dapr actor service written with the PyPI Dapr SDK
(`dapr.ext.fastapi.DaprActor` on FastAPI, served by uvicorn), which jobsd hosts as daprd would.

    DAPR_HTTP_PORT=<jobsd's HTTP port> python actor_app.py --port PORT --log EVENTS.jsonl

It serves the SDK's routes (`GET /dapr/config`, `PUT /actors/<type>/<id>/method/<m>`,
`…/method/remind/<name>`, `…/method/timer/<name>`, `DELETE /actors/<type>/<id>`) for one
actor type, `ReminderActor`, whose idle timeout is IDLE_TIMEOUT. At startup the SDK waits for
the sidecar (`GET /v1.0/healthz/outbound`) before uvicorn listens. The actor's methods register
and unregister reminders and timers with the SDK's own calls (`register_reminder`,
`register_timer`, `unregister_*`), which go to jobsd's actor API.

Every method call, reminder, timer tick, activation and deactivation is appended to EVENTS as
one JSON line, flushed before the SDK answers (so what jobsd saw acknowledged is in the log):

    {"t": time.time(), "kind": "method"|"reminder"|"timer"|"activate"|"deactivate",
     "actor": <id>, "pid": <this process>, ...}

with, per kind: method `name`, `arg`; reminder `name`, `data_b64` (the state bytes the SDK
decoded), `due_time`, `period` (repr of what the SDK parsed from the body); timer `name`,
`data` (the timer state as the callback got it).

The checks (actor_checks.py) import `ReminderActorInterface` from here for their ActorProxy.
"""

import argparse
import asyncio
import base64
import json
import os
import sys
import time
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Optional

from dapr.actor import Actor, ActorInterface, Remindable, actormethod

ACTOR_TYPE = "ReminderActor"
# Short, so that the checks can see jobsd deactivate an idle actor (`DELETE /actors/<t>/<id>`)
# within a bounded wait; an actor with a 1 s reminder or timer never idles that long.
IDLE_TIMEOUT = timedelta(seconds=5)

LOG = None  # the open events file


def record(kind: str, actor: str, **fields) -> None:
    event = {"t": time.time(), "kind": kind, "actor": actor, "pid": os.getpid(), **fields}
    LOG.write(json.dumps(event, separators=(",", ":")) + "\n")
    LOG.flush()


def ms(value: Optional[float]) -> Optional[timedelta]:
    return None if value is None else timedelta(milliseconds=value)


class ReminderActorInterface(ActorInterface):
    @actormethod(name="Ping")
    async def ping(self, arg: dict) -> dict: ...

    @actormethod(name="ArmReminder")
    async def arm_reminder(self, arg: dict) -> None: ...

    @actormethod(name="DisarmReminder")
    async def disarm_reminder(self, name: str) -> None: ...

    @actormethod(name="ArmTimer")
    async def arm_timer(self, arg: dict) -> None: ...

    @actormethod(name="DisarmTimer")
    async def disarm_timer(self, name: str) -> None: ...

    @actormethod(name="Slow")
    async def slow(self, arg: dict) -> dict: ...

    @actormethod(name="Boom")
    async def boom(self) -> None: ...


# `Remindable` must be a direct base class: the SDK checks `Remindable in __bases__`.
class ReminderActor(Actor, ReminderActorInterface, Remindable):
    # Calls of Slow in progress, per actor id (the SDK itself does not serialize calls: jobsd's
    # per-actor turn must).
    in_flight: dict = {}

    async def _on_activate(self) -> None:
        record("activate", self.id.id)

    async def _on_deactivate(self) -> None:
        record("deactivate", self.id.id)

    async def ping(self, arg: dict) -> dict:
        record("method", self.id.id, name="Ping", arg=arg)
        return {"pong": arg, "actor": self.id.id, "pid": os.getpid()}

    async def arm_reminder(self, arg: dict) -> None:
        """arg: {"name", "data_b64", "due_ms", "period_ms" (null: a one-shot)}."""
        record("method", self.id.id, name="ArmReminder", arg=arg)
        await self.register_reminder(
            arg["name"], base64.b64decode(arg["data_b64"]), ms(arg["due_ms"]),
            ms(arg.get("period_ms")))

    async def disarm_reminder(self, name: str) -> None:
        record("method", self.id.id, name="DisarmReminder", arg=name)
        await self.unregister_reminder(name)

    async def arm_timer(self, arg: dict) -> None:
        """arg: {"name", "data" (any JSON), "due_ms", "period_ms"}."""
        record("method", self.id.id, name="ArmTimer", arg=arg)
        await self.register_timer(
            arg["name"], self.on_timer, arg["data"], ms(arg["due_ms"]), ms(arg["period_ms"]))

    async def disarm_timer(self, name: str) -> None:
        record("method", self.id.id, name="DisarmTimer", arg=name)
        await self.unregister_timer(name)

    async def slow(self, arg: dict) -> dict:
        """Holds the call for arg["ms"]; answers how many calls of this actor were in progress
        at once, this one included (1 when jobsd keeps actor calls turn-based)."""
        me = self.id.id
        ReminderActor.in_flight[me] = ReminderActor.in_flight.get(me, 0) + 1
        seen = ReminderActor.in_flight[me]
        try:
            await asyncio.sleep(arg["ms"] / 1000)
            seen = max(seen, ReminderActor.in_flight[me])
        finally:
            ReminderActor.in_flight[me] -= 1
        record("method", me, name="Slow", arg=arg, concurrent=seen)
        return {"concurrent": seen}

    async def boom(self) -> None:
        record("method", self.id.id, name="Boom", arg=None)
        raise RuntimeError("boom on purpose")

    async def on_timer(self, state) -> None:
        record("timer", self.id.id, name="on_timer", data=state)

    async def receive_reminder(self, name: str, state: bytes, due_time, period, ttl=None) -> None:
        record("reminder", self.id.id, name=name, data_b64=base64.b64encode(state).decode(),
               due_time=repr(due_time), period=repr(period))


def build_app():
    from dapr.actor.runtime.config import ActorRuntimeConfig
    from dapr.actor.runtime.runtime import ActorRuntime
    from dapr.ext.fastapi import DaprActor
    from fastapi import FastAPI

    ActorRuntime.set_actor_config(ActorRuntimeConfig(actor_idle_timeout=IDLE_TIMEOUT))

    @asynccontextmanager
    async def lifespan(app):
        # Blocks until the sidecar answers GET /v1.0/healthz/outbound; uvicorn listens after.
        await actor.register_actor(ReminderActor)
        print(f"registered {ACTOR_TYPE}; sidecar on port {os.environ.get('DAPR_HTTP_PORT')}",
              flush=True)
        yield

    app = FastAPI(lifespan=lifespan)
    actor = DaprActor(app)
    return app


def main() -> int:
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    LOG = open(args.log, "a", encoding="utf-8")
    import uvicorn

    uvicorn.run(build_app(), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
