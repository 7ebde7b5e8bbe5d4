"""What the kubeflow target creates, as YAML to review: the Katib Experiment, the final job, RBAC.

The final job follows `kubeflow_job_api`: `tfjob.yaml` (a TFJob), or for a TrainJob, in
`trainjob/`, the TensorFlow runtime to install once (`trainingruntime.yaml`, cluster admin)
and an example TrainJob in each release's override field (`trainjob.yaml`: Trainer v2.2+
`runtimePatches`; `trainjob-v2.1.yaml`: `podTemplateOverrides`); `auto` writes both kinds.
With `trial_workers` > 0 each trial is a TrainJob (`job_kind`: the final job is one
too), and `trainjob/` also holds what Katib needs for them (`katib.yaml`: its controller
allowed to run TrainJobs, the step allowed to read `katib-config`) and the Experiment in
Trainer v2.1's field (`experiment-v2.1.yaml`).

`hpt-pipeline manifests --target kubeflow --output DIR` writes them from the settings
with the same builders the pipeline's steps use, so `kubectl apply --dry-run=server -f
DIR` checks them against the cluster's CRDs and admission webhooks before a run. The
dataset and output locations are only known at run time: the files use the data
volume's mount (`data_mount_path`) or `pipeline_root`, under `example/` folders.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from pipelines.jobs import trainer_args, worker_pools
from pipelines.settings import Settings
from pipelines.settings_space import study_space
from pipelines.targets.kubeflow import (
    experiment,
    job_kind,
    katib_rules,
    kube,
    rbac,
    spot,
    tfjob,
    trainjob,
)
from pipelines.targets.kubeflow.trial_template import TrialPods
from pipelines.targets.kubeflow.trial_trainjob import TRIAL_RESOURCE
from trainer.contract import FIXED_TRAINER_SETTINGS

FILES = ("experiment.yaml", "tfjob.yaml", "rbac.yaml")
# In a folder of their own, so `kubectl apply --dry-run=server -f DIR` checks what every
# cluster serves; the two examples differ in the override field, one per Trainer release.
TRAINJOB_FILES = {  # file → the TrainJob override field its example uses
    "trainjob/trainjob.yaml": trainjob.PATCHES,
    "trainjob/trainjob-v2.1.yaml": trainjob.V21_OVERRIDES,
}
RUNTIME_FILE = "trainjob/trainingruntime.yaml"
# Multi-node trials (trial_workers > 0): Katib's side, and the Experiment whose trial
# TrainJobs use Trainer v2.1's override field (experiment.yaml uses v2.2+'s).
KATIB_FILE = "trainjob/katib.yaml"
EXPERIMENT_V21_FILE = "trainjob/experiment-v2.1.yaml"
NAMESPACE_LABEL = {"katib.kubeflow.org/metrics-collector-injection": "enabled"}


def _root(settings: Settings) -> str:
    return (
        settings.kubeflow.data_mount_path
        if settings.kubeflow.data_pvc
        else (settings.cloud.pipeline_root or "/data")
    )


def _args(settings: Settings, tuned: Collection[str]) -> list[str]:
    fixed = {name: settings.value(name) for name in FIXED_TRAINER_SETTINGS}
    fixed["weights"] = (
        settings.architecture.weights or ""
    )  # the model's own default, as the trainer reads it
    return trainer_args.trainer_flags(f"{_root(settings)}/example/dataset", fixed, tuned)


def _pools(
    settings: Settings,
    workers: int,
    accelerators: int,
    accelerator: str,
    tuned: Collection[str] = (),
) -> list[dict[str, Any]]:
    """A job's pools, a chief and `workers`, as `components/job_specs.py` builds them."""
    return worker_pools.training_worker_pool_specs(
        image_uri=settings.images.trainer_image,
        command=trainer_args.TRAINER_COMMAND,
        args=_args(settings, tuned),
        accelerator_type=accelerator if accelerators else None,
        accelerator_count=accelerators,
        worker_count=workers,
        expect_gpus=True,  # the pod requests the GPUs: the trainer refuses to train without them
    )


