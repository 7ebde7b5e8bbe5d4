"""The study a run's settings ask for: their search space, checked, optimising their metric."""

from __future__ import annotations

from pipelines.settings import Settings
from pipelines.study.options import check_algorithm
from pipelines.study.search_space import Metric, SearchSpace, load_search_space


def study_space(settings: Settings) -> SearchSpace:
    """The settings' search space with their metric and goal (the metric lives in settings only).

    Raises:
        SearchSpaceError: A space the trainer or the settings' algorithm cannot take.
    """
    space = load_search_space(settings.search_space)
    check_algorithm(space, settings.algorithm)
    return SearchSpace(space.parameters, (Metric(settings.metric_tag, settings.goal),))
