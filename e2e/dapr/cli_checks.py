#!/usr/bin/env python3
"""The checks of e2e/dapr/cli.sh: Dapr's own CLI (`dapr scheduler …`) against a `jobsd
scheduler` cluster on etcd, and the same commands against the real Dapr Scheduler.

    cli_checks.py populate     create the jobs and reminders of one target
    cli_checks.py cli          every `dapr scheduler` command, checked against jobsd's view
    cli_checks.py dapr-import  (jobsd) `dapr scheduler import` of the real Scheduler's export
    cli_checks.py migrate      (jobsd) `dapr scheduler import` of jobsd's export, fresh cluster
    cli_checks.py takeover     (jobsd) the migrated jobs after two replicas are stopped
    cli_checks.py jobsd-import `jobsd jobs import` of a `dapr scheduler export` file
    cli_checks.py compare      what the CLI printed for jobsd against what it printed for Dapr

Settings come from the environment (cli.sh sets them):
  CLI_TARGET      `jobsd` or `dapr`: whose Scheduler is on 127.0.0.1:2379's etcd
  CLI_WORK        the run's work dir; each target writes under CLI_WORK/<target>/
  CLI_RESULTS     the results file: one tab-separated row per check
                  (command, target, pass|fail, note)
  CLI_SIDECAR     the jobsd sidecar of app `cliapp` (http://host:port), hosting the actor types
  CLI_DAPRD       the real daprd of app `daprdapp` (http://host:port)
  CLI_SCHEDULERS  the Scheduler replicas (host:port, comma-separated)
  CLI_EVENTS      the JSON-lines log of e2e/dapr/cli_app.py (what the app was sent)
  DAPR_CLI, JOBSD_BIN, PROTO_DIR (jobsd's proto/, for the Scheduler stubs)

What each target is given (populate), 13 records in namespace `default`:
  app/cliapp/{nightly,once,ticked,doomed}       jobsd sidecar, Jobs API
  app/daprdapp/{report,cleanup}                 real daprd, Jobs API
  actor/ReminderActor/a1/tick, a2/later         jobsd sidecar, actor reminders API
  actor/OtherActor/o1/r1, o2/r2                 "
  workflow/cliapp/inst1/timer-0-abc, inst2/start-9f2c and activity/cliapp/inst1::0::1
      Scheduler.ScheduleJob with the actor target daprd gives a workflow's and an activity's
      reminders (`dapr.internal.default.cliapp.workflow|activity`): no workflow app runs here.
`ticked` (dueTime 1s, then hourly) and `tick` (dueTime 1s, period 1h) fire once, so their
counters hold 1; `doomed` fires every 2 s (to see a delete stop it and an import start it).
"""

import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

TARGET = os.environ.get("CLI_TARGET", "")
WORK = os.environ.get("CLI_WORK", "")
RESULTS = os.environ.get("CLI_RESULTS", "")
SIDECAR = os.environ.get("CLI_SIDECAR", "")
DAPRD = os.environ.get("CLI_DAPRD", "")
SCHEDULERS = os.environ.get("CLI_SCHEDULERS", "")
EVENTS = os.environ.get("CLI_EVENTS", "")
DAPR_CLI = os.environ.get("DAPR_CLI", "dapr")
JOBSD_BIN = os.environ.get("JOBSD_BIN", "jobsd")

NS = "default"
WF_TYPE = f"dapr.internal.{NS}.cliapp.workflow"
ACT_TYPE = f"dapr.internal.{NS}.cliapp.activity"

APP_JOBS = {
    "nightly": {"schedule": "0 0 2 * * *", "ttl": "8760h", "data": {"k": "v"}},
    "once": {"dueTime": "2030-01-01T00:00:00Z", "data": "hello"},
    "ticked": {"schedule": "@every 1h", "dueTime": "1s", "repeats": 5},
    "doomed": {"schedule": "@every 2s"},
}
DAPRD_JOBS = {
    "report": {"schedule": "@daily", "repeats": 10},
    "cleanup": {"dueTime": "24h", "data": {"a": 1}},
}
REMINDERS = {
    ("ReminderActor", "a1", "tick"): {"dueTime": "1s", "period": "1h", "data": "x"},
    ("ReminderActor", "a2", "later"): {"dueTime": "1h", "period": "30m"},
    ("OtherActor", "o1", "r1"): {"dueTime": "1h"},
    ("OtherActor", "o2", "r2"): {"dueTime": "2h", "period": "R5/PT1H"},
}
# (actor type, actor id, reminder name, dueTime) of the workflow-shaped reminders.
WORKFLOW = [
    (WF_TYPE, "inst1", "timer-0-abc", "1h"),
    (WF_TYPE, "inst2", "start-9f2c", "1h"),
    (ACT_TYPE, "inst1::0::1", "run-activity", "1h"),
]

NAMES_APP = ["app/cliapp/" + n for n in APP_JOBS] + ["app/daprdapp/" + n for n in DAPRD_JOBS]
NAMES_ACTOR = [f"actor/{t}/{i}/{n}" for (t, i, n) in REMINDERS]
NAMES_WORKFLOW = ["workflow/cliapp/inst1/timer-0-abc", "workflow/cliapp/inst2/start-9f2c"]
NAMES_ACTIVITY = ["activity/cliapp/inst1::0::1"]
NAMES_ALL = NAMES_APP + NAMES_ACTOR + NAMES_WORKFLOW + NAMES_ACTIVITY
# Whose count and last trigger move while the checks run.
VOLATILE = {"app/cliapp/doomed"}

passed = failed = 0


