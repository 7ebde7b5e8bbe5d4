"""Vertex binding of the tuning step's output: the HPT job's trials as the trials artifact."""

from kfp import dsl

from components.base import component


@component
def fetch_trials(
    gcp_resources: str,
    base_output_directory: str,
    pipeline_job: str,
    trials: dsl.Output[dsl.Artifact],
):
    """Read the finished HPT job into the artifact the local run writes too.

    Each trial is also recorded in Vertex ML Metadata (Vertex itself never
    records trials), linked to the trials artifact in this run's context.
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
