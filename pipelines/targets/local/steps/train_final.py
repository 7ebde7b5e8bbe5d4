"""Local binding of the final training step: the job's worker pools as processes here."""

from kfp import dsl

from components.base import component


@component
def train_locally(
    worker_pool_specs: list,
    base_output_directory: str,
    study_dir: str,
    model: dsl.Output[dsl.Model],
):
    """Run the final job's worker pools as local processes (chief + workers on loopback).

    The job runs in a folder kept with the study (`pipelines/jobs/kept_job.py`), not in
    `base_output_directory` (new each run), when `study_dir` is set: a rerun reuses it
    finished or resumes it.
    """
    from pipelines.jobs import kept_job, model_artifact

    base = kept_job.run(
        worker_pool_specs,
        base_output_directory,
        study_dir,
        echo=lambda line: print(line, flush=True),
    )
    model_artifact.describe(model, base)
