"""`--param` overrides checked the way `run`/`compile` check settings, before anything is sent.

A run-time parameter changed with `submit --param` or `schedule create --param` reaches
Vertex unchecked otherwise, and fails there: an unknown search-space flag fails every
trial, a machine type that does not take the accelerator fails the final job after the
whole study has been paid for. Here the parameters the run will have (the template's
defaults, the settings' cloud values, the overrides) are checked with the same rules
as the settings they come from, and a bad one is one line naming `--param NAME=VALUE`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pipelines.jobs.machines import MachineError, check_machine
from pipelines.models import describe_model
from pipelines.pipeline_parameters import SETTING_OF  # parameter → the setting it carries
from pipelines.settings import FIELDS, Settings, SettingsError, load_settings
from pipelines.settings_cloud import MAX_DISPLAY_NAME
from pipelines.study.options import check_algorithm
from pipelines.study.search_space import Metric, SearchSpace, SearchSpaceError
from pipelines.study.search_space import check_against_trainer as check_space
from pipelines.study.spec_reader import parse_study_spec_parameters
from pipelines.templates import declared_parameters
from trainer.contract import METRIC_GOALS, ContractError

DISPLAY_NAMES = ("model_display_name", "study_display_name", "final_display_name")
# The two machine specs of a run: (machine type, accelerator type, accelerator count).
MACHINES = tuple(
    tuple(f"{pool}_{part}" for part in ("machine_type", "accelerator_type", "accelerator_count"))
    for pool in ("trial", "final")
)
_OPTIONAL = ("parent_model", "service_account", "network", "kms_key", "tensorboard")  # "": unset


def defaults(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The pipeline parameters' compiled default values."""
    params = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    return {name: p["defaultValue"] for name, p in params.items() if "defaultValue" in p}


def check_parameters(
    spec: Mapping[str, Any], values: Mapping[str, Any], overrides: Mapping[str, Any]
) -> None:
    """Refuse a run whose parameters Vertex would accept and then fail on.

    Args:
        spec: The compiled pipeline spec (`templates.read_template`).
        values: Every value the job sets (the settings' and the overrides).
        overrides: The `--param` values, named in errors.

    Raises:
        SettingsError: One line naming the parameter, its value and what is expected.
    """
    declared = declared_parameters(spec)
    run = {**defaults(spec), **values}

    def bad(name: str, detail: str) -> SettingsError:
        return _bad(name, run, overrides, detail)

    _check_as_settings(run, overrides, declared)
    for names in MACHINES:
        if all(n in run for n in names):
            machine, accelerator, count = (run[n] for n in names)
            try:
                check_machine(str(machine), str(accelerator), int(count), what=names[0])
            except MachineError as err:
                where = "--param " if any(n in overrides for n in names) else "parameter "
                raise SettingsError(f"{where}{err}") from None
    for name in DISPLAY_NAMES:
        if len(str(run.get(name, ""))) > MAX_DISPLAY_NAME:
            raise bad(name, f"expected at most {MAX_DISPLAY_NAME} characters (Vertex's limit)")
    if {"study_spec_parameters", "model"} & set(overrides):
        _check_space(run, bad)


def _check_as_settings(
    run: Mapping[str, Any], overrides: Mapping[str, Any], declared: Mapping[str, str]
) -> None:
    """Validate the run's parameters that carry a setting, as `Settings` validates them."""
    param_of = {SETTING_OF.get(name, name): name for name in run if name in declared}
    fields = {
        field: None if (field in _OPTIONAL and run[name] == "") else run[name]
        for field, name in param_of.items()
        if field in FIELDS and field != "goal"
    }
    for use, field in (
        ("use_trial_threshold", "trial_threshold"),
        ("use_eval_threshold", "eval_threshold"),
    ):
        if not run.get(use, True):
            fields.pop(field, None)  # a threshold that is switched off is not checked
    try:
        load_settings(overrides=fields, environ={})
    except SettingsError as err:
        message = str(err)
        field = "metric_tag" if message.startswith("metric ") else message.split("=", 1)[0]
        name = param_of.get(field, field)
        raise _bad(name, run, overrides, message.split(": ", 1)[-1]) from None


def _bad(
    name: str, run: Mapping[str, Any], overrides: Mapping[str, Any], detail: str
) -> SettingsError:
    """The one-line error for parameter `name` (`--param NAME=VALUE` when overridden)."""
    where = "--param " if name in overrides else "parameter "
    return SettingsError(f"{where}{name}={run.get(name)!r}: {detail}")


def _check_space(run: Mapping[str, Any], bad: Callable[[str, str], SettingsError]) -> None:
    """The run's search space against the trainer's and its model's flags, and its algorithm."""
    tag = str(run.get("metric_tag", Settings.default("metric_tag")))
    try:
        known = describe_model(
            str(run.get("model", Settings.default("model"))), int(run.get("image_size", 32))
        )
    except ContractError as err:
        raise bad("model", str(err)) from None
    try:
        space = SearchSpace(
            parse_study_spec_parameters(run["study_spec_parameters"]),
            (Metric(tag, METRIC_GOALS.get(tag, "maximize")),),
        )
        check_space(space, known.spec.all_hyperparameters(), open_ended=not known.checked)
        check_algorithm(space, str(run.get("algorithm", Settings.default("algorithm"))))
    except SearchSpaceError as err:
        raise bad("study_spec_parameters", str(err)) from None
