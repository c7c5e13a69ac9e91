"""End-to-end checks of jobsd's Jobs API through the Dapr Python SDK (PyPI `dapr`).

Run by e2e/jobs_api.sh against a running jobsd, with DAPR_HTTP_PORT, DAPR_GRPC_PORT and
DAPR_RUNTIME_HOST set. Phases (first argument):

  api                      SDK round trips, the python-sdk integration cases, the deprecated
                           *_alpha1 methods, raw Alpha1 rpcs, HTTP <-> SDK interop, errors.
  durability-setup STATE   schedule a batch of far-future jobs, overwrite one, delete a few,
                           and write what each job looks like (SDK view and raw GetJob bytes)
                           to the JSON file STATE.
  durability-verify STATE  after a restart on the same data dir: every job is still there with
                           identical fields, the deleted ones stay deleted.

Each phase prints one line per check and closes with `N passed, M failed`; it exits non-zero if
any check failed. Expectations follow the SDK's own rules (dapr/clients/grpc/_jobs.py): data is
always sent (an empty Any when None) and `_from_proto` maps an empty `data.value` back to None; an
unset failure policy comes back as the Scheduler default Constant(max_retries=3, interval 1s).
"""

import asyncio
import datetime
import json
import os
import sys
import warnings

import grpc
from google.protobuf import json_format
from google.protobuf.any_pb2 import Any
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.wrappers_pb2 import StringValue

from dapr.clients import ConstantFailurePolicy, DaprClient, DropFailurePolicy, Job
from dapr.clients.exceptions import DaprGrpcError
from dapr.proto import api_v1

from checks import request
from harness import Suite

HTTP = f"http://{os.environ.get('DAPR_RUNTIME_HOST', '127.0.0.1')}:{os.environ['DAPR_HTTP_PORT']}"
RPC_TIMEOUT = 15  # seconds, for raw stub calls (SDK calls get DAPR_API_TIMEOUT_SECONDS)
DEFAULT_POLICY = ("constant", 3, 1)  # the Scheduler's default, as the SDK maps it back
VALUE_TYPE_URL = "type.googleapis.com/google.protobuf.Value"
STRING_VALUE_TYPE_URL = "type.googleapis.com/google.protobuf.StringValue"


# ---------------------------------------------------------------- helpers


def policy_view(fp):
    """A comparable view of an SDK failure policy (None stays None)."""
    if fp is None:
        return None
    if isinstance(fp, DropFailurePolicy):
        return ("drop",)
    if isinstance(fp, ConstantFailurePolicy):
        return ("constant", fp.max_retries, fp.interval_seconds)
    raise AssertionError(f"unexpected failure policy type {type(fp)!r}")


def data_view(data):
    if data is None:
        return None
    return {"type_url": data.type_url, "value": data.value.hex()}


def job_view(job: Job) -> dict:
    """Every field of an SDK Job, in a form that compares and prints well."""
    return {
        "name": job.name,
        "schedule": job.schedule,
        "repeats": job.repeats,
        "due_time": job.due_time,
        "ttl": job.ttl,
        "data": data_view(job.data),
        "failure_policy": policy_view(job.failure_policy),
    }


def expected_view(job: Job) -> dict:
    """What get_job must return for a job scheduled as `job`, by the SDK's rules."""
    view = job_view(job)
    if job.data is None or not job.data.value:
        view["data"] = None  # sent as an empty Any, mapped back to None
    if job.failure_policy is None:
        view["failure_policy"] = DEFAULT_POLICY
    if not job.schedule:
        view["schedule"] = None  # the SDK sends only truthy strings
    if not job.due_time:
        view["due_time"] = None
    if not job.ttl:
        view["ttl"] = None
    return view


def assert_job(got: Job, want: dict):
    got_view = job_view(got)
    assert got_view == want, f"job mismatch:\n  got  {got_view}\n  want {want}"


def round_trip(d: DaprClient, job: Job, overwrite: bool = False) -> Job:
    d.schedule_job(job, overwrite=overwrite)
    got = d.get_job(job.name)
    assert_job(got, expected_view(job))
    return got


