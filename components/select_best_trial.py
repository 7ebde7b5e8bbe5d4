"""Pick the best trial; its id, parameters and metric show in the console."""

from typing import NamedTuple

from kfp import dsl

from components.base import component


@component
def select_best_trial(
    trials: dsl.Input[dsl.Artifact],
    metric_tag: str,
    goal: str,
    threshold: float,
    use_threshold: bool,
    continued_trials: list,
    summary: dsl.Output[dsl.Metrics],
) -> NamedTuple(  # type: ignore[valid-type]  # kfp reads the call form
    "BestTrial", [("best_trial_id", str), ("best_parameters", dict), ("best_metric", float)]
):
    """Choose among succeeded trials; stop the pipeline if the best misses `threshold`.

    Ties go to the smaller/cheaper configuration. `use_threshold` False ignores `threshold`.
    `continued_trials` (an earlier run's) are chosen among with the tune step's trials.
    """
    from collections import namedtuple

    from pipelines.study import continuation, selection, trials_artifact

    all_trials = continuation.combine(continued_trials, trials_artifact.read(trials))
    best = selection.select_best_trial(
        all_trials,
        metric_id=metric_tag,
        goal=goal,
        threshold=float(threshold) if use_threshold else None,
    )
    summary.log_metric(f"best_{metric_tag}", best.metric)
    summary.log_metric("best_trial_id", float(best.trial_id) if best.trial_id.isdigit() else -1.0)
    summary.log_metric("trials_considered", best.considered)
    summary.log_metric("trials_total", len(all_trials))
    for name, value in best.parameters.items():
        if isinstance(value, int | float):
            summary.log_metric(f"param_{name}", value)
    summary.metadata["best_parameters"] = best.parameters
    summary.metadata["trials"] = trials.uri
    summary.metadata["continued_from"] = continuation.sources(all_trials)
    BestTrial = namedtuple("BestTrial", ["best_trial_id", "best_parameters", "best_metric"])
    return BestTrial(best.trial_id, best.parameters, best.metric)
