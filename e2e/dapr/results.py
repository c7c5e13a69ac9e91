#!/usr/bin/env python3
"""Turns the test2json events of one run of Dapr's integration suite into a results file.

    results.py EVENTS RESULTS.tsv LOG [CASES]

EVENTS is one file of test2json events, or a folder of them (one run per case).

RESULTS.tsv: one line per test case of the suite (the rows of cases this run did not run are
kept from earlier runs) (`daprd/jobs/get`, ...): name, status
(pass, fail, skip), seconds. Sub-tests are folded into their case. LOG gets the output of every
failed case, in full, for reading. Prints the counts.
"""

import json
import os
import sys

PREFIX = "Test_Integration/"


def case_of(test):
    """The suite's case of a go test name (`Test_Integration/daprd/jobs/get/run` ->
    `daprd/jobs/get`), or None for the run's own steps."""
    if not test or not test.startswith(PREFIX):
        return None
    name = test[len(PREFIX):]
    if name.startswith(("build binaries", "build_binaries")):
        return None
    return name


def main():
    events_path, results_path, log_path = sys.argv[1:4]
    status = {}
    elapsed = {}
    output = {}
    top = set()
    # Several runs (a first pass, then a rerun of what failed) come comma-separated, in order:
    # a case's last status counts, and one that failed before it passed is `flaky`.
    first = {}
    for run, one in enumerate(events_path.split(",")):
        paths = (
            [os.path.join(one, n) for n in sorted(os.listdir(one)) if n.endswith(".json")]
            if os.path.isdir(one)
            else [one]
        )
        read_events(paths, status, elapsed, output, top)
        if run == 0:
            first = dict(status)
    flaky = {c for c, st in status.items() if st == "pass" and first.get(c, "fail") == "fail"}
    if "," not in events_path:
        flaky = set()
    finish(sys.argv, status, elapsed, output, top, flaky, results_path, log_path)


def read_events(paths, status, elapsed, output, top):
    """Folds the test2json events of `paths` into the maps."""
    for line in (l for p in paths for l in open(p, encoding="utf-8", errors="replace")):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        name = case_of(ev.get("Test"))
        if name is None:
            continue
        action = ev.get("Action")
        if action == "run":
            top.add(name)
        output.setdefault(name, []).append(ev.get("Output", "") or "")
        if action in ("pass", "fail", "skip"):
            status[name] = action
            if "Elapsed" in ev:
                elapsed[name] = ev["Elapsed"]

def finish(argv, status, elapsed, output, top, flaky, results_path, log_path):
    """Writes the results and the failures' log; prints the counts."""
    # Sub-test names may hold slashes of their own (`run/id/backslash`), so a case is a test
    # none of whose slash-prefixes is a test.
    def is_case(n):
        parts = n.split("/")
        return not any("/".join(parts[:k]) in top for k in range(1, len(parts)))

    cases = sorted(n for n in top if is_case(n))
    if len(argv) > 4:
        # The cases that were run: one that left no result (its process timed out or died
        # before the suite started it) fails.
        cases = [c.strip() for c in open(argv[4], encoding="utf-8") if c.strip()]
    rows = []
    for c in cases:
        st = status.get(c, "fail")  # a case the run's timeout cut short never reported
        if st == "pass" and c in flaky:
            st = "flaky"
        # A case fails if any of its steps failed (the framework fails the parent then).
        rows.append((c, st, elapsed.get(c, 0.0)))
    # A run of some cases (a focus) updates their rows and keeps the others' from earlier runs.
    kept = []
    if os.path.exists(results_path):
        ran = {c for c, _, _ in rows}
        for line in open(results_path, encoding="utf-8"):
            if line.startswith("#") or not line.strip():
                continue
            name = line.split("\t", 1)[0]
            if name not in ran:
                kept.append(line.rstrip("\n"))
    lines = kept + [f"{c}\t{st}\t{s:.1f}" for c, st, s in rows]
    with open(results_path, "w", encoding="utf-8") as f:
        f.write("# test\tstatus\tseconds\n")
        for line in sorted(lines):
            f.write(line + "\n")
    with open(log_path, "w", encoding="utf-8") as f:
        for c, st, _ in rows:
            if st == "fail":
                f.write(f"===== {c}\n")
                for n in sorted(output):
                    if n == c or n.startswith(c + "/"):
                        f.write("".join(output[n]))
    counts = {}
    for _, st, _ in rows:
        counts[st] = counts.get(st, 0) + 1
    print(
        f"{len(rows)} cases: {counts.get('pass', 0) + counts.get('flaky', 0)} passed "
        f"({counts.get('flaky', 0)} on a rerun), {counts.get('fail', 0)} failed, "
        f"{counts.get('skip', 0)} skipped"
    )


if __name__ == "__main__":
    main()
