"""The pipeline, written once: `build_pipeline(target, settings)`.

prepare_dataset → build trial job spec → tune → select_best_trial →
build final job spec → train_final → evaluate → (if it passes) register.

Only three steps differ between the targets, and only in what executes the
same payloads: `vertex` binds them to GCPC's HyperparameterTuningJobRunOp,
CustomTrainingJobOp and ModelUploadOp; `local` to the local executors.
"""

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

from google_cloud_pipeline_components.types import artifact_types
from google_cloud_pipeline_components.v1.custom_job import CustomTrainingJobOp
from google_cloud_pipeline_components.v1.hyperparameter_tuning_job import (
    HyperparameterTuningJobRunOp,
)
from google_cloud_pipeline_components.v1.model import ModelUploadOp
from kfp import dsl

from components import base
from components.evaluate import evaluate_model
from components.fetch_trials import fetch_trials
from components.find_model import find_parent_model
from components.job_specs import final_job_spec, trial_job_spec
from components.prepare_dataset import prepare_dataset
from components.register import register_locally
from components.select_best_trial import select_best_trial
from components.train_final import model_from_job, train_locally
from components.tune_local import tune_locally
from pipelines.search_space import Metric, SearchSpace, load_search_space
from pipelines.settings import Settings

with warnings.catch_warnings():  # GCPC's preview package warns about kfp's future default image
    warnings.simplefilter("ignore", FutureWarning)
    from google_cloud_pipeline_components.preview.model_evaluation import (
        ModelImportEvaluationOp,
    )

TARGETS = ("local", "vertex")
PIPELINE_DESCRIPTION = (
    "Prepare an image dataset, tune a distributed TensorFlow CNN (MirroredStrategy trials), "
    "retrain the best configuration with MultiWorkerMirroredStrategy, evaluate and register it."
)


@dataclasses.dataclass(frozen=True)
class Binding:
    """What executes the tune, train_final and register steps for one target."""

    tune: Callable[..., Any]
    train_final: Callable[..., Any]
    register: Callable[..., Any]


def study_space(settings: Settings) -> SearchSpace:
    """The search space from settings, optimising the settings' metric and goal."""
    space = load_search_space(settings.search_space)
    return SearchSpace(space.parameters, (Metric(settings.metric_tag, settings.goal),))


# --- local target ---------------------------------------------------------------------------------


def _local_tune(op: Callable, p: Any, dataset: Any, spec: Any) -> Any:
    task = op(tune_locally)(
        dataset=dataset,
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        study_spec_metrics=p.study_spec_metrics,
        study_spec_parameters=p.study_spec_parameters,
        max_trial_count=p.max_trial_count,
        parallel_trial_count=p.parallel_trial_count,
        max_failed_trial_count=p.max_failed_trial_count,
        study_spec_algorithm=p.algorithm,
        study_spec_measurement_selection_type=p.measurement_selection,
        base_output_directory=spec.outputs["base_output_directory"],
        early_stopping=p.early_stopping,
        seed=p.seed,
    ).set_display_name("Tune (local study)")
    return task.outputs["trials"]


def _local_train(op: Callable, p: Any, spec: Any) -> tuple[Any, Any]:
    task = op(train_locally)(
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        base_output_directory=spec.outputs["base_output_directory"],
    ).set_display_name("Train final model (local multi-worker)")
    return task.outputs["model"], None


def _local_register(
    op: Callable, p: Any, settings: Settings, *, model_uri: Any, **inputs: Any
) -> Any:
    return op(register_locally)(
        registry_dir=p.registry_dir, model_name=p.model_display_name, **inputs
    ).set_display_name("Register model (local registry)")


# --- vertex target --------------------------------------------------------------------------------


