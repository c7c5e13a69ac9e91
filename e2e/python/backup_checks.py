"""Checks of e2e/backup.sh (and e2e/bench/backup.sh): jobs moved from one jobsd to another
with `jobsd jobs export --handover` / `jobsd jobs import` go on where they were.

    backup_checks.py fill PORT N EVENTS        N mixed jobs on the jobsd at PORT; some paused,
                                               some mid-retry, some one-shots already run
    backup_checks.py snapshot PORT EXPORT OUT  GET /jobsd/v1/jobs/{name} and .../next?count=3
                                               of every job the export names, into OUT
    backup_checks.py compare A B EVENTS SPLIT  the two snapshots agree, and the app's deliveries
                                               (EVENTS; the ones after line SPLIT came from the
                                               second jobsd) repeat no execution attempt

The mix (by index i): cron with TZ, @every, one-shots due in hours, one-shots due at once (run
on the first jobsd: they move as finished records), repeats, ttl, tick and failure policies,
labels and data, paused jobs, `fail-*` jobs the app fails (mid-retry when exported) and a few
`@every 2s` jobs firing through the move.

What may differ between the two views of a job, and why (the "volatile" fields):
  - status.inFlight: whether this process has a trigger out right now;
  - status.counters.skipped.paused of a paused job: the ticks that fell due while it is paused,
    counted up to the moment of the GET;
  - everything that moves when a job fires, for a job that was due before the second GET: for
    those the second jobsd's deliveries must carry the first one's next fire times instead.
"""

import http.client
import json
import sys
import threading
import time
import urllib.parse
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

from harness import Suite, run_phase_of

THREADS = 16
TZS = ["Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "UTC"]
LOCAL = threading.local()


def conn(port: int) -> http.client.HTTPConnection:
    c = getattr(LOCAL, "conn", None)
    if c is None or LOCAL.port != port:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        LOCAL.conn, LOCAL.port = c, port
    return c


def call(port: int, method: str, path: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    for attempt in range(3):
        c = conn(port)
        try:
            c.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
        except (http.client.HTTPException, OSError):
            c.close()
            LOCAL.conn = None
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def spec(i: int):
    """Name and create body of job i of the mix."""
    k = i % 20
    if i % 500 == 17:
        return f"often-{i}", {"schedule": "@every 2s", "data": {"i": i}}
    if i % 500 == 18:
        return f"fail-{i}", {
            "schedule": "@every 1h",
            "dueTime": "1s",
            "failurePolicy": {"constant": {"interval": "5s", "maxRetries": 500}},
        }
    if i % 200 == 9:
        return f"soon-{i}", {"dueTime": "1s", "data": f"one-shot {i}"}
    if k < 4:
        tz = TZS[i % len(TZS)]
        return f"cron-{i}", {"schedule": f"TZ={tz} {i % 60} {(i // 60) % 60} {i % 24} * * *"}
    if k < 7:
        return f"every-{i}", {"schedule": f"@every {1 + i % 24}h", "data": {"i": i, "s": "x" * (i % 50)}}
    if k < 9:
        return f"once-{i}", {"dueTime": f"{2 + i % 48}h", "data": f"payload {i}"}
    if k < 12:
        return f"repeats-{i}", {"schedule": "@every 30m", "repeats": 5 + i % 10, "dueTime": f"{i % 600}s"}
    if k < 14:
        return f"ttl-{i}", {"schedule": "@every 15m", "ttl": f"{24 + i % 48}h"}
    if k < 16:
        catch = ["latest", "none", "all"][i % 3]
        return f"policy-{i}", {
            "schedule": "@every 10m",
            "policy": {"catchUp": catch, "jitter": "30s", "overlap": "skip"},
            "failurePolicy": {
                "exponential": {"initialInterval": "1s", "multiplier": 2, "maxRetries": 3},
                "onExhausted": "pause",
            },
        }
    if k < 19:
        return f"labels-{i}", {
            "schedule": "@daily",
            "labels": {"team": f"t{i % 7}", "tier": "gold" if i % 2 else "silver"},
            "data": {"nested": {"list": [i, i + 1], "ok": True}},
        }
    return f"paused-{i}", {"schedule": f"@every {1 + i % 6}h"}


def fill(port: str, n: str, events: str) -> Suite:
    suite = Suite("backup-fill")
    port, n = int(port), int(n)
    specs = [spec(i) for i in range(n)]

    @suite.check
    def every_create_is_accepted():
        def create(item):
            name, body = item
            status, answer = call(port, "POST", f"/jobsd/v1/jobs/{quote(name)}", body)
            assert status == 204, (name, status, answer)

        started = time.monotonic()
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(create, specs, chunksize=64))
        took = time.monotonic() - started
        print(f"# created {n} jobs in {took:.1f}s ({n / took:.0f}/s)", flush=True)

    @suite.check
    def some_are_paused():
        names = [name for name, _ in specs if name.startswith("paused-")]

        def pause(name):
            status, answer = call(port, "POST", f"/jobsd/v1/jobs/{quote(name)}/pause",
                                  {"note": "before the move"})
            assert status == 204, (name, status, answer)

        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(pause, names, chunksize=64))
        assert names

    @suite.check
    def failing_jobs_are_mid_retry_and_one_shots_ran():
        fails = {name for name, _ in specs if name.startswith("fail-")}
        soon = [name for name, _ in specs if name.startswith("soon-")]
        deadline = time.monotonic() + 60
        while True:
            seen = set()
            with open(events, encoding="utf-8") as f:
                for line in f:
                    seen.add(json.loads(line)["name"])
            if fails <= seen and set(soon) <= seen:
                break
            assert time.monotonic() < deadline, (len(fails - seen), len(set(soon) - seen))
            time.sleep(0.5)
        # A one-shot that ran is kept as finished (for the views) once its result is written.
        deadline = time.monotonic() + 30
        for name in soon:
            while True:
                _, view = call(port, "GET", f"/jobsd/v1/jobs/{quote(name)}")
                if view["status"]["state"] == "finished":
                    break
                assert time.monotonic() < deadline, view
                time.sleep(0.2)

    return suite


