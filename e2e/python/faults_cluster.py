"""Checks of e2e/faults/cluster.sh (issue 15, item 4): a scheduler cluster under etcd and
replica faults. Standard library only.

    faults_cluster.py load SIDECAR SECONDS ACKED     create jobs for SECONDS through SIDECAR
    faults_cluster.py check EVENTS ACKED WINDOWS TTL  judge the deliveries

`load` creates 20 `@every 1s` jobs (tick-N), then a one-shot (once-N, due 3 s ahead) every
0.1 s, appending `{"name", "due"}` to ACKED for each create answered 2xx (a create that failed
or timed out is not acknowledged and not judged).

`check` reads the app's EVENTS (trigger_http_app.py), ACKED and WINDOWS (one `label start end`
line per fault, epoch seconds) and checks: every acknowledged one-shot delivered, none before
its due time; a one-shot delivered twice only when its first delivery fell in a fault window
(one that was in flight when it began, or in its first 2/3 of the lease TTL: counted and
printed); every tick job fires again within lease TTL
+ 2 s after each fault ends; nothing fires while etcd is stopped past the lease TTL; `postcompact`
(created after the compactions) fires and `delme` (deleted after them) stops.
"""

import json
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from datetime import datetime, timezone

from harness import Suite

TICKS = 20


def post(sidecar: str, name: str, body: dict, timeout: float = 10) -> int:
    req = urllib.request.Request(f"http://{sidecar}/v1.0-alpha1/jobs/{name}",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status
    except Exception:  # noqa: BLE001 - any failure means not acknowledged
        return 0


def load(sidecar: str, seconds: str, acked_path: str) -> int:
    for i in range(TICKS):
        if post(sidecar, f"tick-{i}", {"schedule": "@every 1s"}) // 100 != 2:
            print(f"tick-{i} not created", flush=True)
            return 1
    end = time.time() + float(seconds)
    lock = threading.Lock()
    counter = [0]

    def creator():
        with open(acked_path, "a") as out:
            while time.time() < end:
                with lock:
                    i = counter[0]
                    counter[0] += 1
                due = time.time() + 3
                stamp = datetime.fromtimestamp(due, timezone.utc).isoformat(timespec="milliseconds")
                if post(sidecar, f"once-{i}", {"dueTime": stamp.replace("+00:00", "Z")}) // 100 == 2:
                    with lock:
                        out.write(json.dumps({"name": f"once-{i}", "due": due}) + "\n")
                        out.flush()
                time.sleep(0.2)

    # Two creators: one stuck on a request during a fault does not stop the other.
    threads = [threading.Thread(target=creator) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{counter[0]} one-shot creates sent", flush=True)
    return 0


def check(events_path: str, acked_path: str, windows_path: str, ttl: str) -> Suite:
    ttl = float(ttl)
    suite = Suite("faults-cluster")
    deliveries = defaultdict(list)
    with open(events_path) as f:
        for line in f:
            e = json.loads(line)
            if e.get("name"):
                deliveries[e["name"]].append(e["t"])
    acked = {}
    with open(acked_path) as f:
        for line in f:
            a = json.loads(line)
            acked[a["name"]] = a["due"]
    windows = []
    with open(windows_path) as f:
        for line in f:
            label, start, end = line.split()
            windows.append((label, float(start), float(end)))
    print(f"{len(acked)} one-shots acknowledged; windows: "
          + ", ".join(f"{w[0]} {w[2] - w[1]:.1f}s" for w in windows), flush=True)

    def in_flight_at(t):
        # A delivery that was out when a fault began, or in its first 2/3 of the lease TTL
        # (before any replica can know its lease is in doubt): its result may not have been
        # recorded, so it may come again. Anything delivered twice later is a replica firing
        # what it no longer owns.
        for label, start, _ in windows:
            if start - 1 <= t <= start + ttl * 2 / 3:
                return label
        return None

    @suite.check
    def every_acknowledged_one_shot_delivered():
        lost = [n for n in acked if not deliveries.get(n)]
        assert not lost, f"{len(lost)} acknowledged one-shots never delivered: {lost[:10]}"

    @suite.check
    def no_one_shot_delivered_before_its_due_time():
        early = [(n, min(deliveries[n]) - due) for n, due in acked.items()
                 if deliveries.get(n) and min(deliveries[n]) < due - 0.005]
        assert not early, f"{len(early)} early: {early[:10]}"

    @suite.check
    def duplicates_only_for_in_flight_deliveries_of_a_fault():
        per_window = defaultdict(int)
        offsets = defaultdict(list)
        outside = []
        for n in acked:
            ts = sorted(deliveries.get(n, []))
            if len(ts) < 2:
                continue
            label = in_flight_at(ts[0])
            if label:
                per_window[label] += len(ts) - 1
                start = next(w[1] for w in windows if w[0] == label)
                offsets[label].append((round(ts[0] - start, 2), round(ts[1] - start, 2)))
            else:
                outside.append((n, ts))
        print(f"duplicate one-shot deliveries (un-acked in flight) per fault: {dict(per_window)}",
              flush=True)
        for label, pairs in offsets.items():
            print(f"  {label}: first and second delivery, seconds after the fault began: "
                  f"{sorted(pairs)[:20]}", flush=True)
        assert not outside, f"{len(outside)} delivered twice though not in flight at a fault: {outside[:5]}"

    @suite.check
    def one_shots_due_in_a_fault_fire_within_ttl_plus_2s_of_its_end():
        late = []
        for n, due in acked.items():
            ts = deliveries.get(n)
            if not ts:
                continue
            back = due
            for _, start, end in windows:
                if start - 1 <= due <= end:
                    back = max(back, end)
            if min(ts) - back > ttl + 2:
                late.append((n, round(min(ts) - back, 2)))
        assert not late, f"{len(late)} late: {late[:10]}"

    @suite.check
    def tick_jobs_resume_within_ttl_plus_2s_after_each_fault():
        slow = []
        for label, start, end in windows:
            worst = 0.0
            for i in range(TICKS):
                after = [t for t in deliveries.get(f"tick-{i}", []) if t > end]
                if after:
                    worst = max(worst, after[0] - end)
                if not after or after[0] - end > ttl + 2:
                    slow.append((label, f"tick-{i}", round(after[0] - end, 2) if after else None))
            print(f"{label}: every tick job fired again within {worst:.2f}s of its end", flush=True)
        assert not slow, f"not resumed in time: {slow[:10]}"

    @suite.check
    def nothing_fires_while_etcd_is_stopped_past_the_lease_ttl():
        # No replica can know it still owns its partitions: one cut off from etcd must stop
        # before the others may take them over.
        for label, start, end in windows:
            if label != "etcd-stopped":
                continue
            fired = sum(1 for ts in deliveries.values() for t in ts if start + ttl < t < end)
            print(f"{label}: {fired} deliveries between lease TTL and its end", flush=True)
            assert fired == 0, f"{fired} deliveries while etcd was stopped"

    @suite.check
    def after_compactions_a_new_job_fires_and_a_deleted_one_stops():
        assert len(deliveries.get("postcompact", [])) >= 3, deliveries.get("postcompact")
        with open(windows_path + ".deleted") as f:
            deleted_at = float(f.read())
        late = [t for t in deliveries.get("delme", []) if t > deleted_at + 2]
        assert not late, f"delme delivered {len(late)} times after its delete"

    return suite


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "load":
        return load(*sys.argv[2:])
    if len(sys.argv) == 6 and sys.argv[1] == "check":
        return check(*sys.argv[2:]).run()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
