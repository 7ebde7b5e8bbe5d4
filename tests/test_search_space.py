"""The search space: defaults, YAML, validation errors, and the GCPC payload round trip."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.study import search_space as ss
from pipelines.study import spec_reader
from pipelines.study.search_space import Metric, Parameter, SearchSpace, SearchSpaceError
from pipelines.study.study_spec_check import validate_study_spec

ROOT = Path(__file__).resolve().parents[1]

EVERY_KIND = """
parameters:
  - id: optimizer
    type: categorical
    values: [sgd, adam]
    conditional:
      - id: momentum
        parent_values: [sgd]
        type: double
        min: 0.5
        max: 0.999
        scale: reverse_log
  - id: learning_rate
    type: double
    min: 0.0001
    max: 0.1
    scale: log
  - id: num_layers
    type: integer
    min: 1
    max: 4
    conditional:
      - {id: width, type: integer, min: 8, max: 64, scale: log, parent_values: [3, 4]}
  - id: num_units
    type: discrete
    values: [64, 128, 512]
    scale: log
    conditional:
      - {id: dropout, type: discrete, values: [0.1, 0.5], parent_values: [512]}
"""


def every_kind() -> SearchSpace:
    import yaml

    parameters = ss.from_dict(yaml.safe_load(EVERY_KIND)).parameters
    return SearchSpace(
        parameters, (Metric("val_accuracy", "maximize"), Metric("val_loss", "minimize"))
    )


def test_the_seeds_space_is_a_preset_and_the_yaml_spells_it_out():
    space = ss.load_search_space("seeds")
    assert [p.parameter_id for p in space.parameters] == ["learning_rate", "momentum", "num_units"]
    lr, momentum, units = space.parameters
    assert (lr.type, lr.min, lr.max, lr.scale) == ("double", 0.001, 1.0, "log")
    # The seeds' momentum reaches 1, which the trainer refuses: the preset stops at 0.99.
    assert (momentum.type, momentum.min, momentum.max, momentum.scale) == (
        "double",
        0,
        0.99,
        "linear",
    )
    assert (units.type, units.values) == ("discrete", (64, 128, 512))
    assert space.metrics == (Metric("val_accuracy", "maximize"),)
    assert ss.load_search_space(str(ROOT / "pipelines/study/presets/seeds.yaml")) == space


def test_the_default_keeps_the_effective_sgd_step_where_a_short_study_converges():
    space = ss.default_search_space()
    assert ss.load_search_space(None) == space == ss.load_search_space("default")
    lr, momentum, units = space.parameters
    assert (lr.min, lr.max, lr.scale) == (0.004, 0.03, "log")
    assert (momentum.min, momentum.max) == (0.75, 0.9)
    assert units.values == (64, 128, 256)
    steps = [a / (1 - m) for a in (lr.min, lr.max) for m in (momentum.min, momentum.max)]
    assert 0.01 < min(steps) and max(steps) < 0.31


def test_payload_equals_the_seed_codelab_serialization():
    """Serializing the default gives what the codelab's own GCPC/aiplatform code gives."""
    from google.cloud.aiplatform import hyperparameter_tuning as hpt
    from google_cloud_pipeline_components.v1.hyperparameter_tuning_job import (
        serialize_metrics,
        serialize_parameters,
    )

    seed_parameters = serialize_parameters(
        {
            "learning_rate": hpt.DoubleParameterSpec(min=0.001, max=1, scale="log"),
            "momentum": hpt.DoubleParameterSpec(min=0, max=0.99, scale="linear"),  # seeds: 1
            "num_units": hpt.DiscreteParameterSpec(values=[64, 128, 512], scale=None),
        }
    )
    space = ss.load_search_space("seeds")
    assert space.to_study_spec_parameters() == seed_parameters
    assert space.to_study_spec_metrics() == serialize_metrics({"val_accuracy": "maximize"})


