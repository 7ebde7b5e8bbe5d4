"""The study's objectives, from the run's objectives and metric tag: specs, goal, selection."""

from typing import NamedTuple

from components.base import component


@component
def study_metric(
    metric_tag: str,
    objectives: list,
    constraints: list,
    measurement_selection: str = "",
) -> NamedTuple(  # type: ignore[valid-type]  # kfp reads the call form
    "StudyMetric",
    [("study_spec_metrics", list), ("goal", str), ("measurement_selection", str)],
):
    """`study_spec_metrics` (one per objective, primary first), the primary's goal, the selection.

    `objectives` (empty: `[metric_tag]`) decide what the study waits for and which way each
    is chosen; `metric_tag`, the trainer's flag, must be the first. The constraints are
    checked here against the objectives, so a bad run-time value stops before the study, as
    does `BEST_MEASUREMENT` with several objectives (empty: the best with one, else the last).
    """
    from collections import namedtuple

    from pipelines.settings_space import study_metric_spec
    from pipelines.study.objectives import measurement_selection as applied

    metrics, goal = study_metric_spec(metric_tag, objectives, constraints)
    selection = applied(measurement_selection, len(metrics))
    shown = ", ".join(f"{m['metric_id']} ({'max' if m['goal'] == 1 else 'min'})" for m in metrics)
    print(
        f"study objectives: {shown}; constraints: {', '.join(constraints) or 'none'}; "
        f"measurement: {selection}"
    )
    StudyMetric = namedtuple("StudyMetric", ["study_spec_metrics", "goal", "measurement_selection"])
    return StudyMetric(metrics, goal, selection)
