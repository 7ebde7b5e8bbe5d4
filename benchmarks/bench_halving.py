"""Successive halving benchmark (issue 53, item 5): what `--scheduler asha` saves over `none`.

Runs ``hpt-pipeline run`` on the bundled digits (``--source sample``) once per scheduler
and seed: the same study (``--max-trials`` configurations drawn by ``RANDOM_SEARCH`` from
the same seed, so both schedulers see the same configurations in the same order, each
trial ``--epochs`` long, two at a time), then the final job, evaluation and registration.
For each run it reads the study's ``trials.json``:

* trial-epochs trained, counted from the trials' measurements (one per epoch reported,
  `pipelines.study.halving.trial_epochs`, as the run's own summary counts them);
* the study's best validation accuracy among trials measured at the top rung (the ones
  selection may pick), and the test accuracy the evaluation step wrote;
* the run's wall time (process start to exit).

Medians over seeds go in the headline, with the ratio of trial-epochs, and the cost on
paper of a 100-trial ResNet50 study at 224 px on Vertex (one T4 per trial) from
``--trial-hour-minutes`` (minutes a full-budget trial takes there: an assumption, stated)
and Vertex's list prices for ``n1-standard-8`` + 1 ``NVIDIA_TESLA_T4`` (on-demand and
spot, us-central1, given on the command line with their source: prices change).

Usage: ``python -m benchmarks.bench_halving [--quick] [--seeds 3] [--trials 27]
[--epochs 9]``. Writes ``benchmarks/results/halving.json``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common
from pipelines.study import halving

NAME = "halving"
CLI = Path(sys.executable).with_name("hpt-pipeline")
SCHEDULERS = ("none", "asha")


def run_once(scheduler: str, seed: int, args: Any, root: Path) -> dict[str, Any]:
    """One `hpt-pipeline run`; its trial-epochs, best top-rung validation, test accuracy, wall."""
    output = root / f"{scheduler}-seed{seed}"
    argv = [
        str(CLI),
        "run",
        "--output",
        str(output),
        "--source",
        "sample",
        "--max-trials",
        str(args.trials),
        "--parallel-trials",
        str(args.parallel),
        "--epochs",
        str(args.epochs),
        "--scheduler",
        scheduler,
        "--algorithm",
        "RANDOM_SEARCH",
        "--seed",
        str(seed),
        "--tracking",
        "off",
    ]
    wall, _ = common.run_command(argv, env=common.bench_env(), timeout=7200)
    trials = json.loads((output / "study" / "trials.json").read_text())
    trials = trials.get("trials", trials) if isinstance(trials, dict) else trials
    top = [t for t in trials if _last_epoch(t) == args.epochs]  # what selection may pick
    best = max((_metric(t, "val_accuracy") for t in top), default=None)
    return {
        "scheduler": scheduler,
        "seed": seed,
        "trials": len(trials),
        "trial_epochs": halving.trial_epochs(trials),
        "top_rung_trials": len(top),
        "best_val_accuracy": best,
        "test_accuracy": _test_accuracy(output),
        "wall_s": wall,
        "configurations": [_params(t) for t in trials],
    }


def _last_epoch(trial: dict[str, Any]) -> int:
    """The last epoch a trial reported (its final measurement is its best one, not its last)."""
    return max((int(m.get("stepCount", 0)) for m in trial.get("measurements", [])), default=0)


def _metric(trial: dict[str, Any], name: str) -> float:
    metrics = (trial.get("finalMeasurement") or {}).get("metrics", [])
    return float(next(m["value"] for m in metrics if m["metricId"] == name))


def _params(trial: dict[str, Any]) -> dict[str, Any]:
    return {p["parameterId"]: p["value"] for p in trial.get("parameters", [])}


def _test_accuracy(output: Path) -> float | None:
    """The evaluation step's test_accuracy (its metrics artifact's metadata), newest run first."""
    found = sorted(output.glob("artifacts/*/evaluate-model/executor_output.json"))
    for path in reversed(found):
        metrics = json.loads(path.read_text())["artifacts"]["metrics"]["artifacts"][0]
        return float(metrics["metadata"]["test_accuracy"])
    return None


def paper_cost(none_epochs: float, asha_epochs: float, args: Any) -> dict[str, float | str]:
    """A 100-trial ResNet50 study on Vertex at the measured share of trial-epochs."""
    share = asha_epochs / none_epochs
    full_hours = 100 * args.trial_hour_minutes / 60
    return {
        "full_budget_trial_hours": full_hours,
        "asha_trial_hours": full_hours * share,
        "on_demand_usd_per_hour": args.on_demand_usd,
        "spot_usd_per_hour": args.spot_usd,
        "none_on_demand_usd": full_hours * args.on_demand_usd,
        "asha_on_demand_usd": full_hours * share * args.on_demand_usd,
        "none_spot_usd": full_hours * args.spot_usd,
        "asha_spot_usd": full_hours * share * args.spot_usd,
        "price_source": args.price_source,
    }


def main(argv: list[str] | None = None) -> Path:
    """Run the schedulers side by side, seed by seed (alternating order), print the table."""
    parser = common.base_parser(__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=27)
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--keep", default=None, help="make the runs' folder here (kept)")
    parser.add_argument("--trial-hour-minutes", type=float, default=60.0)
    parser.add_argument("--on-demand-usd", type=float, default=0.84)
    parser.add_argument("--spot-usd", type=float, default=0.29)
    parser.add_argument(
        "--price-source",
        default=(
            "NOT verified here (no pricing page was reachable): n1-standard-8 $0.4375/h + "
            "T4 $0.4025/h as cloud.google.com/vertex-ai/pricing listed them for us-central1 "
            "training; spot taken as ~65% off. Pass today's prices with --on-demand-usd, "
            "--spot-usd"
        ),
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.trials, args.epochs = 1, 9, 3
    runs: list[dict[str, Any]] = []
    root = Path(tempfile.mkdtemp(prefix="bench-halving-", dir=args.keep))
    try:
        for seed in range(args.seeds):
            order = SCHEDULERS if seed % 2 == 0 else tuple(reversed(SCHEDULERS))
            for scheduler in order:
                runs.append(run_once(scheduler, 100 + seed, args, root))
                print(json.dumps({k: v for k, v in runs[-1].items() if k != "configurations"}))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    by = {s: [r for r in runs if r["scheduler"] == s] for s in SCHEDULERS}
    same = all(
        a["configurations"] == b["configurations"]
        for a, b in zip(by["none"], by["asha"], strict=True)
    )
    med = {
        s: {
            k: common.median(r[k] for r in by[s] if r[k] is not None)
            for k in ("trial_epochs", "wall_s", "best_val_accuracy", "test_accuracy")
            if any(r[k] is not None for r in by[s])
        }
        for s in SCHEDULERS
    }
    share = med["asha"]["trial_epochs"] / med["none"]["trial_epochs"]
    cost = paper_cost(med["none"]["trial_epochs"], med["asha"]["trial_epochs"], args)
    headline = [
        [f"{s}: trial-epochs (median of {args.seeds})", common.fmt(med[s]["trial_epochs"], ".0f")]
        for s in SCHEDULERS
    ]
    headline += [
        ["asha ÷ none trial-epochs", f"{share:.2f}"],
        *[[f"{s}: wall s", common.fmt(med[s]["wall_s"], ".0f")] for s in SCHEDULERS],
        *[
            [f"{s}: best val_accuracy (top rung)", common.fmt(med[s].get("best_val_accuracy"))]
            for s in SCHEDULERS
        ],
        *[[f"{s}: test_accuracy", common.fmt(med[s].get("test_accuracy"))] for s in SCHEDULERS],
        ["same configurations in both studies", str(same)],
        [
            "100-trial ResNet50 on Vertex, T4 (paper)",
            f"none {cost['full_budget_trial_hours']:.0f} h = ${cost['none_on_demand_usd']:.0f} "
            f"on-demand / ${cost['none_spot_usd']:.0f} spot; asha "
            f"{cost['asha_trial_hours']:.0f} h = ${cost['asha_on_demand_usd']:.0f} / "
            f"${cost['asha_spot_usd']:.0f}",
        ],
    ]
    figures = {"settings": vars(args), "runs": runs, "medians": med, "paper": cost}
    return common.finish(NAME, figures, headline, args)


if __name__ == "__main__":
    main()
