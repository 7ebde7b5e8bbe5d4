"""The `local` target: the study, the final job and the registry run on this machine.

The tune step runs the Vertex study payload with Optuna (`tune_locally`), the
final job runs one process per replica (`train_locally`), and registration
writes a new version into the local registry folder.
"""

from collections.abc import Callable
from typing import Any

from pipelines.settings import Settings
from pipelines.targets.local.steps.features import features_locally
from pipelines.targets.local.steps.register import register_locally
from pipelines.targets.local.steps.train_final import train_locally
from pipelines.targets.local.steps.tune import tune_locally
from pipelines.wiring.base import (
    SCHEDULING_PARAMETERS,
    Binding,
    refuse_scheduling,
    refuse_vertex_only,
    study_inputs,
    tracking_inputs,
)


def check_settings(settings: Settings) -> None:
    """Refuse what this machine cannot honour (`run`'s preflight and `compile` both check).

    Raises:
        SettingsError: Spot or flex-start capacity (`trial_scheduling`, `final_scheduling`),
            `tracking: vertex` or a `tensorboard` (Vertex's).
    """
    refuse_scheduling(settings, "the local target runs every job on this machine")
    refuse_vertex_only(settings, "local")


def _local_tune(op: Callable, p: Any, settings: Settings, dataset: Any, spec: Any) -> Any:
    check_settings(settings)
    task = op(tune_locally)(
        dataset=dataset,
        **study_inputs(p, spec),
        early_stopping=p.early_stopping,
        scheduler=p.scheduler,
        min_epochs=p.min_epochs,
        reduction_factor=p.reduction_factor,
        epochs=p.epochs,
        max_study_hours=p.max_study_hours,
        max_trials_no_progress=p.max_trials_no_progress,
        seed=p.seed,
        continued_trials=p.continued_trials,  # the study starts from them
        **tracking_inputs(p, settings),
    ).set_display_name("Tune (local study)")
    task.set_caching_options(False)  # reads and resumes the study folder
    return task.outputs["trials"]


def _local_features(op: Callable, p: Any, settings: Settings, spec: Any) -> Any:
    task = op(features_locally)(
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        base_output_directory=spec.outputs["base_output_directory"],
        features_dir=spec.outputs["features_dir"],
        trainable_blocks=spec.outputs["trainable_blocks"],
        reason=spec.outputs["reason"],
    ).set_display_name("Features (frozen backbone, local)")
    task.set_caching_options(False)  # reads and writes the cache folder (keyed by the trainer)
    return task.outputs["features"]


def _local_train(op: Callable, p: Any, settings: Settings, spec: Any) -> tuple[Any, Any]:
    task = op(train_locally)(
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        base_output_directory=spec.outputs["base_output_directory"],
        study_dir=p.study_dir,  # the job is kept there: a rerun reuses or resumes it
    ).set_display_name("Train final model (local multi-worker)")
    task.set_caching_options(False)  # a training job: never replayed
    return task.outputs["model"], None


def _local_register(
    op: Callable, p: Any, settings: Settings, *, model_uri: Any, **inputs: Any
) -> Any:
    return (
        op(register_locally)(registry_dir=p.registry_dir, model_name=p.model_display_name, **inputs)
        .set_display_name("Register model (local registry)")
        .set_caching_options(False)
    )


BINDING = Binding(
    tune=_local_tune,
    train_final=_local_train,
    register=_local_register,
    expects_gpus=False,
    features=_local_features,
    hidden_parameters=SCHEDULING_PARAMETERS,  # refused by check_settings
)