def expect_grpc_error(fn, code, reason=None, message_part=None) -> DaprGrpcError:
    try:
        fn()
    except DaprGrpcError as err:
        assert err.code() == code, f"code {err.code()} != {code}: {err.details()}"
        if reason is not None:
            assert err.error_code() == reason, f"reason {err.error_code()} != {reason}"
            info = err.status_details().error_info
            assert info and info.get("domain") == "dapr.io", f"ErrorInfo {info}"
        if message_part is not None:
            assert message_part in err.details(), f"{message_part!r} not in {err.details()!r}"
        return err
    raise AssertionError(f"expected DaprGrpcError {code}, got no error")


def expect_not_found(d: DaprClient, name: str):
    """daprd maps the Scheduler's NotFound to INTERNAL for GetJob (reference §2.4)."""
    expect_grpc_error(lambda: d.get_job(name), grpc.StatusCode.INTERNAL,
                      "DAPR_SCHEDULER_GET_JOB", "job not found")


def http(method: str, path: str, body=None):
    """(status, headers, body bytes) of an HTTP request to the Dapr HTTP API."""
    return request(HTTP + path, method, body, RPC_TIMEOUT)


def packed(msg) -> Any:
    a = Any()
    a.Pack(msg)
    return a


def raw_get(d: DaprClient, name: str) -> bytes:
    """GetJob through the generated stub: the exact proto jobsd sent, serialized."""
    resp = d._stub.GetJob(api_v1.GetJobRequest(name=name), timeout=RPC_TIMEOUT)
    return resp.SerializeToString(deterministic=True)


# ---------------------------------------------------------------- phase: api


