"""Kubeflow binding of the features step: a one-replica job (the chief) on the shared claim.

The same job builder and wait as the final job (`pipelines/targets/kubeflow/final_job.py`),
with the features job's single pool: one pod on the trial machine's resources, the data
PVC mounted, writing the cache beside the dataset. `job_api` is the final job's choice
(`kubeflow_job_api`), so a cluster serving only Trainer v2 runs it as a TrainJob.
"""

from kfp import dsl

from components.base import component


@component
def features_on_kubeflow(
    worker_pool_specs: list,
    base_output_directory: str,
    features_dir: str,
    trainable_blocks: str,
    reason: str,
    display_name: str,
    namespace: str,
    service_account: str,
    data_pvc: str,
    data_mount_path: str,
    cpu: str,
    memory: str,
    timeout_s: int,
    features: dsl.Output[dsl.Artifact],
    job_api: str = "tfjob",
    pending_grace_s: int = 600,
):
    """Run `python -m trainer.features` in a pod (nothing when the plan caches nothing)."""
    from pipelines.jobs import features_artifact
    from pipelines.targets.kubeflow import final_job

    start = features_artifact.clock()
    before = features_artifact.entries(features_dir)
    result = features_artifact.SKIPPED
    if worker_pool_specs:
        final_job.run_final_job(
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
                gpu_setting="trial_accelerator_count",
                job_api_setting=job_api,
                pending_grace_s=pending_grace_s,
            )
        )
        result = features_artifact.outcome(before, features_artifact.entries(features_dir))
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
