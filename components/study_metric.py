"""The study's objectives, decided by the run's objectives and metric tag: their specs and goal."""

from typing import NamedTuple

from components.base import component


@component
def study_metric(
    metric_tag: str,
    objectives: list,
    constraints: list,
) -> NamedTuple(  # type: ignore[valid-type]  # kfp reads the call form
    "StudyMetric", [("study_spec_metrics", list), ("goal", str)]
):
    """`study_spec_metrics` (one per objective, primary first) and the primary's goal.

    `objectives` (empty: `[metric_tag]`) decide what the study waits for and which way each
    is chosen; `metric_tag`, the trainer's flag, must be the first. The constraints are
    checked here against the objectives, so a bad run-time value stops before the study.
    """
    from collections import namedtuple

    from pipelines.settings_space import study_metric_spec

    metrics, goal = study_metric_spec(metric_tag, objectives, constraints)
    shown = ", ".join(f"{m['metric_id']} ({'max' if m['goal'] == 1 else 'min'})" for m in metrics)
    print(f"study objectives: {shown}; constraints: {', '.join(constraints) or 'none'}")
    StudyMetric = namedtuple("StudyMetric", ["study_spec_metrics", "goal"])
    return StudyMetric(metrics, goal)
