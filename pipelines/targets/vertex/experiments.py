"""Vertex AI Experiments (`tracking: vertex`): one Experiment per pipeline, a run per trial.

Vertex's own convention, written with `aiplatform`'s Experiments API after the HPT job, from
the trials the fetch step read (so each run says what the trials JSON says): an Experiment
named after the pipeline (`experiment_id`), an ExperimentRun per trial (`run_name`: the HPT
job's id and the trial's, so every pipeline run's trials are runs of their own) holding
every hyperparameter as a param, the final measurement's metrics, each epoch's metrics as
time series (through the Experiment's backing TensorBoard: the `tensorboard` setting) and
the trial's end state; the pipeline run itself becomes a run of the Experiment (a child of
its context, as `PipelineJob.submit(experiment=…)` makes it), which shows the final job's
test metrics (the evaluate step's `system.Metrics`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.study import trials as trials_lib

# MetadataService.CreateContext: a context id is 4-128 of [a-z0-9-]; aiplatform makes a
# run's id `<experiment>-<run>`, at most 121 long (`_EXPERIMENT_RUN_MAX_LENGTH`: room for
# `-tb-run`), so the Experiment keeps 64 and leaves 56 for `<job id>-trial-<id>` (an HPT
# job's id is at most 19 digits).
MIN_ID, MAX_EXPERIMENT_ID = 4, 64
_NOT_ID = re.compile(r"[^a-z0-9-]+")
_HPT_JOB = re.compile(r"^projects/([^/]+)/locations/([^/]+)/hyperparameterTuningJobs/[^/]+$")
NO_TIME_SERIES = (
    "tracking=vertex: each trial's per-epoch metrics need a tensorboard (Vertex AI Experiments "
    "keep time series in the Experiment's backing TensorBoard); the runs get params and final "
    "metrics only"
)


def experiment_id(display_name: str) -> str:
    """The Experiment a pipeline's trials go to: its display name as a context id.

    Lowercase; every run of characters other than `[a-z0-9-]` becomes one `-`.

    Raises:
        ValueError: Fewer than `MIN_ID` characters are left (one line).
    """
    name = _NOT_ID.sub("-", display_name.lower()).strip("-")[:MAX_EXPERIMENT_ID].rstrip("-")
    if len(name) < MIN_ID:
        raise ValueError(
            f"display_name={display_name!r}: tracking=vertex names the Vertex AI Experiment "
            f"after it, which takes at least {MIN_ID} lowercase letters, digits or hyphens"
        )
    return name


def run_name(job_name: str, trial: Mapping[str, Any]) -> str:
    """A trial's ExperimentRun name: `<HPT job id>-trial-<id>`, in the ids' characters."""
    return _NOT_ID.sub("-", f"{job_name.rsplit('/', 1)[-1]}-trial-{trial['id']}".lower())


def _numbers(values: Mapping[str, Any]) -> dict[str, float | int | str]:
    return {k: v if isinstance(v, (int, float, str)) else str(v) for k, v in values.items()}


def _write_run(run: Any, trial: Mapping[str, Any], tensorboard: str) -> None:
    """One trial into its ExperimentRun; its end state last, so a finished run is whole."""
    from google.cloud.aiplatform_v1.types import Execution

    run.log_params(_numbers(trials_lib.trial_parameters(trial)))
    if tensorboard:
        for m in trial.get("measurements", []):
            metrics = trials_lib.measurement_metrics(m)
            if metrics:
                run.log_time_series_metrics(metrics, step=int(m.get("stepCount", 0)))
    final = trials_lib.measurement_metrics(trial.get("finalMeasurement"))
    if final:
        run.log_metrics(_numbers(final))
    done = trials_lib.trial_outcome(trial) == trials_lib.SUCCEEDED
    run.update_state(Execution.State.COMPLETE if done else Execution.State.FAILED)


def record_trials(
    trials: Sequence[Mapping[str, Any]],
    *,
    experiment: str,
    job_name: str,
    tensorboard: str = "",
    pipeline_job: str = "",
    credentials: Any = None,
    say: Callable[[str], None] = print,
) -> list[str]:
    """Write each trial as an ExperimentRun of `experiment`; the runs' resource names.

    Args:
        trials: Trial JSON (`fetch_trials`).
        experiment: The Experiment's id (`experiment_id`); created when missing.
        job_name: The HPT job (`projects/P/locations/L/hyperparameterTuningJobs/ID`): where.
        tensorboard: The Experiment's backing TensorBoard; "" writes no time series (said).
        pipeline_job: This pipeline run, made a run of the Experiment ("": none).
        credentials: google-auth credentials; None uses the environment's.
        say: Where the line about missing time series goes.
    """
    from google.cloud import aiplatform
    from google.cloud.aiplatform_v1.types import Execution

    match = _HPT_JOB.match(job_name)
    if not match:
        raise ValueError(f"{job_name}: expected projects/P/locations/L/hyperparameterTuningJobs/ID")
    where = {"project": match[1], "location": match[2], "credentials": credentials}
    exp = aiplatform.Experiment.get_or_create(experiment, **where)
    if tensorboard:
        exp.assign_backing_tensorboard(tensorboard)
    else:
        say(NO_TIME_SERIES)
    names = []
    for trial in trials:
        name = run_name(job_name, trial)
        # A retried step meets the runs it wrote (`create` refuses one that exists): one it
        # finished stays as it is, one it stopped in is written again, the rest are made.
        run = aiplatform.ExperimentRun.get(name, experiment=exp, **where)
        if run is None:
            run = aiplatform.ExperimentRun.create(name, experiment=exp, **where)
        if run.state == Execution.State.RUNNING:
            _write_run(run, trial, tensorboard)
        names.append(run.resource_name)
    if pipeline_job:
        from pipelines.targets.vertex.metadata import run_context

        pipeline_run = run_context(pipeline_job, credentials)
        aiplatform.Context(exp.resource_name, **where).add_context_children([pipeline_run])
    return names
