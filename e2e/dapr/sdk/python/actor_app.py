"""The Python SDK as an actor app: `dapr.ext.fastapi.DaprActor` (the `fastapi` extra of PyPI
`dapr`) under uvicorn, hosting PySdkActor. The actor registers and unregisters its reminder and
timer with the SDK's own calls (`register_reminder`, `register_timer`, ...), as a Python user
must: the Python SDK has no reminder or timer call outside an actor. Its state goes through the
SDK's actor state manager (`self._state_manager`), which the SDK saves after every method too.
Every method call, tick and timer is recorded (common.py).
"""

import base64
import os
from contextlib import asynccontextmanager
from datetime import timedelta

import uvicorn
from common import b64, record
from dapr.actor import Actor, ActorInterface, Remindable, actormethod
from dapr.ext.fastapi import DaprActor
from fastapi import FastAPI


class PySdkActorInterface(ActorInterface):
    @actormethod(name="Ping")
    async def ping(self, arg: str) -> str: ...

    @actormethod(name="ArmReminder")
    async def arm_reminder(self, arg: dict) -> None: ...

    @actormethod(name="DisarmReminder")
    async def disarm_reminder(self, name: str) -> None: ...

    @actormethod(name="ArmTimer")
    async def arm_timer(self, arg: dict) -> None: ...

    @actormethod(name="DisarmTimer")
    async def disarm_timer(self, name: str) -> None: ...

    @actormethod(name="SetCount")
    async def set_count(self, n: int) -> int: ...

    @actormethod(name="GetCount")
    async def get_count(self) -> int: ...

    @actormethod(name="RemoveCount")
    async def remove_count(self) -> bool: ...

    @actormethod(name="GetSeeded")
    async def get_seeded(self) -> dict: ...


class PySdkActor(Actor, PySdkActorInterface, Remindable):
    async def ping(self, arg: str) -> str:
        record("method", actor=self.id.id, name="Ping", text=arg)
        return "pong:" + arg

    async def arm_reminder(self, arg: dict) -> None:
        await self.register_reminder(arg["name"], base64.b64decode(arg["data_b64"]),
                                     timedelta(seconds=1), timedelta(seconds=1))

    async def disarm_reminder(self, name: str) -> None:
        await self.unregister_reminder(name)

    async def arm_timer(self, arg: dict) -> None:
        await self.register_timer(arg["name"], self.on_timer, arg["data"],
                                  timedelta(seconds=1), timedelta(seconds=1))

    async def disarm_timer(self, name: str) -> None:
        await self.unregister_timer(name)

    # Actor state, as a Python user keeps it: the state manager's cache, saved explicitly
    # (save_state) or by the SDK after the method.
    async def set_count(self, n: int) -> int:
        await self._state_manager.set_state("count", n)
        await self._state_manager.save_state()
        return n

    async def get_count(self) -> int:
        has, n = await self._state_manager.try_get_state("count")
        return n if has else -1

    async def remove_count(self) -> bool:
        return await self._state_manager.try_remove_state("count")  # saved after the method

    async def get_seeded(self) -> dict:
        has, v = await self._state_manager.try_get_state("seeded")
        return v if has else {}

    async def on_timer(self, state) -> None:
        record("timer", actor=self.id.id, name="on_timer", text=state)

    async def receive_reminder(self, name, state, due_time, period, ttl=None) -> None:
        record("reminder", actor=self.id.id, name=name, data_b64=b64(state))


@asynccontextmanager
async def lifespan(_app):
    # The SDK waits for the sidecar (GET /v1.0/healthz/outbound) here; uvicorn listens after.
    await actor.register_actor(PySdkActor)
    yield


app = FastAPI(lifespan=lifespan)
actor = DaprActor(app)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["SDKM_PORT"]), log_level="warning",
                access_log=False)
