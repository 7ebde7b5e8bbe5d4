"""Pipeline settings by concern, from flags > YAML config > `HPT_*` environment > defaults.

The grouping rule: a field lives in the section of the concern it configures (`SECTIONS`,
in this order: data, study, architecture (the model), training, machines, images, cloud,
kubeflow, local, results), keeps its exact name there (`settings.study.max_trials`,
`settings.kubeflow.kubeflow_host`), and each section is a frozen dataclass that checks its
own fields (`pipelines/settings_sections.py`, `pipelines/settings_cloud.py`). What users
write stays flat: flags, YAML keys, `HPT_*` variables, `--param` and the pipeline's
parameters name a field alone, and `SECTION_OF` (flat name → section, derived from the
section dataclasses, never written twice) is the one table between the two spellings.
`Settings(**flat)` and `settings.replace(**flat)` take flat names; `settings.flat()` and
`settings.value(name)` read them back for payloads, the study's identity and `--param`.
Defaults derived across sections (the goal, the objectives, the model's display name, the
serving image) are filled in one place, `_derive`; checks that span two sections are in
`_check`. Validation happens here, before anything expensive starts, and every error is
one line naming the bad value and what is expected.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pipelines import images
from pipelines.jobs import fork_client
from pipelines.settings_cloud import CloudSettings, KubeflowSettings
from pipelines.settings_sections import (
    DataSettings,
    ImageSettings,
    LocalSettings,
    MachineSettings,
    ModelSettings,
    ResultsSettings,
    SettingsError,
    StudySettings,
    TrainingSettings,
)
from pipelines.study import objectives as objective_rules
from pipelines.study.halving import HALVING
from trainer import cluster
from trainer.contract import DEFAULT_METRIC_TAG, METRIC_GOALS, MIN_IMAGE_SIZE
from trainer.models import MODELS

__all__ = ["SECTION_OF", "Settings", "SettingsError", "load_settings"]

ENV_PREFIX = "HPT_"
REGISTRY_DIR = "registry"  # the default registry's folder in the output


@dataclasses.dataclass(frozen=True, init=False)
class Settings:
    """Everything a pipeline run is parameterised by, one section per concern.

    Defaults are cloud-sized (the seeds' 150×150 images, a real study);
    `LOCAL_RUN_DEFAULTS` is the small budget `hpt-pipeline run` starts from. `workers`
    counts the final job's workers besides the chief; `trial_accelerator_count` /
    `final_accelerator_count` keep Vertex's name with two meanings (`MachineSettings`).
    """

    data: DataSettings
    study: StudySettings
    architecture: ModelSettings
    training: TrainingSettings
    machines: MachineSettings
    images: ImageSettings
    cloud: CloudSettings
    kubeflow: KubeflowSettings
    local: LocalSettings
    results: ResultsSettings

    def __init__(self, **flat: Any) -> None:
        """Build every section from flat field names (a user's spelling); refuse unknown ones."""
        _refuse_unknown(flat, "")
        values = {**{name: _default(name) for name in SECTION_OF}, **flat}
        _derive(values)
        for section, kind in SECTIONS.items():
            given = {name: values[name] for name in FIELDS_OF[section]}
            object.__setattr__(self, section, kind(**given))
        _check(self)

    def flat(self) -> dict[str, Any]:
        """Every field by its flat name, in the sections' order."""
        return {name: getattr(getattr(self, SECTION_OF[name]), name) for name in SECTION_OF}

    def value(self, name: str) -> Any:
        """One field by its flat name (a setting a user names); unknown names refused."""
        _refuse_unknown({name: None}, "")
        return getattr(getattr(self, SECTION_OF[name]), name)

    @staticmethod
    def default(name: str) -> Any:
        """A field's default, by its flat name (a fresh one where the field has a factory)."""
        _refuse_unknown({name: None}, "")
        return _default(name)

    def replace(self, **flat: Any) -> Settings:
        """A copy with the given flat fields changed, checked again."""
        _refuse_unknown(flat, "")
        return Settings(**{**self.flat(), **flat})


# Section attribute → its dataclass, in order; the flat table below is derived from them.
_SECTION_TYPES = typing.get_type_hints(Settings)
SECTIONS: dict[str, type] = {f.name: _SECTION_TYPES[f.name] for f in dataclasses.fields(Settings)}
FIELDS_OF = {name: [f.name for f in dataclasses.fields(kind)] for name, kind in SECTIONS.items()}
# Flat name → the section holding it: the one table between what users write and the code.
SECTION_OF = {name: section for section, names in FIELDS_OF.items() for name in names}
FIELDS = {f.name: f for kind in SECTIONS.values() for f in dataclasses.fields(kind)}
_HINTS = {n: hint for kind in SECTIONS.values() for n, hint in typing.get_type_hints(kind).items()}


def _default(name: str) -> Any:
    """A field's default (a fresh one where the field has a factory)."""
    field = FIELDS[name]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _derive(values: dict[str, Any]) -> None:
    """Fill the defaults that depend on other fields, in place (the one place they are)."""
    listed = objective_rules.split_items(values["objectives"])
    if listed and values["metric_tag"] == DEFAULT_METRIC_TAG:  # the primary is the tag
        values["metric_tag"] = listed[0].partition(":")[0]
    values["objectives"] = listed or (values["metric_tag"],)
    values["constraints"] = objective_rules.split_items(values["constraints"])
    if not values["measurement_selection"]:  # the best with one objective, else the last
        values["measurement_selection"] = objective_rules.measurement_selection(
            "", len(values["objectives"])
        )
    if values["scheduler"] in ("none", "median") and values["early_stopping"]:
        values["scheduler"] = "median"  # early_stopping: true keeps meaning the median rule
    if values["scheduler"] == "median":
        values["early_stopping"] = True
    _read_trial_nodes(values)
    if not values["goal"]:
        values["goal"] = METRIC_GOALS.get(values["metric_tag"], "maximize")
    if not values["model_display_name"]:
        model = values["model"]
        module, _, function = model.rpartition(":")
        if function in ("build", "build_model"):  # a reference: name it by its module
            function = module.rsplit(".", 1)[-1]
        name = (function or model).replace("_", "-").lower()
        values["model_display_name"] = f"hpt-{name}"
    if not values["registry"]:  # beside the run's other outputs, wherever it is started
        values["registry"] = str(Path(values["output"]) / REGISTRY_DIR)
    if not values["serving_image"]:
        values["serving_image"] = images.serving_image_uri(values["region"])


def _read_trial_nodes(values: dict[str, Any]) -> None:
    """Read the older `kubeflow_trial_nodes` (pods per trial) as `trial_workers` + 1, in place.

    Both given and disagreeing is refused; a bad count is left to the Kubeflow section's check.
    """
    nodes, workers = values["kubeflow_trial_nodes"], values["trial_workers"]
    if nodes is None or not isinstance(nodes, int) or nodes < 1:
        return
    if workers not in (0, nodes - 1):
        raise SettingsError(
            f"kubeflow_trial_nodes={nodes} and trial_workers={workers}: they disagree; expected "
            f"kubeflow_trial_nodes = trial_workers + 1 (pods per trial), or trial_workers alone"
        )
    values["trial_workers"], values["kubeflow_trial_nodes"] = nodes - 1, None


def trial_nodes_line(nodes: Any) -> str:
    """The one line saying how an explicit `kubeflow_trial_nodes` is read."""
    return (
        f"kubeflow_trial_nodes={nodes} is read as trial_workers={int(nodes) - 1} "
        "(pods per trial = trial_workers + 1); say trial_workers"
    )


def _say(line: str, notes: list[str] | None) -> None:
    """Append `line` to `notes`, or, with none to append to, print it as a note (stderr)."""
    if notes is not None:
        notes.append(line)
    else:
        print(f"note: {line}", file=sys.stderr)


def _refuse_unknown(flat: Mapping[str, Any], where: str) -> None:
    """One line for the first key that is no setting (a renamed one names its new name)."""
    if old := min(set(flat) & set(RENAMED), default=None):
        raise SettingsError(f"{where}{renamed(old)}")
    if unknown := sorted(set(flat) - set(SECTION_OF)):
        raise SettingsError(f"{where}unknown setting {unknown[0]!r}{_near(unknown[0], SECTION_OF)}")


def _near(name: str, known: typing.Iterable[str], spell: typing.Callable[[str], str] = repr) -> str:
    """` (did you mean <the closest known name>?)`, or nothing when none is close."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {spell(close[0])}?)" if close else ""


# `HPT_*` variables that are read but are no setting: the trainer's (trainer/cluster.py) and
# the fork server's (pipelines/jobs/fork_client.py).
OTHER_ENV = (
    cluster.CPU_THREADS_ENV,
    cluster.LOGICAL_DEVICES_ENV,
    cluster.NUM_NODES_ENV,
    cluster.NODE_ADDRESS_ENV,
    fork_client.ENV,
)


def unknown_env(env: Mapping[str, str]) -> list[str]:
    """A warning line for each `HPT_*` variable that is no setting (ignored), with the near name."""
    names = {ENV_PREFIX + name.upper() for name in FIELDS}
    return [
        f"warning: {var} is not a setting, ignored{_near(var, names, str)}"
        for var in sorted(env)
        if var.startswith(ENV_PREFIX)
        and var not in names
        and var not in OTHER_ENV
        and var.removeprefix(ENV_PREFIX).lower() not in RENAMED
    ]


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
    "record_format",  # encoded images are JPEG: what a trial trains on
    "search_space",  # with its content's digest, recorded beside it
    "metric_tag",
    "goal",
    "objectives",  # constraints are not listed: like thresholds, they act at selection only
    "algorithm",
    "measurement_selection",
    "early_stopping",
    "scheduler",
    "min_epochs",
    "reduction_factor",
    "continue_from",  # the trials the study starts from
    "epochs",
    "batch_size",
    "precision",
    "trial_accelerator_count",
    "trial_workers",  # the global batch, so what a learning rate means, scales with the workers
    "model",
    "weights",
)
# Local-run defaults that give way to an explicit setting they conflict with (clamped, with
# a note): (default's field, the explicit field that bounds it from above).
CLAMPED_DEFAULTS = (("parallel_trials", "max_trials"),)


def _check(s: Settings) -> None:
    """Refuse the first bad setting, in one line.

    The model's checks, then the one check that spans two sections (the model's smallest
    image), then each section's own checks in order.
    """
    s.architecture.check()
    model = s.architecture.model
    minimum = MODELS[model].min_image_size if model in MODELS else MIN_IMAGE_SIZE
    if s.data.image_size < minimum:
        raise SettingsError(
            f"image_size={s.data.image_size!r}: expected an integer >= {minimum} "
            f"(model {model} needs {minimum} px per side)"
        )
    for section in SECTIONS:
        getattr(s, section).check()
    halving = s.study.scheduler in HALVING
    if halving and not s.study.min_epochs < s.training.epochs:
        raise SettingsError(
            f"min_epochs={s.study.min_epochs}: expected an integer below epochs="
            f"{s.training.epochs} (scheduler={s.study.scheduler}: the first rung is below the top)"
        )


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
    _refuse_unknown(data, f"--config={path}: ")
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
    if environ is None:  # the process's own environment: say what it sets that is ignored
        for line in unknown_env(env):
            print(line, file=sys.stderr)
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
            expected = str(err).rsplit(": ", 1)[-1]  # name the variable the value came from
            raise SettingsError(f"{ENV_PREFIX}{key.upper()}={value!r}: {expected}") from None
    if {"metric_tag", "objectives"} <= explicit and coerced["objectives"]:  # never overridden
        try:
            objective_rules.resolve(coerced["objectives"], (), coerced["metric_tag"])
        except objective_rules.ObjectiveError as err:
            raise SettingsError(str(err)) from None
    for name, bound in CLAMPED_DEFAULTS:
        ceiling = coerced.get(bound, _default(bound))
        value = coerced.get(name, _default(name))
        if name not in explicit and bound in explicit and value > ceiling:
            coerced[name] = ceiling
            if notes is not None:
                notes.append(f"{name} lowered from its default {value} to {bound}={ceiling}")
    settings = Settings(**coerced)  # refused first: a refusal stays one line
    if coerced.get("kubeflow_trial_nodes") and "kubeflow_trial_nodes" in explicit:
        _say(trial_nodes_line(coerced["kubeflow_trial_nodes"]), notes)
    return settings


def require_cloud(settings: Settings, *names: str) -> None:
    """Fail with one line when a cloud setting needed by a command is missing."""
    for name in names or ("project", "region", "pipeline_root"):
        if not settings.value(name):
            flag = name.replace("_", "-")
            raise SettingsError(
                f"{name} is not set: pass --{flag}, put {name} in the config file, "
                f"or set {ENV_PREFIX}{name.upper()}"
            )