# ------------------------------------------------------------------------------ plumbing
def row(command: str, ok: bool, note: str = "", target: str = "") -> bool:
    """One check's result: printed, and appended to the results file."""
    global passed, failed
    target = target or ("jobsd" if TARGET == "jobsd" else "Dapr")
    note = " ".join(str(note).split())[:400]
    if ok:
        passed += 1
    else:
        failed += 1
    print(f"{'ok  ' if ok else 'FAIL'} [{target}] {command}" + (f"  ({note})" if note else ""),
          flush=True)
    if RESULTS:
        with open(RESULTS, "a", encoding="utf-8") as f:
            f.write(f"{command}\t{target}\t{'pass' if ok else 'fail'}\t{note}\n")
    return ok


def check(command: str, fn, target: str = "") -> bool:
    """Runs fn() → (ok, note); an exception is a failure with its message."""
    try:
        ok, note = fn()
    except Exception as e:  # noqa: BLE001 - a check that breaks is a failed check
        ok, note = False, f"{type(e).__name__}: {e}"
    return row(command, ok, note, target)


def target_dir(target: str = "") -> str:
    d = os.path.join(WORK, target or TARGET)
    os.makedirs(d, exist_ok=True)
    return d


class Run:
    """One command's exit code and output."""

    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    def note(self) -> str:
        return f"rc={self.rc} out={self.out.strip()[:160]!r} err={self.err.strip()[:160]!r}"


# What the CLI printed, by command, for the comparison (CLI_WORK/<target>/outputs.json).
OUTPUTS: dict = {}


def dapr(*args, key: str = "") -> Run:
    """`dapr scheduler ARGS` (recorded under `key` for the comparison)."""
    argv = [DAPR_CLI, "scheduler", *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                       env={**os.environ, "NO_COLOR": "1"})
    r = Run(argv, p.returncode, p.stdout, p.stderr)
    if key:
        OUTPUTS[key] = {"args": list(args), "rc": r.rc, "out": r.out, "err": r.err}
    return r


def save_outputs() -> None:
    path = os.path.join(target_dir(), "outputs.json")
    old = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    old.update(OUTPUTS)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(old, f, indent=1)


def jobsd_jobs(app_id: str, *args) -> Run:
    """`jobsd jobs --scheduler <replicas> --app-id APP ARGS`: jobsd's own view."""
    argv = [JOBSD_BIN, "jobs", "--scheduler", SCHEDULERS, "--app-id", app_id, *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                       env={k: v for k, v in os.environ.items()
                            if k not in ("DAPR_API_TOKEN", "JOBSD_ADDRESS", "NAMESPACE")})
    return Run(argv, p.returncode, p.stdout, p.stderr)


def http(method: str, url: str, body=None, timeout: float = 15):
    """(status, parsed JSON body or text or None)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    if not raw:
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def wait_until(fn, timeout: float, step: float = 0.25):
    deadline = time.time() + timeout
    while True:
        v = fn()
        if v or time.time() >= deadline:
            return v
        time.sleep(step)


def events(kind: str, name: str, since: float = 0.0, until: float = float("inf")):
    """Times the app was sent the job or reminder `name` in [since, until)."""
    out = []
    try:
        with open(EVENTS, encoding="utf-8") as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("kind") == kind and e.get("name") == name and since <= e["t"] < until:
                    out.append(e["t"])
    except FileNotFoundError:
        pass
    return out


# ------------------------------------------------------------------------------ gRPC stubs
_stubs = None


def stubs():
    """dapr.proto.scheduler.v1 stubs generated from jobsd's proto/ into CLI_WORK/stubs."""
    global _stubs
    if _stubs:
        return _stubs
    import grpc  # noqa: F401 - fail early when the venv lacks it
    import grpc_tools
    from grpc_tools import protoc

    out = os.path.join(WORK, "stubs")
    proto_dir = os.environ["PROTO_DIR"]
    if not os.path.exists(os.path.join(out, ".done")):
        os.makedirs(out, exist_ok=True)
        include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        for f in ("dapr/proto/common/v1/common.proto", "dapr/proto/scheduler/v1/scheduler.proto"):
            rc = protoc.main(["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out}",
                              f"--grpc_python_out={out}", os.path.join(proto_dir, f)])
            if rc != 0:
                raise RuntimeError(f"protoc {f} failed ({rc})")
        # Regular packages, so that these win over the Dapr SDK's `dapr` package in the venv.
        for sub in ("dapr", "dapr/proto", "dapr/proto/common", "dapr/proto/common/v1",
                    "dapr/proto/scheduler", "dapr/proto/scheduler/v1"):
            open(os.path.join(out, sub, "__init__.py"), "a").close()
        open(os.path.join(out, ".done"), "w").close()
    sys.path.insert(0, out)
    from dapr.proto.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc  # type: ignore

    _stubs = (scheduler_pb2, scheduler_pb2_grpc)
    return _stubs


def scheduler_stub():
    import grpc

    pb, pbg = stubs()
    channel = grpc.insecure_channel(SCHEDULERS.split(",")[0])
    return pb, pbg.SchedulerStub(channel)


def actor_metadata(pb, actor_type: str, actor_id: str):
    return pb.JobMetadata(app_id="cliapp", namespace=NS, target=pb.JobTargetMetadata(
        actor=pb.TargetActorReminder(id=actor_id, type=actor_type)))


def grpc_get(actor_type: str, actor_id: str, name: str):
    """The Scheduler's GetJob of an actor reminder: the job, or None when not found."""
    import grpc

    pb, stub = scheduler_stub()
    try:
        return stub.GetJob(pb.GetJobRequest(
            name=name, metadata=actor_metadata(pb, actor_type, actor_id)), timeout=10).job
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise


