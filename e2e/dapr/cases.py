#!/usr/bin/env python3
"""Lists the cases of Dapr's integration suite whose names match a regex, one per line.

    cases.py SUITE_DIR REGEX

A case is what `suite.Register(new(T))` registers in a package under SUITE_DIR
(`tests/integration/suite`); its name is the package's path under SUITE_DIR, a slash and
T, as the suite's own `suite.All` names it (`daprd/jobs/get`). Files built only for Windows
are left out, as on this machine.
"""

import os
import re
import sys

REGISTER = re.compile(r"suite\.Register\(new\((\w+)\)\)")


def main():
    suite_dir, pattern = sys.argv[1], re.compile(sys.argv[2])
    names = set()
    for dirpath, _dirs, files in os.walk(suite_dir):
        for f in files:
            if not f.endswith(".go") or f.endswith("_test.go") or f.endswith("_windows.go"):
                continue
            text = open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read()
            head = text.split("package", 1)[0]
            if "go:build windows" in head:
                continue
            pkg = os.path.relpath(dirpath, suite_dir)
            for t in REGISTER.findall(text):
                name = f"{pkg}/{t}"
                if pattern.search(name):
                    names.add(name)
    for name in sorted(names):
        print(name)


if __name__ == "__main__":
    main()
