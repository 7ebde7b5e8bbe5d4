"""Vertex binding of the features step: a custom job on the trial machine type, one GPU."""

from kfp import dsl

from components.base import component


@component
def features_on_vertex(
    worker_pool_specs: list,
    base_output_directory: str,
    features_dir: str,
    trainable_blocks: str,
    reason: str,
    display_name: str,
    project: str,
    location: str,
    service_account: str,
    network: str,
    encryption_spec_key_name: str,
    labels: dict,
    gcp_resources: dsl.OutputPath(str),  # type: ignore[valid-type]
    features: dsl.Output[dsl.Artifact],
):
    """Run `python -m trainer.features` as a Vertex custom job (nothing when the plan is empty)."""
    from pipelines.jobs import features_artifact
    from pipelines.payloads import strict_parse
    from pipelines.targets.vertex import features_job

    start = features_artifact.clock()
    result = features_artifact.SKIPPED
    if worker_pool_specs:
        payload = features_job.custom_job_payload(
            display_name=display_name,
            worker_pool_specs=worker_pool_specs,
            base_output_directory=base_output_directory,
            service_account=service_account,
            network=network,
            encryption_spec_key_name=encryption_spec_key_name,
            labels=labels,
        )
        strict_parse("CustomJob", payload, "features job")  # refuse what the service would
        features_job.run_custom_job(
            payload, project=project, location=location, gcp_resources=gcp_resources
        )
        result = features_artifact.DONE
    else:
        with open(gcp_resources, "w") as f:
            f.write("{}")  # no job: an empty resource list
    print(
        features_artifact.describe(
            features,
            features_dir=features_dir,
            trainable_blocks=trainable_blocks,
            reason=reason,
            seconds=features_artifact.clock() - start,
            result=result,
        )
    )
