"""The `local` target: the study, the final job and the registry run on this machine.

The tune step runs the Vertex study payload with Optuna (`tune_locally`), the
final job runs one process per replica (`train_locally`), and registration
writes a new version into the local registry folder.
"""

from collections.abc import Callable
from typing import Any

from components.register import register_locally
from components.train_final import train_locally
from components.tune_local import tune_locally
from pipelines.settings import Settings
from pipelines.wiring.base import Binding, study_inputs


def _local_tune(op: Callable, p: Any, settings: Settings, dataset: Any, spec: Any) -> Any:
    task = op(tune_locally)(
        dataset=dataset,
        **study_inputs(p, spec),
        early_stopping=p.early_stopping,
        seed=p.seed,
    ).set_display_name("Tune (local study)")
    task.set_caching_options(False)  # reads and resumes the study folder
    return task.outputs["trials"]


def _local_train(op: Callable, p: Any, settings: Settings, spec: Any) -> tuple[Any, Any]:
    task = op(train_locally)(
        worker_pool_specs=spec.outputs["worker_pool_specs"],
        base_output_directory=spec.outputs["base_output_directory"],
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
    tune=_local_tune, train_final=_local_train, register=_local_register, expects_gpus=False
)
