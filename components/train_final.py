"""Final training step: the local binding, and the Vertex job's model as an artifact."""

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


@component
def model_from_job(
    gcp_resources: str,
    base_output_directory: str,
    model: dsl.Output[dsl.Model],
) -> str:
    """Point a Model artifact at the model the Vertex custom job exported; return its URI."""
    from pipelines.jobs import model_artifact

    model_artifact.describe(model, base_output_directory, job=gcp_resources)
    return model.uri
