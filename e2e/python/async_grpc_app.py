"""The gRPC app of e2e/steer_async.sh (async completion over gRPC), built on the Dapr Python
SDK's `dapr.ext.grpc.App` like e2e/python/trigger_grpc_app.py. It takes every job whose name
starts with `async-` "later": the handler returns at once and a server interceptor adds the
response metadata `jobsd-async: true`; a worker thread then ends the execution through jobsd's
gRPC service `jobsd.v1.Jobs` (stubs generated at start from proto/jobsd/v1/jobs.proto):

    python3 async_grpc_app.py --port PORT --jobsd-grpc 127.0.0.1:GRPC_PORT --log EVENTS.jsonl
        --names NAME...

    async-gdone-*   Heartbeat (lease 30s), then CompleteExecution
    async-gfail-*   FailExecution with error "grpc boom" on the first delivery, then
                    CompleteExecution

The execution id is the `jobsd-execution-id` request metadata, or (from a jobsd that does not
send it yet) derived as jobsd derives it from the `tick` in the job's data. Events as in
async_app.py.
"""

import argparse
import shutil
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
from dapr.ext.grpc import App, JobEvent
from google.protobuf import json_format, struct_pb2

import async_app
from async_app import derived_id, record
from policy_checks import generate_stubs

LOCK = threading.Lock()
STUB = None
PB = None
CALLS = {}
JOB_RPCS = (
    "/dapr.proto.runtime.v1.AppCallback/OnJobEvent",
    "/dapr.proto.runtime.v1.AppCallbackAlpha/OnJobEventAlpha1",
)


def execution_id_of(request, context):
    for key, value in context.invocation_metadata():
        if key == "jobsd-execution-id":
            return value
    try:
        value = struct_pb2.Value()
        value.ParseFromString(request.data.value)
        return derived_id(request.name, json_format.MessageToDict(value)["tick"])
    except Exception:  # noqa: BLE001 - no id: the job is not one of the suite's
        return None


def rpc(name: str, execution_id: str, what: str, fn, req) -> None:
    try:
        answer = fn(req, timeout=15)
        status, text = "OK", str(answer).replace("\n", " ")
    except grpc.RpcError as err:
        status, text = err.code().name, err.details()
    record({"kind": "call", "name": name, "id": execution_id, "what": what,
            "status": status, "answer": text})


def work(name: str, execution_id: str, n: int) -> None:
    time.sleep(0.3)
    if name.startswith("async-gdone-"):
        rpc(name, execution_id, "heartbeat", STUB.Heartbeat,
            PB.HeartbeatRequest(execution_id=execution_id, lease="30s"))
        time.sleep(0.5)
    elif name.startswith("async-gfail-") and n == 1:
        rpc(name, execution_id, "fail", STUB.FailExecution,
            PB.FailExecutionRequest(execution_id=execution_id, error="grpc boom"))
        return
    rpc(name, execution_id, "complete", STUB.CompleteExecution,
        PB.CompleteExecutionRequest(execution_id=execution_id))


class AsyncInterceptor(grpc.ServerInterceptor):
    """Marks the answer to an `async-*` job "later" and starts its worker."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if (handler is None or handler_call_details.method not in JOB_RPCS
                or handler.unary_unary is None):
            return handler
        inner = handler.unary_unary

        def wrapped(request, context):
            resp = inner(request, context)
            name = request.name
            if name.startswith("async-"):
                execution_id = execution_id_of(request, context)
                with LOCK:
                    CALLS[name] = CALLS.get(name, 0) + 1
                    n = CALLS[name]
                context.set_trailing_metadata((("jobsd-async", "true"),))
                record({"kind": "delivery", "name": name, "id": execution_id, "status": "held"})
                if execution_id:
                    threading.Thread(target=work, args=(name, execution_id, n),
                                     daemon=True).start()
            return resp

        return grpc.unary_unary_rpc_method_handler(
            wrapped,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def main() -> int:
    global STUB, PB
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--jobsd-grpc", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--names", nargs="*", default=[])
    args = ap.parse_args()
    async_app.LOG = open(args.log, "a", encoding="utf-8")
    stubs = tempfile.mkdtemp(prefix="jobsd-async-stubs-")
    PB, pb_grpc = generate_stubs(stubs)
    # Imported: the generated files are no longer needed, and the app is stopped by a signal
    # that would skip any cleanup at exit.
    shutil.rmtree(stubs, ignore_errors=True)
    STUB = pb_grpc.JobsStub(grpc.insecure_channel(args.jobsd_grpc))

    app = App(thread_pool=futures.ThreadPoolExecutor(max_workers=10),
              interceptors=[AsyncInterceptor()])
    for name in args.names:
        @app.job_event(name)
        def later(job_event: JobEvent) -> None:
            pass
    print(f"async gRPC app on {args.port}", flush=True)
    app.run(args.port, listen_address="127.0.0.1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
