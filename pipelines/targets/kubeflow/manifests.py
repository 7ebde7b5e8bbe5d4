"""What the kubeflow target creates, as YAML to review: the Katib Experiment, the final job, RBAC.

The final job follows `kubeflow_job_api`: `tfjob.yaml` (a TFJob), or for a TrainJob, in
`trainjob/`, the TensorFlow runtime to install once (`trainingruntime.yaml`, cluster admin)
and an example TrainJob in each release's override field (`trainjob.yaml`: Trainer v2.2+
`runtimePatches`; `trainjob-v2.1.yaml`: `podTemplateOverrides`); `auto` writes both kinds.

`hpt-pipeline manifests --target kubeflow --output DIR` writes them from the settings
with the same builders the pipeline's steps use, so `kubectl apply --dry-run=server -f
DIR` checks them against the cluster's CRDs and admission webhooks before a run. The
dataset and output locations are only known at run time: the files use the data
volume's mount (`data_mount_path`) or `pipeline_root`, under `example/` folders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipelines.jobs import trainer_args, worker_pools
from pipelines.settings import Settings
from pipelines.settings_space import study_space
from pipelines.targets.kubeflow import experiment, katib_rules, rbac, tfjob, trainjob
from trainer.contract import FIXED_TRAINER_SETTINGS

FILES = ("experiment.yaml", "tfjob.yaml", "rbac.yaml")
# In a folder of their own, so `kubectl apply --dry-run=server -f DIR` checks what every
# cluster serves; the two examples differ in the override field, one per Trainer release.
TRAINJOB_FILES = {  # file → the TrainJob override field its example uses
    "trainjob/trainjob.yaml": trainjob.PATCHES,
    "trainjob/trainjob-v2.1.yaml": trainjob.V21_OVERRIDES,
}
RUNTIME_FILE = "trainjob/trainingruntime.yaml"
NAMESPACE_LABEL = {"katib.kubeflow.org/metrics-collector-injection": "enabled"}


def _root(settings: Settings) -> str:
    return settings.data_mount_path if settings.data_pvc else (settings.pipeline_root or "/data")


def _args(settings: Settings) -> list[str]:
    fixed = {name: getattr(settings, name) for name in FIXED_TRAINER_SETTINGS}
    fixed["weights"] = settings.weights or ""  # the model's own default, as the trainer reads it
    return trainer_args.trainer_flags(f"{_root(settings)}/example/dataset", fixed)


def _pool(settings: Settings, count: int, accelerators: int, accelerator: str) -> dict[str, Any]:
    pools = worker_pools.trial_worker_pool_specs(
        image_uri=settings.trainer_image,
        command=trainer_args.TRAINER_COMMAND,
        args=_args(settings),
        accelerator_type=accelerator if accelerators else None,
        accelerator_count=accelerators,
        expect_gpus=True,  # the pod requests the GPUs: the trainer refuses to train without them
    )
    return {**pools[0], "replica_count": count}


def build(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """The documents of each file, built and checked as the pipeline's steps do."""
    space = study_space(settings)
    cluster = dict(
        namespace=settings.kubeflow_namespace,
        cpu=settings.kubeflow_cpu,
        memory=settings.kubeflow_memory,
        service_account=settings.kubeflow_service_account or "",
    )
    study_dir = f"{_root(settings)}/example/study"
    trial = _pool(settings, 1, settings.trial_accelerator_count, settings.trial_accelerator_type)
    exp = experiment.build_experiment(
        name=experiment.experiment_name(f"{settings.display_name}-study", study_dir),
        study_spec_parameters=space.to_study_spec_parameters(),
        study_spec_metrics=space.to_study_spec_metrics(),
        study_spec_algorithm=settings.algorithm,
        study_spec_measurement_selection_type=settings.measurement_selection,
        max_trial_count=settings.max_trials,
        parallel_trial_count=settings.parallel_trials,
        max_failed_trial_count=settings.max_failed_trials,
        worker_pool_specs=[trial],
        base_output_directory=study_dir,
        pvc_name=settings.data_pvc or "",
        pvc_mount_path=settings.data_mount_path if settings.data_pvc else "",
        early_stopping=settings.early_stopping,
        # What a run creates: the pipeline's `study_dir` parameter is empty unless given at
        # submit, and then the Experiment is per run (`katib_tune`: resumable=bool(study_dir)).
        resume_policy=experiment.PER_RUN_POLICY,
        **cluster,
    )
    katib_rules.check_experiment(exp)
    chief = _pool(settings, 1, settings.final_accelerator_count, settings.final_accelerator_type)
    pools = [chief] + ([{**chief, "replica_count": settings.workers}] if settings.workers else [])
    final_dir = f"{_root(settings)}/example/final"
    name = tfjob.tfjob_name(f"{settings.display_name}-final", final_dir)
    pod = dict(
        cpu=settings.kubeflow_cpu,
        memory=settings.kubeflow_memory,
        service_account=settings.kubeflow_service_account,
        data_pvc=settings.data_pvc,
        data_mount_path=settings.data_mount_path,
    )
    files: dict[str, list[dict[str, Any]]] = {"experiment.yaml": [exp]}
    if settings.kubeflow_job_api in ("tfjob", "auto"):
        job = tfjob.to_manifest(
            tfjob.build_tfjob(name, settings.kubeflow_namespace, pools, final_dir, **pod)  # type: ignore[arg-type]
        )
        tfjob.validate_tfjob(job)
        files["tfjob.yaml"] = [job]
    if settings.kubeflow_job_api in ("trainjob", "auto"):
        files[RUNTIME_FILE] = [trainjob.runtime_manifest()]
        for file, field in TRAINJOB_FILES.items():
            files[file] = [
                trainjob.build_trainjob(
                    name,
                    settings.kubeflow_namespace,
                    pools,
                    final_dir,
                    override_field=field,
                    **pod,  # type: ignore[arg-type]
                )
            ]
    files["rbac.yaml"] = rbac.manifests(
        settings.kubeflow_namespace, settings.kubeflow_service_account
    )
    return files


def notes(settings: Settings) -> list[str]:
    """What the reader should know that no file says (`experiment.integer_log_notes`)."""
    return experiment.integer_log_notes(study_space(settings))


def write(settings: Settings, output: str | Path) -> list[Path]:
    """Write the files into `output` (created); returns their paths."""
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, docs in build(settings).items():
        path = folder / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        written.append(path)
    return written