def _experiment(settings: Settings, override_field: str = trainjob.PATCHES) -> dict[str, Any]:
    """The Experiment a run creates (trials as Jobs, or TrainJobs in `override_field`)."""
    space = study_space(settings)
    study_dir = f"{_root(settings)}/example/study"
    trial = _pools(
        settings,
        settings.training.trial_workers,
        settings.machines.trial_accelerator_count,
        settings.machines.trial_accelerator_type,
        tuned=[p.parameter_id for p in space.parameters],  # Katib appends each one
    )
    exp = experiment.build_experiment(
        name=experiment.experiment_name(
            f"{settings.cloud.display_name}-study",
            study_dir,
            job_kind.trial_nodes(settings),
        ),
        namespace=settings.kubeflow.kubeflow_namespace,
        study=experiment.StudyPayload(
            study_spec_parameters=space.to_study_spec_parameters(),
            study_spec_metrics=space.to_study_spec_metrics(),
            study_spec_algorithm=settings.study.algorithm,
            study_spec_measurement_selection_type=settings.study.measurement_selection,
            max_trial_count=settings.study.max_trials,
            parallel_trial_count=settings.study.parallel_trials,
            max_failed_trial_count=settings.study.max_failed_trials,
            early_stopping=settings.study.early_stopping,
        ),
        pods=TrialPods(
            worker_pool_specs=trial,
            cpu=settings.kubeflow.kubeflow_cpu,
            memory=settings.kubeflow.kubeflow_memory,
            base_output_directory=study_dir,
            service_account=settings.kubeflow.kubeflow_service_account or "",
            pvc_name=settings.kubeflow.data_pvc or "",
            data_mount_path=settings.kubeflow.data_mount_path if settings.kubeflow.data_pvc else "",
            nodes=job_kind.trial_nodes(settings),
            spot_label=spot.spot_label(settings, "trial_scheduling"),
        ),
        # What a run creates: the pipeline's `study_dir` parameter is empty unless given at
        # submit, and then the Experiment is per run (`katib_tune`: resumable=bool(study_dir)).
        resume_policy=experiment.PER_RUN_POLICY,
        override_field=override_field,
    )
    katib_rules.check_experiment(exp)
    return exp


def build(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """The documents of each file, built and checked as the pipeline's steps do."""
    api = job_kind.job_api_setting(
        settings.kubeflow.kubeflow_job_api, job_kind.trial_nodes(settings)
    )
    trial_trainjobs = job_kind.trial_kind(job_kind.trial_nodes(settings)) == job_kind.TRAINJOB
    files: dict[str, list[dict[str, Any]]] = {"experiment.yaml": [_experiment(settings)]}
    pools = _pools(
        settings,
        settings.training.workers,
        settings.machines.final_accelerator_count,
        settings.machines.final_accelerator_type,
    )
    final_dir = f"{_root(settings)}/example/final"
    nodes = 1 + settings.training.workers
    name = trainjob.trainjob_name(f"{settings.cloud.display_name}-final", final_dir, nodes)
    pod = kube.ReplicaPods(
        cpu=settings.kubeflow.kubeflow_cpu,
        memory=settings.kubeflow.kubeflow_memory,
        service_account=settings.kubeflow.kubeflow_service_account,
        data_pvc=settings.kubeflow.data_pvc,
        data_mount_path=settings.kubeflow.data_mount_path,
        spot_label=spot.spot_label(settings, "final_scheduling"),
    )
    if api in ("tfjob", "auto"):
        job = tfjob.to_manifest(
            tfjob.build_tfjob(name, settings.kubeflow.kubeflow_namespace, pools, final_dir, pod)
        )
        tfjob.validate_tfjob(job)
        files["tfjob.yaml"] = [job]
    if api in ("trainjob", "auto"):
        files[RUNTIME_FILE] = [trainjob.runtime_manifest()]
        for file, field in TRAINJOB_FILES.items():
            files[file] = [
                trainjob.build_trainjob(
                    name,
                    settings.kubeflow.kubeflow_namespace,
                    pools,
                    final_dir,
                    pod,
                    override_field=field,
                )
            ]
    if trial_trainjobs:  # the Experiment in Trainer v2.1's field; what Katib's side needs
        files[EXPERIMENT_V21_FILE] = [_experiment(settings, trainjob.V21_OVERRIDES)]
        files[KATIB_FILE] = rbac.katib_trainjobs(
            settings.kubeflow.kubeflow_namespace, settings.kubeflow.kubeflow_service_account
        )
    files["rbac.yaml"] = rbac.manifests(
        settings.kubeflow.kubeflow_namespace, settings.kubeflow.kubeflow_service_account
    )
    return files


def notes(settings: Settings) -> list[str]:
    """What the reader should know that no file says (`experiment.objective_notes`)."""
    space = study_space(settings)
    lines = experiment.objective_notes([m.metric_id for m in space.metrics])
    if job_kind.trial_kind(job_kind.trial_nodes(settings)) == job_kind.TRAINJOB:
        lines.append(
            f"trial_workers={settings.training.trial_workers}: each trial is a TrainJob "
            f"(Katib 0.19+): ConfigMap {rbac.KATIB_NAMESPACE}/{rbac.KATIB_CONFIG} must list "
            f"{TRIAL_RESOURCE} under init.controller.trialResources (Katib 0.19's installs do; "
            f"else add it and restart katib-controller); apply {KATIB_FILE} once (cluster "
            f"admin); {EXPERIMENT_V21_FILE} is the Experiment for Trainer v2.1"
        )
    return lines


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
