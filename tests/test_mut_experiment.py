"""The Katib Experiment where mutmut found it unpinned: its name, the notes `manifests`
prints, the compile-time refusal of a space Katib cannot run, and a misspelt field refused
naming its path. Each reads what a user or the cluster gets, not the module's constants.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelines.settings import Settings
from pipelines.settings_sections import SettingsError
from pipelines.settings_space import study_space
from pipelines.study.search_space import Parameter, SearchSpace, SearchSpaceError
from pipelines.targets.kubeflow import experiment, manifests
from pipelines.targets.kubeflow.trial_template import KatibSpecError
from pipelines.wiring import binding_for
from tests.test_kubeflow_katib import build

FLAT = SearchSpace(parameters=(Parameter("learning_rate", "double", min=1e-4, max=0.1),))

# --------------------------------------------------------------------------- the name


def test_the_name_is_the_readable_prefix_hpt_and_ten_hex_digits_of_the_folder() -> None:
    """What `kubectl get experiments` shows; a retried tune step looks it up by this name."""
    assert (
        experiment.experiment_name("HPT Pipeline: nightly!", "gs://b/run-1/study")
        == "hpt-pipeline-nightly-hpt-2710872fbb"
    )


def test_a_long_prefix_keeps_its_first_25_characters_and_no_trailing_dash() -> None:
    assert experiment.experiment_name("x" * 80, "r") == "x" * 25 + "-hpt-454349e422"
    assert experiment.experiment_name("a" * 24 + " b", "r") == "a" * 24 + "-hpt-454349e422"


def test_a_prefix_starts_at_its_first_letter_and_one_without_letters_is_hpt() -> None:
    assert experiment.experiment_name("--9 Nightly", "r") == "nightly-hpt-454349e422"
    assert experiment.experiment_name("2024!", "r") == "hpt-hpt-454349e422"


# --------------------------------------------------------------------------- the spec's digest


def test_the_digest_ignores_the_order_the_spec_comes_back_in() -> None:
    exp = build()
    reordered = {**exp, "spec": dict(reversed(list(exp["spec"].items())))}
    assert list(reordered["spec"]) != list(exp["spec"])
    assert experiment.spec_hash(reordered) == experiment.spec_hash(exp)


def test_the_digest_of_a_spec_is_the_one_earlier_runs_wrote() -> None:
    """A rerun on a `study_dir` compares this digest with the annotation an earlier run (an
    earlier release, too) wrote on its Experiment: a new format would refuse every resume."""
    spec = {"parameters": [{"name": "lr"}], "algorithm": {"algorithmName": "tpe"}}
    assert experiment.spec_hash({"spec": {**spec, "maxTrialCount": 9}}) == (
        "c1116d8f9a6bed275abe06b138afaefa65ebe22500d3ea9ce182897ae31af2db"
    )


# --------------------------------------------------------------------------- what users are told


SPACE = """\
parameters:
  - {id: num_units, type: integer, min: 16, max: 256, scale: log}
  - {id: epochs, type: integer, min: 1, max: 4}
  - {id: learning_rate, type: double, min: 0.001, max: 0.1, scale: log}
