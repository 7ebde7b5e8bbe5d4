"""A study's objectives and constraints, read from settings text and checked before anything runs.

Objectives are metric names, the first one primary; each name's goal comes from the trainer's
one table (`trainer.contract.METRIC_GOALS`), or from a `name:max|min` suffix for a team's own
metric. A constraint (`latency_ms<=20`) bounds one objective; a trial is picked only when it
meets every constraint (`pipelines.study.selection`).
"""

from __future__ import annotations

import dataclasses
import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pipelines.study.search_space import Metric
from trainer.contract import METRIC_GOALS, METRIC_TAGS, check_goal, retired_tag

SUFFIX_GOALS = {"max": "maximize", "min": "minimize"}
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_CONSTRAINT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(<=|>=|<|>)\s*(\S+)\s*$")


class ObjectiveError(ValueError):
    """A bad objective or constraint; one-line message naming it and what is expected."""


def split_items(raw: Any) -> tuple[str, ...]:
    """A list setting from YAML (a list) or a flag/env value (comma-separated text)."""
    items = str(raw).split(",") if isinstance(raw, str) else [str(i) for i in raw]
    return tuple(i.strip() for i in items if i.strip())


def parse_objective(text: str) -> Metric:
    """`val_loss` (goal from the table) or `my_metric:max` (a team's own metric) as a Metric.

    Raises:
        ObjectiveError: Unknown name without a goal, a bad suffix, or a goal the table contradicts.
    """
    name, sep, suffix = text.strip().partition(":")
    if refusal := retired_tag(name, "objectives"):
        raise ObjectiveError(refusal)
    if not _NAME.match(name):
        raise ObjectiveError(f"objectives={text}: expected a metric name, or name:max|min")
    if not sep:
        if name not in METRIC_GOALS:
            raise ObjectiveError(
                f"objectives={name}: expected one of {', '.join(METRIC_TAGS)}, "
                f"or {name}:max|min for a team's own metric"
            )
        return Metric(name, METRIC_GOALS[name])
    if suffix not in SUFFIX_GOALS:
        raise ObjectiveError(f"objectives={text}: expected {name}:max or {name}:min")
    goal = SUFFIX_GOALS[suffix]
    if name in METRIC_GOALS:
        try:
            check_goal(name, goal)
        except ValueError as err:
            raise ObjectiveError(f"objectives={text}: {err}") from None
    return Metric(name, goal)


def parse_objectives(items: Iterable[str]) -> tuple[Metric, ...]:
    """Objectives in order (the first primary), each named once.

    Raises:
        ObjectiveError: None given, a bad one, or a name given twice.
    """
    items = tuple(items)
    objectives = tuple(parse_objective(i) for i in items)
    if not objectives:
        raise ObjectiveError("objectives=: expected at least one metric name")
    names = [o.metric_id for o in objectives]
    if twice := next((n for n in names if names.count(n) > 1), None):
        raise ObjectiveError(f"objectives={','.join(items)}: {twice} given twice; name each once")
    return objectives


def objective_text(objective: Metric) -> str:
    """The text that parses back to `objective` (the table's names bare, others with a goal)."""
    if METRIC_GOALS.get(objective.metric_id) == objective.goal:
        return objective.metric_id
    return f"{objective.metric_id}:{objective.goal[:3]}"


@dataclasses.dataclass(frozen=True)
class Constraint:
    """An upper or lower bound on one objective that a picked trial must meet."""

    metric_id: str
    op: str
    bound: float

    def __str__(self) -> str:
        return f"{self.metric_id}{self.op}{self.bound:g}"

    def met(self, value: float) -> bool:
        """Whether `value` is within the bound."""
        return OPERATORS[self.op](value, self.bound)

    def shortfall(self, value: float) -> float:
        """How far `value` is outside the bound, relative to it (0 when met)."""
        if self.met(value):
            return 0.0
        return abs(value - self.bound) / max(abs(self.bound), 1e-12)


