"""Best-trial selection over trials in Vertex's `Trial` JSON schema (no TensorFlow, no network)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipelines.study import trials as trials_lib

# Parameters whose smaller values make a cheaper model; ties go to the cheaper trial.
DEFAULT_COST_PARAMETERS = ("num_units", "epochs")
_TIE_DIGITS = 6


class SelectionError(ValueError):
    """No usable trial, or the best one misses the threshold; one-line message."""


@dataclasses.dataclass(frozen=True)
class BestTrial:
    """The chosen trial."""

    trial_id: str
    parameters: dict[str, Any]
    metric: float
    considered: int


def _cost(params: Mapping[str, Any], cost_parameters: Sequence[str]) -> tuple[float, ...]:
    return tuple(
        float(params[name]) if isinstance(params.get(name), int | float) else math.inf
        for name in cost_parameters
    )


def rank_key(
    trial_id: str,
    value: float,
    params: Mapping[str, Any],
    *,
    goal: str,
    cost_parameters: Sequence[str] = DEFAULT_COST_PARAMETERS,
) -> tuple[Any, ...]:
    """The selection order as a sort key (smallest first): every ranking of trials uses it.

    The metric (rounded to 6 digits, so near-equal values tie), then the cheaper
    configuration (smaller `cost_parameters`), then the earlier trial.
    """
    sign = -1.0 if goal == "maximize" else 1.0
    tid = str(trial_id)
    return (
        sign * round(value, _TIE_DIGITS),
        _cost(params, cost_parameters),
        int(tid) if tid.isdigit() else math.inf,
        tid,
    )


def select_best_trial(
    trials: Iterable[Mapping[str, Any]],
    *,
    metric_id: str,
    goal: str = "maximize",
    threshold: float | None = None,
    cost_parameters: Sequence[str] = DEFAULT_COST_PARAMETERS,
) -> BestTrial:
    """Pick the best succeeded trial.

    Order: the metric (rounded to 6 digits, so near-equal values tie), then the cheaper
    configuration (smaller `cost_parameters`), then the earlier trial.

    Raises:
        SelectionError: No succeeded trial reports the metric, or the best one
            does not reach `threshold` (>= when maximizing, <= when minimizing).
    """
    if goal not in ("maximize", "minimize"):
        raise SelectionError(f"goal={goal!r}: expected maximize or minimize")
    candidates = []
    for trial in trials:
        metrics = trials_lib.measurement_metrics(trial.get("finalMeasurement"))
        succeeded = trials_lib.trial_state(trial) == trials_lib.TrialState.SUCCEEDED
        if not succeeded or metric_id not in metrics:
            continue
        params = trials_lib.trial_parameters(trial)
        key = rank_key(
            trial["id"], metrics[metric_id], params, goal=goal, cost_parameters=cost_parameters
        )
        candidates.append((key, trial, params, metrics[metric_id]))
    if not candidates:
        raise SelectionError(f"no succeeded trial reported the metric {metric_id!r}")
    _, best, params, value = min(candidates, key=lambda c: c[0])
    if threshold is not None:
        met = value >= threshold if goal == "maximize" else value <= threshold
        if not met:
            relation = ">=" if goal == "maximize" else "<="
            raise SelectionError(
                f"best trial {best['id']} has {metric_id}={value:.4f}, missing the threshold "
                f"({relation} {threshold}): stopping before the final training"
            )
    return BestTrial(
        trial_id=str(best["id"]),
        parameters=params,
        metric=value,
        considered=len(candidates),
    )
