"""Run each test file by itself, so that no file passes only thanks to another's imports.

`python tests/run_each_file.py [FILE ...] [--root DIR] [-- PYTEST_ARGS]` runs
`pytest -q -x -p no:randomly FILE` once per file (default: every `tests/test_*.py`), from
`--root` (default: this checkout) with `PWD` set to it, and prints one line per file. Exit 1
when any file fails alone. A mutation run over a few files (`tests/mutants.py`, `make
mutmut`) means what it says only if those files pass alone; `make each-file` runs it.
Not collected by pytest (no `test_` prefix).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_alone(
    root: Path, test_file: str, pytest_args: Sequence[str] = ()
) -> tuple[int, str, float]:
    """(pytest's exit code, its last lines, seconds) for `test_file` run by itself from `root`."""
    env = {**os.environ, "PWD": str(root)}
    env.pop("OLDPWD", None)
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            *pytest_args,
            test_file,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    tail = "\n".join(done.stdout.strip().splitlines()[-3:])
    return done.returncode, tail, time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="test files (default: every tests/test_*.py)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project to run them in")
    args = parser.parse_args(argv)
    files = args.files or sorted(
        str(p.relative_to(args.root)) for p in (args.root / "tests").glob("test_*.py")
    )
    failed = []
    for test_file in files:
        code, tail, seconds = run_alone(args.root, test_file, extra)
        # 5: no test collected (a file whose tests are all deselected) is not a failure.
        ok = code in (0, 5)
        last = tail.splitlines()[-1] if tail else ""
        print(f"{'ok    ' if ok else 'FAILED'} {seconds:6.1f}s  {test_file}  {last}", flush=True)
        if not ok:
            failed.append(test_file)
            print("       " + tail.replace("\n", "\n       "), flush=True)
    print(f"\n{len(files) - len(failed)}/{len(files)} test files pass alone")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
