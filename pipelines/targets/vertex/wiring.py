"""The `vertex` target: GCPC's HPT job (Vizier), custom job and model upload run the payloads.

Tuning is an HPT job sent with GCPC's own launcher code (with the study's stopping
spec, which `HyperparameterTuningJobRunOp` cannot send) followed by a step that reads
the job's trials into the trials artifact; the final job is `CustomTrainingJobOp`; the
model is uploaded to Vertex Model Registry (a new version when one exists, which
takes the `default` alias unless `keep_default_version`) with its evaluation attached.
"""

import warnings
from collections.abc import Callable
from typing import Any

from google_cloud_pipeline_components._placeholders import PROJECT_ID_PLACEHOLDER
from google_cloud_pipeline_components.types import artifact_types
from google_cloud_pipeline_components.v1.custom_job import CustomTrainingJobOp
from google_cloud_pipeline_components.v1.model import ModelUploadOp
from kfp import dsl

from pipelines.jobs.machines import MachineError, check_machine
from pipelines.settings import Settings, SettingsError
from pipelines.targets.vertex.experiments import NO_TIME_SERIES, experiment_id
from pipelines.targets.vertex.steps.features import features_on_vertex
from pipelines.targets.vertex.steps.register import find_parent_model
from pipelines.targets.vertex.steps.train_final import final_scheduling, model_from_job
from pipelines.targets.vertex.steps.tune import fetch_trials, tune_on_vertex
from pipelines.tracking.store import VERTEX
from pipelines.wiring.base import HALVING_PARAMETERS, Binding, refuse_halving, study_inputs

with warnings.catch_warnings():  # GCPC's preview package warns about kfp's future default image
    warnings.simplefilter("ignore", FutureWarning)
    from google_cloud_pipeline_components.preview.model_evaluation import (
        ModelImportEvaluationOp,
    )


def _check_machines(settings: Settings) -> None:
    """Refuse machine/accelerator pairs Vertex refuses (`pipelines/jobs/machines.py`)."""
    for pool in ("trial", "final"):
        machine, accelerator, count = (
            settings.value(f"{pool}_{part}")
            for part in ("machine_type", "accelerator_type", "accelerator_count")
        )
        try:
            check_machine(machine, accelerator, count, what=f"{pool}_machine_type")
        except MachineError as err:
            raise SettingsError(str(err)) from None


def _experiment(settings: Settings) -> str:
    """The Vertex AI Experiment of the trials under `tracking: vertex`, else ""."""
    if settings.results.tracking != VERTEX:
        return ""
    try:
        return experiment_id(settings.cloud.display_name)
    except ValueError as err:
        raise SettingsError(str(err)) from None


def _notes(settings: Settings) -> list[str]:
    """Under `tracking: vertex` without a `tensorboard`: the runs get no time series."""
    vertex = settings.results.tracking == VERTEX
    return [NO_TIME_SERIES] if vertex and not settings.cloud.tensorboard else []


def _vertex_tune(op: Callable, p: Any, settings: Settings, dataset: Any, spec: Any) -> Any:
    _check_machines(settings)
    refuse_halving(
        settings,
        "a Vertex HPT job takes stopping rules only (median: scheduler=median; decay curve), "
        "no successive halving",
    )
    study = op(tune_on_vertex)(
        display_name=p.study_display_name,
        project=PROJECT_ID_PLACEHOLDER,
        location=p.location,
        **study_inputs(p, spec),
        service_account=p.service_account,
        network=p.network,
        encryption_spec_key_name=p.encryption_spec_key_name,
        early_stopping=p.early_stopping,
        max_study_hours=p.max_study_hours,  # study_spec.study_stopping_config
        max_trials_no_progress=p.max_trials_no_progress,
        trial_scheduling=p.trial_scheduling,  # trial_job_spec.scheduling: spot, flex_start
        max_wait_hours=p.max_wait_hours,
        labels=p.labels,  # the most expensive job of the run: cost reports need them
        tensorboard=p.tensorboard,  # the trials' TensorBoard logs (needs service_account)
    ).set_display_name("Tune (Vertex HPT job)")
    study.set_caching_options(False)  # creates a Vertex job: never replayed
    fetched = op(fetch_trials)(
        gcp_resources=study.outputs["gcp_resources"],
        base_output_directory=spec.outputs["base_output_directory"],
        pipeline_job=dsl.PIPELINE_JOB_RESOURCE_NAME_PLACEHOLDER,
        experiment=_experiment(settings),  # tracking: vertex; "" writes no ExperimentRuns
        tensorboard=p.tensorboard,  # the Experiment's backing TensorBoard: time series
    )
    fetched.set_caching_options(False)  # asks Vertex for the job's trials
    return fetched.set_display_name("Fetch trials").outputs["trials"]


