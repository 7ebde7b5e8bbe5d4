"""Pipeline settings: one dataclass from flags > YAML config > `HPT_*` environment > defaults.

Validation happens here, before anything expensive starts, and every error is
one line naming the bad value and what is expected.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pipelines import images, settings_cloud
from pipelines.study import objectives as objective_rules
from pipelines.study.options import ALGORITHMS, MEASUREMENT_SELECTIONS
from trainer.contract import (
    DEFAULT_FEATURE_CACHE,
    DEFAULT_METRIC_TAG,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    FEATURE_CACHE_CHOICES,
    METRIC_GOALS,
    MIN_IMAGE_SIZE,
    PRECISIONS,
    PREPARATION,
    ContractError,
    check_goal,
)
from trainer.models import MODELS, check_weights, custom

ENV_PREFIX = "HPT_"


class SettingsError(ValueError):
    """A bad setting; the message is one line naming the value and what is expected."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a pipeline run is parameterised by.

    Defaults are cloud-sized (the seeds' 150×150 images, a real study);
    `LOCAL_RUN_DEFAULTS` is the small budget `hpt-pipeline run` starts from.

    Flat on purpose, grouped by concern in the order below (data, study, model, training,
    machines, images, cloud, Kubeflow, local), each group checked by its own function
    (`_check_*`, `settings_cloud.first_problem`). What users write is flat (flags, YAML
    keys, `HPT_*` variables, `--param`), the pipeline's parameters are flat and named by
    `pipelines/pipeline_parameters.py`, and some 30 modules read its fields by name: nested
    sections (as `tensorflow/models`' `official/` has) would rename every reader and every
    spelling at once for no rule a flat field cannot hold. `workers` counts the final job's
    workers besides the chief; `trial_accelerator_count`/`final_accelerator_count` keep
    Vertex's name with two meanings (see Machines below).
    """

    # Data
    source: str = "sample"
    image_size: int = PREPARATION.image_size
    validation_fraction: float = PREPARATION.validation_fraction
    test_fraction: float = PREPARATION.test_fraction
    seed: int = PREPARATION.seed  # splits, the study's sampler and the trainer
    max_bad_fraction: float = PREPARATION.max_bad_fraction  # unreadable images skipped, at most
    # Study
    search_space: str | None = None  # a preset name or a YAML file; None → the model's first preset
    metric_tag: str = DEFAULT_METRIC_TAG
    goal: str = ""  # empty: the metric's own goal (trainer.contract.METRIC_GOALS)
    # Metrics, the first primary (= metric_tag); name:max|min for a team's own; (): [metric_tag]
    objectives: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()  # e.g. latency_ms<=20: a picked trial meets each
    algorithm: str = "ALGORITHM_UNSPECIFIED"
    measurement_selection: str = "BEST_MEASUREMENT"
    max_trials: int = 12
    parallel_trials: int = 3
    max_failed_trials: int = 3  # failures that fail the study (Vertex: reaching the count)
    early_stopping: bool = False
    trial_threshold: float | None = None  # the best trial must reach it, else stop
    # An earlier run whose trials this study continues from (pipelines/targets/earlier_runs.py)
    continue_from: str | None = None
    # Model (trainer.models: a registered name or a team's builder, package.module:function)
    model: str = DEFAULT_MODEL
    # imagenet | none | a weights file (local or gs://); None: the model's own default
    weights: str | None = None
    # Training
    epochs: int = 10
    batch_size: int = 32
    precision: str = DEFAULT_PRECISION  # the trainer's --precision; auto: resolved per machine
    # auto: a features step caches the frozen backbone's outputs for trials that freeze it; off
    feature_cache: str = DEFAULT_FEATURE_CACHE
    workers: int = 1  # the final job's workers besides the chief (replicas: 1 + workers)
    eval_threshold: float | None = None  # test_accuracy needed to register the model
    # Machines. `*_accelerator_count` keeps Vertex's name and has two meanings by target:
    # accelerators (GPUs) per replica on a cloud; locally, logical CPU devices per replica
    # that MirroredStrategy spreads over (`trainer/cluster.py:LOGICAL_DEVICES_ENV`).
    trial_machine_type: str = "n1-standard-8"
    trial_accelerator_type: str = "NVIDIA_TESLA_T4"
    trial_accelerator_count: int = 2
    final_machine_type: str = "n1-standard-8"
    final_accelerator_type: str = "NVIDIA_TESLA_T4"
    final_accelerator_count: int = 1
    # Images
    trainer_image: str = images.image_uris()["trainer"]
    components_image: str = images.image_uris()["components"]
    serving_image: str = ""  # empty: the table's container (pipelines/images.py) for the region
    # Cloud
    project: str | None = None
    region: str = "us-central1"
    pipeline_root: str | None = None
    service_account: str | None = None
    network: str | None = None
    kms_key: str | None = None
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    experiment: str | None = None
    enable_caching: bool | None = None  # None: as compiled (kfp caches every task by default)
    display_name: str = "hpt-pipeline"
    model_display_name: str = ""  # empty: hpt-<model> (hpt-cnn; a reference: its function)
    parent_model: str | None = None  # projects/P/locations/L/models/ID: upload as its new version
    keep_default_version: bool = False  # True: a new version does not take the `default` alias
    # Kubeflow (open source: Kubeflow Pipelines 2.x + Katib + Training Operator)
    kubeflow_host: str | None = None  # KFP API endpoint, e.g. http://localhost:8080
    kubeflow_namespace: str = "kubeflow"  # where Experiments, Trials and TFJobs are created
    kubeflow_service_account: str | None = None  # pods of trials and replicas run as it
    data_pvc: str | None = None  # a PVC holding datasets and models, instead of object storage
    # Where data_pvc is mounted in every pod. One path, three names: the pipeline parameter
    # `shared_root` carries it (empty without data_pvc), Kubeflow's manifest builders take
    # it as `data_mount_path`.
    data_mount_path: str = "/mnt/hpt"
    kubeflow_cpu: str = "2"  # CPU request/limit of a trial or replica pod (Kubernetes quantity)
    kubeflow_memory: str = "8Gi"  # memory request/limit of a trial or replica pod
    model_registry_url: str | None = None  # Kubeflow Model Registry, e.g. https://mr.example:443
    kubeflow_timeout_s: int = 24 * 3600  # how long the tune and train steps wait for Katib/TFJob
    kubeflow_job_api: str = "auto"  # final job: tfjob | trainjob | auto (what the cluster serves)
    kubeflow_pending_grace_s: int = 600  # a trial/replica pod Pending longer stops the step
    kubeflow_trial_nodes: int = 1  # pods per Katib trial; > 1: TrainJob trials (Katib 0.19+)
    # Kubeflow Pipelines API credentials (one at most; never shown in messages or repr)
    kubeflow_token: str | None = dataclasses.field(default=None, repr=False)  # bearer token
    kubeflow_token_file: str | None = None  # a token file re-read per request (projected SA token)
    kubeflow_cookie: str | None = dataclasses.field(default=None, repr=False)  # auth proxy session
    # Local
    output: str = "runs/latest"
    registry: str = "runs/registry"  # the local model registry: trained models' versions

    def __post_init__(self) -> None:
        listed = objective_rules.split_items(self.objectives)
        if listed and self.metric_tag == DEFAULT_METRIC_TAG:  # the primary is the tag
            object.__setattr__(self, "metric_tag", listed[0].partition(":")[0])
        object.__setattr__(self, "objectives", listed or (self.metric_tag,))
        object.__setattr__(self, "constraints", objective_rules.split_items(self.constraints))
        if not self.goal:
            object.__setattr__(self, "goal", METRIC_GOALS.get(self.metric_tag, "maximize"))
        if not self.model_display_name:
            module, _, function = self.model.rpartition(":")
            if function in ("build", "build_model"):  # a reference: name it by its module
                function = module.rsplit(".", 1)[-1]
            name = (function or self.model).replace("_", "-").lower()
            object.__setattr__(self, "model_display_name", f"hpt-{name}")
        if not self.serving_image:
            object.__setattr__(self, "serving_image", images.serving_image_uri(self.region))
        _check(self)


# The final job's Kubernetes API on the kubeflow target: the Training Operator v1's TFJob, or
# Kubeflow Trainer v2's TrainJob (Kubeflow 1.11+); auto takes what the cluster serves (TFJob
# first). pipelines/targets/kubeflow/job_api.py resolves it.

LOCAL_RUN_DEFAULTS = dict(
    image_size=32,
    max_trials=4,
    parallel_trials=2,
    max_failed_trials=2,  # the second failure fails the study (Vertex's rule)
    epochs=10,  # epochs are ~0.2 s at 32 px: start-up dominates, and 4 epochs undertrain
    batch_size=32,
    workers=1,
    trial_accelerator_count=2,
    final_accelerator_count=1,
)

# The settings that change what a trial means: recorded with a local study, and a rerun
# into the same output must repeat them (`pipelines/app/study_identity.py`). Settings not
# listed (max_trials, parallel_trials, max_failed_trials, thresholds, workers…) may change
# on resume. A new setting that changes what a trial trains or measures is added here.
STUDY_SETTINGS = (
    "source",  # with the dataset's fingerprint, recorded beside it
    "image_size",
    "validation_fraction",
    "test_fraction",
    "seed",
    "max_bad_fraction",
    "search_space",  # with its content's digest, recorded beside it
    "metric_tag",
    "goal",
    "objectives",  # constraints are not listed: like thresholds, they act at selection only
    "algorithm",
    "measurement_selection",
    "early_stopping",
    "continue_from",  # the trials the study starts from
    "epochs",
    "batch_size",
    "precision",
    "trial_accelerator_count",
    "model",
    "weights",
)
# Local-run defaults that give way to an explicit setting they conflict with (clamped, with
# a note): (default's field, the explicit field that bounds it from above).
CLAMPED_DEFAULTS = (("parallel_trials", "max_trials"),)


def _check(s: Settings) -> None:
    """Refuse the first bad setting, in one line (model and data, study, training, cloud)."""
    _check_model_and_data(s)
    _check_study(s)
    _check_training(s)
    problem = settings_cloud.first_problem(s)
    if problem:
        raise SettingsError(problem)


def _need(s: Settings, ok: bool, name: str, expected: str) -> None:
    """Raise SettingsError `name=value: expected …` unless `ok`."""
    if not ok:
        raise SettingsError(f"{name}={getattr(s, name)!r}: expected {expected}")


def _check_model_and_data(s: Settings) -> None:
    """The model, its weights and image size, and the dataset split fractions."""
    _need(
        s,
        s.model in MODELS or bool(custom.REFERENCE.match(s.model)),
        "model",
        f"one of {', '.join(MODELS)} or package.module:function",
    )
    minimum = MODELS[s.model].min_image_size if s.model in MODELS else MIN_IMAGE_SIZE
    _need(
        s,
        s.image_size >= minimum,
        "image_size",
        f"an integer >= {minimum} (model {s.model} needs {minimum} px per side)",
    )
    if s.model in MODELS:
        try:
            check_weights(MODELS[s.model], s.weights)
        except ContractError as err:
            raise SettingsError(str(err)) from None
    _need(s, 0 <= s.validation_fraction < 1, "validation_fraction", "a number in [0, 1)")
    _need(s, 0 <= s.test_fraction < 1, "test_fraction", "a number in [0, 1)")
    _need(s, 0 <= s.max_bad_fraction < 1, "max_bad_fraction", "a fraction in [0, 1)")
    _need(
        s,
        s.validation_fraction + s.test_fraction < 1,
        "test_fraction",
        "validation_fraction + test_fraction < 1",
    )


def _check_study(s: Settings) -> None:
    """The metric, objectives and constraints, the algorithm and the trial budget."""
    study = (s.objectives, s.constraints, s.metric_tag, s.early_stopping)
    try:
        if s.objectives != (s.metric_tag,):  # listed objectives: their own refusal first
            objective_rules.check_settings(*study)
        check_goal(s.metric_tag, s.goal)
        objective_rules.check_settings(*study)
    except (ContractError, objective_rules.ObjectiveError) as err:
        raise SettingsError(str(err)) from None
    _need(s, s.algorithm in ALGORITHMS, "algorithm", f"one of {', '.join(ALGORITHMS)}")
    _need(
        s,
        s.measurement_selection in MEASUREMENT_SELECTIONS,
        "measurement_selection",
        f"one of {', '.join(MEASUREMENT_SELECTIONS)}",
    )
    _need(s, s.max_trials >= 1, "max_trials", "an integer >= 1")
    _need(
        s,
        1 <= s.parallel_trials <= s.max_trials,
        "parallel_trials",
        f"an integer in [1, max_trials={s.max_trials}]",
    )
    _need(s, s.max_failed_trials >= 0, "max_failed_trials", "an integer >= 0")


def _check_training(s: Settings) -> None:
    """The trainer's settings, the machines' counts and the thresholds."""
    _need(s, s.epochs >= 1, "epochs", "an integer >= 1")
    _need(s, s.batch_size >= 1, "batch_size", "an integer >= 1")
    _need(s, s.precision in PRECISIONS, "precision", f"one of {', '.join(PRECISIONS)}")
    _need(
        s,
        s.feature_cache in FEATURE_CACHE_CHOICES,
        "feature_cache",
        f"one of {', '.join(FEATURE_CACHE_CHOICES)}",
    )
    _need(s, s.workers >= 0, "workers", "an integer >= 0 (workers besides the chief)")
    _need(s, s.trial_accelerator_count >= 0, "trial_accelerator_count", "an integer >= 0")
    _need(s, s.final_accelerator_count >= 0, "final_accelerator_count", "an integer >= 0")
    for name in ("trial_threshold", "eval_threshold"):
        value = getattr(s, name)
        _need(s, value is None or isinstance(value, int | float), name, "a number or null")


FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
# Settings renamed so that a name means one thing: old → new. The old one is refused in one
# line naming the new one, wherever it is read (YAML, HPT_* env, flags, --param).
RENAMED = {"replicas": "workers"}  # `replicas` counts the chief too (job_specs, model metadata)
_MEANING = {"workers": "the final job's workers besides the chief"}


_SPELLINGS = {
    "name": lambda name: name,  # YAML, --param
    "flag": lambda name: "--" + name.replace("_", "-"),
    "env": lambda name: ENV_PREFIX + name.upper(),
}


def renamed(old: str, form: str = "name") -> str | None:
    """`<old>: say <new> (<meaning>)` for a renamed setting, spelt as `form`; else None."""
    new = RENAMED.get(old)
    if new is None:
        return None
    spell = _SPELLINGS[form]
    return f"{spell(old)}: say {spell(new)} ({_MEANING[new]})"


_HINTS = typing.get_type_hints(Settings)


def _coerce(name: str, raw: Any) -> Any:
    """Turn a YAML/env/flag value into the field's type, or raise SettingsError."""
    hint = _HINTS[name]
    if raw is None:
        return None
    if name == "labels":
        return parse_labels(raw)
    if name in ("objectives", "constraints"):
        return objective_rules.split_items(raw)
    base = next((t for t in typing.get_args(hint) if t is not type(None)), hint)
    if name == "feature_cache" and raw is False:
        return "off"  # YAML 1.1 reads an unquoted `off` as false
    try:
        if base is bool:
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("1", "true", "yes", "on"):
                return True
            if str(raw).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if base is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError
        return base(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"{name}={raw!r}: expected {base.__name__}") from None


def parse_labels(raw: Any) -> dict[str, str]:
    """Labels from a mapping, `k=v,k2=v2`, or a list of `k=v`."""
    if isinstance(raw, Mapping):
        return {str(k): str(v) for k, v in raw.items()}
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    labels = {}
    for item in items:
        if not item:
            continue
        key, sep, value = str(item).partition("=")
        if not sep:
            raise SettingsError(f"label {item!r}: expected key=value")
        labels[key.strip()] = value.strip()
    return labels


def read_config(path: str | Path) -> dict[str, Any]:
    """Read a YAML settings file (top-level keys are Settings fields)."""
    path = Path(path)
    if not path.is_file():
        raise SettingsError(f"--config={path}: file not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise SettingsError(
            f"--config={path}: not valid YAML ({str(err).splitlines()[0]})"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"--config={path}: expected a mapping of settings")
    if old := min(set(data) & set(RENAMED), default=None):
        raise SettingsError(f"--config={path}: {renamed(old)}")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise SettingsError(f"--config={path}: unknown setting {unknown[0]!r}")
    return data


def load_settings(
    *,
    config: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    notes: list[str] | None = None,
) -> Settings:
    """Merge settings: `overrides` (flags; None = unset) > config YAML > HPT_* env > defaults.

    A default in `CLAMPED_DEFAULTS` that conflicts with an explicit setting is lowered to
    fit it, and a line saying so is appended to `notes`; explicit values are never changed.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = dict(defaults or {})
    explicit: set[str] = set()
    for old in RENAMED:
        if env.get(ENV_PREFIX + old.upper()) not in (None, ""):
            raise SettingsError(str(renamed(old, "env")))
    for name in FIELDS:
        if (raw := env.get(ENV_PREFIX + name.upper())) not in (None, ""):
            values[name] = raw
            explicit.add(name)
    if config:
        from_file = read_config(config)
        values.update(from_file)
        explicit.update(from_file)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    values.update(given)
    explicit.update(given)
    from_env = explicit - set(given) - (set(from_file) if config else set())
    coerced = {}
    for key, value in values.items():
        try:
            coerced[key] = _coerce(key, value)
        except SettingsError as err:
            if key not in from_env:
                raise
            expected = str(err).split(": ", 1)[-1]  # name the variable the value came from
            raise SettingsError(f"{ENV_PREFIX}{key.upper()}={value!r}: {expected}") from None
    if {"metric_tag", "objectives"} <= explicit and coerced["objectives"]:  # never overridden
        try:
            objective_rules.resolve(coerced["objectives"], (), coerced["metric_tag"])
        except objective_rules.ObjectiveError as err:
            raise SettingsError(str(err)) from None
    for name, bound in CLAMPED_DEFAULTS:
        ceiling = coerced.get(bound, getattr(Settings, bound))
        value = coerced.get(name, getattr(Settings, name))
        if name not in explicit and bound in explicit and value > ceiling:
            coerced[name] = ceiling
            if notes is not None:
                notes.append(f"{name} lowered from its default {value} to {bound}={ceiling}")
    return Settings(**coerced)


def require_cloud(settings: Settings, *names: str) -> None:
    """Fail with one line when a cloud setting needed by a command is missing."""
    for name in names or ("project", "region", "pipeline_root"):
        if not getattr(settings, name):
            flag = name.replace("_", "-")
            raise SettingsError(
                f"{name} is not set: pass --{flag}, put {name} in the config file, "
                f"or set {ENV_PREFIX}{name.upper()}"
            )