def names_of(export: str):
    with open(export, encoding="utf-8") as f:
        return [json.loads(line)["name"] for line in f if line.startswith('{"name"')]


def snapshot(port: str, export: str, out: str) -> Suite:
    suite = Suite("backup-snapshot")
    port = int(port)

    @suite.check
    def every_exported_job_answers_get_and_next():
        names = names_of(export)

        def get(name):
            t = time.time()
            s1, view = call(port, "GET", f"/jobsd/v1/jobs/{quote(name)}")
            s2, nxt = call(port, "GET", f"/jobsd/v1/jobs/{quote(name)}/next?count=3")
            assert s1 == 200 and s2 == 200, (name, s1, view, s2, nxt)
            return {"name": name, "t": t, "view": view, "next": nxt}

        started = time.monotonic()
        with ThreadPoolExecutor(THREADS) as pool:
            rows = list(pool.map(get, names, chunksize=64))
        with open(out, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, sort_keys=True) + "\n")
        took = time.monotonic() - started
        print(f"# {len(rows)} jobs read in {took:.1f}s", flush=True)
        assert rows

    return suite


def lasting(view):
    """The view without what only says what the process is doing right now."""
    view = json.loads(json.dumps(view))
    status = view["status"]
    status.pop("inFlight", None)
    if status.get("state") == "paused":
        status["counters"]["skipped"].pop("paused", None)
    return view


def times(nxt):
    return [t["time"] for t in (nxt or {}).get("ticks", [])]


def parse_time(text):
    # RFC 3339 with Z and up to nanoseconds, as jobsd writes it.
    from datetime import datetime, timezone
    base, _, frac = text.rstrip("Z").partition(".")
    t = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