def api_suite(d: DaprClient) -> Suite:
    s = Suite("api")

    @s.check
    def all_fields_round_trip_constant_policy_and_packed_data():
        job = Job(name="rt-all", schedule="@every 1h", repeats=7,
                  due_time="2099-01-02T03:04:05Z", ttl="2100-01-01T00:00:00Z",
                  data=packed(StringValue(value="hello jobs")),
                  failure_policy=ConstantFailurePolicy(max_retries=5, interval_seconds=3))
        got = round_trip(d, job)
        assert got.data.type_url == STRING_VALUE_TYPE_URL
        sv = StringValue()
        assert got.data.Unpack(sv) and sv.value == "hello jobs"
        fp = got.failure_policy
        assert isinstance(fp, ConstantFailurePolicy)
        assert (fp.max_retries, fp.interval_seconds) == (5, 3)

    @s.check
    def raw_any_without_type_url_round_trips():
        # As the SDK's job examples send it: GrpcAny(value=json bytes), no type_url.
        payload = json.dumps({"msg": "hi", "n": 1}).encode()
        got = round_trip(d, Job(name="rt-raw-any", due_time="1000h", data=Any(value=payload)))
        assert got.data.type_url == "" and got.data.value == payload
        assert json.loads(got.data.value) == {"msg": "hi", "n": 1}

    @s.check
    def binary_and_large_data_round_trip():
        blob = bytes(range(256)) * 4096  # 1 MiB, every byte value
        round_trip(d, Job(name="rt-big", due_time="1000h",
                          data=Any(type_url="type.googleapis.com/example.Blob", value=blob)))

    @s.check
    def struct_data_round_trips():
        st = Struct()
        st.update({"a": 1, "b": [True, None, "x"], "c": {"d": 2.5}})
        got = round_trip(d, Job(name="rt-struct", due_time="1000h", data=packed(st)))
        back = Struct()
        assert got.data.Unpack(back) and back == st

    @s.check
    def no_data_comes_back_as_none():
        got = round_trip(d, Job(name="rt-nodata", due_time="1000h"))
        assert got.data is None

    @s.check
    def drop_failure_policy_round_trips():
        got = round_trip(d, Job(name="rt-drop", schedule="@daily", due_time="1000h",
                                failure_policy=DropFailurePolicy()))
        assert isinstance(got.failure_policy, DropFailurePolicy)

    @s.check
    def default_failure_policy_is_constant_3_retries_1s():
        got = round_trip(d, Job(name="rt-default-policy", due_time="1000h"))
        fp = got.failure_policy
        assert isinstance(fp, ConstantFailurePolicy)
        assert (fp.max_retries, fp.interval_seconds) == (3, 1)

    @s.check
    def constant_policy_unset_max_retries_and_sdk_default_interval():
        got = round_trip(d, Job(name="rt-constant-forever", due_time="1000h",
                                failure_policy=ConstantFailurePolicy()))
        assert (got.failure_policy.max_retries, got.failure_policy.interval_seconds) == (None, 30)

    @s.check
    def constant_policy_zero_retries_and_no_interval():
        got = round_trip(d, Job(name="rt-constant-zero", due_time="1000h",
                                failure_policy=ConstantFailurePolicy(max_retries=0,
                                                                     interval_seconds=None)))
        assert (got.failure_policy.max_retries, got.failure_policy.interval_seconds) == (0, None)

    @s.check
    def due_time_and_ttl_strings_come_back_verbatim():
        # Go duration, ISO 8601 and RFC 3339 with offset/fraction: stored as given.
        for i, (due, ttl) in enumerate([("87600h0m9s0ms", None), ("P1Y2M3DT4H5M6S", "P2Y"),
                                        ("2099-01-01T00:00:00+02:00",
                                         "2099-06-01T00:00:00.5Z")]):
            round_trip(d, Job(name=f"rt-times-{i}", schedule="0 30 9 * * MON-FRI",
                              due_time=due, ttl=ttl))

    @s.check
    def special_character_and_unicode_names():
        for name in ["my||job@name", "Ünï cødé ☃", "a.b:c-d_e"]:
            round_trip(d, Job(name=name, due_time="1000h"))
            d.delete_job(name)
            expect_not_found(d, name)

    # --- the python-sdk integration tests (tests/integration/test_jobs.py)

    @s.check
    def sdk_due_time_365_days_ahead_round_trips():
        due = (datetime.datetime.now(datetime.timezone.utc)
               + datetime.timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")
        got = round_trip(d, Job(name="sdk-future", due_time=due))
        assert got.name == "sdk-future" and got.due_time == due

    @s.check
    def sdk_delete_then_get_raises_internal():
        round_trip(d, Job(name="sdk-delete", due_time="1000h"))
        d.delete_job("sdk-delete")
        expect_not_found(d, "sdk-delete")

    @s.check
    def sdk_every_1h_repeats_10_round_trips():
        got = round_trip(d, Job(name="sdk-recurring", schedule="@every 1h", repeats=10))
        assert got.schedule == "@every 1h" and got.repeats == 10

    @s.check
    def sdk_blank_name_and_missing_schedule_raise_value_error():
        for job in [Job(name="", due_time="10s"), Job(name="   ", schedule="@daily"),
                    Job(name="sdk-no-schedule")]:
            try:
                d.schedule_job(job)
            except ValueError:
                pass
            else:
                raise AssertionError(f"no ValueError for {job}")
        for call in (d.get_job, d.delete_job):
            try:
                call(" ")
            except ValueError:
                pass
            else:
                raise AssertionError(f"no ValueError from {call.__name__}(' ')")
        expect_not_found(d, "sdk-no-schedule")

    @s.check
    def sdk_overwrite_replaces_the_job():
        round_trip(d, Job(name="sdk-overwrite", schedule="@every 1h", due_time="1000h", ttl="P9Y",
                          repeats=3, data=Any(value=b"old"), failure_policy=DropFailurePolicy()))
        # Every field is replaced, not merged: the dropped ones come back unset/default.
        round_trip(d, Job(name="sdk-overwrite", due_time="2000h"), overwrite=True)

    @s.check
    def sdk_existing_name_without_overwrite_is_already_exists():
        original = Job(name="sdk-exists", due_time="1000h", data=Any(value=b"first"))
        round_trip(d, original)
        expect_grpc_error(lambda: d.schedule_job(Job(name="sdk-exists", due_time="2000h")),
                          grpc.StatusCode.ALREADY_EXISTS, "DAPR_SCHEDULER_SCHEDULE_JOB",
                          "job already exists")
        assert_job(d.get_job("sdk-exists"), expected_view(original))

    # --- deprecated methods and the Alpha1 rpcs

    @s.check
    def deprecated_alpha1_methods_work_and_warn():
        job = Job(name="alpha-sdk", schedule="@hourly", repeats=2, due_time="1000h",
                  data=packed(StringValue(value="a1")),
                  failure_policy=ConstantFailurePolicy(max_retries=1, interval_seconds=2))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            d.schedule_job_alpha1(job)
            assert_job(d.get_job_alpha1("alpha-sdk"), expected_view(job))
            d.schedule_job_alpha1(Job(name="alpha-sdk", due_time="5m"), overwrite=True)
            assert d.get_job_alpha1("alpha-sdk").due_time == "5m"
            d.delete_job_alpha1("alpha-sdk")
        deprecations = [str(w.message) for w in caught
                        if issubclass(w.category, DeprecationWarning)
                        and "_alpha1 is deprecated" in str(w.message)]
        assert len(deprecations) == 5, f"deprecation warnings: {deprecations}"
        expect_not_found(d, "alpha-sdk")

    @s.check
    def alpha1_rpcs_share_the_store_with_the_stable_ones():
        stub = d._stub
        job = Job(name="alpha-raw", schedule="@every 2h", due_time="1000h",
                  data=Any(value=b"raw"), failure_policy=DropFailurePolicy())
        stub.ScheduleJobAlpha1(api_v1.ScheduleJobRequest(job=job._get_proto()),
                               timeout=RPC_TIMEOUT)
        assert_job(d.get_job("alpha-raw"), expected_view(job))  # stable GetJob
        resp = stub.GetJobAlpha1(api_v1.GetJobRequest(name="alpha-raw"), timeout=RPC_TIMEOUT)
        assert_job(Job._from_proto(resp.job), expected_view(job))
        try:
            stub.ScheduleJobAlpha1(api_v1.ScheduleJobRequest(job=job._get_proto()),
                                   timeout=RPC_TIMEOUT)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.ALREADY_EXISTS, err
        else:
            raise AssertionError("ScheduleJobAlpha1 without overwrite replaced a job")
        stub.DeleteJobAlpha1(api_v1.DeleteJobRequest(name="alpha-raw"), timeout=RPC_TIMEOUT)
        expect_not_found(d, "alpha-raw")

    # --- HTTP API <-> SDK

    @s.check
    def http_post_with_json_data_is_a_value_any_for_the_sdk():
        body = {"dueTime": "1000h", "data": {"k": "v", "n": [1, 2.5, True, None]},
                "failurePolicy": {"constant": {"interval": "2s", "maxRetries": 4}}}
        status, _, raw = http("POST", "/v1.0-alpha1/jobs/h1", body)
        assert (status, raw) == (204, b""), (status, raw)
        got = d.get_job("h1")
        assert got.data.type_url == VALUE_TYPE_URL, got.data.type_url
        v = Value()
        assert got.data.Unpack(v)
        assert json_format.MessageToDict(v) == body["data"]
        assert_job(got, {"name": "h1", "schedule": None, "repeats": None, "due_time": "1000h",
                         "ttl": None, "data": data_view(got.data),
                         "failure_policy": ("constant", 4, 2)})
        for prefix in ("/v1.0-alpha1", "/v1.0"):
            status, headers, raw = http("GET", f"{prefix}/jobs/h1")
            assert status == 200, (status, raw)
            assert headers.get_content_type() == "application/json"
            assert json.loads(raw) == {
                "name": "h1", "dueTime": "1000h",
                "data": {"@type": VALUE_TYPE_URL, "value": body["data"]},
                "failurePolicy": {"constant": {"interval": "2s", "maxRetries": 4}}}, raw

    @s.check
    def http_post_string_data_and_no_data():
        status, _, raw = http("POST", "/v1.0/jobs/h2",
                              {"schedule": "@daily", "repeats": 3, "due_time": "10s",
                               "ttl": "11s", "data": "Hello, World!"})
        assert status == 204, (status, raw)
        got = d.get_job("h2")
        v = Value()
        assert got.data.Unpack(v) and v.string_value == "Hello, World!"
        assert (got.schedule, got.repeats, got.due_time, got.ttl) == ("@daily", 3, "10s", "11s")
        status, _, raw = http("POST", "/v1.0/jobs/h3", {"dueTime": "1000h"})
        assert status == 204, (status, raw)
        assert d.get_job("h3").data is None

    @s.check
    def http_get_of_sdk_scheduled_jobs():
        d.schedule_job(Job(name="h-sdk", schedule="@every 1m", repeats=123, due_time="1000s",
                           ttl="123s", data=packed(StringValue(value="hello world")),
                           failure_policy=ConstantFailurePolicy(max_retries=5,
                                                                interval_seconds=3)))
        status, _, raw = http("GET", "/v1.0/jobs/h-sdk")
        assert status == 200, (status, raw)
        assert json.loads(raw) == {
            "name": "h-sdk", "schedule": "@every 1m", "repeats": 123, "dueTime": "1000s",
            "ttl": "123s", "data": {"@type": STRING_VALUE_TYPE_URL, "value": "hello world"},
            "failurePolicy": {"constant": {"interval": "3s", "maxRetries": 5}}}, raw
        # Without data the SDK sends an empty Any, which protojson renders as {}.
        d.schedule_job(Job(name="h-sdk-nodata", due_time="1000h",
                           failure_policy=DropFailurePolicy()))
        status, _, raw = http("GET", "/v1.0/jobs/h-sdk-nodata")
        assert status == 200, (status, raw)
        assert json.loads(raw) == {"name": "h-sdk-nodata", "dueTime": "1000h", "data": {},
                                   "failurePolicy": {"drop": {}}}, raw

    @s.check
    def http_delete_is_seen_by_the_sdk():
        status, _, raw = http("DELETE", "/v1.0/jobs/h1")
        assert (status, raw) == (204, b""), (status, raw)
        expect_not_found(d, "h1")
        status, _, raw = http("GET", "/v1.0/jobs/h1")
        assert status == 500 and json.loads(raw)["errorCode"] == "DAPR_SCHEDULER_GET_JOB", raw

    # --- errors the Scheduler reports (validation is server-side, code INTERNAL)

    @s.check
    def deleting_a_missing_job_succeeds():
        d.delete_job("never-existed")

    @s.check
    def server_side_validation_errors():
        cases = [
            (Job(name="bad-repeats", due_time="10s", repeats=0),
             "defined repeats must be greater than 0"),
            (Job(name="bad-cron", schedule="* * * * *"), "expected exactly 6 fields, found 5"),
            (Job(name="bad-ttl", due_time="10s", ttl="20s"),
             "job must have a schedule to have a ttl"),
            (Job(name="bad-due", due_time="tomorrow"), "due time format not recognized"),
            (Job(name="bad/name", due_time="10s"), "must not contain"),
        ]
        for job, message in cases:
            expect_grpc_error(lambda j=job: d.schedule_job(j), grpc.StatusCode.INTERNAL,
                              "DAPR_SCHEDULER_SCHEDULE_JOB", message)
        for name in ("bad-repeats", "bad-cron", "bad-ttl", "bad-due"):
            expect_not_found(d, name)

    @s.check
    def async_client_round_trip():
        from dapr.aio.clients import DaprClient as AsyncDaprClient

        async def run():
            async with AsyncDaprClient() as ad:
                job = Job(name="aio-job", schedule="@every 5m", due_time="1000h",
                          data=Any(value=b"aio"), failure_policy=DropFailurePolicy())
                await ad.schedule_job(job)
                assert_job(await ad.get_job("aio-job"), expected_view(job))
                await ad.delete_job("aio-job")
                try:
                    await ad.get_job("aio-job")
                except DaprGrpcError as err:
                    assert err.code() == grpc.StatusCode.INTERNAL, err.code()
                else:
                    raise AssertionError("deleted job still readable")

        asyncio.run(asyncio.wait_for(run(), timeout=30))

    return s


# ---------------------------------------------------------------- phases: durability

DURABLE_COUNT = 50
DELETED = [f"dur-{i:03d}" for i in (3, 17, 29, 41, 48)]
OVERWRITTEN = "dur-010"


def durable_job(i: int) -> Job:
    """Job i of the durability batch: varied fields, first tick years away so nothing fires."""
    schedule = [None, "@every 1h", "0 30 9 * * MON-FRI", "@daily",
                "TZ=Europe/Berlin 0 0 12 1 * *"][i % 5]
    due = ["2099-01-02T03:04:05Z", f"{876000 + i}h", f"P{i % 7 + 50}Y",
           "2098-12-31T23:59:59.123+05:30"][i % 4]
    ttl = None
    repeats = None
    if schedule:
        ttl = [None, "P5Y", "2199-01-01T00:00:00Z"][i % 3]
        repeats = [None, i % 9 + 1][i % 2]
    data = [None,
            packed(StringValue(value=f"job {i}")),
            Any(value=json.dumps({"i": i}).encode()),
            Any(type_url="type.googleapis.com/example.Bytes", value=bytes(range(i, i + 64)))][i % 4]
    policy = [None, DropFailurePolicy(), ConstantFailurePolicy(max_retries=i, interval_seconds=i),
              ConstantFailurePolicy(), ConstantFailurePolicy(max_retries=0,
                                                             interval_seconds=None)][i % 5]
    return Job(name=f"dur-{i:03d}", schedule=schedule, repeats=repeats, due_time=due, ttl=ttl,
               data=data, failure_policy=policy)


def durability_setup_suite(d: DaprClient, state_file: str) -> Suite:
    s = Suite("durability-setup")
    state = {"jobs": {}, "deleted": DELETED}

    @s.check
    def schedule_batch():
        for i in range(DURABLE_COUNT):
            job = durable_job(i)
            d.schedule_job(job)
            assert_job(d.get_job(job.name), expected_view(job))

    @s.check
    def overwrite_one():
        job = Job(name=OVERWRITTEN, schedule="@every 30m", due_time="P60Y", repeats=99,
                  data=packed(StringValue(value="overwritten")),
                  failure_policy=ConstantFailurePolicy(max_retries=7, interval_seconds=11))
        d.schedule_job(job, overwrite=True)
        assert_job(d.get_job(OVERWRITTEN), expected_view(job))

    @s.check
    def delete_some():
        for name in DELETED:
            d.delete_job(name)
            expect_not_found(d, name)

    @s.check
    def record_state():
        for i in range(DURABLE_COUNT):
            name = f"dur-{i:03d}"
            if name in DELETED:
                continue
            state["jobs"][name] = {"view": job_view(d.get_job(name)),
                                   "raw": raw_get(d, name).hex()}
        assert len(state["jobs"]) == DURABLE_COUNT - len(DELETED)
        with open(state_file, "w", encoding="utf-8") as f:
            json.dump(state, f)

    return s


def durability_verify_suite(d: DaprClient, state_file: str, label: str) -> Suite:
    s = Suite(f"durability-verify-{label}")
    with open(state_file, encoding="utf-8") as f:
        state = json.load(f)

    def survives(name, entry):
        def check():
            view = entry["view"]
            # JSON turned the policy tuple into a list.
            if view["failure_policy"] is not None:
                view["failure_policy"] = tuple(view["failure_policy"])
            assert_job(d.get_job(name), view)
            assert raw_get(d, name).hex() == entry["raw"], "GetJob bytes differ after restart"
        return check

    for name, entry in sorted(state["jobs"].items()):
        s.add(f"{name}_survived", survives(name, entry))

    @s.check
    def overwritten_job_kept_its_new_version():
        got = d.get_job(OVERWRITTEN)
        assert (got.schedule, got.repeats, got.due_time) == ("@every 30m", 99, "P60Y")

    @s.check
    def deleted_jobs_stay_deleted():
        for name in state["deleted"]:
            expect_not_found(d, name)

    @s.check
    def existing_names_still_conflict():
        expect_grpc_error(lambda: d.schedule_job(Job(name="dur-000", due_time="1h")),
                          grpc.StatusCode.ALREADY_EXISTS, "DAPR_SCHEDULER_SCHEDULE_JOB")

    @s.check
    def store_still_writable():
        job = Job(name=f"after-restart-{label}", due_time="1000h", data=Any(value=b"x"))
        round_trip(d, job)
        d.delete_job(job.name)
        expect_not_found(d, job.name)

    return s


def main(argv) -> int:
    if not argv or argv[0] not in ("api", "durability-setup", "durability-verify"):
        print(__doc__, file=sys.stderr)
        return 2
    with DaprClient() as d:  # blocks until GET /v1.0/healthz/outbound is 2xx
        if argv[0] == "api":
            suite = api_suite(d)
        elif argv[0] == "durability-setup":
            suite = durability_setup_suite(d, argv[1])
        else:
            suite = durability_verify_suite(d, argv[1], argv[2] if len(argv) > 2 else "restart")
        return suite.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
