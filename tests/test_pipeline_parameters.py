"""The one table of settings and the pipeline parameters that carry them, and its page."""

from __future__ import annotations

import re

import pytest

from pipelines.pipeline import build_pipeline
from pipelines.pipeline_parameters import (
    PARAMETER_OF,
    PARAMETERS,
    SETTING_OF,
    parameter_defaults,
)
from pipelines.settings import load_settings
from tests.conftest import ROOT

DERIVED = (  # the parameters no setting carries (docs/parameters.md)
    "study_spec_parameters",
    "use_trial_threshold",
    "use_eval_threshold",
    "study_display_name",
    "final_display_name",
    "continued_trials",
    "shared_root",
    "features_dir",
    "study_dir",
    "dataset_dir",
)


def test_the_docs_page_lists_exactly_the_tables_pairs():
    text = (ROOT / "docs" / "parameters.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| `(\w+)` \|$", text, flags=re.M))
    assert rows == PARAMETER_OF


def test_each_renamed_setting_reaches_its_parameters_default_in_the_compiled_pipeline():
    settings = load_settings(
        overrides=dict(max_trials=7, parallel_trials=5, max_failed_trials=4, region="europe-west4"),
        environ={},
    )
    inputs = build_pipeline("vertex", settings).component_spec.inputs
    assert {name: inputs[name].default for name in SETTING_OF if name in inputs} == {
        "max_trial_count": 7,
        "parallel_trial_count": 5,
        "max_failed_trial_count": 4,
        "location": "europe-west4",
        "encryption_spec_key_name": "",  # kms_key unset: a parameter has no null
    }


def test_an_unset_setting_is_its_parameter_types_empty_value_and_tuples_become_lists():
    settings = load_settings(
        overrides=dict(objectives=["val_accuracy", "latency_ms"], constraints=["latency_ms<=20"]),
        environ={},
    )
    derived = {name: [] for name in DERIVED}
    defaults = parameter_defaults(settings, derived)
    assert defaults["trial_threshold"] == 0.0 and defaults["parent_model"] == ""
    assert defaults["constraints"] == ["latency_ms<=20"]
    assert defaults["registry_dir"] == settings.local.registry
    assert list(defaults) == [name for name, _ in PARAMETERS]


def test_a_parameter_that_carries_no_setting_and_is_not_derived_is_refused():
    settings = load_settings(environ={})
    with pytest.raises(ValueError, match=r"^pipeline parameter study_spec_parameters: no setting"):
        parameter_defaults(settings, {})
