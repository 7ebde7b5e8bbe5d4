"""Pick the best trial on the Pareto front; its id, objectives, parameters and why show."""

from typing import NamedTuple

from kfp import dsl

from components.base import component


@component
def select_best_trial(
    trials: dsl.Input[dsl.Artifact],
    dataset: dsl.Input[dsl.Dataset],
    study_spec_metrics: list,
    constraints: list,
    threshold: float,
    use_threshold: bool,
    continued_trials: list,
    summary: dsl.Output[dsl.Metrics],
) -> NamedTuple(  # type: ignore[valid-type]  # kfp reads the call form
    "BestTrial", [("best_trial_id", str), ("best_parameters", dict), ("best_metric", float)]
):
    """Choose among succeeded trials (`pipelines.study.selection`); stop if none will do.

    The trials meeting every constraint, their Pareto front over the study's objectives, the
    best primary objective on it (ties to the cheaper configuration). No trial meeting the
    constraints, or a pick missing `threshold` (primary objective; `use_threshold` False
    ignores it), stops the pipeline before the final training; so does a study whose every
    trial diverged. `continued_trials` (an earlier run's) are chosen among with the tune
    step's trials. A pick at chance (`dataset`'s class count) is said in one line.
    """
    from collections import namedtuple

    from pipelines.study import continuation, selection, trials_artifact
    from pipelines.study.objectives import parse_constraints
    from pipelines.study.spec_reader import parse_study_spec_metrics

    objectives = parse_study_spec_metrics(study_spec_metrics)
    all_trials = continuation.combine(continued_trials, trials_artifact.read(trials))
    best = selection.select_best_trial(
        all_trials,
        objectives=objectives,
        constraints=parse_constraints(constraints, objectives),
        threshold=float(threshold) if use_threshold else None,
    )
    print(f"selected {best.reason}")
    at_chance = selection.chance_note(all_trials, best.trial_id, dataset.metadata)
    if at_chance:
        print(f"warning: {at_chance}")
    summary.metadata["at_chance"] = at_chance
    for name, value in best.metrics.items():
        summary.log_metric(f"best_{name}", value)
    summary.log_metric("best_trial_id", float(best.trial_id) if best.trial_id.isdigit() else -1.0)
    summary.log_metric("trials_considered", best.considered)
    summary.log_metric("trials_total", len(all_trials))
    summary.log_metric("pareto_front_size", len(best.front))
    for name, value in best.parameters.items():
        if isinstance(value, int | float):
            summary.log_metric(f"param_{name}", value)
    summary.metadata["best_parameters"] = best.parameters
    summary.metadata["objectives"] = [
        {"metric_id": o.metric_id, "goal": o.goal} for o in objectives
    ]
    summary.metadata["constraints"] = list(best.constraints)
    summary.metadata["pareto_front"] = list(best.front)
    summary.metadata["why"] = best.reason
    summary.metadata["trials"] = trials.uri
    summary.metadata["continued_from"] = continuation.sources(all_trials)
    BestTrial = namedtuple("BestTrial", ["best_trial_id", "best_parameters", "best_metric"])
    return BestTrial(best.trial_id, best.parameters, best.metric)