def _vertex_features(op: Callable, p: Any, settings: Settings, spec: Any) -> Any:
    task = op(features_on_vertex)(
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        base_output_directory=spec.outputs["base_output_directory"],
        features_dir=spec.outputs["features_dir"],
        trainable_blocks=spec.outputs["trainable_blocks"],
        reason=spec.outputs["reason"],
        display_name=f"{settings.cloud.display_name}-features",
        project=PROJECT_ID_PLACEHOLDER,
        location=p.location,
        service_account=p.service_account,
        network=p.network,
        encryption_spec_key_name=p.encryption_spec_key_name,
        labels=p.labels,
    ).set_display_name("Features (frozen backbone, Vertex custom job)")
    task.set_caching_options(False)  # creates a Vertex job; the cache is keyed by the trainer
    return task.outputs["features"]


def _vertex_train(op: Callable, p: Any, settings: Settings, spec: Any) -> tuple[Any, Any]:
    scheduling = op(final_scheduling)(
        strategy=p.final_scheduling, max_wait_hours=p.max_wait_hours
    ).set_display_name("Final job's capacity")
    job = CustomTrainingJobOp(
        strategy=scheduling.outputs["strategy"],  # STANDARD, SPOT or FLEX_START
        max_wait_duration=scheduling.outputs["max_wait_duration"],
        display_name=p.final_display_name,
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        base_output_directory=spec.outputs["base_output_directory"],
        restart_job_on_worker_restart=True,
        location=p.location,
        service_account=p.service_account,
        network=p.network,
        encryption_spec_key_name=p.encryption_spec_key_name,
        labels=p.labels,
        tensorboard=p.tensorboard,
    ).set_display_name("Train final model (Vertex multi-worker job)")
    job.set_caching_options(False)  # creates a Vertex job: never replayed
    located = op(model_from_job)(
        gcp_resources=job.outputs["gcp_resources"],
        base_output_directory=spec.outputs["base_output_directory"],
    ).set_display_name("Locate exported model")
    return located.outputs["model"], located.outputs["Output"]


def _vertex_register(
    op: Callable, p: Any, settings: Settings, *, model_uri: Any, evaluation: Any, **_: Any
) -> Any:
    serving = dsl.importer(
        artifact_uri=model_uri,
        artifact_class=artifact_types.UnmanagedContainerModel,
        metadata={"containerSpec": {"imageUri": settings.images.serving_image}},
    ).set_display_name("Serving container model")
    parent = op(find_parent_model)(
        display_name=p.model_display_name, location=p.location, parent_model=p.parent_model
    ).set_display_name("Find the model to version")
    parent.set_caching_options(False)  # reads the Model Registry: a cached "no model yet" lies
    upload_args = dict(
        display_name=parent.outputs["json_display_name"],  # escaped: GCPC splices it into JSON
        unmanaged_container_model=serving.output,
        location=p.location,
        labels=p.labels,
        encryption_spec_key_name=p.encryption_spec_key_name,
        description="Tuned and multi-worker trained by hpt-pipeline",
    )
    # GCPC gives `default` only to a model's first version (aiplatform's upload moves it):
    # a new version must take it, or whatever serves the model by name keeps version 1.
    aliases = [] if settings.cloud.keep_default_version else ["default"]
    with dsl.If(parent.outputs["Output"] == True, name="new-version"):  # noqa: E712
        as_version = ModelUploadOp(
            parent_model=parent.outputs["model"], version_aliases=aliases, **upload_args
        )
        as_version.set_display_name("Register a new model version (Vertex Model Registry)")
        as_version.set_caching_options(False)
    with dsl.Else(name="first-version"):
        as_new = ModelUploadOp(**upload_args)
        as_new.set_display_name("Register a new model (Vertex Model Registry)")
        as_new.set_caching_options(False)
    uploaded = dsl.OneOf(as_version.outputs["model"], as_new.outputs["model"])
    ModelImportEvaluationOp(
        model=uploaded,
        metrics=evaluation,
        problem_type="classification",
        display_name="test split",
    ).set_display_name("Attach evaluation to the model").set_caching_options(False)
    return uploaded


BINDING = Binding(
    tune=_vertex_tune,
    train_final=_vertex_train,
    register=_vertex_register,
    features=_vertex_features,
    # local/Kubeflow's (tracking: the tune steps that write MLflow runs), and successive
    # halving's (refused here)
    hidden_parameters=frozenset(
        {"tracking", "tracking_uri", "study_dir", "registry_dir", "shared_root", "dataset_dir"}
    )
    | HALVING_PARAMETERS,
    tracks=False,
    notes=_notes,
    fans_out=True,  # prepare_workers > 1: shard groups as parallel pipeline tasks
)
