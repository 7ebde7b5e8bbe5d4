"""Local binding of the features step: the features job's pool as a process here."""

from kfp import dsl

from components.base import component


@component
def features_locally(
    worker_pool_specs: list,
    base_output_directory: str,
    features_dir: str,
    trainable_blocks: str,
    reason: str,
    features: dsl.Output[dsl.Artifact],
):
    """Run `python -m trainer.features` here (nothing when the plan caches nothing)."""
    from pipelines.jobs import features_artifact

    start = features_artifact.clock()
    before = features_artifact.entries(features_dir)
    if worker_pool_specs:  # the executor's imports only when there is a job to run
        from pipelines.jobs import fork_client, local_job

        # Forked from the run's preloaded process (it serves trainer.features), as the
        # preparation and evaluation steps are; started afresh outside a run.
        local_job.run_custom_job(
            worker_pool_specs=worker_pool_specs,
            base_output_directory=base_output_directory,
            fork_server=fork_client.shared_server(),
        )
    result = (
        features_artifact.outcome(before, features_artifact.entries(features_dir))
        if worker_pool_specs
        else features_artifact.SKIPPED
    )
    line = features_artifact.describe(
        features,
        features_dir=features_dir,
        trainable_blocks=trainable_blocks,
        reason=reason,
        seconds=features_artifact.clock() - start,
        result=result,
    )
    print(line)
