"""What a user meets when a search space is written wrong, and what a right one compiles to.

Each case is a YAML file loaded as `hpt-pipeline run --search-space FILE` loads it, or the
Vertex payload the space compiles to. Written to kill mutmut's survivors in
`pipelines/study/search_space.py` (docs/mutation.md): each refusal is one line naming the
parameter and what is expected, and each value the user wrote reaches the payload.
"""

from __future__ import annotations

import pytest

from pipelines.study import sampler
from pipelines.study import search_space as ss
from pipelines.study.search_space import Metric, Parameter, SearchSpace, SearchSpaceError
from trainer.models import MODELS


def load(tmp_path, text: str, **kwargs) -> SearchSpace:
    path = tmp_path / "space.yaml"
    path.write_text(text, encoding="utf-8")
    return ss.load_search_space(str(path), **kwargs)


def refusal(tmp_path, text: str, **kwargs) -> str:
    with pytest.raises(SearchSpaceError) as err:
        load(tmp_path, text, **kwargs)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path / "space.yaml") + ": ")
    return message[len(str(tmp_path / "space.yaml") + ": ") :]


P = "parameters:\n"
REFUSED = {
    "a parameter that is not a mapping": (
        P + "  - learning_rate\n",
        "search space: expected a parameter mapping, got 'learning_rate'",
    ),
    "no type": (
        P + "  - {id: lr, min: 0.1, max: 1}\n",
        "parameter 'lr': missing type, expected one of double, integer, discrete, categorical",
    ),
    "two unknown keys": (
        P + "  - {id: lr, type: double, mn: 0.1, mx: 1}\n",
        "parameter 'lr': unknown key(s) mn, mx, expected id, type, min, max, values, scale, "
        "parent_values, conditional",
    ),
    "conditional not a list": (
        P + "  - {id: optimizer, type: categorical, values: [sgd], conditional: {id: m}}\n",
        "parameter 'optimizer': conditional must be a list of parameter mappings",
    ),
    "values not a list": (
        P + "  - {id: num_units, type: discrete, values: 64}\n",
        "parameter 'num_units': values must be a list",
    ),
    "parent_values not a list": (
        P + "  - id: optimizer\n    type: categorical\n    values: [sgd, adam]\n"
        "    conditional:\n"
        "      - {id: momentum, type: double, min: 0.1, max: 0.5, parent_values: sgd}\n",
        "parameter 'momentum': parent_values must be a list",
    ),
    "a numeric id": (P + "  - {id: 5, type: double, min: 0.1, max: 1}\n", "parameter '5': bad id"),
    "top level not a mapping": ("- learning_rate\n", "search space: expected a mapping with"),
    "parameters not a list": (
        "parameters: {learning_rate: 1}\n",
        "search space: parameters must be a list of mappings",
    ),
    "two unknown top-level keys": (
        "parameter: []\nspace: []\n",
        "search space: unknown key(s) parameter, space, expected parameters",
    ),
    "metrics in the file": (
        "metrics: {val_loss: minimize}\n",
        "set metric_tag (and goal) in the settings instead",
    ),
    "a NaN bound": (
        P + "  - {id: learning_rate, type: double, min: .nan, max: 0.1}\n",
        "parameter 'learning_rate': a double needs numeric min and max",
    ),
    "a text bound": (
        P + "  - {id: learning_rate, type: double, min: 0.001, max: big}\n",
        "parameter 'learning_rate': a double needs numeric min and max",
    ),
    "a bound missing": (
        P + "  - {id: learning_rate, type: double, min: 0.001}\n",
        "parameter 'learning_rate': a double needs numeric min and max",
    ),
    "values for a double": (
        P + "  - {id: learning_rate, type: double, values: [0.1, 0.2]}\n",
        "parameter 'learning_rate': a double takes min and max, not values",
    ),
    "min beside discrete values": (
        P + "  - {id: num_units, type: discrete, min: 16, values: [64, 128]}\n",
        "parameter 'num_units': a discrete parameter takes values, not min/max",
    ),
    "discrete words": (
        P + "  - {id: num_units, type: discrete, values: [small, big]}\n",
        "parameter 'num_units': discrete values must be numbers",
    ),
    "discrete reverse_log through 0": (
        P + "  - {id: momentum, type: discrete, values: [0, 0.5], scale: reverse_log}\n",
        "parameter 'momentum': reverse_log scale needs values > 0, got 0.0",
    ),
    "discrete log below 0, listed last": (
        P + "  - {id: momentum, type: discrete, values: [0.5, -0.5], scale: log}\n",
        "parameter 'momentum': log scale needs values > 0, got -0.5",
    ),
    "unknown type": (
        P + "  - {id: learning_rate, type: float, min: 0.1, max: 1}\n",
        "unknown type 'float', expected one of double, integer, discrete, categorical",
    ),
    "unknown scale": (
        P + "  - {id: learning_rate, type: double, min: 0.1, max: 1, scale: ln}\n",
        "unknown scale 'ln', expected one of linear, log, reverse_log",
    ),
    "numbers as categories": (
        P + "  - {id: optimizer, type: categorical, values: [1, 2]}\n",
        "parameter 'optimizer': categorical values must be non-empty strings",
    ),
    "a category twice": (
        P + "  - {id: optimizer, type: categorical, values: [sgd, sgd]}\n",
        "parameter 'optimizer': duplicate values, expected distinct categories",
    ),
    "children under a double": (
        P + "  - id: learning_rate\n    type: double\n    min: 0.1\n    max: 1\n"
        "    conditional:\n"
        "      - {id: momentum, type: double, min: 0.1, max: 0.5, parent_values: [0.5]}\n",
        "a double cannot have conditional parameters, expected one of integer, discrete, "
        "categorical",
    ),
    "a child without parent_values": (
        P + "  - id: optimizer\n    type: categorical\n    values: [sgd, adam]\n"
        "    conditional:\n      - {id: momentum, type: double, min: 0.1, max: 0.5}\n",
        "parameter 'momentum': conditional on 'optimizer' but no parent_values",
    ),
    "a category the parent does not have": (
        P + "  - id: optimizer\n    type: categorical\n    values: [sgd, adam]\n"
        "    conditional:\n"
        "      - {id: momentum, type: double, min: 0.1, max: 0.5, parent_values: [rmsprop]}\n",
        "parameter 'momentum': parent value 'rmsprop' is not a value of 'optimizer'",
    ),
}
for _value in ("100", "64.5", "abc", "'64'"):  # near, within 1, a word, a number as text
    REFUSED[f"parent value {_value} under discrete units"] = (
        P + "  - id: num_units\n    type: discrete\n    values: [64, 128]\n"
        "    conditional:\n"
        f"      - {{id: momentum, type: double, min: 0.1, max: 0.5, parent_values: [{_value}]}}\n",
        "parameter 'momentum': parent value ",
    )


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_space_file_written_wrong_is_refused_in_one_line_saying_what_is_expected(tmp_path, case):
    text, expected = REFUSED[case]
    message = refusal(tmp_path, text)
    assert expected in message
    assert message.startswith(expected) or message.endswith(expected)  # nothing around it


