"""Best-trial selection over trials in Vertex's `Trial` JSON schema: constraints, front, pick.

No TensorFlow, no network.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pipelines.study import trials as trials_lib
from pipelines.study.halving import pruned_at
from pipelines.study.objectives import Constraint
from pipelines.study.search_space import Metric
from trainer.contract import DIVERGED_FIX

# Parameters whose smaller values make a cheaper model; ties go to the cheaper trial.
DEFAULT_COST_PARAMETERS = ("num_units", "epochs")
_TIE_DIGITS = 6
# A pick whose val_accuracy is within this of 1/num_classes is at chance: it learnt nothing.
CHANCE_MARGIN = 0.02


class SelectionError(ValueError):
    """No usable trial, or the best one misses the threshold; one-line message."""


@dataclasses.dataclass(frozen=True)
class BestTrial:
    """The chosen trial."""

    trial_id: str
    parameters: dict[str, Any]
    metric: float  # the primary objective's value
    considered: int
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)  # every objective's
    front: tuple[str, ...] = ()  # the Pareto front's trial ids, best primary first
    constraints: tuple[str, ...] = ()  # the constraints every front trial meets
    reason: str = ""  # why the pick won, one line


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


def dominates(a: Sequence[float], b: Sequence[float], goals: Sequence[str]) -> bool:
    """Whether objective values `a` are at least as good as `b` everywhere and better once.

    Values are compared rounded to 6 digits, as `rank_key` ties them.
    """
    signs = [1.0 if g == "maximize" else -1.0 for g in goals]
    ra = [s * round(v, _TIE_DIGITS) for s, v in zip(signs, a, strict=True)]
    rb = [s * round(v, _TIE_DIGITS) for s, v in zip(signs, b, strict=True)]
    pairs = list(zip(ra, rb, strict=True))
    return all(x >= y for x, y in pairs) and any(x > y for x, y in pairs)


def pareto_front(values: Mapping[str, Sequence[float]], goals: Sequence[str]) -> list[str]:
    """The ids whose objective values no other id dominates, in the mapping's order."""
    return [
        tid
        for tid, v in values.items()
        if not any(dominates(w, v, goals) for other, w in values.items() if other != tid)
    ]


def select_best_trial(
    trials: Iterable[Mapping[str, Any]],
    *,
    metric_id: str = "",
    goal: str = "maximize",
    objectives: Sequence[Metric] = (),
    constraints: Sequence[Constraint] = (),
    threshold: float | None = None,
    cost_parameters: Sequence[str] = DEFAULT_COST_PARAMETERS,
) -> BestTrial:
    """Pick the best succeeded trial: one rule for one objective or several.

    A diverged trial (`trials.is_diverged`) is never a candidate, whatever its state.
    The succeeded trials that report every objective and meet every constraint; their Pareto
    front over the objectives; the pick is the front's best by `rank_key` on the primary
    (first) objective: its value (rounded to 6 digits, so near-equal values tie), then the
    cheaper configuration (smaller `cost_parameters`), then the earlier trial. Without
    `objectives`, the one objective is `metric_id` with `goal`.

    Raises:
        SelectionError: No succeeded trial reports the objectives (every one diverged: the
            cause and the fix), none meets the
            constraints (naming the closest), or the pick does not reach `threshold` (>= when
            maximizing, <= when minimizing; on the primary objective).
    """
    objectives = _checked_objectives(objectives, metric_id, goal)
    primary = objectives[0]
    names = [o.metric_id for o in objectives]
    scored = _scored(trials, names)

    def key(tid: str) -> tuple[Any, ...]:
        _, params, values = scored[tid]
        return rank_key(
            tid,
            values[primary.metric_id],
            params,
            goal=primary.goal,
            cost_parameters=cost_parameters,
        )

    feasible = [t for t in scored if all(c.met(scored[t][2][c.metric_id]) for c in constraints)]
    if not feasible:
        raise _none_feasible(scored, constraints, key)
    goals = [o.goal for o in objectives]
    front = pareto_front({t: [scored[t][2][n] for n in names] for t in feasible}, goals)
    best_id = min(front, key=key)
    _, params, values = scored[best_id]
    value = values[primary.metric_id]
    if threshold is not None:
        _check_threshold(best_id, primary, value, threshold)
    return BestTrial(
        trial_id=best_id,
        parameters=params,
        metric=value,
        considered=len(scored),
        metrics=values,
        front=tuple(sorted(front, key=key)),
        constraints=tuple(map(str, constraints)),
        reason=_reason(best_id, primary, value, front, feasible, scored, constraints),
    )


def _checked_objectives(
    objectives: Sequence[Metric], metric_id: str, goal: str
) -> tuple[Metric, ...]:
    """`objectives`, or the one `metric_id` with `goal`; each goal maximize or minimize.

    Raises:
        SelectionError: A goal is neither maximize nor minimize.
    """
    checked = tuple(objectives) or (Metric(metric_id, goal),)
    for o in checked:
        if o.goal not in ("maximize", "minimize"):
            raise SelectionError(f"goal={o.goal!r}: expected maximize or minimize")
    return checked


