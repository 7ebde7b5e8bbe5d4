"""The study's metric, decided by the metric tag alone: its spec and its goal."""

from typing import NamedTuple

from components.base import component


@component
def study_metric(
    metric_tag: str,
) -> NamedTuple(  # type: ignore[valid-type]  # kfp reads the call form
    "StudyMetric", [("study_spec_metrics", list), ("goal", str)]
):
    """`study_spec_metrics` and the goal for `metric_tag` (`val_loss` is minimized).

    One pipeline parameter, `metric_tag`, decides what the trials report (the trainer's
    `--metric_tag`), what the study waits for and which way the best trial is chosen, so
    no combination of run-time parameters can disagree.
    """
    from collections import namedtuple

    from pipelines.settings_space import study_metric_spec

    metrics, goal = study_metric_spec(metric_tag)
    print(f"study metric: {metric_tag} ({goal})")
    StudyMetric = namedtuple("StudyMetric", ["study_spec_metrics", "goal"])
    return StudyMetric(metrics, goal)
