"""Pipeline benchmark (issue 8, item 3): where the wall time of `hpt-pipeline run` goes.

Runs ``hpt-pipeline run`` (the local defaults: 4 trials 2 at a time, 4 epochs,
chief + 1 worker) into a fresh folder, `--runs` times for each image size (32px,
the local default, and 150px, the seeds'), and splits each run's wall time
(process start to exit) into:

* training: the epochs themselves (each trial's and the final job's per-epoch
  ``seconds`` from their model.json, validation included). Summed over trials as
  the issue words it (trials running 2 at a time count twice), and as wall-clock
  time covered by at least one training epoch (each epoch placed at its hypertune
  report's timestamp; the final job's chief alone);
* overhead = total - training, as a share of the total, broken down:
  CLI start-up (process start → first task: Python, kfp and pipeline build),
  each kfp.local task's duration (from pipeline.log), the trial processes'
  start-up and teardown (trial wall - its epochs: interpreter, TensorFlow import,
  strategy and dataset set-up, tracing, export), the study's own time outside
  trials, the final job's non-training time, and the CLI's teardown.

A separate figure, ``python -c 'import tensorflow'`` (median of 3), prices the
TensorFlow import every trial and replica process pays.

Usage: ``python -m benchmarks.bench_pipeline [--quick] [--runs 2] [-- extra run flags]``.
Writes ``benchmarks/results/pipeline.json``.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "pipeline"
CLI = Path(sys.executable).with_name("hpt-pipeline")
_LOG_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) - INFO - (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TASK = re.compile(r"'([^']+)'")
# kfp.local tasks that do almost nothing but build a payload or pick a trial: their
# duration is the per-task overhead (a subprocess, imports, executor I/O).
LIGHT_TASKS = ("trial-job-spec", "select-best-trial", "final-job-spec", "register-locally")


def task_times(log: Path, started: float) -> dict[str, Any]:
    """Pipeline start/end and each task's [start, end], in seconds since `started` (epoch s)."""
    day = datetime.datetime.fromtimestamp(started)
    midnight = day.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    events: dict[str, Any] = {"tasks": {}}
    for raw in log.read_text(errors="replace").splitlines():
        match = _LOG_LINE.match(_ANSI.sub("", raw))
        if not match:
            continue
        h, m, s, ms, text = match.groups()
        at = midnight + int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000
        if at < started - 60:  # the run crossed midnight
            at += 86400
        at -= started
        name = (_TASK.search(text) or [None, ""])[1]
        if text.startswith("Running pipeline"):
            events["pipeline_start"] = at
        elif text.startswith("Executing task"):
            events["tasks"][name] = [at, None]
        elif text.startswith("Task") and "finished with status" in text:
            events["tasks"].setdefault(name, [at, None])[1] = at
        elif text.startswith("Pipeline") and "finished with status" in text:
            events["pipeline_end"] = at
    return events


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by at least one of the intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def epoch_seconds(model_json: Path) -> list[float]:
    """Per-epoch seconds from an exported model's model.json (empty if absent)."""
    if not model_json.is_file():
        return []
    return [e["seconds"] for e in json.loads(model_json.read_text())["history"] if "seconds" in e]


def trial_figures(trial: dict[str, Any], study: Path) -> dict[str, Any]:
    """One trial's wall time, its epochs' seconds, and its epochs as wall-clock intervals."""
    start = _utc_seconds(trial["startTime"])
    end = _utc_seconds(trial.get("endTime") or trial["startTime"])
    seconds = epoch_seconds(study / trial["id"] / "model" / "model.json")
    reports = {}
    metric_file = Path(trial.get("local", {}).get("metricFile", ""))
    if metric_file.is_file():
        for line in metric_file.read_text().splitlines():
            with_step = json.loads(line)
            reports[int(float(with_step["global_step"]))] = float(with_step["timestamp"])
    intervals = [
        (reports[i + 1] - s, reports[i + 1]) for i, s in enumerate(seconds) if i + 1 in reports
    ]
    return {
        "id": trial["id"],
        "wall": end - start,
        "training": sum(seconds),
        "epochs": seconds,
        # Process start → first epoch (interpreter, imports, set-up), last epoch → exit (export).
        "before_epochs": intervals[0][0] - start if intervals else None,
        "after_epochs": end - intervals[-1][1] if intervals else None,
        "start": start,
        "intervals": intervals,
    }