_Scored = dict[str, tuple[Mapping[str, Any], dict[str, Any], dict[str, float]]]


def _scored(trials: Iterable[Mapping[str, Any]], names: Sequence[str]) -> _Scored:
    """Succeeded trials that report every objective: id → (trial, parameters, values).

    Raises:
        SelectionError: None; when trials diverged, how many, the cause and the fix.
    """
    scored: _Scored = {}
    diverged = []
    for trial in trials:
        if trials_lib.is_diverged(trial):
            diverged.append(str(trial["id"]))
            continue
        metrics = trials_lib.measurement_metrics(trial.get("finalMeasurement"))
        succeeded = trials_lib.trial_state(trial) == trials_lib.TrialState.SUCCEEDED
        succeeded = succeeded and pruned_at(trial) is None  # measured at the top rung only
        if succeeded and all(n in metrics for n in names):
            values = {n: metrics[n] for n in names}
            scored[str(trial["id"])] = (trial, trials_lib.trial_parameters(trial), values)
    if not scored and diverged:
        raise SelectionError(
            f"no usable trial: {len(diverged)} diverged (trial(s) {', '.join(diverged)}: a loss "
            f"not finite or exploded) and none succeeded; stopping before the final training: "
            f"{DIVERGED_FIX}"
        )
    if not scored:
        raise SelectionError(f"no succeeded trial reported the metric {'/'.join(names)!r}")
    return scored


def chance_level(accuracy: Any, classes: int, margin: float = 0.0) -> float | None:
    """Chance (1 / `classes`) when `accuracy` is at most `margin` above it; else None.

    None too when the accuracy is not a number or there are fewer than 2 classes.
    """
    if not isinstance(accuracy, int | float) or classes < 2:
        return None
    chance = 1.0 / classes
    return chance if accuracy <= chance + margin else None


def chance_note(
    trials: Iterable[Mapping[str, Any]], trial_id: str, dataset: Mapping[str, Any]
) -> str:
    """One line when the picked trial's val_accuracy is at chance (~1/num_classes), else ''.

    A study can pick a trial that learnt nothing (every trial guessing); it goes on, said.
    `dataset`: the prepared dataset's metadata (its `num_classes`).
    """
    trial = next(t for t in trials if str(t.get("id")) == str(trial_id))
    num_classes = int(dataset.get("num_classes") or 0)
    accuracy = trials_lib.final_metric(trial, "val_accuracy")
    chance = chance_level(accuracy, num_classes, CHANCE_MARGIN)
    if chance is None:
        return ""
    return (
        f"at chance: the best trial {trial.get('id')} has val_accuracy={accuracy:.4g}, about "
        f"1/{num_classes}={chance:.3g} (a guess): the study learnt nothing usable; check the "
        "labels, the weights and the search space's ranges"
    )


def _none_feasible(
    scored: _Scored, constraints: Sequence[Constraint], key: Callable[[str], Any]
) -> SelectionError:
    """The refusal when no trial meets the constraints, naming the closest and what it missed."""
    closest = min(scored, key=lambda t: (_shortfall(scored[t][2], constraints), key(t)))
    missed = ", ".join(
        f"{c.metric_id}={scored[closest][2][c.metric_id]:.4g} (needs {c.op}{c.bound:g})"
        for c in constraints
        if not c.met(scored[closest][2][c.metric_id])
    )
    return SelectionError(
        f"no trial meets {', '.join(map(str, constraints))}: the closest is trial "
        f"{closest} with {missed}; stopping before the final training"
    )


def _check_threshold(best_id: str, primary: Metric, value: float, threshold: float) -> None:
    """Refuse a pick that misses `threshold` on the primary objective (in its goal's sense)."""
    met = value >= threshold if primary.goal == "maximize" else value <= threshold
    if not met:
        relation = ">=" if primary.goal == "maximize" else "<="
        raise SelectionError(
            f"best trial {best_id} has {primary.metric_id}={value:.4f}, missing the "
            f"threshold ({relation} {threshold}): stopping before the final training"
        )


def _shortfall(values: Mapping[str, float], constraints: Sequence[Constraint]) -> float:
    return sum(c.shortfall(values[c.metric_id]) for c in constraints)


def _reason(
    best_id: str,
    primary: Metric,
    value: float,
    front: Sequence[str],
    feasible: Sequence[str],
    scored: Mapping[str, Any],
    constraints: Sequence[Constraint],
) -> str:
    """Why the pick won, in one line."""
    best = "highest" if primary.goal == "maximize" else "lowest"
    why = f"trial {best_id}: the {best} {primary.metric_id} ({value:.4g})"
    why += f" on the Pareto front of {len(front)} trial(s)"
    if constraints:
        why += (
            f" among the {len(feasible)} of {len(scored)} meeting "
            f"{', '.join(map(str, constraints))}"
        )
    return why