def parse_constraint(text: str, objectives: Sequence[Metric]) -> Constraint:
    """`latency_ms<=20` as a Constraint on one of the objectives.

    Raises:
        ObjectiveError: Bad syntax, a non-finite bound, or a metric that is not an objective
            (only objectives are collected from every trial on every target).
    """
    match = _CONSTRAINT.match(text)
    if not match:
        raise ObjectiveError(
            f"constraints={text}: expected METRIC<=NUMBER (or >=, <, >), e.g. latency_ms<=20"
        )
    name, op, raw = match.groups()
    try:
        bound = float(raw)
    except ValueError:
        bound = math.nan
    if not math.isfinite(bound):
        raise ObjectiveError(f"constraints={text}: expected a finite number after {op}")
    names = [o.metric_id for o in objectives]
    if name not in names:
        raise ObjectiveError(
            f"constraints={text}: {name} is not an objective ({', '.join(names)}); "
            f"add it to objectives so every trial reports it"
        )
    return Constraint(name, op, bound)


def parse_constraints(items: Iterable[str], objectives: Sequence[Metric]) -> tuple[Constraint, ...]:
    """Every constraint, each checked against the objectives (see `parse_constraint`)."""
    return tuple(parse_constraint(i, objectives) for i in items)


def resolve(
    objectives: Iterable[str], constraints: Iterable[str], metric_tag: str
) -> tuple[tuple[Metric, ...], tuple[Constraint, ...]]:
    """A run's objectives (none: `[metric_tag]`) and constraints, checked together.

    Raises:
        ObjectiveError: A bad objective or constraint, or a primary objective other than
            `metric_tag` (the trainer's own flag names the primary one).
    """
    objectives = tuple(objectives)
    parsed = parse_objectives(objectives or (metric_tag,))
    if parsed[0].metric_id not in METRIC_GOALS:
        raise ObjectiveError(
            f"objectives={','.join(objectives) or metric_tag}: the primary {parsed[0].metric_id} "
            "must be a metric the trainer "
            f"reports ({', '.join(METRIC_TAGS)}); list a team's own metric after it"
        )
    if parsed[0].metric_id != metric_tag:
        raise ObjectiveError(
            f"objectives={','.join(objective_text(o) for o in parsed)}: the first (primary) "
            f"objective must be metric_tag={metric_tag}; set metric_tag to "
            f"{parsed[0].metric_id} or leave it unset"
        )
    return parsed, parse_constraints(constraints, parsed)


def check_settings(
    objectives: Sequence[str], constraints: Sequence[str], metric_tag: str, early_stopping: bool
) -> None:
    """A run's objectives and constraints as settings (`resolve`), and its early stopping.

    Raises:
        ObjectiveError: What `resolve` refuses, or early stopping with several objectives
            (Vertex's median rule ranks one metric; Optuna cannot prune several).
    """
    parsed, _ = resolve(objectives, constraints, metric_tag)
    if early_stopping and len(parsed) > 1:  # Optuna and the median rule are 1-D
        raise ObjectiveError(
            f"early_stopping=True with {len(parsed)} objectives: the median rule ranks one "
            "metric and multi-objective studies cannot prune; turn early stopping off"
        )


def measurement_selection(selection: str, objectives: int) -> str:
    """The measurement selection a study sends: unset, the best with one objective, else the last.

    The cost metrics are reported once, after the last epoch, and Vertex's best measurement
    is best by one metric (`StudySpec.MeasurementSelectionType` says nothing of several):
    with several objectives only the last measurement holds them all (docs/objectives.md).

    Args:
        selection: The `measurement_selection` setting; empty (or Vertex's unspecified): unset.
        objectives: How many objectives the study has.

    Raises:
        ObjectiveError: `BEST_MEASUREMENT` asked for with several objectives.
    """
    if selection in ("", "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED"):
        return "LAST_MEASUREMENT" if objectives > 1 else "BEST_MEASUREMENT"
    if selection == "BEST_MEASUREMENT" and objectives > 1:
        raise ObjectiveError(
            f"measurement_selection=BEST_MEASUREMENT with {objectives} objectives: the cost "
            "metrics are reported once, after the last epoch, and Vertex's best measurement "
            "is best by one metric, so only the last measurement holds every objective; set "
            "LAST_MEASUREMENT or leave it unset"
        )
    return selection
