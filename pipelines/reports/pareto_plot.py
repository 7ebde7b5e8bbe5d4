"""The trial report's Pareto plot: the primary objective against each other one.

The front, the constraint lines and the pick come from the one selection rule
(`pipelines.study.selection.select_best_trial`), so the star is the trial that is retrained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.reports import plotting
from pipelines.study import trials as trials_lib
from pipelines.study.objectives import Constraint
from pipelines.study.search_space import Metric
from pipelines.study.selection import BestTrial, SelectionError, select_best_trial


def pick(
    trials: Sequence[Mapping[str, Any]],
    objectives: Sequence[Metric],
    constraints: Sequence[Constraint],
) -> BestTrial | None:
    """The selection's pick with its front; None when no trial qualifies (the plot shows why)."""
    try:
        return select_best_trial(trials, objectives=objectives, constraints=constraints)
    except SelectionError:
        return None


def _panel(
    ax: Any,
    axes: tuple[Metric, Metric],
    points: Mapping[str, Mapping[str, float]],
    front: set[str],
    constraints: Sequence[Constraint],
    best: BestTrial | None,
) -> None:
    """One panel: `axes` (x, y) for every trial with both, the front, the constraints, the pick."""
    other, primary = axes
    shown = {i: m for i, m in points.items() if {primary.metric_id, other.metric_id} <= set(m)}
    xs = [m[other.metric_id] for m in shown.values()]
    ys = [m[primary.metric_id] for m in shown.values()]
    ax.scatter(xs, ys, color="lightgray", edgecolor="gray", label="trials", zorder=2)
    on_front = sorted(
        (m[other.metric_id], m[primary.metric_id]) for i, m in shown.items() if i in front
    )
    if on_front:
        fx, fy = zip(*on_front, strict=True)
        ax.plot(fx, fy, "o-", color="tab:blue", label="Pareto front (meets constraints)", zorder=3)
    for trial_id, m in shown.items():
        ax.annotate(
            trial_id,
            (m[other.metric_id], m[primary.metric_id]),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    for c in constraints:
        line = ax.axvline if c.metric_id == other.metric_id else ax.axhline
        if c.metric_id in (other.metric_id, primary.metric_id):
            line(c.bound, color="tab:red", linestyle="--", label=f"constraint {c}")
    if best and best.trial_id in shown:
        m = shown[best.trial_id]
        ax.plot(
            m[other.metric_id],
            m[primary.metric_id],
            "*",
            color="tab:orange",
            markersize=16,
            label=f"pick: trial {best.trial_id}",
            zorder=4,
        )
    ax.set_xlabel(f"{other.metric_id} ({other.goal})")
    ax.set_ylabel(f"{primary.metric_id} ({primary.goal})")
    ax.legend(fontsize=7)


def plot_pareto(
    trials: Sequence[Mapping[str, Any]],
    objectives: Sequence[Metric],
    constraints: Sequence[Constraint],
    path: Path,
) -> Path:
    """One panel per other objective (x) against the primary (y).

    Every succeeded trial, the Pareto front joined in order, the constraint lines dashed,
    the pick starred.
    """
    plt = plotting.pyplot()
    primary, others = objectives[0], list(objectives[1:])
    best = pick(trials, objectives, constraints)
    front = set(best.front) if best else set()
    points = {
        str(t["id"]): trials_lib.measurement_metrics(t.get("finalMeasurement"))
        for t in trials
        if trials_lib.trial_outcome(t) == trials_lib.SUCCEEDED  # not a diverged one's 1e9
    }
    fig, axes = plt.subplots(1, len(others), figsize=(5.5 * len(others), 4.2), squeeze=False)
    for ax, other in zip(axes[0], others, strict=True):
        _panel(ax, (other, primary), points, front, constraints, best)
    title = best.reason if best else "no trial meets every constraint"
    fig.suptitle(f"Pareto front: {title}", fontsize=9)
    fig.savefig(path, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