def gcpc_serialization(space: SearchSpace) -> tuple[list, list]:
    """The oracle: GCPC's serializers over aiplatform's `hyperparameter_tuning` spec objects."""
    from google.cloud.aiplatform import hyperparameter_tuning as hpt
    from google_cloud_pipeline_components.v1.hyperparameter_tuning_job import (
        serialize_metrics,
        serialize_parameters,
    )

    def spec(p: Parameter, parent_values=None):
        common = {
            "conditional_parameter_spec": {
                c.parameter_id: spec(c, c.parent_values) for c in p.conditional
            }
            or None,
            "parent_values": list(parent_values) if parent_values else None,
        }
        scale = p.scale or "unspecified"
        if p.type == "double":
            return hpt.DoubleParameterSpec(
                min=float(p.min), max=float(p.max), scale=scale, **common
            )
        if p.type == "integer":
            return hpt.IntegerParameterSpec(min=int(p.min), max=int(p.max), scale=scale, **common)
        if p.type == "discrete":
            values = sorted(float(v) for v in p.values)
            return hpt.DiscreteParameterSpec(values=values, scale=scale, **common)
        return hpt.CategoricalParameterSpec(values=[str(v) for v in p.values], **common)

    return (
        serialize_parameters({p.parameter_id: spec(p) for p in space.parameters}),
        serialize_metrics({m.metric_id: m.goal for m in space.metrics}),
    )


def unscaled_and_unsorted() -> SearchSpace:
    return SearchSpace(
        (
            Parameter("rate", "double", min=0, max=1),
            Parameter("layers", "integer", min=0, max=9),
            Parameter(
                "units",
                "discrete",
                values=(256, 64, 128.5),
                conditional=(
                    Parameter("drop", "double", min=0.1, max=0.5, parent_values=(256, 64)),
                ),
            ),
            Parameter("act", "categorical", values=("relu", "gelu")),
        ),
        (Metric("val_loss", "minimize"),),
    )


@pytest.mark.parametrize(
    "make",
    [
        ss.default_search_space,
        lambda: ss.load_search_space("seeds"),
        every_kind,
        unscaled_and_unsorted,
    ],
    ids=["default", "seeds", "every-kind", "unscaled-unsorted"],
)
def test_payload_is_what_gcpc_serializes_key_order_included(make):
    """Our serialization skips the aiplatform import; GCPC's own helpers are the reference."""
    space = make()
    parameters, metrics = gcpc_serialization(space)
    assert space.to_study_spec_parameters() == parameters
    assert space.to_study_spec_metrics() == metrics
    # Byte for byte as the compiled specs carry them.
    assert json.dumps(space.to_study_spec_parameters()) == json.dumps(parameters)
    assert json.dumps(space.to_study_spec_metrics()) == json.dumps(metrics)


def test_enum_numbers_are_aiplatform_v1s():
    from google.cloud.aiplatform_v1.types import StudySpec

    for scale, number in ss.SCALE_TYPE_NUMBERS.items():
        name = ss.SCALE_TYPE_NAMES.get(scale, "SCALE_TYPE_UNSPECIFIED")  # type: ignore[arg-type]
        assert StudySpec.ParameterSpec.ScaleType[name] == number
    for goal, number in ss.GOAL_NUMBERS.items():
        assert StudySpec.MetricSpec.GoalType[goal.upper()] == number