def _median_or_none(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return common.median(known) if known else None


def _utc_seconds(value: str) -> float:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def analyse(output: Path, started: float, total: float) -> dict[str, Any]:
    """Split one run's wall time into training and overhead (see the module docstring)."""
    events = task_times(output / "pipeline.log", started)
    tasks = {name: end - begin for name, (begin, end) in events["tasks"].items() if end is not None}
    study = output / "study"
    trials = [trial_figures(t, study) for t in json.loads((study / "trials.json").read_text())]
    final_model = max(
        (output / "artifacts").glob("*/final-job-spec/job_dir/model/model.json"),
        key=lambda p: p.stat().st_mtime,
    )
    final = sum(epoch_seconds(final_model))
    summed = sum(t["training"] for t in trials) + final
    covered = union_seconds(i for t in trials for i in t["intervals"]) + final
    tune_span = [
        (t["start"] - started, t["start"] - started + t["wall"]) for t in trials
    ]  # trial processes, relative to the run's start
    overhead = {
        "cli_startup": events.get("pipeline_start", 0.0),
        "between_tasks": events.get("pipeline_end", total)
        - events.get("pipeline_start", 0.0)
        - sum(tasks.values()),
        "cli_teardown": total - events.get("pipeline_end", total),
        "tasks": {name: round(seconds, 3) for name, seconds in tasks.items()},
        "light_task_median": common.median(tasks[n] for n in LIGHT_TASKS if n in tasks),
        "trial_process_outside_epochs": sum(t["wall"] - t["training"] for t in trials),
        "trial_process_outside_epochs_median": common.median(
            t["wall"] - t["training"] for t in trials
        ),
        "trial_before_epochs_median": _median_or_none(t["before_epochs"] for t in trials),
        "trial_after_epochs_median": _median_or_none(t["after_epochs"] for t in trials),
        "study_outside_trials": tasks.get("tune-locally", 0.0) - union_seconds(tune_span),
        "final_job_outside_epochs": tasks.get("train-locally", 0.0) - final,
        "prepare_dataset": tasks.get("prepare-dataset"),
        "evaluate_model": tasks.get("evaluate-model"),
    }
    return {
        "total_seconds": round(total, 2),
        "overhead_seconds": round(total - covered, 2),
        "training_seconds_summed": round(summed, 2),
        "training_seconds_wall": round(covered, 2),
        "overhead_fraction_summed": round(1 - summed / total, 3),
        "overhead_fraction_wall": round(1 - covered / total, 3),
        "overhead": _rounded(overhead),
        "trials": [
            {k: _rounded(t[k]) for k in ("id", "wall", "training", "before_epochs", "after_epochs")}
            | {"epochs": _rounded(t["epochs"])}
            for t in trials
        ],
        "final_job_epochs": _rounded(epoch_seconds(final_model)),
    }


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def run_once(run_args: list[str]) -> dict[str, Any]:
    """One `hpt-pipeline run` into a fresh folder, analysed."""
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        output = Path(tmp, "run")
        argv = [str(CLI), "run", f"--output={output}", f"--registry={tmp}/registry", *run_args]
        started = time.time()
        total, _ = common.run_command(argv, env=common.bench_env(), timeout=3600)
        return analyse(output, started, total)


def tensorflow_import_seconds(repeats: int) -> float:
    """Median wall time of a Python process that only imports TensorFlow."""
    argv = [sys.executable, "-c", "import tensorflow"]
    return common.median(
        common.run_command(argv, env=common.bench_env())[0] for _ in range(repeats)
    )


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over runs of the headline figures and of each overhead part."""

    def med(get: Any) -> float:
        return round(common.median(get(r) for r in runs), 3)

    parts = [k for k, v in runs[0]["overhead"].items() if isinstance(v, int | float)]
    return {
        "total_seconds": med(lambda r: r["total_seconds"]),
        "overhead_seconds": med(lambda r: r["overhead_seconds"]),
        "training_seconds_summed": med(lambda r: r["training_seconds_summed"]),
        "training_seconds_wall": med(lambda r: r["training_seconds_wall"]),
        "overhead_fraction_summed": med(lambda r: r["overhead_fraction_summed"]),
        "overhead_fraction_wall": med(lambda r: r["overhead_fraction_wall"]),
        "overhead": {p: med(lambda r, p=p: r["overhead"][p] or 0.0) for p in parts},
        "tasks": {
            name: med(lambda r, name=name: r["overhead"]["tasks"].get(name, 0.0))
            for name in runs[0]["overhead"]["tasks"]
        },
    }


def headline(configs: dict[str, Any], tf_import: float, trials: int) -> list[list[str]]:
    """README rows: the overhead share at each image size, then the breakdown of the first."""
    rows = []
    for size, summary in configs.items():
        rows += [
            [
                f"pipeline run {size}px: total s / training s (summed / wall-clock)",
                f"{summary['total_seconds']:.1f} / {summary['training_seconds_summed']:.1f} / "
                f"{summary['training_seconds_wall']:.1f}",
            ],
            [
                f"pipeline run {size}px: overhead share (summed / wall-clock)",
                f"{summary['overhead_fraction_summed']:.0%} / "
                f"{summary['overhead_fraction_wall']:.0%}",
            ],
        ]
    size, summary = next(iter(configs.items()))
    o = summary["overhead"]
    return rows + [
        [
            f"overhead {size}px: trial processes outside epochs ({trials} trials, s)",
            f"{o['trial_process_outside_epochs']:.1f} "
            f"({o['trial_process_outside_epochs_median']:.1f} each)",
        ],
        [
            f"overhead {size}px per trial: before first epoch / after last epoch (s)",
            f"{common.fmt(o.get('trial_before_epochs_median'), '.1f')} / "
            f"{common.fmt(o.get('trial_after_epochs_median'), '.1f')}",
        ],
        ["overhead: TensorFlow import per process (s)", f"{tf_import:.1f}"],
        [
            f"overhead {size}px: CLI start-up / kfp.local light task / final job non-epoch (s)",
            f"{o['cli_startup']:.1f} / {o['light_task_median']:.1f} / "
            f"{o['final_job_outside_epochs']:.1f}",
        ],
        [
            f"overhead {size}px: prepare dataset / evaluate (s)",
            f"{o['prepare_dataset']:.1f} / {o['evaluate_model']:.1f}",
        ],
    ]


def main(argv: list[str] | None = None) -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=2, help="runs per image size")
    parser.add_argument("--max-trials", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument(
        "--image-sizes",
        type=int,
        nargs="+",
        default=[32, 150],
        help="one configuration each (32: the local default; 150: the seeds')",
    )
    parser.add_argument("run_args", nargs="*", help="more `hpt-pipeline run` flags (after --)")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.max_trials, args.epochs, args.image_sizes = 1, 2, 2, [32]
    configs: dict[str, Any] = {}
    for size in args.image_sizes:
        run_args = [
            f"--max-trials={args.max_trials}",
            f"--epochs={args.epochs}",
            f"--image-size={size}",
            *args.run_args,
        ]
        runs = []
        for index in range(args.runs):
            print(f"hpt-pipeline run {' '.join(run_args)} ({index + 1}/{args.runs})", flush=True)
            runs.append(run_once(run_args))
        configs[str(size)] = {"run_args": run_args, **summarize(runs), "runs": runs}
    tf_import = tensorflow_import_seconds(1 if args.quick else 3)
    figures = {
        "settings": {"runs": args.runs, "image_sizes": args.image_sizes},
        "configs": configs,
        "tensorflow_import_seconds": round(tf_import, 2),
    }
    common.finish(NAME, figures, headline(configs, tf_import, args.max_trials), args)


if __name__ == "__main__":
    main()
