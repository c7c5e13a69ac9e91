"""Concurrency limits by key under load (issue 38), driven by e2e/bench/concurrency.sh.

Three `jobsd scheduler` replicas on one etcd, one jobsd sidecar in front of them, and this
script's own HTTP app, which counts the executions of each key it has in hand at once (the
truth the limit is judged by), holds each call HANDLER_MS and records every delivery.

  1. rules: key `a` limit LIMIT, key `b` limit LIMIT (PUT /jobsd/v1/concurrency/{key});
  2. N_A one-shot jobs of key `a` and N_B of key `b`, all due at one instant, created in
     batches through the sidecar;
  3. KILL_AFTER seconds after the instant, replica s2 gets SIGKILL (its share of every limit
     moves to the others once its lease runs out);
  4. until every job is delivered (or DEADLINE): the app's most in hand per key, deliveries
     per second per key, the time each key finished, duplicates and lost.

Prints a table and writes JSON (argv: sidecar http port, victim pid, results file).
"""

import json
import os
import signal
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LIMIT = int(os.environ.get("LIMIT", "20"))
N_A = int(os.environ.get("N_A", "3000"))
N_B = int(os.environ.get("N_B", "1000"))
HANDLER_MS = int(os.environ.get("HANDLER_MS", "50"))
KILL_AFTER = float(os.environ.get("KILL_AFTER", "3"))
DEADLINE = float(os.environ.get("DEADLINE", "180"))
LEAD = float(os.environ.get("LEAD", "15"))


class App:
    def __init__(self):
        self.lock = threading.Lock()
        self.in_hand = {"a": 0, "b": 0}
        self.most = {"a": 0, "b": 0}
        self.deliveries = []  # (t, name, key)
        self.over = []  # (t, key, in hand) whenever a key is over its limit

    def begin(self, name):
        key = name.split("-", 1)[0]
        with self.lock:
            self.in_hand[key] = self.in_hand.get(key, 0) + 1
            n = self.in_hand[key]
            self.most[key] = max(self.most.get(key, 0), n)
            if n > LIMIT:
                self.over.append((time.time(), key, n))
        return key

    def end(self, name, key):
        with self.lock:
            self.in_hand[key] -= 1
            self.deliveries.append((time.time(), name, key))


APP = App()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        name = self.path.rsplit("/", 1)[-1]
        key = APP.begin(name)
        time.sleep(HANDLER_MS / 1000)
        APP.end(name, key)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        body = b"{}" if self.path == "/dapr/config" else b""
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def call(port, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)


def main():
    sidecar, victim, out, port_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(port_file, "w") as f:
        f.write(str(server.server_address[1]))
    # The shell starts the sidecar now, pointed at this app; wait for it.
    for _ in range(600):
        try:
            if call(sidecar, "GET", "/v1.0/healthz")[0] == 204:
                break
        except Exception:
            pass
        time.sleep(0.1)
    for key in ("a", "b"):
        call(sidecar, "PUT", f"/jobsd/v1/concurrency/{key}", {"limit": LIMIT})
    due = datetime.now(timezone.utc) + timedelta(seconds=LEAD)
    due_text = due.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    names = [f"a-{i}" for i in range(N_A)] + [f"b-{i}" for i in range(N_B)]

    def batch(chunk):
        jobs = [{"name": n, "dueTime": due_text, "data": "x",
                 "policy": {"concurrencyKey": n.split("-")[0]}} for n in chunk]
        status, answer = call(sidecar, "POST", "/jobsd/v1/jobs:batch", {"jobs": jobs})
        bad = [r for r in answer["results"] if r["status"] != 204]
        assert status == 200 and not bad, (status, bad[:3])

    t_create = time.time()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(batch, [names[i:i + 500] for i in range(0, len(names), 500)]))
    created_s = time.time() - t_create
    assert time.time() < due.timestamp(), f"creates took {created_s:.1f}s, past the due time"
    t_due = due.timestamp()
    time.sleep(max(0.0, t_due + KILL_AFTER - time.time()))
    os.kill(victim, signal.SIGKILL)
    t_kill = time.time()
    views = []
    while time.time() < t_due + DEADLINE:
        with APP.lock:
            done = {n for _, n, _ in APP.deliveries}
        if len(done) == len(names):
            break
        try:
            views.append((time.time(), call(sidecar, "GET", "/jobsd/v1/concurrency")[1]))
        except Exception as e:  # a replica going away mid-call
            views.append((time.time(), {"error": str(e)}))
        time.sleep(0.5)
    time.sleep(2)  # late duplicates
    with APP.lock:
        deliveries = list(APP.deliveries)
        most = dict(APP.most)
        over = list(APP.over)
    per_key = {}
    for key, n in (("a", N_A), ("b", N_B)):
        mine = sorted(t for t, _, k in deliveries if k == key)
        names_k = [nm for _, nm, k in deliveries if k == key]
        first, last = (mine[0], mine[-1]) if mine else (0, 0)
        # Steady rate: deliveries between the 10th and the 90th percentile of the key's times.
        lo, hi = mine[len(mine) // 10], mine[len(mine) * 9 // 10] if mine else (0, 0)
        steady = (len(mine) * 8 // 10) / (hi - lo) if hi > lo else 0
        per_key[key] = {
            "jobs": n,
            "delivered_distinct": len(set(names_k)),
            "deliveries": len(names_k),
            "duplicates": len(names_k) - len(set(names_k)),
            "lost": n - len(set(names_k)),
            "most_in_hand": most.get(key, 0),
            "first_after_due_s": round(first - t_due, 2),
            "finished_after_due_s": round(last - t_due, 2),
            "steady_per_s": round(steady, 1),
        }
    # The rate each second around the kill, both keys.
    buckets = {}
    for t, _, k in deliveries:
        s = int(t - t_due)
        buckets.setdefault(s, {"a": 0, "b": 0})[k] += 1
    result = {
        "limit": LIMIT, "handler_ms": HANDLER_MS, "n_a": N_A, "n_b": N_B,
        "ceiling_per_key_per_s": round(LIMIT * 1000 / HANDLER_MS, 1),
        "created_in_s": round(created_s, 2), "kill_after_due_s": round(t_kill - t_due, 2),
        "keys": per_key, "over_limit_events": len(over), "over_examples": over[:5],
        "per_second": {str(k): v for k, v in sorted(buckets.items())},
        "views": [(round(t - t_due, 1), v) for t, v in views[::4]],
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"limit {LIMIT} per key, handler {HANDLER_MS} ms (ceiling "
          f"{result['ceiling_per_key_per_s']}/s per key); {N_A} jobs of a, {N_B} of b due at "
          f"one instant; replica s2 killed {result['kill_after_due_s']} s after it")
    print("| key | jobs | delivered | duplicates | lost | most in hand (app) | first / last "
          "after due | steady deliveries/s |")
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    for key, r in per_key.items():
        print(f"| {key} | {r['jobs']} | {r['delivered_distinct']} | {r['duplicates']} | "
              f"{r['lost']} | {r['most_in_hand']} | {r['first_after_due_s']} / "
              f"{r['finished_after_due_s']} s | {r['steady_per_s']} |")
    print("per second after due (a, b):",
          " ".join(f"{s}:{v['a']},{v['b']}" for s, v in sorted(buckets.items())))
    ok = all(r["lost"] == 0 for r in per_key.values()) and not over
    print("RESULT", "pass" if ok else "fail")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