def test_building_a_payload_imports_neither_gcpc_nor_aiplatform():
    code = (
        "import sys; from pipelines.study import search_space as ss; "
        "s = ss.load_search_space('seeds'); "
        "s.to_study_spec_parameters(); s.to_study_spec_metrics(); "
        "print(sorted(m for m in sys.modules if m.startswith(('google.cloud.aiplatform', "
        "'google_cloud_pipeline_components'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("make", [ss.default_search_space, every_kind], ids=["default", "all"])
def test_payload_round_trips_through_aiplatform_v1(make):
    space = make()
    parameters, metrics = space.to_study_spec_parameters(), space.to_study_spec_metrics()
    study_spec = validate_study_spec(parameters, metrics, "ALGORITHM_UNSPECIFIED")
    assert [p.parameter_id for p in study_spec.parameters] == [
        p.parameter_id for p in space.parameters
    ]
    assert spec_reader.from_study_spec(parameters, metrics) == space
    # As kfp may hand them over: JSON strings, ints as floats/strings, enums by name.
    as_strings = [json.dumps(p) for p in parameters]
    assert spec_reader.from_study_spec(as_strings, [json.dumps(m) for m in metrics]) == space


def test_every_kind_serializes_with_vertex_enums_and_nested_conditions():
    by_id = {p["parameter_id"]: p for p in every_kind().to_study_spec_parameters()}
    assert by_id["learning_rate"]["scale_type"] == 2  # UNIT_LOG_SCALE
    assert by_id["num_layers"]["integer_value_spec"] == {"min_value": "1", "max_value": "4"}
    (momentum,) = by_id["optimizer"]["conditional_parameter_specs"]
    assert momentum["parent_categorical_values"] == {"values": ["sgd"]}
    assert momentum["parameter_spec"]["scale_type"] == 3  # UNIT_REVERSE_LOG_SCALE
    (width,) = by_id["num_layers"]["conditional_parameter_specs"]
    assert width["parent_int_values"] == {"values": ["3", "4"]}
    (dropout,) = by_id["num_units"]["conditional_parameter_specs"]
    assert dropout["parent_discrete_values"] == {"values": [512.0]}
    assert {m["metric_id"]: m["goal"] for m in every_kind().to_study_spec_metrics()} == {
        "val_accuracy": 1,  # MAXIMIZE
        "val_loss": 2,  # MINIMIZE
    }


def test_parsing_takes_kfp_local_numbers_and_enum_names():
    payload = [
        {
            "parameter_id": "n",
            "integer_value_spec": {"min_value": 1.0, "max_value": "5"},
            "scale_type": "UNIT_LINEAR_SCALE",
        }
    ]
    (n,) = spec_reader.parse_study_spec_parameters(payload)
    assert (n.type, n.min, n.max, n.scale) == ("integer", 1, 5, "linear")
    assert isinstance(n.min, int)
    assert spec_reader.parse_study_spec_metrics(
        [{"metric_id": "val_loss", "goal": "MINIMIZE"}]
    ) == (Metric("val_loss", "minimize"),)


def D(pid, **kw):  # noqa: N802 - a compact parameter factory
    return Parameter(pid, kw.pop("type", "double"), **kw)


BAD_SPACES = {
    "min >= max": ((D("lr", min=1.0, max=0.1, scale="linear"),), "'lr': min (1.0) must be < max"),
    "min == max": ((D("lr", min=1.0, max=1.0, scale="linear"),), "'lr': min (1.0) must be < max"),
    "log min <= 0": ((D("lr", min=0.0, max=1.0, scale="log"),), "'lr': log scale needs min > 0"),
    "reverse_log min <= 0": (
        (D("m", min=-1.0, max=1.0, scale="reverse_log"),),
        "'m': reverse_log scale needs min > 0",
    ),
    "empty discrete": ((D("u", type="discrete", values=()),), "'u': empty values"),
    "empty categorical": ((D("o", type="categorical"),), "'o': empty values"),
    "duplicate ids": (
        (D("lr", min=0.1, max=1.0), D("lr", min=0.1, max=1.0)),
        "'lr': duplicate id",
    ),
    "duplicate conditional id": (
        (
            D(
                "o",
                type="categorical",
                values=("a", "b"),
                conditional=(D("o", min=0.0, max=1.0, parent_values=("a",)),),
            ),
        ),
        "'o': duplicate id",
    ),
    "unknown type": ((D("lr", type="float", min=0.1, max=1.0),), "'lr': unknown type 'float'"),
    "unknown scale": ((D("lr", min=0.1, max=1.0, scale="ln"),), "'lr': unknown scale 'ln'"),
    "categorical with scale": (
        (D("o", type="categorical", values=("a",), scale="log"),),
        "'o': categorical parameters take no scale",
    ),
    "fractional integer bounds": (
        (D("n", type="integer", min=1.5, max=4),),
        "'n': integer bounds must be whole numbers",
    ),
    "duplicate discrete values": (
        (D("u", type="discrete", values=(64, 64)),),
        "'u': duplicate values",
    ),
    "discrete log with 0": (
        (D("u", type="discrete", values=(0, 64), scale="log"),),
        "'u': log scale needs values > 0",
    ),
    "condition on a double": (
        (D("lr", min=0.1, max=1.0, conditional=(D("m", min=0.0, max=1.0, parent_values=(0.5,)),)),),
        "'lr': a double cannot have conditional parameters",
    ),
    "parent value not feasible": (
        (
            D(
                "n",
                type="integer",
                min=1,
                max=3,
                conditional=(D("w", min=0.0, max=1.0, parent_values=(7,)),),
            ),
        ),
        "'w': parent value 7 is not a value of 'n'",
    ),
    "bad id": ((D("--lr", min=0.1, max=1.0),), "'--lr': bad id"),
}


@pytest.mark.parametrize("case", BAD_SPACES, ids=list(BAD_SPACES))
def test_bad_space_is_refused_with_one_line_naming_the_parameter(case):
    parameters, expected = BAD_SPACES[case]
    with pytest.raises(SearchSpaceError) as err:
        SearchSpace(parameters=parameters)
    message = str(err.value)
    assert "\n" not in message
    assert expected in message


BAD_YAML = {
    "unknown key": (
        "parameters:\n  - {id: lr, type: double, mn: 0, max: 1}\n",
        "unknown key(s) mn",
    ),
    "min >= max": ("parameters:\n  - {id: lr, type: double, min: 2, max: 1}\n", "'lr': min (2)"),
    "metrics in a space file": (
        "metrics: {val_accuracy: maximize}\n",
        "`metrics` is not read from a space file; set metric_tag",
    ),
    "not yaml": ("parameters: [\n", "not valid YAML"),
    "top-level typo": ("parameter: []\n", "unknown key(s) parameter"),
    "parent_values at top": (
        "parameters:\n  - {id: lr, type: double, min: 0.1, max: 1, parent_values: [1]}\n",
        "parent_values is only for parameters under conditional",
    ),
}


@pytest.mark.parametrize("case", BAD_YAML, ids=list(BAD_YAML))
def test_bad_yaml_gives_one_line_with_the_path(tmp_path, case):
    text, expected = BAD_YAML[case]
    path = tmp_path / "space.yaml"
    path.write_text(text)
    with pytest.raises(SearchSpaceError) as err:
        ss.load_search_space(str(path))
    assert "\n" not in str(err.value)
    assert str(path) in str(err.value) and expected in str(err.value)


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(SearchSpaceError, match="cannot read search space"):
        ss.load_search_space(str(tmp_path / "nope.yaml"))


def test_unknown_payload_field_is_refused():
    payload = ss.default_search_space().to_study_spec_parameters()
    payload[0]["bogus"] = 1
    with pytest.raises(SearchSpaceError, match="bogus"):
        spec_reader.parse_study_spec_parameters(payload)


def test_values_are_cast_and_formatted_for_the_trainer():
    units = Parameter("num_units", "discrete", values=(64, 128, 512))
    assert units.cast(128.0) == 128 and isinstance(units.cast(128.0), int)
    n = Parameter("n", "integer", min=1, max=3, scale="linear")
    assert n.feasible_values() == (1, 2, 3)
