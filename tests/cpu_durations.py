"""Per-test CPU seconds, for comparing the suite's cost on a shared, loaded machine.

Wall-clock durations (`pytest --durations`) swing several-fold with the load other suites
put on the host; CPU seconds much less. As a plugin (`python -m pytest -p
tests.cpu_durations …`, output file `$CPU_DURATIONS`, default `runs/cpu-durations.jsonl`)
it appends one JSON line per test: wall and CPU seconds, CPU counting this process, the
children it has reaped and the tests' trainer fork server (`tests/trainer_runs.py`, whose
children would otherwise be counted only when it exits). `python tests/cpu_durations.py
FILE [N]` prints the total and the N (default 20) costliest files. docs/testing.md has the
figures. Not collected by pytest (no `test_` prefix).
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from collections.abc import Iterator, Sequence

import pytest

OUTPUT_ENV = "CPU_DURATIONS"
DEFAULT_OUTPUT = "runs/cpu-durations.jsonl"


def _server_seconds() -> float:
    """CPU seconds of the tests' trainer fork server and its reaped children (0: none)."""
    runs = sys.modules.get("tests.trainer_runs")
    server = getattr(runs, "_servers", {}).get("trainer") if runs else None
    if server is None or server.process is None or server.process.returncode is not None:
        return 0.0
    try:
        with open(f"/proc/{server.process.pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime … cstime


def cpu_seconds() -> float:
    """This process's CPU seconds, its reaped children's and the trainer server's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return total + _server_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Time one test (setup, call, teardown) and append its line."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    yield
    line = {"id": item.nodeid, "wall": time.perf_counter() - wall, "cpu": cpu_seconds() - cpu}
    path = os.environ.get(OUTPUT_ENV, DEFAULT_OUTPUT)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def per_file(lines: Sequence[str]) -> dict[str, tuple[int, float, float]]:
    """File → (tests, wall seconds, CPU seconds), summed over its tests' lines."""
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for text in lines:
        row = json.loads(text)
        totals = files[row["id"].split("::")[0]]
        totals[0] += 1
        totals[1] += row["wall"]
        totals[2] += row["cpu"]
    return {name: (int(t[0]), t[1], t[2]) for name, t in files.items()}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python tests/cpu_durations.py FILE [N]", file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as source:
        files = per_file(source.read().splitlines())
    count = int(args[1]) if len(args) > 1 else 20
    tests = sum(f[0] for f in files.values())
    cpu = sum(f[2] for f in files.values())
    print(f"{tests} tests, {cpu:.0f} CPU s, {sum(f[1] for f in files.values()):.0f} wall s")
    for name, (n, wall, seconds) in sorted(files.items(), key=lambda kv: -kv[1][2])[:count]:
        print(f"{name:50} {n:5d} {seconds:8.1f} CPU s {wall:8.1f} wall s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
