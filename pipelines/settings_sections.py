"""The sections of `Settings` that are not about a cloud, each checking its own fields.

Data, study, model (`architecture`), training, machines, images, local paths and where
results are tracked: each a
frozen dataclass whose `check` refuses its first bad field.

`pipelines/settings_cloud.py` holds the cloud and Kubeflow sections, `pipelines/settings.py`
puts the sections together (and checks what spans two of them). Every refusal is one line
naming the setting, its value and what is expected.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from pipelines import images
from pipelines.jobs import scheduling
from pipelines.jobs.scheduling import DEFAULT_MAX_WAIT_HOURS
from pipelines.study import objectives as objective_rules
from pipelines.study.halving import SCHEDULERS
from pipelines.study.options import ALGORITHMS, MEASUREMENT_SELECTIONS
from pipelines.tracking.store import MODES as TRACKING_MODES
from trainer.contract import (
    DEFAULT_FEATURE_CACHE,
    DEFAULT_METRIC_TAG,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    FEATURE_CACHE_CHOICES,
    PRECISIONS,
    PREPARATION,
    RECORD_FORMATS,
    TRAINER_HYPERPARAMETERS,
    ContractError,
    check_goal,
)
from trainer.models import MODELS, check_weights, custom

# The largest seed every user of it takes: NumPy's legacy RandomState (Optuna's samplers).
MAX_SEED = 2**32 - 1


class SettingsError(ValueError):
    """A bad setting; the message is one line naming the value and what is expected."""


def need(section: Any, ok: bool, name: str, expected: str) -> None:
    """Raise SettingsError `name=value: expected …` unless `ok` (`name`: a field of `section`)."""
    if not ok:
        raise SettingsError(f"{name}={getattr(section, name)!r}: expected {expected}")


def need_match_if_set(section: Any, name: str, pattern: re.Pattern[str], expected: str) -> None:
    """`need` for an optional field: unset (None) or a value that `pattern` matches."""
    value = getattr(section, name)
    need(section, value is None or bool(pattern.match(value)), name, expected)


@dataclasses.dataclass(frozen=True)
class DataSettings:
    """The dataset and how it is split."""

    source: str = "sample"
    image_size: int = PREPARATION.image_size
    validation_fraction: float = PREPARATION.validation_fraction
    test_fraction: float = PREPARATION.test_fraction
    seed: int = PREPARATION.seed  # splits, the study's sampler and the trainer
    max_bad_fraction: float = PREPARATION.max_bad_fraction  # unreadable images skipped, at most
    record_format: str = PREPARATION.record_format  # auto | raw | encoded (trainer.contract)
    prepare_workers: int = PREPARATION.prepare_workers  # shard tasks at once

    def check(self) -> None:
        """The seed and split fractions (the image size's minimum is the model's: `Settings`)."""
        need(self, 0 <= self.seed <= MAX_SEED, "seed", f"an integer in [0, {MAX_SEED}]")
        need(self, 0 <= self.validation_fraction < 1, "validation_fraction", "a number in [0, 1)")
        need(self, 0 <= self.test_fraction < 1, "test_fraction", "a number in [0, 1)")
        need(self, 0 <= self.max_bad_fraction < 1, "max_bad_fraction", "a fraction in [0, 1)")
        need(
            self,
            self.record_format in RECORD_FORMATS,
            "record_format",
            f"one of {', '.join(RECORD_FORMATS)}",
        )
        need(self, self.prepare_workers >= 1, "prepare_workers", "an integer >= 1")
        need(
            self,
            self.validation_fraction + self.test_fraction < 1,
            "test_fraction",
            "validation_fraction + test_fraction < 1",
        )


@dataclasses.dataclass(frozen=True)
class StudySettings:
    """The search: its space, metrics, algorithm and trial budget."""

    search_space: str | None = None  # a preset name or a YAML file; None → the model's first preset
    metric_tag: str = DEFAULT_METRIC_TAG
    goal: str = ""  # empty: the metric's own goal (trainer.contract.METRIC_GOALS)
    # Metrics, the first primary (= metric_tag); name:max|min for a team's own; (): [metric_tag]
    objectives: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()  # e.g. latency_ms<=20: a picked trial meets each
    algorithm: str = "ALGORITHM_UNSPECIFIED"
    # empty: BEST_MEASUREMENT with one objective, LAST with several (`Settings` derives it)
    measurement_selection: str = ""
    max_trials: int = 12
    parallel_trials: int = 3
    max_failed_trials: int = 3  # failures that fail the study (Vertex: reaching the count)
    early_stopping: bool = False  # the median rule: true means scheduler=median
    # none | median | asha | hyperband (successive halving: pipelines/study/halving.py)
    scheduler: str = "none"
    min_epochs: int = 1  # successive halving's first rung (the top rung is epochs)
    reduction_factor: int = 3  # η: one trial in η is promoted at each rung
    max_study_hours: float = 0.0  # the tune step's wall clock, 0: none (pipelines/study/budgets.py)
    max_trials_no_progress: int = 0  # finished trials in a row without a better best, 0: none
    trial_threshold: float | None = None  # the best trial must reach it, else stop
    # An earlier run whose trials this study continues from (pipelines/targets/earlier_runs.py)
    continue_from: str | None = None

    def check(self) -> None:
        """The metric, objectives and constraints, the algorithm and the trial budget."""
        study = (self.objectives, self.constraints, self.metric_tag, self.early_stopping)
        try:
            if self.objectives != (self.metric_tag,):  # listed objectives: their refusal first
                objective_rules.check_settings(*study)
            check_goal(self.metric_tag, self.goal)
            objective_rules.check_settings(*study)
        except (ContractError, objective_rules.ObjectiveError) as err:
            raise SettingsError(str(err)) from None
        need(self, self.scheduler in SCHEDULERS, "scheduler", f"one of {', '.join(SCHEDULERS)}")
        need(
            self,
            not self.early_stopping or self.scheduler == "median",
            "early_stopping",
            f"false with scheduler={self.scheduler} (early_stopping=true means scheduler=median)",
        )
        need(self, self.min_epochs >= 1, "min_epochs", "an integer >= 1 (the first rung)")
        need(self, self.reduction_factor >= 2, "reduction_factor", "an integer >= 2")
        need(self, self.max_study_hours >= 0, "max_study_hours", "a number >= 0 (0: no limit)")
        need(
            self,
            self.max_trials_no_progress >= 0,
            "max_trials_no_progress",
            "an integer >= 0 (0: no limit)",
        )
        need(self, self.algorithm in ALGORITHMS, "algorithm", f"one of {', '.join(ALGORITHMS)}")
        need(
            self,
            self.measurement_selection in MEASUREMENT_SELECTIONS,
            "measurement_selection",
            f"one of {', '.join(MEASUREMENT_SELECTIONS)}",
        )
        try:
            objective_rules.measurement_selection(self.measurement_selection, len(self.objectives))
        except objective_rules.ObjectiveError as err:
            raise SettingsError(str(err)) from None
        need(self, self.max_trials >= 1, "max_trials", "an integer >= 1")
        need(
            self,
            1 <= self.parallel_trials <= self.max_trials,
            "parallel_trials",
            f"an integer in [1, max_trials={self.max_trials}]",
        )
        need(self, self.max_failed_trials >= 0, "max_failed_trials", "an integer >= 0")
        need(
            self,
            self.trial_threshold is None or isinstance(self.trial_threshold, int | float),
            "trial_threshold",
            "a number or null",
        )


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """The model (trainer.models: a registered name or a team's builder) and its start weights."""

    model: str = DEFAULT_MODEL
    # imagenet | none | a weights file (local or gs://); None: the model's own default
    weights: str | None = None

    def check(self) -> None:
        """A registered model or a `package.module:function` reference, and weights it takes."""
        need(
            self,
            self.model in MODELS or bool(custom.REFERENCE.match(self.model)),
            "model",
            f"one of {', '.join(MODELS)} or package.module:function",
        )
        if self.model in MODELS:
            try:
                check_weights(MODELS[self.model], self.weights)
            except ContractError as err:
                raise SettingsError(str(err)) from None


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """What the trainer is told, the final job's size and the bar to register its model."""

    # The trainer's defaults: one each, in the contract (a study may also tune them).
    epochs: int = int(TRAINER_HYPERPARAMETERS["epochs"].default)
    batch_size: int = int(TRAINER_HYPERPARAMETERS["batch_size"].default)
    precision: str = DEFAULT_PRECISION  # the trainer's --precision; auto: resolved per machine
    # auto: a features step caches the frozen backbone's outputs for trials that freeze it; off
    feature_cache: str = DEFAULT_FEATURE_CACHE
    workers: int = 1  # the final job's workers besides the chief (replicas: 1 + workers)
    trial_workers: int = 0  # each trial's workers besides its chief (as `workers`, per trial)
    eval_threshold: float | None = None  # test_accuracy needed to register the model

    def check(self) -> None:
        """Counts, the precision and cache choices, and the threshold."""
        need(self, self.epochs >= 1, "epochs", "an integer >= 1")
        need(self, self.batch_size >= 1, "batch_size", "an integer >= 1")
        need(self, self.precision in PRECISIONS, "precision", f"one of {', '.join(PRECISIONS)}")
        need(
            self,
            self.feature_cache in FEATURE_CACHE_CHOICES,
            "feature_cache",
            f"one of {', '.join(FEATURE_CACHE_CHOICES)}",
        )
        need(self, self.workers >= 0, "workers", "an integer >= 0 (workers besides the chief)")
        need(
            self,
            self.trial_workers >= 0,
            "trial_workers",
            "an integer >= 0 (each trial's workers besides its chief)",
        )
        need(
            self,
            self.eval_threshold is None or isinstance(self.eval_threshold, int | float),
            "eval_threshold",
            "a number or null",
        )


@dataclasses.dataclass(frozen=True)
class MachineSettings:
    """Trial and final-job machines.

    `*_accelerator_count` keeps Vertex's name and has two meanings by target: accelerators
    (GPUs) per replica on a cloud; locally, logical CPU devices per replica that
    MirroredStrategy spreads over (`trainer/cluster.py:LOGICAL_DEVICES_ENV`).
    """

    trial_machine_type: str = "n1-standard-8"
    trial_accelerator_type: str = "NVIDIA_TESLA_T4"
    trial_accelerator_count: int = 2
    final_machine_type: str = "n1-standard-8"
    final_accelerator_type: str = "NVIDIA_TESLA_T4"
    final_accelerator_count: int = 1
    # Capacity (pipelines/jobs/scheduling.py): standard, spot or flex_start (queued)
    trial_scheduling: str = "standard"
    final_scheduling: str = "standard"
    max_wait_hours: float = DEFAULT_MAX_WAIT_HOURS  # flex_start's queueing bound, 0: none

    def check(self) -> None:
        """Accelerator counts are not negative; the scheduling is one Vertex can carry."""
        need(self, self.trial_accelerator_count >= 0, "trial_accelerator_count", "an integer >= 0")
        need(self, self.final_accelerator_count >= 0, "final_accelerator_count", "an integer >= 0")
        strategies = {n: getattr(self, n) for n in ("trial_scheduling", "final_scheduling")}
        try:
            for name, value in strategies.items():
                scheduling.check_strategy(name, value)
            scheduling.check_wait(self.max_wait_hours, strategies)
        except scheduling.SchedulingError as err:
            raise SettingsError(str(err)) from None


@dataclasses.dataclass(frozen=True)
class ImageSettings:
    """The container images jobs run."""

    trainer_image: str = images.image_uris()["trainer"]
    components_image: str = images.image_uris()["components"]
    serving_image: str = ""  # empty: the table's container (pipelines/images.py) for the region

    def check(self) -> None:
        """Image URIs are free text (the preflight checks that they exist)."""


@dataclasses.dataclass(frozen=True)
class LocalSettings:
    """Where the local target writes."""

    output: str = "runs/latest"
    # The local model registry (trained models' versions); empty: `<output>/registry`.
    registry: str = ""

    def check(self) -> None:
        """Local paths are free text (created when a run starts)."""


_TRACKING_URI = re.compile(r"^(https?://\S+|sqlite:///\S+|file:\S+|databricks\S*|/\S*)$")


@dataclasses.dataclass(frozen=True)
class ResultsSettings:
    """Where trials are compared: MLflow (`pipelines/tracking/store.py` has the rules)."""

    tracking: str = "auto"  # auto | mlflow | off
    # None: KFP's MLFLOW_TRACKING_URI where it sets one; locally, the run folder's SQLite file
    tracking_uri: str | None = None

    def check(self) -> None:
        """A known mode and, if set, a URI MLflow takes."""
        need(
            self, self.tracking in TRACKING_MODES, "tracking", f"one of {', '.join(TRACKING_MODES)}"
        )
        need_match_if_set(
            self,
            "tracking_uri",
            _TRACKING_URI,
            "an MLflow tracking URI (http(s)://host:port, sqlite:///path.db, file:path)",
        )
