"""A recording gRPC app for e2e/triggers.sh, built on the Dapr Python SDK's `dapr.ext.grpc.App`
(PyPI `dapr[grpc]`): jobsd delivers jobs to it over `AppCallback.OnJobEvent` (falling back to
`AppCallbackAlpha.OnJobEventAlpha1`).

    python trigger_grpc_app.py --port PORT --log EVENTS.jsonl --ok NAME... --raise NAME...

Each `--ok` name gets an `@app.job_event(name)` handler that records the event and returns
(→ OK → SUCCESS); each `--raise` name gets one that records the event and raises (→ UNKNOWN →
FAILED). Any other name has no handler, so the SDK answers UNIMPLEMENTED on both rpcs.

Two kinds of JSON lines are appended to EVENTS.jsonl, each flushed before the rpc returns:

  {"kind": "handler", "t", "name", "data_hex", "as_string"}   what a handler got (JobEvent)
  {"kind": "rpc", "t", "rpc", "name", "method", "verb", "content_type", "has_data",
   "type_url", "data_hex", "outcome"}                           every job rpc, seen by a server
                                                                interceptor (outcome: "ok" or
                                                                the exception's class name)
"""

import argparse
import json
import sys
import threading
import time
from concurrent import futures

import grpc

from dapr.ext.grpc import App, JobEvent

LOCK = threading.Lock()
LOG = None

JOB_RPCS = (
    "/dapr.proto.runtime.v1.AppCallback/OnJobEvent",
    "/dapr.proto.runtime.v1.AppCallbackAlpha/OnJobEventAlpha1",
)


def record(event: dict) -> None:
    line = json.dumps(event, separators=(",", ":")) + "\n"
    with LOCK:
        LOG.write(line)
        LOG.flush()


class RecordingInterceptor(grpc.ServerInterceptor):
    """Records the raw JobEventRequest of every job rpc and how the SDK's servicer answered."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        rpc = handler_call_details.method
        if handler is None or rpc not in JOB_RPCS or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary

        def wrapped(request, context):
            event = {
                "kind": "rpc",
                "t": time.time(),
                "rpc": rpc,
                "name": request.name,
                "method": request.method,
                "verb": request.http_extension.verb if request.HasField("http_extension") else None,
                "content_type": request.content_type,
                "has_data": request.HasField("data"),
                "type_url": request.data.type_url,
                "data_hex": request.data.value.hex(),
                # jobsd's execution context (jobsd-execution-id, -attempt, -scheduled-time,
                # -trigger), sent as request metadata.
                "context": {k: v for k, v in (handler_call_details.invocation_metadata or ())
                            if k.startswith("jobsd-")},
            }
            try:
                resp = inner(request, context)
            except BaseException as err:
                event["outcome"] = type(err).__name__
                record(event)
                raise
            event["outcome"] = "ok"
            record(event)
            return resp

        return grpc.unary_unary_rpc_method_handler(
            wrapped,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def handler_event(job_event: JobEvent) -> dict:
    try:
        as_string = job_event.get_data_as_string()
    except UnicodeDecodeError:
        as_string = None
    return {
        "kind": "handler",
        "t": time.time(),
        "name": job_event.name,
        "data_hex": bytes(job_event.data).hex(),
        "as_string": as_string,
    }


def main() -> int:
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ok", nargs="*", default=[])
    ap.add_argument("--raise", dest="raising", nargs="*", default=[])
    args = ap.parse_args()
    LOG = open(args.log, "a", encoding="utf-8")

    app = App(thread_pool=futures.ThreadPoolExecutor(max_workers=10),
              interceptors=[RecordingInterceptor()])

    for name in args.ok:
        @app.job_event(name)
        def ok(job_event: JobEvent) -> None:
            record(handler_event(job_event))

    for name in args.raising:
        @app.job_event(name)
        def fail(job_event: JobEvent) -> None:
            record(handler_event(job_event))
            raise RuntimeError(f"handler for {job_event.name} fails on purpose")

    print(f"trigger_grpc_app on 127.0.0.1:{args.port}: ok={args.ok} raise={args.raising}",
          flush=True)
    app.run(args.port, listen_address="127.0.0.1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