"""


@pytest.mark.parametrize("algorithm", ["ALGORITHM_UNSPECIFIED", "RANDOM_SEARCH"])
def test_an_integer_on_a_log_scale_is_sent_as_is_and_no_max_plus_one_is_advised(
    tmp_path: Path, algorithm: str
) -> None:
    """Katib's services reach an integer log-scale max: Optuna's `IntDistribution(log=True)`,
    and hyperopt's `qloguniform` at the service's default step 1, rounded (both run here, from
    Katib v0.19.0's sources, on [16, 17]: 17 came up). The old note that advised `max + 1`
    would have let the study propose a value above the user's bound."""
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    settings = Settings(search_space=str(space), algorithm=algorithm)
    assert manifests.notes(settings) == []
    (exp,) = manifests.build(settings.replace(kubeflow_namespace="team"))["experiment.yaml"]
    (units,) = [p for p in exp["spec"]["parameters"] if p["name"] == "num_units"]
    assert units == {
        "name": "num_units",
        "parameterType": "int",
        "feasibleSpace": {"min": "16", "max": "256", "distribution": "logUniform"},
    }


def test_compiling_for_kubeflow_refuses_a_space_with_conditions_in_one_line() -> None:
    """The `backbones` preset nests each model's parameters under `model`: Katib has no
    conditions, so compile (and submit) refuses it before anything is sent."""
    with pytest.raises(SettingsError) as err:
        binding_for("kubeflow").check_space(study_space(Settings(search_space="backbones")))
    assert str(err.value) == (
        "search_space: parameter 'optimizer': conditional parameters are not supported by "
        "Katib (kubeflow target); flatten the search space"
    )


def test_compiling_for_kubeflow_accepts_a_flat_space(tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    binding_for("kubeflow").check_space(study_space(Settings(search_space=str(space))))


# --------------------------------------------------------------------------- Katib's models


def misspell(path: str, value: Any) -> dict[str, Any]:
    exp = build()
    *parents, last = path.split(".")
    target: Any = exp
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[last] = value
    return exp


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        ("spec.maxTrialCounts", 3, ".spec.maxTrialCounts: 3 -> None"),
        (
            "spec.parameters.0.feasibleSpace.steps",
            "2",
            ".spec.parameters[0].feasibleSpace.steps: '2' -> None",
        ),
        (
            "spec.objective.additionalMetricName",
            ["val_loss"],
            ".spec.objective.additionalMetricName: ['val_loss'] -> None",
        ),
        (
            "spec.earlyStoping",
            {"algorithmName": "medianstop"},
            ".spec.earlyStoping: {'algorithmName': 'medianstop'} -> None",
        ),
    ],
    ids=["number", "in-a-list", "a-list", "a-mapping"],
)
def test_a_field_katibs_models_would_drop_is_refused_naming_its_path(
    path: str, value: Any, where: str
) -> None:
    """A misspelt key is silently dropped by the API server: refused here, with its path."""
    with pytest.raises(KatibSpecError) as err:
        experiment.round_trip(misspell(path, value))
    assert str(err.value) == f"Experiment: Katib's models dropped or changed a field: {where}"


def test_a_value_katibs_models_refuse_is_one_line_naming_the_field() -> None:
    exp = build()
    exp["spec"]["maxTrialCount"] = "many"
    with pytest.raises(KatibSpecError) as err:
        experiment.round_trip(exp)
    assert str(err.value).startswith(
        "Experiment: 1 validation error for V1beta1ExperimentSpec maxTrialCount Input should be "
        "a valid integer [type=int_type, input_value='many', input_type=str]"
    )
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- the trial pods


def test_a_one_node_trials_pods_carry_the_label_the_tune_step_watches_them_by() -> None:
    """The tune step lists `<label>=<experiment>` pods to fail fast on one that cannot start."""
    pod = build()["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]
    assert pod["metadata"]["labels"] == {experiment.EXPERIMENT_POD_LABEL: "hpt-study"}


# --------------------------------------------------------------------------- what is refused


def test_a_name_of_40_characters_is_katibs_and_41_is_refused_whole() -> None:
    build(FLAT, name="e" * 40)
    with pytest.raises(KatibSpecError) as err:
        build(FLAT, name="e" * 41)
    assert str(err.value) == (
        f"experiment name {'e' * 41!r}: expected lower case letters, digits and '-', starting "
        "with a letter, at most 40 characters (Katib's rule)"
    )


def test_an_unknown_algorithm_is_refused_listing_those_katib_runs() -> None:
    with pytest.raises(KatibSpecError) as err:
        build(FLAT, study_spec_algorithm="NELDER_MEAD")
    assert str(err.value) == (
        "study_spec_algorithm='NELDER_MEAD': expected one of ALGORITHM_UNSPECIFIED, "
        "GRID_SEARCH, RANDOM_SEARCH"
    )


def test_a_grid_over_a_double_is_refused_naming_it() -> None:
    with pytest.raises(SearchSpaceError) as err:
        build(FLAT, study_spec_algorithm="GRID_SEARCH")
    assert str(err.value).startswith("algorithm=GRID_SEARCH: parameter 'learning_rate' is a double")


def test_a_parameter_named_like_the_trial_name_binding_is_refused() -> None:
    space = SearchSpace(parameters=(Parameter("trialName", "integer", min=1, max=3),))
    with pytest.raises(KatibSpecError) as err:
        build(space)
    assert str(err.value) == "parameter 'trialName': the name is reserved"


def test_a_reverse_log_scale_is_refused_naming_katibs_distributions() -> None:
    space = SearchSpace(
        parameters=(Parameter("momentum", "double", min=0.5, max=0.99, scale="reverse_log"),)
    )
    with pytest.raises(KatibSpecError) as err:
        build(space)
    assert str(err.value) == (
        "parameter 'momentum': scale reverse_log has no Katib distribution (uniform, "
        "logUniform, normal, logNormal); use linear or log"
    )
