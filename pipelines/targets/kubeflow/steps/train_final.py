"""Kubeflow binding of the final training step: a TFJob or a TrainJob, its model an artifact.

`job_api` (`kubeflow_job_api`: tfjob, trainjob, auto) picks the Training Operator's TFJob
(Chief + Workers; the operator sets `TF_CONFIG`) or Trainer v2's TrainJob (1 + workers
nodes; the trainer forms `TF_CONFIG` from the node's index). The trainer reads it;
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
    job_api: str = "tfjob",
    pending_grace_s: int = 600,
    spot_label: str = "",
) -> str:
    """Create (or reuse) the job, wait for it, describe the chief's export; return where it is.

    `spot_label` (a node label `key=value`) puts the replicas on a spot pool (`spot`).
    """
    from pipelines.jobs import model_artifact
    from pipelines.jobs.trainer_args import artifact_location
    from pipelines.targets.kubeflow import final_job

    job = final_job.run_final_job(
        final_job.FinalJobRequest(
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
            job_api_setting=job_api,
            pending_grace_s=pending_grace_s,
            spot_label=spot_label,
        )
    )
    meta = job["metadata"]
    model_artifact.describe(model, base_output_directory, job=f"{meta['namespace']}/{meta['name']}")
    return artifact_location(model)
