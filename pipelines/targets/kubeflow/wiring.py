"""The `kubeflow` target: Katib tunes, a TFJob retrains, the model is a KFP Model artifact.

For open-source Kubeflow (Kubeflow Pipelines 2.x, Katib, the Training Operator).
The tune step creates a Katib Experiment from the same study payload the other
targets run (`steps/tune.py`), the final job is a TFJob built from the same
`worker_pool_specs` (`steps/train_final.py`), and registration records the model with its
evaluation (`steps/register.py`; Kubeflow Model Registry too when `model_registry_url` is
set). Cluster settings (namespace, service account, pod resources, the optional data PVC)
are compile-time values.
With `data_pvc`, every step that reads or writes the dataset or the model mounts
the PVC with kfp-kubernetes, and so do the trial and replica pods.
"""

from collections.abc import Callable
from typing import Any

from kfp import dsl

from pipelines.settings import ENV_PREFIX, Settings, SettingsError
from pipelines.targets.kubeflow.steps.features import features_on_kubeflow
from pipelines.targets.kubeflow.steps.register import register_on_kubeflow
from pipelines.targets.kubeflow.steps.train_final import train_with_tfjob
from pipelines.targets.kubeflow.steps.tune import tune_on_katib
from pipelines.wiring.base import (
    HALVING_PARAMETERS,
    SCHEDULING_PARAMETERS,
    Binding,
    refuse_halving,
    refuse_scheduling,
    refuse_vertex_only,
    study_inputs,
    tracking_inputs,
)


def check_settings(settings: Settings) -> None:
    """Refuse what every run would refuse on the cluster: compile, manifests, submit, schedule.

    Raises:
        SettingsError: `kubeflow_namespace: kubeflow`, multi-node trials with
            `kubeflow_job_api: tfjob` (`job_kind`), flex-start capacity, or
            `tracking: vertex` or a `tensorboard` (Vertex's); one line.
    """
    from pipelines.targets.kubeflow.job_kind import JobKindError, job_api_setting, trial_nodes

    refuse_scheduling(
        settings,
        "a cluster has no queued-capacity request here (spot is a node pool: "
        "kubeflow_spot_node_label)",
        allowed=("standard", "spot"),
    )
    refuse_vertex_only(settings, "kubeflow")

    if settings.kubeflow.kubeflow_namespace == "kubeflow":
        raise SettingsError(
            "kubeflow_namespace=kubeflow: Kubeflow's own namespace runs no trials in a full "
            "install (no Katib metrics-collector label; PSS restricted from 1.11): pass "
            "--namespace with your profile namespace (compile, manifests, submit, schedule), "
            f"or set kubeflow_namespace in --config or {ENV_PREFIX}KUBEFLOW_NAMESPACE"
        )
    try:
        job_api_setting(settings.kubeflow.kubeflow_job_api, trial_nodes(settings))
    except JobKindError as err:
        raise SettingsError(str(err)) from None


def _job_api(settings: Settings) -> str:
    """The job API both steps resolve: one choice for trials and the final job (`job_kind`)."""
    from pipelines.targets.kubeflow.job_kind import job_api_setting, trial_nodes

    check_settings(settings)
    return job_api_setting(settings.kubeflow.kubeflow_job_api, trial_nodes(settings))


def _cluster(settings: Settings) -> dict[str, Any]:
    """Where and how the Katib trials and TFJob replicas run (settings refused first)."""
    check_settings(settings)
    return dict(
        namespace=settings.kubeflow.kubeflow_namespace,
        service_account=settings.kubeflow.kubeflow_service_account or "",
        data_pvc=settings.kubeflow.data_pvc or "",
        data_mount_path=settings.kubeflow.data_mount_path,
        cpu=settings.kubeflow.kubeflow_cpu,
        memory=settings.kubeflow.kubeflow_memory,
        timeout_s=settings.kubeflow.kubeflow_timeout_s,
    )


def _mount_data(task: Any, settings: Settings) -> Any:
    """Mount the data PVC (when set) in a step that reads or writes datasets or models."""
    if settings.kubeflow.data_pvc:
        from kfp import kubernetes

        kubernetes.mount_pvc(
            task, pvc_name=settings.kubeflow.data_pvc, mount_path=settings.kubeflow.data_mount_path
        )
    return task


def _kubeflow_features(op: Callable, p: Any, settings: Settings, spec: Any) -> Any:
    task = op(features_on_kubeflow)(
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        base_output_directory=spec.outputs["base_output_directory"],
        features_dir=spec.outputs["features_dir"],
        trainable_blocks=spec.outputs["trainable_blocks"],
        reason=spec.outputs["reason"],
        display_name=f"{settings.cloud.display_name}-features",
        job_api=_job_api(settings),  # as the final job: what the cluster serves
        pending_grace_s=settings.kubeflow.kubeflow_pending_grace_s,
        **_cluster(settings),
    ).set_display_name("Features (frozen backbone, one-replica job)")
    task.set_caching_options(False)  # creates cluster objects; the cache is keyed by the trainer
    _mount_data(task, settings)  # sees the cache folder on the claim (reused or computed)
    return task.outputs["features"]


