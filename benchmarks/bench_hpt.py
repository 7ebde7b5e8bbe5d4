"""HPT benchmark (issue 8, item 4): best metric after N trials, TPE vs random search.

The sampler is what the local study uses (`pipelines.study.sampler.make_sampler`: TPE
for ``ALGORITHM_UNSPECIFIED``, random for ``RANDOM_SEARCH``), over the seeds' search
space, for several sampler seeds:

* stand-in objective, direct: Optuna ask/tell with `sampler.suggest` on
  `tests.fake_trainer.objective` (what the fake trainer reports at convergence;
  1.0 at lr=0.01, momentum=0.9, 128 units), one trial at a time, for each budget N;
* stand-in objective through the payload path: `run_study` running
  `tests/fake_trainer.py` trials, 2 at a time as the local pipeline runs them;
* the real trainer with a small budget: `run_study` running `trainer.task` on the
  sample prepared at 32px (`--quick` skips it).

Figures: per algorithm and N, the median (and min/max) over seeds of the best
metric, and how often TPE beat random on the same seed (ties count half).

Usage: ``python -m benchmarks.bench_hpt [--quick]``. Writes ``benchmarks/results/hpt.json``.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "hpt"
ALGORITHMS = {"tpe": "ALGORITHM_UNSPECIFIED", "random": "RANDOM_SEARCH"}
FAKE_TRAINER = common.ROOT / "tests" / "fake_trainer.py"


def stand_in_best(algorithm: str, seed: int, trials: int) -> float:
    """Best stand-in objective after `trials` sequential trials of the local study's sampler."""
    import optuna

    from pipelines.study import sampler
    from pipelines.study.search_space import default_search_space
    from tests.fake_trainer import objective

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = default_search_space()
    study = optuna.create_study(
        direction="maximize", sampler=sampler.make_sampler(ALGORITHMS[algorithm], seed, trials)
    )
    for _ in range(trials):
        trial = study.ask()
        study.tell(trial, objective(sampler.suggest(trial, space.parameters)))
    return float(study.best_value)


def study_best(
    algorithm: str,
    seed: int,
    trials: int,
    *,
    command: list[str],
    args: list[str],
    parallel: int,
    base: Path,
) -> float | None:
    """Best final metric of a `run_study` over the seeds' space (None if no trial succeeded)."""
    from pipelines.jobs.worker_pools import trial_worker_pool_specs
    from pipelines.study import measurements
    from pipelines.study import trials as trials_lib
    from pipelines.study.search_space import default_search_space
    from pipelines.targets.local import local_study

    space = default_search_space()
    results = local_study.run_study(
        worker_pool_specs=trial_worker_pool_specs(image_uri="local", command=command, args=args),
        study_spec_metrics=space.to_study_spec_metrics(),
        study_spec_parameters=space.to_study_spec_parameters(),
        max_trial_count=trials,
        parallel_trial_count=parallel,
        max_failed_trial_count=trials,
        study_spec_algorithm=ALGORITHMS[algorithm],
        base_output_directory=str(base),
        seed=seed,
        show_progress=False,
        cwd=str(common.ROOT),
    )
    best = measurements.best_trial(results, space.metrics[0])
    return trials_lib.final_metric(best, space.metrics[0].metric_id) if best else None


def compare(best: Callable[[str, int], float | None], seeds: list[int]) -> dict[str, Any]:
    """Best metric per algorithm and seed; medians and TPE's win rate over random."""
    values = {a: [best(a, seed) for seed in seeds] for a in ALGORITHMS}
    scores = [
        1.0 if t > r else 0.5 if t == r else 0.0
        for t, r in zip(values["tpe"], values["random"], strict=True)
        if t is not None and r is not None
    ]
    out: dict[str, Any] = {}
    for algorithm, found in values.items():
        ok = [v for v in found if v is not None]
        out[algorithm] = {
            "median": round(common.median(ok), 4) if ok else None,
            "min": round(min(ok), 4) if ok else None,
            "max": round(max(ok), 4) if ok else None,
            "per_seed": [None if v is None else round(v, 4) for v in found],
        }
    out["tpe_win_rate"] = round(sum(scores) / len(scores), 2) if scores else None
    return out


