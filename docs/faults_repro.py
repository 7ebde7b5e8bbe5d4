"""Reproduce issue 42's cases 1 and 3 through the CLI, and time each message (docs/faults.md).

    python docs/faults_repro.py case1 --cli .venv/bin/hpt-pipeline --output runs/r
    sudo-free as root: python docs/faults_repro.py case3 --cli .venv/bin/hpt-pipeline \
        --output runs/full --size-mb 6
    python docs/faults_repro.py case3-fill --cli .venv/bin/hpt-pipeline --output runs/fill

case1: `run --max-trials 4 --parallel-trials 2 --epochs 3 --image-size 24`, SIGINT to the
run's process group as soon as a trial's `chief-0.log` shows its last epoch and the console
has not said `trial N succeeded`, then the same command again.
case3: the output on a tmpfs of `--size-mb` (a private mount namespace: `unshare -m`, root
needed), the run, then the tmpfs grown to 200 MB (space freed) and the same command again.
case3-fill: the output on a 64 MB tmpfs that passes any up-front check; once the first trial
has started, a file fills the tmpfs; when the run has ended, the file is removed and the same
command runs again.
Each step prints its wall time, exit code and the lines that say what happened.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

RUN = ["run", "--max-trials", "4", "--parallel-trials", "2", "--epochs", "3", "--image-size", "24"]
SAID = re.compile(
    r"error|interrupted|resum|succeeded|failed|infeasible|No space|trial\(s\)|"
    r"kept|cancel|Traceback|study (done|stopped)|finished in"
)


class Run:
    """One `hpt-pipeline run` in its own process group, its console lines timestamped."""

    def __init__(self, cli: str, output: str, env: dict[str, str]) -> None:
        self.start = time.monotonic()
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            [cli, *RUN, "--output", output],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env=env,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.start, line.rstrip()))

    def said(self, pattern: str) -> bool:
        """Whether a console line so far matches `pattern`."""
        return any(re.search(pattern, line) for _, line in self.lines)

    def wait(self) -> int:
        """The exit code, once every console line is read."""
        code = self.proc.wait()
        self.reader.join()
        return code

    def report(self, title: str, code: int, since: float = 0.0) -> None:
        """Print the wall time, the exit code and the lines that say what happened."""
        end = time.monotonic() - self.start
        print(f"== {title}: exit {code}, {end:.1f} s (from {since:.1f} s: {end - since:.1f} s)")
        for at, line in self.lines:
            if at >= since and SAID.search(line):
                print(f"   {at:6.1f} s  {line[:200]}")


def env_for(output: str) -> dict[str, str]:
    """The environment, with the trainer's metric file beside the output (never /tmp)."""
    env = dict(os.environ)
    env.setdefault("CLOUD_ML_HP_METRIC_FILE", str(Path(output).resolve().parent / "hp.metrics"))
    return env


def case1(cli: str, output: str) -> None:
    """SIGINT between a trial's last epoch and its record, then the same command."""
    env = env_for(output)
    run = Run(cli, output, env)
    study = Path(output) / "study"
    hit = None
    while run.proc.poll() is None and hit is None:
        for log in sorted(study.glob("*/local/chief-0.log")):
            trial = log.parts[-3]
            if "epoch 3/3" in log.read_text(errors="replace") and not run.said(
                rf"trial {trial} (succeeded|failed|infeasible)"
            ):
                hit = trial
                break
        time.sleep(0.005)
    if hit is None:
        run.report("the run ended before any trial's last epoch was seen", run.wait())
        return
    signalled = time.monotonic() - run.start
    os.killpg(run.proc.pid, signal.SIGINT)
    run.report(f"SIGINT after trial {hit}'s last epoch, before its record", run.wait(), signalled)
    again = Run(cli, output, env)
    again.report("the same command again", again.wait())


def namespaced(argv: list[str]) -> None:
    """Re-run this script in a private mount namespace (the tmpfs vanishes with it)."""
    if os.environ.get("FAULTS_REPRO_NS") != "1":
        env = {**os.environ, "FAULTS_REPRO_NS": "1"}
        sys.exit(subprocess.call(["unshare", "-m", sys.executable, __file__, *argv], env=env))


def mount_tmpfs(output: str, size_mb: int) -> Path:
    """A tmpfs of `size_mb` at `<output>-tmpfs` (in this process's mount namespace)."""
    where = Path(output).resolve().parent / f"{Path(output).name}-tmpfs"
    where.mkdir(parents=True, exist_ok=True)
    options = ["-t", "tmpfs", "-o", f"size={size_mb}m"]
    subprocess.run(["mount", *options, "tmpfs", str(where)], check=True)
    return where


def case3(cli: str, output: str, size_mb: int) -> None:
    """The output on a small tmpfs, then the tmpfs grown and the same command."""
    where = mount_tmpfs(output, size_mb)
    out = str(where / "r")
    env = env_for(output)
    run = Run(cli, out, env)
    run.report(f"output on a {size_mb} MB tmpfs", run.wait())
    subprocess.run(["mount", "-o", "remount,size=200m", str(where)], check=True)
    again = Run(cli, out, env)
    again.report("tmpfs grown to 200 MB, the same command again", again.wait())


def case3_fill(cli: str, output: str) -> None:
    """The output's disk filled while the first trial runs, then freed and the same command."""
    where = mount_tmpfs(output, 64)
    out, filler = str(where / "r"), where / "filler"
    env = env_for(output)
    run = Run(cli, out, env)
    while run.proc.poll() is None and not list(Path(out, "study").glob("*/local/chief-0.log")):
        time.sleep(0.05)
    filled = time.monotonic() - run.start
    with open(filler, "wb") as f:  # fill it: write until the tmpfs refuses
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass
    run.report("a 64 MB tmpfs filled once the first trial started", run.wait(), filled)
    filler.unlink()
    again = Run(cli, out, env)
    again.report("the filler removed, the same command again", again.wait())


def main() -> None:
    """Run one case (case 3's in a private mount namespace)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=["case1", "case3", "case3-fill"])
    parser.add_argument("--cli", required=True, help="the hpt-pipeline executable to run")
    parser.add_argument("--output", required=True)
    parser.add_argument("--size-mb", type=int, default=6)
    args = parser.parse_args()
    if args.case == "case1":
        case1(args.cli, args.output)
        return
    namespaced(sys.argv[1:])
    if args.case == "case3":
        case3(args.cli, args.output, args.size_mb)
    else:
        case3_fill(args.cli, args.output)


if __name__ == "__main__":
    main()