# ------------------------------------------------------------------------------ populate
def populate() -> int:
    d = target_dir()
    t0 = time.time()
    with open(os.path.join(d, "t0"), "w") as f:
        f.write(repr(t0))

    for name, body in APP_JOBS.items():
        s, b = http("POST", f"{SIDECAR}/v1.0-alpha1/jobs/{name}", body)
        row(f"populate: jobsd sidecar schedules app/cliapp/{name}", s in (200, 204), f"{s} {b}")
    for name, body in DAPRD_JOBS.items():
        s, b = http("POST", f"{DAPRD}/v1.0-alpha1/jobs/{name}", body)
        row(f"populate: real daprd schedules app/daprdapp/{name}", s in (200, 204), f"{s} {b}")
    for (t, i, n), body in REMINDERS.items():
        s, b = http("POST", f"{SIDECAR}/v1.0/actors/{t}/{i}/reminders/{n}", body)
        row(f"populate: jobsd sidecar registers reminder actor/{t}/{i}/{n}", s in (200, 204),
            f"{s} {b}")

    def schedule_workflow():
        pb, stub = scheduler_stub()
        for t, i, n, due in WORKFLOW:
            stub.ScheduleJob(pb.ScheduleJobRequest(
                name=n, job=pb.Job(due_time=due), metadata=actor_metadata(pb, t, i)), timeout=10)
        return True, "3 reminders via Scheduler.ScheduleJob"

    check("populate: workflow and activity reminders (ScheduleJob, daprd's actor target)",
          schedule_workflow)

    def fired_once():
        got = wait_until(lambda: events("job", "ticked") and events("reminder",
                                                                    "ReminderActor/a1/tick"), 30)
        # The counters are written once the triggers' answers are in.
        time.sleep(1.5)
        return bool(got), "delivered" if got else "not delivered within 30 s"

    check("populate: app/cliapp/ticked and actor/ReminderActor/a1/tick fire (once)", fired_once)
    return finish()