def real_data(workdir: Path, image_size: int) -> str:
    """The sample prepared for the real-trainer study."""
    from dataprep.prepare import prepare_dataset

    prepare_dataset("sample", str(workdir / "prepared"), image_size=image_size)
    return str(workdir / "prepared")


def headline(figures: dict[str, Any]) -> list[list[str]]:
    """README rows: median best (over seeds) TPE vs random, and TPE's win rate."""

    def row(label: str, result: dict[str, Any]) -> list[str]:
        return [
            f"{label}: best median TPE / random (TPE wins)",
            f"{common.fmt(result['tpe']['median'], '.3f')} / "
            f"{common.fmt(result['random']['median'], '.3f')} "
            f"({common.fmt(result['tpe_win_rate'], '.0%')})",
        ]

    seeds = figures["settings"]["seeds"]
    rows = [
        row(f"HPT stand-in, {n} trials, {seeds} seeds", result)
        for n, result in figures["stand_in"].items()
    ]
    for key, label in (("stand_in_study", "HPT stand-in via run_study"), ("real", "HPT real")):
        if figures.get(key):
            settings = figures[key]["settings"]
            rows.append(
                row(
                    f"{label}, {settings['trials']} trials, {settings['seeds']} seeds", figures[key]
                )
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--seeds", type=int, default=20, help="sampler seeds (stand-in, direct)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--study-trials", type=int, default=12, help="run_study, fake trainer")
    parser.add_argument("--study-seeds", type=int, default=3)
    parser.add_argument("--real-trials", type=int, default=8)
    parser.add_argument("--real-seeds", type=int, default=3)
    parser.add_argument("--real-epochs", type=int, default=3)
    parser.add_argument("--real-image-size", type=int, default=32)
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.budgets, args.study_trials, args.study_seeds = 3, [4, 8], 4, 1
        args.real_seeds = 0
    figures: dict[str, Any] = {
        "settings": {"seeds": args.seeds, "budgets": args.budgets},
        "stand_in": {
            str(n): compare(lambda a, s, n=n: stand_in_best(a, s, n), list(range(args.seeds)))
            for n in args.budgets
        },
    }
    with tempfile.TemporaryDirectory(prefix="bench-hpt-") as tmp:
        if args.study_seeds:
            figures["stand_in_study"] = study_figures(
                args.study_trials,
                args.study_seeds,
                Path(tmp, "fake"),
                command=[sys.executable, str(FAKE_TRAINER)],
                args=["--epochs=2"],
            )
        if args.real_seeds:
            data = real_data(Path(tmp), args.real_image_size)
            figures["real"] = study_figures(
                args.real_trials,
                args.real_seeds,
                Path(tmp, "real"),
                command=["python", "-m", "trainer.task"],
                args=[f"--data={data}", f"--epochs={args.real_epochs}", "--batch_size=32"],
            )
            figures["real"]["settings"]["image_size"] = args.real_image_size
    common.finish(NAME, figures, headline(figures), args)


def study_figures(
    trials: int, seeds: int, base: Path, *, command: list[str], args: list[str]
) -> dict[str, Any]:
    """`compare` over `run_study` runs, 2 trials at a time like the local pipeline."""

    def best(algorithm: str, seed: int) -> float | None:
        print(f"run_study {command[-1]}: {algorithm} seed {seed}, {trials} trials", flush=True)
        return study_best(
            algorithm,
            seed,
            trials,
            command=command,
            args=args,
            parallel=2,
            base=base / f"{algorithm}-{seed}",
        )

    result = compare(best, list(range(seeds)))
    result["settings"] = {"trials": trials, "seeds": seeds, "parallel": 2, "args": args}
    return result


if __name__ == "__main__":
    main()
