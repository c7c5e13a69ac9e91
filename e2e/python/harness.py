"""A tiny check runner for the e2e suites: no pytest, plain asserts, one line per check.

    suite = Suite("api")

    @suite.check
    def round_trip():
        assert ...

    sys.exit(suite.run())

`run()` executes the checks in definition order, prints `ok`/`FAIL` per check (with the
traceback of a failure), then the closing line `N passed, M failed`, and returns the exit status
(0 only when nothing failed). A check is a function; it fails if it raises.
"""

import sys
import time
import traceback
from typing import Callable, List, Tuple


class Suite:
    def __init__(self, name: str):
        self.name = name
        self._checks: List[Tuple[str, Callable[[], None]]] = []

    def check(self, fn: Callable[[], None]) -> Callable[[], None]:
        self._checks.append((fn.__name__, fn))
        return fn

    def add(self, name: str, fn: Callable[[], None]) -> None:
        """Register a check under an explicit name (for generated checks)."""
        self._checks.append((name, fn))

    def run(self) -> int:
        passed = failed = 0
        started = time.monotonic()
        for name, fn in self._checks:
            t0 = time.monotonic()
            try:
                fn()
            except Exception:  # noqa: BLE001 - every failure is reported the same way
                failed += 1
                print(f"FAIL {self.name}/{name}", flush=True)
                print(traceback.format_exc().rstrip(), flush=True)
            else:
                passed += 1
                print(f"ok   {self.name}/{name} ({time.monotonic() - t0:.2f}s)", flush=True)
        print(f"# {self.name}: {len(self._checks)} checks in {time.monotonic() - started:.1f}s",
              flush=True)
        print(f"{passed} passed, {failed} failed", flush=True)
        return 0 if failed == 0 else 1


def run_phase(phases: dict, argv: list, usage: str) -> int:
    """The exit status of the phase `argv[1]` names: `phases` maps a name to (a function
    returning its Suite, how many arguments it takes from `argv[2:]`). A wrong call prints
    `usage` and returns 2."""
    phase = argv[1] if len(argv) > 1 else ""
    if phase in phases and len(argv) == 2 + phases[phase][1]:
        return phases[phase][0](*argv[2:]).run()
    print(usage, file=sys.stderr)
    return 2
