"""Kubeflow binding of the tuning step: a Katib Experiment, its Trials as the trials artifact.

The Experiment is built from the same study payload as the Vertex HPT job
(`pipelines.targets.kubeflow.experiment`), checked against Katib's admission rules,
created (or resumed: a retried task finds it by name), waited on with progress
lines, and its Trials are written in the schema every target writes.
"""

from kfp import dsl

from components.base import component


@component
def tune_on_katib(
    study_spec_metrics: list,
    study_spec_parameters: list,
    study_spec_algorithm: str,
    study_spec_measurement_selection_type: str,
    max_trial_count: int,
    parallel_trial_count: int,
    max_failed_trial_count: int,
    worker_pool_specs: list,
    base_output_directory: str,
    namespace: str,
    display_name: str,
    experiment_name: str,
    service_account: str,
    data_pvc: str,
    data_mount_path: str,
    cpu: str,
    memory: str,
    early_stopping: bool,
    timeout_s: int,
    trials: dsl.Output[dsl.Artifact],
    study_dir: str = "",
    job_api: str = "tfjob",
    pending_grace_s: int = 600,
    trial_nodes: int = 1,
    max_study_hours: float = 0.0,
    max_trials_no_progress: int = 0,
    spot_label: str = "",
    tracking: str = "auto",
    tracking_uri: str = "",
    experiment: str = "",
):
    """Run the study on Katib and write its trials (source `katib`).

    With `study_dir` (the user's stable study folder) the Experiment can be resumed by a
    later run; without, it is per run and keeps no PVC. `trial_nodes` (`trial_workers` + 1)
    > 1 makes each trial a TrainJob of that many nodes (Katib 0.19+). `spot_label` (a node
    label `key=value`) puts the trial pods on a spot pool (`spot`). With a tracking store
    (checked before the Experiment is created) the trials become MLflow runs, nested under
    KFP's task run when KFP set `MLFLOW_RUN_ID` and `MLFLOW_TRACKING_URI`.
    """
    from pipelines.study import trials_artifact
    from pipelines.targets.kubeflow import katib_tune
    from pipelines.tracking.steps import StudyTracking

    tracker = StudyTracking(tracking, tracking_uri)  # checked now; its writer warms up meanwhile

    katib_tune.refuse_budgets(float(max_study_hours), int(max_trials_no_progress))
    request = katib_tune.StudyRequest(
        study_spec_parameters=study_spec_parameters,
        study_spec_metrics=study_spec_metrics,
        study_spec_algorithm=study_spec_algorithm,
        study_spec_measurement_selection_type=study_spec_measurement_selection_type,
        max_trial_count=max_trial_count,
        parallel_trial_count=parallel_trial_count,
        max_failed_trial_count=max_failed_trial_count,
        worker_pool_specs=worker_pool_specs,
        base_output_directory=base_output_directory,
        namespace=namespace,
        display_name=display_name,
        experiment_name=experiment_name,
        service_account=service_account,
        pvc_name=data_pvc,
        data_mount_path=data_mount_path,
        cpu=cpu,
        memory=memory,
        early_stopping=early_stopping,
        resumable=bool(study_dir),
        timeout_s=timeout_s,
        job_api_setting=job_api,
        pending_grace_s=pending_grace_s,
        trial_nodes=int(trial_nodes),
        spot_label=spot_label,
    )
    done, converted = katib_tune.run_katib_study(request)
    meta = done["metadata"]
    trials_artifact.write(
        trials, converted, source="katib", study_dir=f"{meta['namespace']}/{meta['name']}"
    )
    tracker.record(
        trials,
        converted,
        experiment=experiment or display_name,
        target="kubeflow",
        search_space=study_spec_parameters,
    )
