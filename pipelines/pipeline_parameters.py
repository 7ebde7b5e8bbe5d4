"""The pipeline's run-time parameters: their names, types and order, and the settings they carry.

The parameters are the pipeline's interface (a submitted run overrides them with `--param`),
named as the Vertex payloads name them; most carry the setting of the same name. Where the
two names differ, `PARAMETER_OF` is the one table that maps them: the pipeline's defaults
(`parameter_defaults`), the `--param` checks (`pipelines/app/parameter_checks.py`) and
docs/parameters.md (checked against it by tests/test_pipeline_parameters.py) all read it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

# Settings field → the pipeline parameter (a Vertex payload's field) that carries it, where
# the names differ. Both names stay: the settings are what users write, the parameters what
# Vertex, a compiled spec and `--param` say.
PARAMETER_OF = {
    "max_trials": "max_trial_count",
    "parallel_trials": "parallel_trial_count",
    "max_failed_trials": "max_failed_trial_count",
    "region": "location",
    "kms_key": "encryption_spec_key_name",
    "registry": "registry_dir",
}
SETTING_OF = {parameter: setting for setting, parameter in PARAMETER_OF.items()}

# Every parameter, in the pipeline's order (kfp passes one channel per parameter it declares,
# in order; a target's hidden ones keep their defaults, wherever they stand). A long list
# because it is the interface: each is a value a run may override. Those without a setting
# of their own are derived in `derived`.
PARAMETERS: tuple[tuple[str, type], ...] = (
    ("source", str),
    ("image_size", int),
    ("validation_fraction", float),
    ("test_fraction", float),
    ("seed", int),
    ("max_bad_fraction", float),
    ("record_format", str),
    ("prepare_workers", int),
    ("study_spec_parameters", list),
    ("metric_tag", str),
    ("objectives", list),
    ("constraints", list),
    ("max_trial_count", int),
    ("parallel_trial_count", int),
    ("max_failed_trial_count", int),
    ("algorithm", str),
    ("measurement_selection", str),
    ("early_stopping", bool),
    ("max_study_hours", float),  # 0: no limit (a pipeline parameter has no null)
    ("max_trials_no_progress", int),
    ("trial_threshold", float),
    ("use_trial_threshold", bool),
    ("model", str),
    ("weights", str),
    ("epochs", int),
    ("batch_size", int),
    ("precision", str),
    ("feature_cache", str),
    ("features_dir", str),
    ("workers", int),
    ("trial_workers", int),
    ("trial_machine_type", str),
    ("trial_accelerator_type", str),
    ("trial_accelerator_count", int),
    ("final_machine_type", str),
    ("final_accelerator_type", str),
    ("final_accelerator_count", int),
    ("trial_scheduling", str),  # Vertex's Scheduling (the other targets hide them)
    ("final_scheduling", str),
    ("max_wait_hours", float),
    ("trainer_image", str),
    ("eval_threshold", float),
    ("use_eval_threshold", bool),
    ("model_display_name", str),
    ("parent_model", str),
    ("study_display_name", str),
    ("final_display_name", str),
    ("location", str),
    ("service_account", str),
    ("network", str),
    ("encryption_spec_key_name", str),
    ("labels", dict),
    ("tensorboard", str),
    ("continued_trials", list),
    ("tracking", str),
    ("tracking_uri", str),
    ("study_dir", str),
    ("dataset_dir", str),  # local: <output>/datasets/<key>, a rerun reuses or resumes it
    ("registry_dir", str),
    ("shared_root", str),
    # Successive halving: only the local target reads them (the others hide them).
    ("scheduler", str),
    ("min_epochs", int),
    ("reduction_factor", int),
)


def parameter_defaults(settings: Any, derived: Mapping[str, Any]) -> dict[str, Any]:
    """Each parameter's default: `derived`'s value, else the setting it carries.

    A setting left unset (None) becomes its parameter type's empty value (`""`, `0.0`):
    a pipeline parameter has no null. Tuples become lists, as the spec stores them.

    Raises:
        ValueError: A parameter that neither `derived` nor a setting gives.
    """
    defaults: dict[str, Any] = {}
    flat = settings.flat()  # the settings by the names users write
    for name, kind in PARAMETERS:
        if name in derived:
            defaults[name] = derived[name]
            continue
        setting = SETTING_OF.get(name, name)
        if setting not in flat:
            raise ValueError(
                f"pipeline parameter {name}: no setting {setting} and no derived value"
            )
        value = flat[setting]
        defaults[name] = kind() if value is None else kind(value)
    return defaults


def signature(defaults: Mapping[str, Any]) -> inspect.Signature:
    """The pipeline function's signature (what kfp reads): a typed parameter per one in `defaults`.

    The parameters keep `PARAMETERS`' order; those `defaults` leaves out (a target's hidden
    ones) are not in it.
    """
    return inspect.Signature(
        [
            inspect.Parameter(
                name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=defaults[name],
                annotation=kind,
            )
            for name, kind in PARAMETERS
            if name in defaults
        ]
    )
