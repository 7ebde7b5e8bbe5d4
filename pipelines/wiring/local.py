"""The `local` target: the study, the final job and the registry run on this machine.

The tune step runs the Vertex study payload with Optuna (`tune_locally`), the
final job runs one process per replica (`train_locally`), and registration
writes a new version into the local registry folder.

`PARTS` lists every file that makes up the target, each with its part.
"""

from collections.abc import Callable
from typing import Any

from components.features_local import features_locally
from components.register_local import register_locally
from components.train_final_local import train_locally
from components.tune_local import tune_locally
from pipelines.settings import Settings
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


# Every file that makes up the `local` target, with its part (tests/test_targets.py checks
# each exists, and that every component and CLI module named for the target is here).
PARTS: tuple[tuple[str, str], ...] = (
    ("pipelines/wiring/local.py", "the binding: which components run tune, train_final, register"),
    ("components/tune_local.py", "tune: the study payload run here (Optuna)"),
    ("components/features_local.py", "features: the frozen backbone's outputs, computed here"),
    ("components/train_final_local.py", "train_final: a process per replica, on loopback"),
    ("components/register_local.py", "register: a new version in the registry folder"),
    ("pipelines/targets/local/__init__.py", "the run-time side's package"),
    ("pipelines/targets/local/registry.py", "the registry: versioned folders, model cards"),
    ("pipelines/study/local_study.py", "the study executor: trials in parallel, resume, budget"),
    ("pipelines/study/trial_runner.py", "one trial: the trial job, its measurements, its state"),
    ("pipelines/study/optuna_study.py", "Optuna in Vizier's place: suggestions, early stopping"),
    ("pipelines/study/sampler.py", "the Optuna sampler that stands in for each algorithm"),
    ("pipelines/jobs/local_job.py", "the job executor: one process per replica, deadlines"),
    ("pipelines/jobs/kept_job.py", "the final job kept with the study: reused or resumed"),
    ("pipelines/jobs/replica_env.py", "the environment Vertex sets, per replica"),
    ("pipelines/jobs/replica_process.py", "a replica's process: forked or fresh"),
    ("pipelines/jobs/fork_client.py", "replicas forked from a preloaded trainer: the client"),
    ("pipelines/jobs/fork_server.py", "the preloaded process (`python -m` it; imports by name)"),
    ("pipelines/app/local_commands.py", "CLI: `run` (its preflight), `models`"),
    ("pipelines/app/local_run.py", "the run end to end with kfp.local, its fork server"),
    ("pipelines/app/local_preflight.py", "memory, TFDS, cores checked before a run"),
    ("pipelines/app/gcs_access.py", "gs:// credentials and access checked before a run"),
    ("pipelines/app/run_summary.py", "the end-of-run summary"),
    ("pipelines/app/study_identity.py", "what a study is, checked on a rerun"),
    ("pipelines/app/interrupts.py", "SIGTERM/SIGHUP stop a run as Ctrl-C does"),
    ("pipelines/lineage/local.py", "lineage read from a local run's folders"),
)

BINDING = Binding(
    tune=_local_tune,
    train_final=_local_train,
    register=_local_register,
    expects_gpus=False,
    features=_local_features,
    hidden_parameters=SCHEDULING_PARAMETERS,  # refused by check_settings
)