def _vertex_tune(op: Callable, p: Any, dataset: Any, spec: Any) -> Any:
    study = HyperparameterTuningJobRunOp(
        display_name=p.study_display_name,
        base_output_directory=spec.outputs["base_output_directory"],
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        study_spec_metrics=p.study_spec_metrics,
        study_spec_parameters=p.study_spec_parameters,
        max_trial_count=p.max_trial_count,
        parallel_trial_count=p.parallel_trial_count,
        max_failed_trial_count=p.max_failed_trial_count,
        study_spec_algorithm=p.algorithm,
        study_spec_measurement_selection_type=p.measurement_selection,
        location=p.location,
        service_account=p.service_account,
        network=p.network,
        encryption_spec_key_name=p.encryption_spec_key_name,
    ).set_display_name("Tune (Vertex HPT job)")
    fetched = op(fetch_trials)(
        gcp_resources=study.outputs["gcp_resources"],
        base_output_directory=spec.outputs["base_output_directory"],
        pipeline_job=dsl.PIPELINE_JOB_RESOURCE_NAME_PLACEHOLDER,
    )
    return fetched.set_display_name("Fetch trials").outputs["trials"]


def _vertex_train(op: Callable, p: Any, spec: Any) -> tuple[Any, Any]:
    job = CustomTrainingJobOp(
        display_name=p.final_display_name,
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        base_output_directory=spec.outputs["base_output_directory"],
        restart_job_on_worker_restart=True,
        location=p.location,
        service_account=p.service_account,
        network=p.network,
        encryption_spec_key_name=p.encryption_spec_key_name,
        labels=p.labels,
    ).set_display_name("Train final model (Vertex multi-worker job)")
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
        metadata={"containerSpec": {"imageUri": settings.serving_image}},
    ).set_display_name("Serving container model")
    upload_args = dict(
        display_name=p.model_display_name,
        unmanaged_container_model=serving.output,
        location=p.location,
        labels=p.labels,
        encryption_spec_key_name=p.encryption_spec_key_name,
        description="Tuned and multi-worker trained by hpt-pipeline",
    )
    parent = op(find_parent_model)(
        display_name=p.model_display_name, location=p.location, parent_model=p.parent_model
    ).set_display_name("Find the model to version")
    with dsl.If(parent.outputs["Output"] == True, name="new-version"):  # noqa: E712
        as_version = ModelUploadOp(parent_model=parent.outputs["model"], **upload_args)
        as_version.set_display_name("Register a new model version (Vertex Model Registry)")
    with dsl.Else(name="first-version"):
        as_new = ModelUploadOp(**upload_args)
        as_new.set_display_name("Register a new model (Vertex Model Registry)")
    uploaded = dsl.OneOf(as_version.outputs["model"], as_new.outputs["model"])
    ModelImportEvaluationOp(
        model=uploaded,
        metrics=evaluation,
        problem_type="classification",
        display_name="test split",
    ).set_display_name("Attach evaluation to the model")
    return uploaded


BINDINGS = {
    "local": Binding(_local_tune, _local_train, _local_register),
    "vertex": Binding(_vertex_tune, _vertex_train, _vertex_register),
}