def finish() -> int:
    save_outputs()
    print(f"checks: {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


# ------------------------------------------------------------------------------ parsing
TABLE_SPLIT = re.compile(r"\S+(?: \S+)*")


def parse_table(text: str):
    """The CLI's table (gocsv through utils.PrintTable): columns start where header words do."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    header = lines[0]
    cols = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    rows = []
    for ln in lines[1:]:
        r = {}
        for k, (start, name) in enumerate(cols):
            end = cols[k + 1][0] if k + 1 < len(cols) else len(ln) + 1
            r[name] = ln[start:end].strip()
        rows.append(r)
    return rows


def parse_yaml_list(text: str):
    """The CLI's YAML (yaml.v3 of a list of flat structs)."""
    items = []
    for ln in text.splitlines():
        if not ln.strip():
            continue
        if ln.startswith("- "):
            items.append({})
            ln = "  " + ln[2:]
        if not items or not ln.startswith("  ") or ":" not in ln:
            raise ValueError(f"unexpected YAML line {ln!r}")
        k, v = ln.strip().split(":", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] == "'":
            v = v[1:-1].replace("''", "'")
        elif len(v) >= 2 and v[0] == v[-1] == '"':
            v = json.loads(v)
        elif re.fullmatch(r"-?\d+", v):
            v = int(v)
        items[-1][k] = v
    return items


def by_name(items):
    return {x.get("name") or x.get("NAME"): x for x in items}


def names_of(r: Run):
    return sorted(x["name"] for x in json.loads(r.out)) if r.rc == 0 and r.out.strip() else []


# ------------------------------------------------------------------------------ views
def data_value(data):
    """A job's data as JSON: daprd's GET body gives the stored `google.protobuf.Any` as
    `{"@type": ".../google.protobuf.Value", "value": V}`; V."""
    if isinstance(data, dict) and str(data.get("@type", "")).endswith("google.protobuf.Value"):
        return data.get("value")
    return data


def job_fields(doc):
    """Dapr's job fields of a `jobsd jobs … get -o json` answer (jobsd's view nests them in
    `job`; against a Dapr Scheduler it is Dapr's GET body)."""
    if isinstance(doc, dict) and isinstance(doc.get("job"), dict):
        return doc["job"]
    return doc


def view_get(app_id: str, name: str):
    r = jobsd_jobs(app_id, "get", name, "-o", "json")
    return r, (json.loads(r.out) if r.rc == 0 and r.out.strip() else None)


def view_names(app_id: str):
    r = jobsd_jobs(app_id, "list", "-o", "json")
    if r.rc != 0:
        raise RuntimeError(f"jobsd jobs list: {r.note()}")
    return sorted(x["name"] for x in json.loads(r.out or "[]")), r


# ------------------------------------------------------------------------------ cli
def cli() -> int:
    d = target_dir()

    # ---- list
    def list_short():
        r = dapr("list", key="list")
        rows = parse_table(r.out)
        names = sorted(x.get("NAME", "") for x in rows)
        ok = r.rc == 0 and names == sorted(NAMES_ALL) and list(rows[0]) [:2] == ["NAME", "BEGIN"]
        return ok, f"{len(rows)} rows, columns {list(rows[0]) if rows else []}; {r.note() if not ok else ''}"

    check("list", list_short)

    def list_wide():
        r = dapr("list", "-o", "wide", key="list -o wide")
        rows = parse_table(r.out)
        names = sorted(x.get("NAME", "") for x in rows)
        ok = r.rc == 0 and names == sorted(NAMES_ALL) and "NAMESPACE" in (rows[0] if rows else {})
        return ok, f"{len(rows)} rows, columns {list(rows[0]) if rows else []}"

    check("list -o wide", list_wide)

    listed = {}

    def list_json():
        r = dapr("list", "-o", "json", key="list -o json")
        items = json.loads(r.out)
        listed.update(by_name(items))
        want = {
            "app/cliapp/nightly": {"schedule": "0 0 2 * * *", "ttl": "8760h", "count": 0},
            "app/cliapp/once": {"dueTime": "2030-01-01T00:00:00Z",
                                "begin": "2030-01-01T00:00:00Z", "count": 0},
            "app/cliapp/ticked": {"schedule": "@every 1h", "dueTime": "1s", "repeats": 5,
                                  "count": 1},
            "app/daprdapp/report": {"schedule": "@daily", "repeats": 10, "count": 0},
            "app/daprdapp/cleanup": {"dueTime": "24h", "count": 0},
            "actor/ReminderActor/a1/tick": {"count": 1},
            "workflow/cliapp/inst1/timer-0-abc": {"dueTime": "1h", "count": 0},
            "activity/cliapp/inst1::0::1": {"dueTime": "1h", "count": 0},
        }
        bad = []
        for name, fields in want.items():
            got = listed.get(name, {})
            for k, v in fields.items():
                if got.get(k) != v:
                    bad.append(f"{name}.{k}={got.get(k)!r} (want {v!r})")
        if sorted(listed) != sorted(NAMES_ALL):
            bad.append(f"names {sorted(listed)}")
        if not listed.get("app/cliapp/ticked", {}).get("lastTrigger"):
            bad.append("ticked has no lastTrigger")
        if not listed.get("app/cliapp/nightly", {}).get("expiration"):
            bad.append("nightly has no expiration")
        if any(x.get("namespace") != NS for x in items):
            bad.append("a namespace is not default")
        return r.rc == 0 and not bad, "; ".join(bad) or f"{len(items)} jobs, fields as created"

    check("list -o json", list_json)

    def list_yaml():
        r = dapr("list", "-o", "yaml", key="list -o yaml")
        items = parse_yaml_list(r.out)
        names = sorted(x["name"] for x in items)
        return r.rc == 0 and names == sorted(NAMES_ALL), f"{len(items)} items"

    check("list -o yaml", list_yaml)

    for flt, want in (("all", NAMES_ALL), ("app", NAMES_APP), ("actor", NAMES_ACTOR),
                      ("workflow", NAMES_WORKFLOW), ("activity", NAMES_ACTIVITY)):
        def list_filter(flt=flt, want=want):
            r = dapr("list", "--filter", flt, "-o", "json", key=f"list --filter {flt} -o json")
            dapr("list", "--filter", flt, key=f"list --filter {flt}")
            got = names_of(r)
            return got == sorted(want), f"{len(got)} of {len(want)}: {got if got != sorted(want) else ''}"

        check(f"list --filter {flt}", list_filter)

    for app_id in ("cliapp", "daprdapp"):
        def list_filter_jobsd_view(app_id=app_id):
            view, _ = view_names(app_id)
            cli_app = [n for n in names_of(dapr("list", "--filter", "app", "-o", "json"))
                       if n.startswith(f"app/{app_id}/")]
            return (cli_app == sorted(f"app/{app_id}/{n}" for n in view) and cli_app,
                    f"jobsd jobs list: {view}; CLI: {cli_app}")

        check(f"list --filter app = jobsd jobs --app-id {app_id} list", list_filter_jobsd_view)

    def list_other_namespace():
        r = dapr("list", "-n", "elsewhere", key="list -n elsewhere")
        return (r.rc == 0 and not r.out.strip() and "No jobs found" in r.err), r.note()

    check("list -n elsewhere (no jobs)", list_other_namespace)

    def list_bad_filter():
        r = dapr("list", "--filter", "nope", key="list --filter nope")
        return r.rc != 0 and "invalid value for --filter" in (r.out + r.err), r.note()

    check("list --filter nope (refused)", list_bad_filter)

    # ---- get
    for fmt in ("short", "wide", "json", "yaml"):
        def get_nightly(fmt=fmt):
            r = dapr("get", "app/cliapp/nightly", "-o", fmt, key=f"get app -o {fmt}")
            if r.rc != 0:
                return False, r.note()
            if fmt == "json":
                [x] = json.loads(r.out)
                ok = x["name"] == "app/cliapp/nightly" and x["schedule"] == "0 0 2 * * *"
            elif fmt == "yaml":
                [x] = parse_yaml_list(r.out)
                ok = x["name"] == "app/cliapp/nightly" and x["ttl"] == "8760h"
            else:
                [x] = parse_table(r.out)
                ok = x["NAME"] == "app/cliapp/nightly"
            return ok, json.dumps(x)[:200]

        check(f"get app/cliapp/nightly -o {fmt}", get_nightly)

    def get_matches_jobsd_view():
        r = dapr("get", "app/cliapp/nightly", "-o", "json")
        [x] = json.loads(r.out)
        vr, view = view_get("cliapp", "nightly")
        if view is None:
            return False, f"jobsd jobs get nightly: {vr.note()}"
        job = job_fields(view)
        s, api = http("GET", f"{SIDECAR}/v1.0-alpha1/jobs/nightly")
        ok = (job.get("schedule") == x["schedule"] and job.get("ttl") == x["ttl"]
              and data_value(job.get("data")) == {"k": "v"}
              and s == 200 and api.get("schedule") == x["schedule"] and api.get("ttl") == x["ttl"]
              and data_value(api.get("data")) == {"k": "v"})
        return ok, f"jobsd jobs get: {json.dumps(job)[:150]}; Jobs API {s} {json.dumps(api)[:150]}"

    check("get app/cliapp/nightly = jobsd jobs get = Jobs API GET", get_matches_jobsd_view)

    def get_reminder():
        r = dapr("get", "actor/ReminderActor/a1/tick", "-o", "json", key="get actor -o json")
        dapr("get", "actor/ReminderActor/a1/tick", key="get actor")
        [x] = json.loads(r.out)
        s, api = http("GET", f"{SIDECAR}/v1.0/actors/ReminderActor/a1/reminders/tick")
        # daprd keeps a reminder's period as the job's schedule `@every <Go duration>`.
        ok = (x["name"] == "actor/ReminderActor/a1/tick" and x["count"] == 1
              and x["dueTime"] == "1s" and x["schedule"] == "@every 1h0m0s" and s == 200
              and api.get("period") in ("1h", "@every 1h0m0s") and api.get("dueTime") == "1s")
        return ok, f"CLI {json.dumps(x)}; sidecar GET reminder {s} {json.dumps(api)[:150]}"

    check("get actor/ReminderActor/a1/tick (count 1) = sidecar GET reminder", get_reminder)

    def get_workflow():
        r = dapr("get", "workflow/cliapp/inst1/timer-0-abc", "activity/cliapp/inst1::0::1",
                 "-o", "json", key="get workflow activity -o json")
        items = json.loads(r.out)
        wf = grpc_get(WF_TYPE, "inst1", "timer-0-abc")
        act = grpc_get(ACT_TYPE, "inst1::0::1", "run-activity")
        ok = ([x["name"] for x in items] == ["workflow/cliapp/inst1/timer-0-abc",
                                              "activity/cliapp/inst1::0::1"]
              and wf is not None and act is not None and wf.due_time == "1h")
        return ok, f"{[x['name'] for x in items]}; GetJob wf={wf is not None} act={act is not None}"

    check("get workflow/… activity/… (two keys) = Scheduler.GetJob", get_workflow)

    def get_missing():
        r = dapr("get", "app/cliapp/nope", key="get missing")
        return r.rc != 0 and "not found" in r.err, r.note()

    check("get app/cliapp/nope (not found)", get_missing)

    def get_bad_key():
        r = dapr("get", "app/cliapp", key="get bad key")
        return r.rc != 0 and "expecting job key" in r.err, r.note()

    check("get app/cliapp (bad key refused)", get_bad_key)

    # ---- export
    export = os.path.join(d, "export.bin")
    if os.path.exists(export):
        os.remove(export)

    def do_export():
        r = dapr("export", "-o", export, key="export")
        m = re.search(r"Exported (\d+) jobs and (\d+) counters", r.out + r.err)
        ok = r.rc == 0 and os.path.getsize(export) > 0 and m and int(m.group(1)) == len(NAMES_ALL)
        return ok, (m.group(0) if m else "") + f" {os.path.getsize(export) if os.path.exists(export) else 0} bytes"

    check("export -o FILE", do_export)

    def export_exists():
        r = dapr("export", "-o", export, key="export again")
        return r.rc != 0 and "already exists" in r.err, r.note()

    check("export -o FILE (exists: refused)", export_exists)

    # ---- delete
    def delete_app_job():
        r = dapr("delete", "app/cliapp/doomed", key="delete app")
        t_del = time.time()
        if r.rc != 0:
            return False, r.note()
        vr, view = view_get("cliapp", "doomed")
        s, _ = http("GET", f"{SIDECAR}/v1.0-alpha1/jobs/doomed")
        # A trigger already on its way may still land: none after 3 s.
        time.sleep(7)
        late = events("job", "doomed", since=t_del + 3)
        before = events("job", "doomed", until=t_del)
        ok = view is None and vr.rc == 3 and s != 200 and not late and before
        return ok, (f"jobsd jobs get: rc {vr.rc}; Jobs API GET {s}; fired {len(before)}x before, "
                    f"{len(late)}x from 3 s after the delete")

    check("delete app/cliapp/doomed (gone from jobsd's view, stops firing)", delete_app_job)

    def delete_two():
        r = dapr("delete", "actor/ReminderActor/a2/later", "activity/cliapp/inst1::0::1",
                 key="delete actor activity")
        s, _ = http("GET", f"{SIDECAR}/v1.0/actors/ReminderActor/a2/reminders/later")
        act = grpc_get(ACT_TYPE, "inst1::0::1", "run-activity")
        ok = r.rc == 0 and r.out.count("Deleted") == 2 and s != 200 and act is None
        return ok, f"sidecar GET reminder {s}; GetJob activity {act is not None}; {r.note()}"

    check("delete actor/… activity/… (two keys)", delete_two)

    def delete_missing():
        r = dapr("delete", "app/cliapp/nope", key="delete missing")
        return r.rc != 0 and "no job with key" in r.err, r.note()

    check("delete app/cliapp/nope (not found)", delete_missing)

    # ---- delete-all
    def deleted(r: Run):
        m = re.search(r"Deleted (\d+) jobs in namespace", r.out)
        return int(m.group(1)) if m else None

    def missing_job_answer():
        a = http("GET", f"{SIDECAR}/v1.0-alpha1/jobs/nope")
        b = http("GET", f"{DAPRD}/v1.0-alpha1/jobs/nope")
        code = lambda x: (x[0], (x[1] or {}).get("errorCode") if isinstance(x[1], dict) else x[1])
        return code(a) == code(b), f"jobsd sidecar {a}; daprd {b}"

    check("Jobs API GET of a missing job: the jobsd sidecar answers what daprd answers",
          missing_job_answer)

    def delete_all_app_id():
        r = dapr("delete-all", "app/daprdapp", key="delete-all app/daprdapp")
        theirs, _ = view_names("daprdapp")
        mine, _ = view_names("cliapp")
        s, _ = http("GET", f"{DAPRD}/v1.0-alpha1/jobs/report")
        ok = (deleted(r) == 2 and theirs == [] and mine == ["nightly", "once", "ticked"]
              and s != 200)
        return ok, f"deleted {deleted(r)}; jobsd jobs list daprdapp {theirs} cliapp {mine}; daprd GET {s}"

    check("delete-all app/daprdapp", delete_all_app_id)

    def delete_all_actor_id():
        r = dapr("delete-all", "actor/OtherActor/o1", key="delete-all actor/type/id")
        gone = http("GET", f"{SIDECAR}/v1.0/actors/OtherActor/o1/reminders/r1")[0]
        kept = http("GET", f"{SIDECAR}/v1.0/actors/OtherActor/o2/reminders/r2")[0]
        return deleted(r) == 1 and gone != 200 and kept == 200, f"deleted {deleted(r)}; o1/r1 GET {gone}, o2/r2 GET {kept}"

    check("delete-all actor/OtherActor/o1", delete_all_actor_id)

    def delete_all_actor_type():
        r = dapr("delete-all", "actor/OtherActor", key="delete-all actor/type")
        gone = http("GET", f"{SIDECAR}/v1.0/actors/OtherActor/o2/reminders/r2")[0]
        kept = http("GET", f"{SIDECAR}/v1.0/actors/ReminderActor/a1/reminders/tick")[0]
        return deleted(r) == 1 and gone != 200 and kept == 200, f"deleted {deleted(r)}; o2/r2 GET {gone}, a1/tick GET {kept}"

    check("delete-all actor/OtherActor", delete_all_actor_type)

    def delete_all_workflow_instance():
        r = dapr("delete-all", "workflow/cliapp/inst1", key="delete-all workflow/app/instance")
        wf1 = grpc_get(WF_TYPE, "inst1", "timer-0-abc")
        wf2 = grpc_get(WF_TYPE, "inst2", "start-9f2c")
        return deleted(r) == 1 and wf1 is None and wf2 is not None, f"deleted {deleted(r)}"

    check("delete-all workflow/cliapp/inst1", delete_all_workflow_instance)

    def delete_all_workflow():
        r = dapr("delete-all", "workflow", key="delete-all workflow")
        wf2 = grpc_get(WF_TYPE, "inst2", "start-9f2c")
        mine, _ = view_names("cliapp")
        kept = http("GET", f"{SIDECAR}/v1.0/actors/ReminderActor/a1/reminders/tick")[0]
        ok = (deleted(r) == 1 and wf2 is None and mine == ["nightly", "once", "ticked"]
              and kept == 200)
        return ok, f"deleted {deleted(r)}; GetJob inst2 {wf2 is not None}; jobsd jobs list {mine}; a1/tick GET {kept}"

    check("delete-all workflow", delete_all_workflow)

    def delete_all_app():
        r = dapr("delete-all", "app", key="delete-all app")
        mine, _ = view_names("cliapp")
        s = http("GET", f"{SIDECAR}/v1.0-alpha1/jobs/nightly")[0]
        return deleted(r) == 3 and mine == [] and s != 200, f"deleted {deleted(r)}; jobsd jobs list cliapp {mine}; Jobs API GET {s}"

    check("delete-all app", delete_all_app)

    def delete_all_all():
        r = dapr("delete-all", "all", key="delete-all all")
        after = dapr("list", key="list after delete-all all")
        s = http("GET", f"{SIDECAR}/v1.0/actors/ReminderActor/a1/reminders/tick")[0]
        ok = deleted(r) == 1 and "No jobs found" in after.err and s != 200
        return ok, f"deleted {deleted(r)}; list: {after.err.strip()}; a1/tick GET {s}"

    check("delete-all all", delete_all_all)

    def delete_all_bad():
        r = dapr("delete-all", "nope", key="delete-all nope")
        return r.rc != 0 and "unknown key prefix" in r.err, r.note()

    check("delete-all nope (refused)", delete_all_bad)

    # ---- import
    import_checks(export, listed, "import -f FILE", "before the deletes", record=True)
    return finish()


def import_checks(export: str, listed: dict, what: str, before: str, record: bool) -> None:
    """`dapr scheduler import -f EXPORT` and what follows: the CLI lists what it listed
    `before` (`listed`), jobsd's views have every record, the imported counters hold."""
    t_imp = time.time()

    def do_import():
        r = dapr("import", "-f", export, key="import" if record else "")
        m = re.search(r"Imported (\d+) items", r.out)
        return r.rc == 0 and m is not None, m.group(0) if m else r.note()

    check(what, do_import)

    def import_cli_view():
        r = dapr("list", "-o", "json", key="list -o json after import" if record else "")
        if not listed:
            return False, f"nothing to compare: `list -o json` failed {before}"
        if r.rc != 0:
            return False, r.note()
        diffs = diff_items(listed, by_name(json.loads(r.out)))
        return not diffs, "; ".join(diffs) or f"the CLI lists what it listed {before}"

    check(f"{what}: list = list {before} (counts too)", import_cli_view)

    def import_jobsd_view():
        mine, _ = view_names("cliapp")
        _, view = view_get("daprdapp", "cleanup")
        s_rem = http("GET", f"{SIDECAR}/v1.0/actors/ReminderActor/a1/reminders/tick")[0]
        s_job, api = http("GET", f"{SIDECAR}/v1.0-alpha1/jobs/nightly")
        s_daprd, dj = http("GET", f"{DAPRD}/v1.0-alpha1/jobs/cleanup")
        wf = grpc_get(WF_TYPE, "inst1", "timer-0-abc")
        ok = (mine == sorted(APP_JOBS) and view is not None and s_rem == 200 and s_job == 200
              and (api or {}).get("schedule") == "0 0 2 * * *" and s_daprd == 200
              and data_value((dj or {}).get("data")) == {"a": 1} and wf is not None)
        return ok, (f"jobsd jobs list cliapp {mine}; jobsd jobs get daprdapp/cleanup "
                    f"{view is not None}; GET reminder {s_rem}, job {s_job}, daprd job {s_daprd} "
                    f"{json.dumps(dj)[:80]}; GetJob workflow {wf is not None}")

    check(f"{what}: jobsd's views (jobsd jobs, Jobs API, reminders, GetJob) have it all",
          import_jobsd_view)

    def doomed_fires():
        refired = wait_until(lambda: events("job", "doomed", since=t_imp), 10)
        return bool(refired), f"doomed fired {len(refired or [])}x within 10 s"

    check(f"{what}: doomed (every 2 s) fires again", doomed_fires)

    def ticked_holds():
        # Its counter came with it: count 1, the next tick an hour after the first.
        again = events("job", "ticked", since=t_imp)
        return not again, f"ticked fired again {len(again)}x"

    check(f"{what}: ticked (count 1, next in 1 h) does not fire again", ticked_holds)


def migrate() -> int:
    """(jobsd) The jobsd part's export, written by the CLI from jobsd's etcd, imported into a
    fresh jobsd cluster."""
    listed = {}
    try:
        with open(os.path.join(WORK, "jobsd", "outputs.json"), encoding="utf-8") as f:
            listed = by_name(json.loads(json.load(f)["list -o json"]["out"]))
    except (OSError, KeyError, ValueError):
        pass
    import_checks(os.path.join(WORK, "jobsd", "export.bin"), listed,
                  "import -f <jobsd's export> into a fresh jobsd cluster",
                  "on the first cluster", record=False)
    return finish()


def diff_items(a: dict, b: dict):
    """Differences between two `list -o json` results by name (volatile jobs' count and last
    trigger not compared)."""
    out = []
    for name in sorted(set(a) | set(b)):
        x, y = dict(a.get(name) or {}), dict(b.get(name) or {})
        if not x or not y:
            out.append(f"{name} only in {'first' if x else 'second'}")
            continue
        if name in VOLATILE:
            for k in ("count", "lastTrigger"):
                x.pop(k, None)
                y.pop(k, None)
        for k in sorted(set(x) | set(y)):
            if x.get(k) != y.get(k):
                out.append(f"{name}.{k}: {x.get(k)!r} vs {y.get(k)!r}")
    return out


# ------------------------------------------------------------------------------ jobsd only
def dapr_import() -> int:
    """`dapr scheduler import` of the real Scheduler's export into jobsd's etcd."""
    src = os.path.join(WORK, "dapr", "export.bin")
    with open(os.path.join(WORK, "dapr", "outputs.json"), encoding="utf-8") as f:
        dapr_list = by_name(json.loads(json.load(f)["list -o json"]["out"]))

    def clear():
        r = dapr("delete-all", "all")
        left = names_of(dapr("list", "-o", "json"))
        return r.rc == 0 and not left, f"{r.out.strip().splitlines()[-1:]}"

    check("delete-all all (before importing the real Scheduler's export)", clear,
          target="jobsd")

    t_imp = time.time()

    def imp():
        r = dapr("import", "-f", src)
        return r.rc == 0, r.out.strip() if r.rc == 0 else r.note()

    check("import -f <real Scheduler's export> into jobsd's etcd", imp, target="jobsd")

    def cli_view():
        got = by_name(json.loads(dapr("list", "-o", "json").out))
        diffs = diff_items(dapr_list, got)
        return not diffs, "; ".join(diffs) or "the CLI lists what it listed on the real Scheduler"

    check("import -f <real Scheduler's export>: list = list on the real Scheduler", cli_view,
          target="jobsd")

    def jobsd_view():
        mine, _ = view_names("cliapp")
        _, view = view_get("cliapp", "ticked")
        ticks = ((view or {}).get("status") or {}).get("ticks")
        return mine == sorted(APP_JOBS) and ticks == 1, f"jobsd jobs list cliapp {mine}; ticked ticks {ticks}"

    check("import -f <real Scheduler's export>: jobsd jobs list/get", jobsd_view, target="jobsd")

    def fires():
        refired = wait_until(lambda: events("job", "doomed", since=t_imp), 10)
        return bool(refired), f"doomed fires: {bool(refired)}"

    check("import -f <real Scheduler's export>: the imported doomed (every 2 s) fires", fires,
          target="jobsd")
    return finish()


def takeover(when: str) -> int:
    """(jobsd) The jobs `dapr scheduler import` wrote into the fresh cluster, `when` replicas
    stopped or restarted (cli.sh): still listed, and the every-2-s one still firing."""
    t = time.time()

    def still_there():
        mine, _ = view_names("cliapp")
        wf = grpc_get(WF_TYPE, "inst1", "timer-0-abc")
        return mine == sorted(APP_JOBS) and wf is not None, f"jobsd jobs list {mine}; GetJob workflow {wf is not None}"

    check(f"{when}: the imported jobs are still there", still_there, target="jobsd")

    def fires():
        time.sleep(10)
        got = events("job", "doomed", since=t + 2)
        return len(got) >= 2, f"doomed fired {len(got)}x in the 8 s from 2 s after"

    check(f"{when}: the imported doomed (every 2 s) goes on firing", fires, target="jobsd")
    return finish()


def jobsd_import(sidecar: str, file: str, label: str) -> int:
    """`jobsd jobs import -f FILE` into an embedded jobsd sidecar of app cliapp."""
    env = {k: v for k, v in os.environ.items() if k not in ("DAPR_API_TOKEN", "JOBSD_ADDRESS")}
    # What each job was created with; ticked ran once before the export.
    want_ticks = {"nightly": 0, "once": 0, "ticked": 1}

    def jobs(*args):
        p = subprocess.run([JOBSD_BIN, "jobs", "--address", sidecar, *args], capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL, env=env)
        return Run(args, p.returncode, p.stdout, p.stderr)

    def imp():
        r = jobs("import", "-f", file, "-o", "json")
        if r.rc != 0:
            return False, r.note()
        summary = json.loads(r.out)
        ok = (summary.get("created") == len(APP_JOBS) and summary.get("notThisApp")
              == len(NAMES_ALL) - len(APP_JOBS) and summary.get("failedCount") == 0)
        return ok, json.dumps(summary)

    check(f"jobsd jobs import -f <dapr scheduler export of {label}>", imp, target="jobsd")

    def views():
        r = jobs("list", "-o", "json")
        names = sorted(x["name"] for x in json.loads(r.out))
        bad = [] if names == sorted(APP_JOBS) else [f"names {names}"]
        for name in APP_JOBS:
            g = jobs("get", name, "-o", "json")
            if g.rc != 0:
                bad.append(f"get {name}: {g.note()}")
                continue
            v = json.loads(g.out)
            job, status = v.get("job", {}), v.get("status", {})
            want = APP_JOBS[name]
            for k in ("schedule", "dueTime", "ttl", "repeats"):
                if job.get(k) != want.get(k):
                    bad.append(f"{name}.{k} {job.get(k)!r}, created with {want.get(k)!r}")
            if name in want_ticks and (status.get("ticks") or 0) != want_ticks[name]:
                bad.append(f"{name} ticks {status.get('ticks')}, {want_ticks[name]} at the export")
            if name == "once" and data_value(job.get("data")) != "hello":
                bad.append(f"once data {job.get('data')!r}")
            if name == "nightly" and data_value(job.get("data")) != {"k": "v"}:
                bad.append(f"nightly data {job.get('data')!r}")
            if name == "once" and status.get("nextFireTime") != "2030-01-01T00:00:00Z":
                bad.append(f"once nextFireTime {status.get('nextFireTime')}")
        return not bad, "; ".join(bad) or f"jobsd jobs list/get: {names}, fields as created, ticks as exported"

    check(f"jobsd jobs list/get after importing the export of {label}", views, target="jobsd")
    return finish()


# ------------------------------------------------------------------------------ compare
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
HUMAN = re.compile(r"^([-+])\d+(?:\.\d+)?(?:ns|µs|us|ms|s|m|h|d|y)$")


def norm_time(text: str, t0: float) -> str:
    """A time near the run as minutes from its start (`t0+60m`); far ones as they are."""
    def one(m):
        t = datetime.strptime(m.group()[:19], "%Y-%m-%dT%H:%M:%S").replace(
            tzinfo=timezone.utc).timestamp()
        d = t - t0
        if abs(d) > 400 * 86400:
            return m.group()
        return f"t0{'+' if d >= 0 else '-'}{round(abs(d) / 60)}m"
    return RFC3339.sub(one, text)


def norm_item(item: dict, t0: float) -> dict:
    out = {}
    name = item.get("name") or item.get("NAME")
    for k, v in item.items():
        if isinstance(v, str):
            v = norm_time(v, t0)
            if HUMAN.match(v):
                v = v[0] + "<duration>"
        if name in VOLATILE and k in ("count", "COUNT", "lastTrigger", "LAST TRIGGER"):
            v = "<moves>"
        out[k] = v
    return out


def structured(out: str, args):
    """What an output holds: a list of items (json, yaml, tables) or its lines."""
    fmt = "short"
    if "-o" in args:
        fmt = args[args.index("-o") + 1]
    if args and args[0] in ("list", "get") and out.strip():
        if fmt == "json":
            return json.loads(out)
        if fmt == "yaml":
            return parse_yaml_list(out)
        return parse_table(out)
    return None


def compare() -> int:
    with open(os.path.join(WORK, "jobsd", "outputs.json"), encoding="utf-8") as f:
        mine = json.load(f)
    with open(os.path.join(WORK, "dapr", "outputs.json"), encoding="utf-8") as f:
        theirs = json.load(f)
    t0 = {}
    for t in ("jobsd", "dapr"):
        with open(os.path.join(WORK, t, "t0")) as f:
            t0[t] = float(f.read())
    for key in sorted(set(mine) & set(theirs)):
        a, b = mine[key], theirs[key]

        def same(a=a, b=b, key=key):
            diffs = []
            if a["rc"] != b["rc"]:
                first = lambda x: (x["err"].strip().splitlines() or [""])[0][:120]
                return False, (f"jobsd: exit {a['rc']} {first(a)!r}; "
                               f"Dapr: exit {b['rc']} {first(b)!r}")
            sa, sb = structured(a["out"], a["args"]), structured(b["out"], b["args"])
            if sa is not None and sb is not None:
                na = sorted((norm_item(x, t0["jobsd"]) for x in sa), key=lambda x: str(x.get("name") or x.get("NAME")))
                nb = sorted((norm_item(x, t0["dapr"]) for x in sb), key=lambda x: str(x.get("name") or x.get("NAME")))
                if [list(x) for x in na[:1]] != [list(x) for x in nb[:1]]:
                    diffs.append(f"columns {list(na[0]) if na else []} vs {list(nb[0]) if nb else []}")
                for x, y in zip(na, nb):
                    for k in sorted(set(x) | set(y)):
                        if x.get(k) != y.get(k):
                            diffs.append(f"{x.get('name') or x.get('NAME')}.{k}: {x.get(k)!r} vs {y.get(k)!r}")
                if len(na) != len(nb):
                    diffs.append(f"{len(na)} vs {len(nb)} items")
            else:
                for stream in ("out", "err"):
                    x = re.sub(r"/\S*/(jobsd|dapr)/export\.bin", "FILE", a[stream])
                    y = re.sub(r"/\S*/(jobsd|dapr)/export\.bin", "FILE", b[stream])
                    if x != y:
                        diffs.append(f"{stream}: {x.strip()[:200]!r} vs {y.strip()[:200]!r}")
            return not diffs, "; ".join(diffs) or "same (times as minutes from the run's start)"

        check(f"{key}: jobsd prints what Dapr prints", same, target="jobsd vs Dapr")
    only = sorted(set(mine) ^ set(theirs))
    if only:
        row("outputs compared", False, f"run for one target only: {only}", "jobsd vs Dapr")
    return finish()


def main() -> int:
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "populate":
        return populate()
    if cmd == "cli":
        return cli()
    if cmd == "dapr-import":
        return dapr_import()
    if cmd == "migrate":
        return migrate()
    if cmd == "takeover":
        return takeover(sys.argv[2])
    if cmd == "jobsd-import":
        return jobsd_import(sys.argv[2], sys.argv[3], sys.argv[4])
    if cmd == "compare":
        return compare()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