def compare(a_file: str, b_file: str, events: str, split: str) -> Suite:
    suite = Suite("backup-compare")
    load = lambda p: {r["name"]: r for r in map(json.loads, open(p, encoding="utf-8"))}  # noqa: E731
    a, b = load(a_file), load(b_file)
    with open(events, encoding="utf-8") as f:
        deliveries = [json.loads(line) for line in f]
    split = int(split)
    after = defaultdict(list)
    for d in deliveries[split:]:
        after[d["name"]].append(d)
    stats = Counter()

    @suite.check
    def the_same_jobs_on_both():
        assert set(a) == set(b), (len(a), len(b), sorted(set(a) ^ set(b))[:10])

    @suite.check
    def every_job_is_identical_or_went_on_from_where_it_was():
        bad = []
        for name, ra in a.items():
            rb = b[name]
            va, vb = ra["view"], rb["view"]
            for key in ("job", "labels", "policy", "failurePolicy", "etag", "name"):
                if va.get(key) != vb.get(key):
                    bad.append((name, key, va.get(key), vb.get(key)))
            nxt = va["status"]["nextFireTime"]
            due_before_b = nxt is not None and parse_time(nxt) <= rb["t"] + 1
            if name.startswith("fail-"):
                stats["mid-retry"] += 1
                continue
            if not due_before_b:
                stats["identical"] += 1
                if lasting(va) != lasting(vb):
                    bad.append((name, "view", lasting(va), lasting(vb)))
                if times(ra["next"]) != times(rb["next"]):
                    bad.append((name, "next", ra["next"], rb["next"]))
                continue
            # Due while nobody fired it: the second jobsd's deliveries carry the first one's
            # next fire times, then its own next ones follow.
            stats["went on"] += 1
            delivered = sorted({d["scheduled"] for d in after[name]}, key=parse_time)
            seq = sorted(set(delivered) | set(times(rb["next"])), key=parse_time)
            if [parse_time(t) for t in seq[:3]] != [parse_time(t) for t in times(ra["next"])[:3]]:
                bad.append((name, "went on", times(ra["next"]), delivered, times(rb["next"])))
        print(f"# {dict(stats)}", flush=True)
        assert not bad, bad[:5]

    @suite.check
    def no_execution_attempt_reached_the_app_twice():
        seen = Counter((d["id"], d["attempt"]) for d in deliveries)
        twice = [k for k, n in seen.items() if n > 1]
        assert not twice, twice[:10]
        assert len(deliveries) > split, "the second jobsd delivered nothing: nothing was shown"
        print(f"# {split} deliveries before the move, {len(deliveries) - split} after", flush=True)

    @suite.check
    def mid_retry_jobs_went_on_with_their_next_attempt():
        before = defaultdict(list)
        for d in deliveries[:split]:
            before[d["name"]].append(d)
        checked = 0
        for name in a:
            if not name.startswith("fail-") or not after[name]:
                continue
            last, first = before[name][-1], after[name][0]
            assert first["id"] == last["id"], (name, last, first)
            assert int(first["attempt"]) == int(last["attempt"]) + 1, (name, last, first)
            assert int(first["attempt"]) == a[name]["view"]["status"]["currentAttempt"], name
            checked += 1
        assert checked, "no failing job was retried after the move"
        print(f"# {checked} jobs retried after the move with their next attempt", flush=True)

    @suite.check
    def one_shots_that_ran_did_not_run_again():
        ran_again = [n for n in a if n.startswith("soon-") and after[n]]
        assert not ran_again, ran_again[:10]
        finished = [n for n in a if n.startswith("soon-")]
        assert all(b[n]["view"]["status"]["state"] == "finished" for n in finished)

    return suite


PHASES = {"fill": (fill, 3), "snapshot": (snapshot, 3), "compare": (compare, 4)}

if __name__ == "__main__":
    sys.exit(run_phase_of(PHASES, sys.argv, __doc__))