def test_a_yaml_error_keeps_the_parsers_words_and_where_on_one_line(tmp_path):
    message = refusal(tmp_path, "parameters: [\n")
    assert "not valid YAML (while parsing a flow node expected the node content" in message
    assert "line 2, column 1" in message


def test_a_name_that_is_no_preset_and_no_file_lists_the_presets(tmp_path):
    with pytest.raises(SearchSpaceError) as err:
        ss.load_search_space("resnet_space")
    presets = ", ".join(ss.preset_names())
    assert str(err.value) == (
        f"search_space='resnet_space': expected a YAML file or a preset ({presets})"
    )
    assert {"default", "seeds", "backbones"} <= set(ss.preset_names())


def test_the_space_after_an_unknown_id_is_still_checked_when_the_models_flags_are_open(tmp_path):
    text = (
        P + "  - {id: width, type: integer, min: 1, max: 4}\n"
        "  - {id: learning_rate, type: double, min: 0, max: 0.1}\n"
    )
    assert "min 0 is refused by the trainer" in refusal(tmp_path, text, open_ended=True)
    assert "the trainer has no flag --width (expected one of learning_rate, optimizer," in (
        refusal(tmp_path, text)
    )


def test_a_model_choice_is_checked_against_the_flags_the_caller_knows(tmp_path):
    text = (
        P + "  - {id: model, type: categorical, values: [cnn, resnet50]}\n"
        "  - {id: learning_rate, type: double, min: 0.01, max: 0.1}\n"
    )
    assert load(tmp_path, text).parameters[0].values == ("cnn", "resnet50")
    flags = MODELS["cnn"].all_hyperparameters()
    only_cnn = {k: v for k, v in flags.items() if k != "learning_rate"}
    message = refusal(tmp_path, text, model_flags=lambda model: (only_cnn, True))
    assert message.startswith("model cnn: parameter 'learning_rate': the trainer has no flag")


def test_hint_names_the_type_to_use_for_the_trainers_flag(tmp_path):
    assert refusal(tmp_path, P + "  - {id: num_units, type: double, min: 16, max: 64}\n") == (
        "parameter 'num_units': a double, but --num_units takes an integer >= 1 "
        "(use type integer or discrete)"
    )
    assert refusal(tmp_path, P + "  - {id: optimizer, type: double, min: 1, max: 2}\n") == (
        "parameter 'optimizer': a double, but --optimizer takes one of sgd, adam "
        "(use type categorical)"
    )
    assert refusal(tmp_path, P + "  - {id: momentum, type: categorical, values: [a, b]}\n") == (
        "parameter 'momentum': a categorical, but --momentum takes a number in [0, 1)"
    )
    assert refusal(tmp_path, P + "  - {id: optimizer, type: categorical, values: [rmsprop]}\n") == (
        "parameter 'optimizer': value rmsprop is refused by the trainer "
        "(--optimizer takes one of sgd, adam)"
    )


