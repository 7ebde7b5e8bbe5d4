"""Local binding of the final training step: the job's worker pools as processes here."""

from kfp import dsl

from components.base import component


@component
def train_locally(
    worker_pool_specs: list,
    base_output_directory: str,
    model: dsl.Output[dsl.Model],
):
    """Run the final job's worker pools as local processes (chief + workers on loopback)."""
    import os

    from pipelines.jobs import fork_client, local_job, model_artifact

    commands = local_job.pool_commands(worker_pool_specs)
    log = os.path.join(local_job.job_local_dir(base_output_directory), fork_client.LOG_FILE)
    with fork_client.session(commands, log_path=log) as server:
        local_job.run_custom_job(
            worker_pool_specs=worker_pool_specs,
            base_output_directory=base_output_directory,
            fork_server=server,
        )
    model_artifact.describe(model, base_output_directory)
