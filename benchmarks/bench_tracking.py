"""Tracking benchmark (issue 55): what MLflow tracking adds to `make run`.

Runs ``hpt-pipeline run`` (the local defaults, as `make run`) with ``--tracking off`` and
with the default (``auto``: the run folder's SQLite store), alternately so that both see
the same load, `--runs` times each, each into a fresh folder. Reports each mode's median
wall time and CPU time (the run's whole process tree: user + system), their difference and
ratio, and the load average around each run: on a shared host the CPU seconds are the
figure to trust, the wall seconds only on a quiet one.

Usage: ``python -m benchmarks.bench_tracking [--quick] [--runs 3] [-- extra run flags]``.
Writes ``benchmarks/results/tracking.json``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "tracking"
CLI = Path(sys.executable).with_name("hpt-pipeline")
MODES = {"off": ["--tracking", "off"], "on": []}  # on: the default, auto with mlflow.db


def one_run(folder: Path, mode: str, extra: list[str]) -> dict[str, Any]:
    """One `hpt-pipeline run` into `folder`: wall and CPU seconds, load before and after."""
    argv = [str(CLI), "run", f"--output={folder}/out", f"--registry={folder}/registry"]
    load = os.getloadavg()[0]
    cpu = common.children_cpu_seconds()
    wall, _ = common.run_command([*argv, *MODES[mode], *extra], env=common.bench_env())
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(common.children_cpu_seconds() - cpu, 2),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "tracked": (folder / "out" / "mlflow.db").is_file(),
    }


def main(argv: list[str] | None = None) -> None:
    """Time `hpt-pipeline run` with tracking off and on, alternately."""
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = common.base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=3, help="runs per mode")
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.quick:
        args.runs, extra = 1, ["--max-trials", "2", "--epochs", "1", *extra]
    figures: dict[str, Any] = {"runs": {mode: [] for mode in MODES}, "extra_args": extra}
    with tempfile.TemporaryDirectory(prefix="bench-tracking-") as tmp:
        for index in range(args.runs):
            for mode in MODES:
                folder = Path(tmp) / f"{mode}-{index}"
                figures["runs"][mode].append(one_run(folder, mode, extra))
                print(mode, figures["runs"][mode][-1], flush=True)
    for mode, runs in figures["runs"].items():
        figures[mode] = {k: common.median(r[k] for r in runs) for k in ("wall_s", "cpu_s")}
    off, on = figures["off"], figures["on"]
    headline = [
        [
            "make run, tracking off: wall / CPU (s, median)",
            f"{off['wall_s']:.1f} / {off['cpu_s']:.1f}",
        ],
        [
            "make run, tracking on: wall / CPU (s, median)",
            f"{on['wall_s']:.1f} / {on['cpu_s']:.1f}",
        ],
        [
            "tracking adds: wall / CPU (s), wall ratio",
            f"{on['wall_s'] - off['wall_s']:+.1f} / {on['cpu_s'] - off['cpu_s']:+.1f}, "
            f"{common.fmt(common.ratio(on['wall_s'], off['wall_s']), '.2f')}x",
        ],
    ]
    common.finish(NAME, figures, headline, args)


if __name__ == "__main__":
    main()
