"""Study budgets: the tune step's wall clock and trials without progress, as Vertex stops a study.

Vertex's `study_spec.study_stopping_config` (`maximum_runtime_constraint.max_duration`,
`max_num_trials_no_progress`) is built here, and the local study applies the same two rules:
`max_study_hours` (the tune step's wall clock: running trials are stopped, kept to rerun,
never failed) and `max_trials_no_progress` (that many finished trials in a row, by end time,
did not improve the best primary value: no new trial starts, running ones finish). Either
ends the study as done, and the summary names the budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from pipelines.study import trials as trials_lib
from pipelines.study.halving import pruned_at
from pipelines.study.search_space import Metric
from pipelines.study.trials import TrialState


@dataclasses.dataclass(frozen=True)
class Budgets:
    """A study's budgets (0: none).

    Attributes:
        max_study_hours: Wall-clock hours of the tune step.
        max_trials_no_progress: Finished trials in a row that did not improve the best.
    """

    max_study_hours: float = 0.0
    max_trials_no_progress: int = 0

    def stopping_config(self) -> dict[str, Any]:
        """Vertex's `study_spec.study_stopping_config` for these budgets (empty: none set)."""
        config: dict[str, Any] = {}
        if self.max_study_hours > 0:
            seconds = round(self.max_study_hours * 3600)
            config["maximum_runtime_constraint"] = {"max_duration": f"{seconds}s"}
        if self.max_trials_no_progress > 0:
            config["max_num_trials_no_progress"] = int(self.max_trials_no_progress)
        return config

    def time_left(self, elapsed_s: float) -> float | None:
        """Seconds left on the wall clock (None: no limit)."""
        if self.max_study_hours <= 0:
            return None
        return max(self.max_study_hours * 3600 - elapsed_s, 0.0)

    def spent(
        self, trials: Iterable[Mapping[str, Any]], metric: Metric, elapsed_s: float
    ) -> str | None:
        """Which budget is spent now, in words (None: neither)."""
        left = self.time_left(elapsed_s)
        if left is not None and left <= 0:
            return f"max_study_hours={self.max_study_hours:g} spent"
        if self.max_trials_no_progress > 0:
            stale = trials_without_progress(trials, metric)
            if stale >= self.max_trials_no_progress:
                return f"max_trials_no_progress={self.max_trials_no_progress}: {stale} in a row"
        return None


def trials_without_progress(trials: Iterable[Mapping[str, Any]], metric: Metric) -> int:
    """Finished trials since the best primary value last improved, in end-time order.

    A failed trial, or one stopped at a rung below the top, is a trial without progress.
    """
    finished = [
        t
        for t in trials
        if trials_lib.trial_state(t) in (TrialState.SUCCEEDED, TrialState.INFEASIBLE)
    ]
    finished.sort(key=lambda t: str(t.get("endTime", "")))
    sign = 1.0 if metric.goal == "maximize" else -1.0
    best: float | None = None
    stale = 0
    for t in finished:
        value = trials_lib.final_metric(t, metric.metric_id)
        useful = trials_lib.trial_state(t) == TrialState.SUCCEEDED and pruned_at(t) is None
        if useful and value is not None and (best is None or sign * value > sign * best):
            best, stale = value, 0
        else:
            stale += 1
    return stale
