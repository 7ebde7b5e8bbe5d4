"""Local binding of the tuning step: run the HPT study payload on this machine."""

from kfp import dsl

from components.base import component


@component
def tune_locally(
    dataset: dsl.Input[dsl.Dataset],
    worker_pool_specs: list,
    study_spec_metrics: list,
    study_spec_parameters: list,
    max_trial_count: int,
    parallel_trial_count: int,
    max_failed_trial_count: int,
    study_spec_algorithm: str,
    study_spec_measurement_selection_type: str,
    base_output_directory: str,
    early_stopping: bool,
    scheduler: str,
    min_epochs: int,
    reduction_factor: int,
    epochs: int,
    max_study_hours: float,
    max_trials_no_progress: int,
    seed: int,
    continued_trials: list,
    trials: dsl.Output[dsl.Artifact],
    tracking: str = "auto",
    tracking_uri: str = "",
    experiment: str = "",
):
    """Run the same study `HyperparameterTuningJobRunOp` would submit, with Optuna, locally.

    Writes the trials (Vertex `Trial` JSON schema) to the `trials` artifact. With
    `continued_trials` (an earlier run's, `continuation.reconcile`d) the study starts from
    them, and the artifact holds them first, then this study's. With a tracking store
    (`tracking`, `tracking_uri`: checked before any trial) the trials become MLflow runs.
    """
    from pipelines.study import continuation, trials_artifact
    from pipelines.targets.local import local_study
    from pipelines.tracking.steps import StudyTracking

    tracker = StudyTracking(tracking, tracking_uri)  # checked now; its writer warms up meanwhile

    results = local_study.run_study(
        worker_pool_specs=worker_pool_specs,
        study_spec_metrics=study_spec_metrics,
        study_spec_parameters=study_spec_parameters,
        max_trial_count=int(max_trial_count),
        parallel_trial_count=int(parallel_trial_count),
        max_failed_trial_count=int(max_failed_trial_count),
        study_spec_algorithm=study_spec_algorithm,
        study_spec_measurement_selection_type=study_spec_measurement_selection_type,
        base_output_directory=base_output_directory,
        early_stopping=bool(early_stopping),
        scheduler=scheduler,
        rungs=(int(min_epochs), int(reduction_factor), int(epochs)),  # the top rung: epochs
        max_study_hours=float(max_study_hours),
        max_trials_no_progress=int(max_trials_no_progress),
        seed=int(seed),
        earlier_trials=continuation.combine(continued_trials, []),
    )
    both = continuation.combine(continued_trials, results)
    trials_artifact.write(trials, both, source="local", study_dir=base_output_directory)
    tracker.record(
        trials,
        both,
        experiment=experiment,
        target="local",
        dataset_fingerprint=str(dataset.metadata.get("metadata_sha256", "")),
        search_space=study_spec_parameters,
    )
