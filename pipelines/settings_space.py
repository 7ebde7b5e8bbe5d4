"""The study a run's settings ask for: their search space, checked, optimising their metric."""

from __future__ import annotations

from typing import Any

from pipelines.settings import Settings
from pipelines.study.options import check_algorithm
from pipelines.study.search_space import GOAL_NUMBERS, Metric, SearchSpace, load_search_space
from trainer.contract import metric_goal


def study_space(settings: Settings) -> SearchSpace:
    """The settings' search space with their metric and goal (the metric lives in settings only).

    Raises:
        SearchSpaceError: A space the trainer or the settings' algorithm cannot take.
    """
    space = load_search_space(settings.search_space)
    check_algorithm(space, settings.algorithm)
    return SearchSpace(space.parameters, (Metric(settings.metric_tag, settings.goal),))


def study_metric_spec(metric_tag: str) -> tuple[list[dict[str, Any]], str]:
    """`study_spec_metrics` and the goal the trainer's metric `metric_tag` is optimised with.

    Raises:
        ContractError: The trainer does not report `metric_tag`.
    """
    goal = metric_goal(metric_tag)
    return [{"metric_id": metric_tag, "goal": GOAL_NUMBERS[goal]}], goal
