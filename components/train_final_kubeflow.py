"""Kubeflow binding of the final training step: a TFJob (Chief + Workers), its model an artifact.

The Training Operator sets `TF_CONFIG` in each replica, which the trainer reads;
the chief exports to `<base_output_directory>/model/` (`AIP_MODEL_DIR`, set in
the replicas as Vertex sets it), where `model` then points. With a PVC
(`data_pvc`), this component's pod must mount it too, at `data_mount_path`, to
read the exported model card.
"""

from kfp import dsl

from components.base import component


@component
def train_with_tfjob(
    worker_pool_specs: list,
    base_output_directory: str,
    display_name: str,
    namespace: str,
    service_account: str,
    data_pvc: str,
    data_mount_path: str,
    cpu: str,
    memory: str,
    timeout_s: int,
    model: dsl.Output[dsl.Model],
) -> str:
    """Create (or reuse) the TFJob, wait for it, describe the chief's export; return where it is."""
    from pipelines.jobs import model_artifact
    from pipelines.jobs.trainer_args import artifact_location
    from pipelines.targets.kubeflow import final_job

    job = final_job.run_final_job(
        worker_pool_specs=worker_pool_specs,
        base_output_directory=base_output_directory,
        display_name=display_name,
        namespace=namespace,
        cpu=cpu,
        memory=memory,
        service_account=service_account,
        data_pvc=data_pvc,
        data_mount_path=data_mount_path,
        timeout_s=timeout_s,
    )
    meta = job["metadata"]
    model_artifact.describe(model, base_output_directory, job=f"{meta['namespace']}/{meta['name']}")
    return artifact_location(model)