def _halving_offers(settings: Settings) -> str:
    """What Katib would run for `scheduler` asha or hyperband (refused: `refuse_halving`)."""
    from pipelines.targets.kubeflow.katib_suggestions import hyperband_outcome

    study = settings.study
    if study.scheduler != "hyperband":
        return "Katib has no asynchronous successive halving (scheduler=median is its medianstop)"
    epochs = int(settings.value("epochs"))
    return hyperband_outcome(
        study.parallel_trials, study.max_trials, study.reduction_factor, epochs
    )


def _kubeflow_tune(op: Callable, p: Any, settings: Settings, dataset: Any, spec: Any) -> Any:
    refuse_halving(settings, _halving_offers(settings))
    from pipelines.targets.kubeflow.job_kind import trial_nodes
    from pipelines.targets.kubeflow.katib_tune import refuse_budgets
    from pipelines.targets.kubeflow.spot import spot_label

    study = settings.study
    try:
        refuse_budgets(study.max_study_hours, study.max_trials_no_progress)
    except ValueError as err:
        raise SettingsError(str(err)) from None
    task = op(tune_on_katib)(
        **study_inputs(p, spec),
        display_name=p.study_display_name,
        experiment_name="",  # derived from the study folder: a rerun resumes the Experiment
        early_stopping=p.early_stopping,
        study_dir=p.study_dir,  # given: a later run may resume the Experiment
        job_api=_job_api(settings),  # the final job's API, checked before the study
        pending_grace_s=settings.kubeflow.kubeflow_pending_grace_s,
        trial_nodes=trial_nodes(settings),  # > 1 (trial_workers): TrainJob trials
        max_study_hours=p.max_study_hours,  # refused: Katib has no study budget
        max_trials_no_progress=p.max_trials_no_progress,
        spot_label=spot_label(settings, "trial_scheduling"),  # hidden setting: a constant
        **tracking_inputs(p, settings),  # trials nest under KFP's task run when it sets one
        **_cluster(settings),
    ).set_display_name("Tune (Katib Experiment)")
    task.set_caching_options(False)  # creates and reads cluster objects
    return task.outputs["trials"]


def _kubeflow_train(op: Callable, p: Any, settings: Settings, spec: Any) -> tuple[Any, Any]:
    job = {"tfjob": "TFJob: chief + workers", "trainjob": "TrainJob: 1 + workers nodes"}
    from pipelines.targets.kubeflow.spot import spot_label

    task = op(train_with_tfjob)(
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        base_output_directory=spec.outputs["base_output_directory"],
        display_name=p.final_display_name,
        job_api=_job_api(settings),  # auto: resolved against the cluster at run time
        pending_grace_s=settings.kubeflow.kubeflow_pending_grace_s,
        spot_label=spot_label(settings, "final_scheduling"),  # hidden setting: a constant
        **_cluster(settings),
    ).set_display_name(f"Train final model ({job.get(_job_api(settings), 'TFJob or TrainJob')})")
    task.set_caching_options(False)  # a training job: never replayed
    _mount_data(task, settings)  # reads the chief's model card
    return task.outputs["model"], task.outputs["Output"]


def _kubeflow_register(
    op: Callable, p: Any, settings: Settings, *, model_uri: Any, **inputs: Any
) -> Any:
    """Register: `inputs` (model, evaluation, trials, dataset, best_trial_id) go as they are."""
    task = op(register_on_kubeflow)(
        **inputs,
        model_name=p.model_display_name,
        model_registry_url=settings.kubeflow.model_registry_url or "",
        run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        data_pvc=settings.kubeflow.data_pvc or "",  # the registry gets pvc://<claim>/<path>
        data_mount_path=settings.kubeflow.data_mount_path,
    ).set_display_name("Register model (KFP Model + Model Registry)")
    task.set_caching_options(False)  # may write to Model Registry
    return task.outputs["registered"]


def _katib_space(space: Any) -> None:
    """Refuse at compile (and so at submit) a space Katib refuses: conditional parameters."""
    from pipelines.targets.kubeflow.experiment import KatibSpecError, check_space

    try:
        check_space(space)
    except KatibSpecError as err:
        raise SettingsError(f"search_space: {err}") from None


def notes(settings: Settings) -> list[str]:
    """What compile, submit and schedule say first: Katib searches on the primary objective."""
    from pipelines.targets.kubeflow.experiment import objective_notes

    return objective_notes([o.partition(":")[0] for o in settings.study.objectives])


BINDING = Binding(
    tune=_kubeflow_tune,
    train_final=_kubeflow_train,
    register=_kubeflow_register,
    mount_data=_mount_data,
    check_space=_katib_space,
    notes=notes,
    features=_kubeflow_features,
    # refused by the bindings; dataset_dir: the local run's (each run its own dataset folder)
    hidden_parameters=HALVING_PARAMETERS | SCHEDULING_PARAMETERS | {"dataset_dir"},
    fans_out=True,  # prepare_workers > 1: shard groups as parallel pipeline tasks
    shared_root=lambda s: s.kubeflow.data_mount_path if s.kubeflow.data_pvc else "",
)