def test_an_integer_bound_the_trainer_refuses_is_named(tmp_path):
    assert refusal(tmp_path, P + "  - {id: num_units, type: integer, min: 0, max: 64}\n") == (
        "parameter 'num_units': min 0 is refused by the trainer (--num_units takes an integer >= 1)"
    )


def test_a_scale_left_out_is_linear_in_the_payload_for_numbers_and_unset_for_categories(tmp_path):
    space = load(
        tmp_path,
        P + "  - {id: learning_rate, type: double, min: 0.01, max: 0.1}\n"
        "  - {id: num_units, type: integer, min: 16, max: 64}\n"
        "  - {id: batch_size, type: discrete, values: [32, 64]}\n"
        "  - {id: optimizer, type: categorical, values: [sgd, adam]}\n",
    )
    scales = [p["scale_type"] for p in space.to_study_spec_parameters()]
    assert scales == [ss.SCALE_TYPE_NUMBERS["linear"]] * 2 + [0, 0]


def test_values_the_user_writes_in_range_are_accepted(tmp_path):
    space = load(
        tmp_path,
        P + "  - id: num_units\n    type: integer\n    min: 1\n    max: 4\n"
        "    conditional:\n"
        "      - {id: momentum, type: double, min: 0.1, max: 0.5, parent_values: [1, 4]}\n"
        "  - {id: learning_rate, type: discrete, values: [0.5, 1, 2], scale: log}\n"
        "  - id: ratio\n    type: discrete\n    values: [0.3, 64]\n"
        "    conditional:\n"
        "      - {id: epochs, type: integer, min: 1, max: 2,"
        " parent_values: [0.30000000000000004]}\n",
        open_ended=True,
    )
    assert [p.parameter_id for p in space.all_parameters()] == [
        "num_units",
        "momentum",
        "learning_rate",
        "ratio",
        "epochs",
    ]


def test_grid_search_follows_each_parents_value_to_its_children():
    optimizer = Parameter(
        "optimizer",
        "categorical",
        values=("sgd", "adam"),
        conditional=(Parameter("momentum", "discrete", values=(0.5, 0.9), parent_values=("sgd",)),),
    )
    units = Parameter(
        "num_units",
        "discrete",
        values=(64, 128),
        conditional=(Parameter("width", "integer", min=2, max=3, parent_values=(128,)),),
    )
    points = sampler.grid_points((optimizer, units))
    assert {"optimizer": "adam", "num_units": 64} in points
    assert {"optimizer": "sgd", "momentum": 0.9, "num_units": 128, "width": 3} in points
    assert len(points) == 3 * 3
    assert all(type(p["num_units"]) is int and type(p["optimizer"]) is str for p in points)
    assert all(type(p["momentum"]) is float for p in points if "momentum" in p)
    assert Parameter("n", "integer", min=0, max=2).feasible_values() == (0, 1, 2)
    assert Parameter("n", "integer", min=-2, max=0).feasible_values() == (-2, -1, 0)
    with pytest.raises(SearchSpaceError) as err:
        sampler.grid_points((Parameter("learning_rate", "double", min=0.01, max=0.1), units))
    assert str(err.value) == (
        "parameter 'learning_rate': a double has no finite set of values "
        "(grid search needs integer, discrete or categorical parameters)"
    )


def test_a_trial_value_is_cast_to_what_the_trainer_flag_takes():
    assert Parameter("optimizer", "categorical", values=("sgd",)).cast("sgd") == "sgd"
    assert type(Parameter("n", "integer", min=1, max=9).cast(3.0)) is int
    lr = Parameter("lr", "discrete", values=(0.5, 1.0))
    assert lr.cast(0.5) == 0.5 and type(lr.cast(1.0)) is int
    assert type(Parameter("lr", "double", min=0.1, max=2.0).cast(1.0)) is float


def test_metrics_written_wrong_are_refused_in_one_line():
    lr = (Parameter("learning_rate", "double", min=0.01, max=0.1, scale="log"),)
    cases = {
        (): "search space: no metrics (expected at least one)",
        (Metric(""),): "metric: empty id (expected the hypertune tag, e.g. val_accuracy)",
        (Metric("val_loss", "minimize"), Metric("val_loss", "minimize")): (
            "metric 'val_loss': duplicate id"
        ),
        (Metric("val_loss", "lower"),): (
            "metric 'val_loss': unknown goal 'lower', expected one of maximize, minimize"
        ),
    }
    for metrics, expected in cases.items():
        with pytest.raises(SearchSpaceError) as err:
            SearchSpace(lr, metrics)
        assert str(err.value) == expected
    with pytest.raises(SearchSpaceError) as err:
        SearchSpace(())
    assert str(err.value) == "search space: no parameters (expected at least one)"
    with pytest.raises(SearchSpaceError) as err:
        SearchSpace(lr + lr)
    assert str(err.value) == (
        "parameter 'learning_rate': duplicate id (ids must be unique, conditional parameters "
        "included)"
    )