def build_pipeline(target: str, settings: Settings) -> Any:
    """The pipeline for `target` (`local` or `vertex`), its parameter defaults from `settings`.

    Raises:
        ValueError: Unknown target.
        SearchSpaceError: A bad search space (before anything is compiled or run).
    """
    if target not in TARGETS:
        raise ValueError(f"target={target!r}: expected one of {', '.join(TARGETS)}")
    binding = BINDINGS[target]
    space = study_space(settings)
    s = settings

    parameters = space.to_study_spec_parameters()
    metrics = space.to_study_spec_metrics()
    labels_default = dict(s.labels)

    def op(component: Any) -> Any:
        return base.with_image(component, s.components_image)

    @dsl.pipeline(name=s.display_name, description=PIPELINE_DESCRIPTION)
    def hpt_pipeline(
        source: str = s.source,
        image_size: int = s.image_size,
        validation_fraction: float = s.validation_fraction,
        test_fraction: float = s.test_fraction,
        seed: int = s.seed,
        study_spec_parameters: list = parameters,
        study_spec_metrics: list = metrics,
        metric_tag: str = s.metric_tag,
        goal: str = s.goal,
        secondary_metric: str = s.secondary_metric or "",
        max_trial_count: int = s.max_trials,
        parallel_trial_count: int = s.parallel_trials,
        max_failed_trial_count: int = s.max_failed_trials,
        algorithm: str = s.algorithm,
        measurement_selection: str = s.measurement_selection,
        early_stopping: bool = s.early_stopping,
        trial_threshold: float = s.trial_threshold or 0.0,
        use_trial_threshold: bool = s.trial_threshold is not None,
        epochs: int = s.epochs,
        batch_size: int = s.batch_size,
        precision: str = s.precision,
        replicas: int = s.replicas,
        trial_machine_type: str = s.trial_machine_type,
        trial_accelerator_type: str = s.trial_accelerator_type,
        trial_accelerator_count: int = s.trial_accelerator_count,
        final_machine_type: str = s.final_machine_type,
        final_accelerator_type: str = s.final_accelerator_type,
        final_accelerator_count: int = s.final_accelerator_count,
        trainer_image: str = s.trainer_image,
        eval_threshold: float = s.eval_threshold or 0.0,
        use_eval_threshold: bool = s.eval_threshold is not None,
        model_display_name: str = s.model_display_name,
        parent_model: str = s.parent_model or "",
        study_display_name: str = f"{s.display_name}-study",
        final_display_name: str = f"{s.display_name}-final",
        location: str = s.region,
        service_account: str = s.service_account or "",
        network: str = s.network or "",
        encryption_spec_key_name: str = s.kms_key or "",
        labels: dict = labels_default,
        study_dir: str = "",
        registry_dir: str = s.registry,
    ):
        p = _Params(locals())
        data = op(prepare_dataset)(
            source=source,
            image_size=image_size,
            validation_fraction=validation_fraction,
            test_fraction=test_fraction,
            seed=seed,
        ).set_display_name("Prepare dataset")
        dataset = data.outputs["dataset"]
        trial_spec = op(trial_job_spec)(
            dataset=dataset,
            trainer_image=trainer_image,
            epochs=epochs,
            batch_size=batch_size,
            metric_tag=metric_tag,
            precision=precision,
            machine_type=trial_machine_type,
            accelerator_type=trial_accelerator_type,
            accelerator_count=trial_accelerator_count,
            study_dir=study_dir,
        ).set_display_name("Build trial job spec")
        trials = binding.tune(op, p, dataset, trial_spec)
        best = op(select_best_trial)(
            trials=trials,
            metric_tag=metric_tag,
            goal=goal,
            secondary_metric=secondary_metric,
            threshold=trial_threshold,
            use_threshold=use_trial_threshold,
        ).set_display_name("Select best trial")
        final_spec = op(final_job_spec)(
            dataset=dataset,
            best_parameters=best.outputs["best_parameters"],
            trainer_image=trainer_image,
            epochs=epochs,
            batch_size=batch_size,
            metric_tag=metric_tag,
            precision=precision,
            machine_type=final_machine_type,
            accelerator_type=final_accelerator_type,
            accelerator_count=final_accelerator_count,
            worker_count=replicas,
        ).set_display_name("Build final job spec")
        model, model_uri = binding.train_final(op, p, final_spec)
        evaluation = op(evaluate_model)(
            model=model,
            dataset=dataset,
            threshold=eval_threshold,
            use_threshold=use_eval_threshold,
        ).set_display_name("Evaluate on the test split")
        with dsl.If(evaluation.outputs["Output"] == True, name="model-passes-threshold"):  # noqa: E712
            binding.register(
                op,
                p,
                s,
                model=model,
                model_uri=model_uri,
                evaluation=evaluation.outputs["metrics"],
                trials=trials,
                dataset=dataset,
                best_trial_id=best.outputs["best_trial_id"],
            )

    return hpt_pipeline


class _Params:
    """Attribute access to the pipeline's parameter channels inside the DSL function."""

    def __init__(self, values: dict[str, Any]):
        self.__dict__.update(values)
