"""What a target is: the steps it binds to executors, and the inputs every study binding shares."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class Binding:
    """What executes the tune, train_final and register steps for one target.

    Each is called inside the pipeline function with the component wrapper `op`
    (it sets the components image), the pipeline's parameter channels `p` and the
    compile-time `settings`:

    * `tune(op, p, settings, dataset, trial_spec) -> trials artifact`
    * `train_final(op, p, settings, final_spec) -> (model artifact, model URI or None)`
    * `register(op, p, settings, *, model, model_uri, evaluation, trials, dataset,
      best_trial_id) -> registered model`
    * `fans_out`: with `prepare_workers` > 1 the data step runs as the pipeline engine's
      parallel tasks (plan, a `dsl.ParallelFor` over groups of shard tasks, finish); False:
      one step whose `prepare_workers` processes run the tasks (local: kfp.local runs steps
      one at a time on this machine).
    * `features(op, p, settings, features_spec) -> features artifact`: run the features
      job spec's pools (nothing when they are empty: the plan caches nothing).
    * `mount_data(task, settings)`: what a step that reads or writes the dataset or the
      model needs to reach them (Kubeflow: the shared PVC); nothing elsewhere.
    * `expects_gpus`: a pool's GPU `accelerator_count` is real hardware, so the trainer is
      told to expect it (`--expected_gpus`); False where the count means logical CPU
      devices (local).
    * `hidden_parameters`: pipeline parameters the target never reads, left out of its spec.
    * `tracks`: its tune step writes the study's MLflow runs (`pipelines/tracking/`); where
      False, a run that asks for them (`tracking=mlflow`, a `tracking_uri`) is refused.
    * `check_space(space)`: refuse, with a `SettingsError`, a search space the target's
      tuner cannot run (Katib: conditional parameters), when the pipeline is built.
    * `notes(settings)`: lines a user should read before a run is compiled or sent (Katib:
      it searches on the primary objective only).
    * `shared_root(settings)`: the folder every step and job of a run sees at the same path
      (Kubeflow: the data PVC's mount path, when one is set); "" where there is none.
    """

    tune: Callable[..., Any]
    train_final: Callable[..., Any]
    register: Callable[..., Any]
    mount_data: Callable[[Any, Any], Any] = lambda task, settings: task
    expects_gpus: bool = True
    hidden_parameters: frozenset[str] = frozenset()
    check_space: Callable[[Any], None] = lambda space: None
    notes: Callable[[Any], list[str]] = lambda settings: []
    tracks: bool = True
    features: Callable[..., Any] | None = None
    fans_out: bool = False
    shared_root: Callable[[Any], str] = lambda settings: ""


# The successive-halving parameters: only a target whose tuner runs it reads them.
HALVING_PARAMETERS = frozenset({"scheduler", "min_epochs", "reduction_factor"})


def refuse_halving(settings: Any, offers: str) -> None:
    """Refuse `scheduler` asha or hyperband where the target's tuner cannot run it, in one line.

    `offers`: what the target's service offers instead, in a few words.

    Raises:
        SettingsError: The scheduler and what the target offers.
    """
    from pipelines.settings import SettingsError
    from pipelines.study.halving import HALVING

    scheduler = settings.study.scheduler
    if scheduler in HALVING:
        raise SettingsError(
            f"scheduler={scheduler}: {offers}; successive halving runs on the local target"
        )


# Spot and queued capacity (`pipelines/jobs/scheduling.py`): only Vertex's jobs carry them.
SCHEDULING_PARAMETERS = frozenset({"trial_scheduling", "final_scheduling", "max_wait_hours"})


def refuse_scheduling(settings: Any, why: str, allowed: tuple[str, ...] = ("standard",)) -> None:
    """Refuse spot or flex-start capacity where the target cannot ask for it, in one line.

    `why`: what the target runs its jobs on, in a few words; `allowed`: the strategies it runs.

    Raises:
        SettingsError: The first scheduling setting not in `allowed`, and why.
    """
    from pipelines.settings import SettingsError

    for name in ("trial_scheduling", "final_scheduling"):
        if (value := settings.value(name)) not in allowed:
            what = "spot and flex_start" if allowed == ("standard",) else value
            raise SettingsError(
                f"{name}={value}: {why}; {what} capacity is Vertex's "
                "(unset it, or use --target vertex)"
            )


def refuse_vertex_only(settings: Any, target: str) -> None:
    """Refuse `tracking: vertex` and a `tensorboard` where the target reads neither, in one line.

    Raises:
        SettingsError: The setting, what reads it, and what `target` takes instead.
    """
    from pipelines.settings import SettingsError
    from pipelines.tracking.store import MODES, VERTEX

    if settings.results.tracking == VERTEX:
        takes = ", ".join(mode for mode in MODES if mode != VERTEX)
        raise SettingsError(
            f"tracking={VERTEX}: Vertex AI Experiments are written by the vertex target only; "
            f"the {target} target takes {takes}"
        )
    if settings.cloud.tensorboard:
        raise SettingsError(
            f"tensorboard={settings.cloud.tensorboard}: a Vertex AI TensorBoard, read by the "
            f"vertex target's jobs only; the {target} target's trials write their TensorBoard "
            "logs to the study folder (unset it, or use --target vertex)"
        )


def study_inputs(p: Any, trial_spec: Any) -> dict[str, Any]:
    """The study payload every tune binding passes on, in GCPC's HPT argument names."""
    return dict(
        base_output_directory=trial_spec.outputs["base_output_directory"],
        worker_pool_specs=trial_spec.outputs["worker_pool_specs"],
        study_spec_metrics=p.study_spec_metrics,
        study_spec_parameters=p.study_spec_parameters,
        max_trial_count=p.max_trial_count,
        parallel_trial_count=p.parallel_trial_count,
        max_failed_trial_count=p.max_failed_trial_count,
        study_spec_algorithm=p.algorithm,
        study_spec_measurement_selection_type=p.study_measurement_selection,
    )


def tracking_inputs(p: Any, settings: Any) -> dict[str, Any]:
    """What a tune step that writes MLflow runs takes: the mode, the store, the experiment."""
    return dict(
        tracking=p.tracking, tracking_uri=p.tracking_uri, experiment=settings.cloud.display_name
    )


@dataclasses.dataclass(frozen=True)
class Target:
    """One target as the CLI and the compiler see it, registered once in `wiring.TARGETS`.

    Its parts are named, not imported: `binding` imports `pipelines.targets.<name>.wiring`
    and the CLI imports `client` and `preflight` only when a command uses them, so compiling
    never imports a cloud SDK and `--help` stays fast (the package's `cli/` modules sit in
    the app's room, above the wiring: tests/test_architecture.py).

    Attributes:
        name: What `--target` takes.
        runs_here: The pipeline runs on this machine (kfp.local): the model's module must
            import here and image placeholders are fine; False: its pods pull the images.
        client: Module of its submit and schedule client (`pipelines.app.dispatch.Client`);
            None: nothing is sent (`local`).
        preflight: `module:function(settings)` refusing, before anything runs or is sent,
            what would fail late on the target (`SettingsError`, one line).
        settings: Its section of `Settings`: the fields only this target reads.
        flags: The command-line flags only this target takes, in the order they are checked;
            given with another target each is refused in one line ending with `flag_note`.
        flag_note: Why such a flag is refused; `{target}` is the target given instead.
        tune_task: Its tune step's task name in a compiled spec (kfp's name for the
            component: `tune_locally` → `tune-locally`); a spec is known by it.
        exclusive: Settings of its section that no other target takes, each with why:
            set for another target, compiling refuses `<name>=<value>: <why>; unset it for
            <target>`.
    """

    name: str
    runs_here: bool
    client: str | None
    preflight: str
    settings: frozenset[str] = frozenset()
    flags: tuple[str, ...] = ()
    flag_note: str = ""
    tune_task: str = ""
    exclusive: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def binding(self) -> Binding:
        """The `Binding` of `pipelines.targets.<name>.wiring`, which the pipeline's DAG plugs in."""
        return importlib.import_module(f"pipelines.targets.{self.name}.wiring").BINDING
