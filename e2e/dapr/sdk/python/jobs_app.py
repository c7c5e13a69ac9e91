"""The Python SDK as a jobs app: `dapr.ext.grpc.App` (the `grpc` extra of PyPI `dapr`), one
`@app.job_event(name)` handler per job the matrix schedules; jobs named fail-* raise, so that
the sidecar reports FAILED and the failure policy applies. Every event is recorded (common.py).
"""

import os

from common import b64, record
from dapr.ext.grpc import App, JobEvent

NAMES = ["recv", "rep", "ow", "fail-const", "fail-drop"]

app = App()


def handler(name: str):
    def on_job(event: JobEvent) -> None:
        record("job", name=event.name, data_b64=b64(event.data))
        if event.name.startswith("fail-"):
            raise RuntimeError(f"failing on purpose: {event.name}")

    return on_job


for n in NAMES:
    app.job_event(n)(handler(n))

if __name__ == "__main__":
    app.run(int(os.environ["SDKM_PORT"]), listen_address="127.0.0.1")
