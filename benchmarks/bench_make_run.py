"""`make run`'s time, per step, for two checkouts side by side (issues 52 and 55).

Runs ``hpt-pipeline run`` with the local defaults (as `make run`) once per code tree per
round, alternating the trees so that both see the same load, each into a fresh folder. A
tree is a checkout put first on ``PYTHONPATH`` (its steps, forked or started by kfp.local,
inherit it), so one venv runs both. Reports per run: the wall, the CPU seconds of the whole
process tree (user + system: on a shared host the figure to trust), the time before and
after the kfp.local pipeline, each task's wall (from `pipeline.log`), the load average
around it and the test accuracy the summary printed.

Usage: ``python -m benchmarks.bench_make_run [--rounds 2] LABEL=PATH [LABEL=PATH ...]
[-- extra run flags]``. Writes ``benchmarks/results/make_run.json``.
"""

from __future__ import annotations

import datetime
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "make_run"
CLI = Path(sys.executable).with_name("hpt-pipeline")
_STAMP = r"^(\d\d:\d\d:\d\d\.\d+) - INFO - "
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def step_walls(log: Path, day: datetime.date) -> tuple[dict[str, float], float, float]:
    """Each task's wall from `pipeline.log`, and the pipeline's start and end (epoch s)."""
    begun: dict[str, float] = {}
    walls: dict[str, float] = {}
    bounds = [0.0, 0.0]
    for raw in log.read_text(errors="replace").splitlines():
        line = _ANSI.sub("", raw)
        if not (stamp := re.match(_STAMP, line)):
            continue
        clock = datetime.datetime.combine(
            day, datetime.datetime.strptime(stamp[1], "%H:%M:%S.%f").time()
        ).timestamp()
        rest = line[stamp.end() :]
        if task := re.match(r"Executing task '([\w-]+)'", rest):
            begun[task[1]] = clock
        elif (task := re.match(r"Task '([\w-]+)' finished", rest)) and task[1] in begun:
            walls[task[1]] = round(clock - begun[task[1]], 2)
        elif rest.startswith("Running pipeline"):
            bounds[0] = clock
        elif rest.startswith("Pipeline '"):
            bounds[1] = clock
    return walls, bounds[0], bounds[1]


def one_run(folder: Path, tree: str, extra: list[str]) -> dict[str, Any]:
    """One `hpt-pipeline run` of `tree` into `folder`: wall, CPU, per-step walls, accuracy."""
    argv = [str(CLI), "run", f"--output={folder}/out", f"--registry={folder}/registry", *extra]
    load = os.getloadavg()[0]
    cpu, started = common.children_cpu_seconds(), time.time()
    _, done = common.run_command(argv, env=common.bench_env(PYTHONPATH=tree), cwd=Path(tree))
    ended = time.time()
    walls, first, last = step_walls(folder / "out" / "pipeline.log", datetime.date.today())
    accuracy = re.findall(r"test_accuracy\D*([0-9.]+)", done.stdout)
    return {
        "wall_s": round(ended - started, 2),
        "cpu_s": round(common.children_cpu_seconds() - cpu, 2),
        "before_pipeline_s": round(first - started, 2),
        "after_pipeline_s": round(ended - last, 2),
        "steps_s": walls,
        "load": [round(load, 1), round(os.getloadavg()[0], 1)],
        "test_accuracy": accuracy[0] if accuracy else None,
    }


def main(argv: list[str] | None = None) -> None:
    """Time `make run` for each labelled tree, alternating."""
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = common.base_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=2, help="runs per tree")
    parser.add_argument("trees", nargs="+", help="LABEL=PATH of a checkout")
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.quick:
        args.rounds, extra = 1, ["--max-trials", "2", "--epochs", "1", *extra]
    trees = dict(tree.split("=", 1) for tree in args.trees)
    figures: dict[str, Any] = {"runs": {label: [] for label in trees}, "extra_args": extra}
    with tempfile.TemporaryDirectory(prefix="bench-make-run-") as tmp:
        for index in range(args.rounds):
            for label, path in trees.items():
                result = one_run(Path(tmp) / f"{label}-{index}", path, extra)
                figures["runs"][label].append(result)
                print(label, result, flush=True)
    headline = []
    for label, runs in figures["runs"].items():
        figures[label] = {k: common.median(r[k] for r in runs) for k in ("wall_s", "cpu_s")}
        headline.append(
            [
                f"{label}: wall / CPU (s, median of {len(runs)})",
                f"{figures[label]['wall_s']:.1f} / {figures[label]['cpu_s']:.1f}",
            ]
        )
    common.finish(NAME, figures, headline, args)


if __name__ == "__main__":
    main()
