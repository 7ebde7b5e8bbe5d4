"""Vertex binding of the tuning step: the HPT job, then its trials as the trials artifact.

`tune_on_vertex` sends the job with GCPC's own launcher code; `fetch_trials` reads it back.

Unlike GCPC's `HyperparameterTuningJobRunOp`, the payload carries the study's
stopping spec, so `early_stopping` works on Vertex too (see
`pipelines.targets.vertex.hpt_job`).
"""

from kfp import dsl

from components.base import component


@component
def tune_on_vertex(
    display_name: str,
    project: str,
    location: str,
    study_spec_metrics: list,
    study_spec_parameters: list,
    study_spec_algorithm: str,
    study_spec_measurement_selection_type: str,
    max_trial_count: int,
    parallel_trial_count: int,
    max_failed_trial_count: int,
    worker_pool_specs: list,
    base_output_directory: str,
    service_account: str,
    network: str,
    encryption_spec_key_name: str,
    early_stopping: bool,
    labels: dict,
    gcp_resources: dsl.OutputPath(str),  # type: ignore[valid-type]
    max_study_hours: float = 0.0,  # study_spec.study_stopping_config; 0: none
    max_trials_no_progress: int = 0,
    trial_scheduling: str = "standard",  # trial_job_spec.scheduling (pipelines/jobs/scheduling)
    max_wait_hours: float = 24.0,
    tensorboard: str = "",
):
    """Create the HPT job (with the run's labels), write `gcp_resources`, wait for it.

    The job is cancelled with the run: SIGTERM reaches this process (`exec_python`).
    """
    from pipelines.targets.vertex import hpt_job

    payload = hpt_job.hpt_job_payload(
        display_name=display_name,
        study_spec_metrics=study_spec_metrics,
        study_spec_parameters=study_spec_parameters,
        study_spec_algorithm=study_spec_algorithm,
        study_spec_measurement_selection_type=study_spec_measurement_selection_type,
        max_trial_count=max_trial_count,
        parallel_trial_count=parallel_trial_count,
        max_failed_trial_count=max_failed_trial_count,
        worker_pool_specs=worker_pool_specs,
        base_output_directory=base_output_directory,
        service_account=service_account,
        network=network,
        encryption_spec_key_name=encryption_spec_key_name,
        early_stopping=early_stopping,
        max_study_hours=float(max_study_hours),
        max_trials_no_progress=int(max_trials_no_progress),
        trial_scheduling=trial_scheduling,
        max_wait_hours=float(max_wait_hours),
        labels=labels,
        tensorboard=tensorboard,
    )
    hpt_job.launcher_request(payload)  # refuse here what the service would refuse
    hpt_job.run_hpt_job(payload, project=project, location=location, gcp_resources=gcp_resources)


@component
def fetch_trials(
    gcp_resources: str,
    base_output_directory: str,
    pipeline_job: str,
    trials: dsl.Output[dsl.Artifact],
    experiment: str = "",
    tensorboard: str = "",
):
    """Read the finished HPT job into the artifact the local run writes too.

    Each trial is also recorded in Vertex ML Metadata (Vertex itself never
    records trials), linked to the trials artifact in this run's context. With an
    `experiment` (`tracking: vertex`) each becomes an ExperimentRun of it, time series
    through `tensorboard` (`pipelines/targets/vertex/experiments.py`); a write that fails
    is said in one line and the study's results stand.
    """
    from pipelines.study import trials_artifact
    from pipelines.targets.vertex import metadata as vertex_metadata
    from pipelines.targets.vertex import trials as vertex_trials

    job_name = vertex_trials.job_name_from_gcp_resources(gcp_resources)
    fetched = vertex_trials.fetch_trials(job_name)
    trials_artifact.write(trials, fetched, source="vertex", study_dir=job_name)
    vertex_metadata.record_trials(
        fetched,
        job_name=job_name,
        base_output_directory=base_output_directory,
        trials_artifact=trials.name,
        pipeline_job=pipeline_job,
    )
    if experiment:
        from pipelines.targets.vertex import experiments

        try:
            experiments.record_trials(
                fetched,
                experiment=experiment,
                job_name=job_name,
                tensorboard=tensorboard,
                pipeline_job=pipeline_job,
            )
        except Exception as err:  # noqa: BLE001 - tracking never fails a study
            said = (str(err).splitlines() or [""])[0]
            print(
                f"tracking: writing the trials to Vertex AI Experiment {experiment} failed "
                f"({type(err).__name__}: {said}); the study's results stand"
            )
