"""Vertex binding of the tuning step's output: the HPT job's trials as the trials artifact."""

from kfp import dsl

from components.base import component


@component
def fetch_trials(gcp_resources: str, trials: dsl.Output[dsl.Artifact]):
    """Read the finished HPT job in `gcp_resources` into the artifact the local run writes too."""
    from pipelines import trials_artifact, vertex_trials

    job_name = vertex_trials.job_name_from_gcp_resources(gcp_resources)
    trials_artifact.write(
        trials, vertex_trials.fetch_trials(job_name), source="vertex", study_dir=job_name
    )
