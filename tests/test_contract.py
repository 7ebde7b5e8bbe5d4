"""The trainer contract: one place for flags, ranges and metrics, and everything agrees with it."""

from __future__ import annotations

import pytest

from pipelines.settings import Settings, SettingsError
from pipelines.study import model_choice
from pipelines.study import search_space as ss
from pipelines.study.search_space import SearchSpaceError
from trainer import contract
from trainer.config import ConfigError
from trainer.flags import parse_args
from trainer.models import MODELS


@pytest.fixture
def data_dir(tmp_path):
    (tmp_path / "metadata.json").write_text("{}")
    return str(tmp_path)


def write_space(tmp_path, text: str) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return str(path)


BAD_SPACES = {
    "unknown id": (
        "parameters:\n  - {id: dropout, type: double, min: 0.1, max: 0.5}\n",
        "parameter 'dropout': the trainer has no flag --dropout",
    ),
    "wrong type": (
        "parameters:\n  - {id: num_units, type: double, min: 16, max: 64}\n",
        "parameter 'num_units': a double, but --num_units takes an integer >= 1",
    ),
    "categorical for a number": (
        "parameters:\n  - {id: momentum, type: categorical, values: [a, b]}\n",
        "parameter 'momentum': a categorical",
    ),
    "bound the trainer refuses": (
        "parameters:\n  - {id: momentum, type: double, min: 0, max: 1}\n",
        "parameter 'momentum': max 1 is refused by the trainer "
        "(--momentum takes a number in [0, 1))",
    ),
    "zero learning rate": (
        "parameters:\n  - {id: learning_rate, type: double, min: 0, max: 0.1}\n",
        "min 0 is refused by the trainer (--learning_rate takes a number > 0)",
    ),
    "discrete value out of range": (
        "parameters:\n  - {id: batch_size, type: discrete, values: [0, 32]}\n",
        "parameter 'batch_size': value 0 is refused",
    ),
    "fractional discrete for an integer flag": (
        "parameters:\n  - {id: num_units, type: discrete, values: [64, 96.5]}\n",
        "value 96.5 is refused",
    ),
    "conditional child checked too": (
        "parameters:\n  - id: batch_size\n    type: discrete\n    values: [32]\n"
        "    conditional:\n"
        "      - {id: width, type: integer, min: 1, max: 4, parent_values: [32]}\n",
        "parameter 'width': the trainer has no flag --width",
    ),
}


@pytest.mark.parametrize("case", BAD_SPACES, ids=list(BAD_SPACES))
def test_a_space_the_trainer_would_refuse_is_refused_when_loaded(tmp_path, case):
    text, expected = BAD_SPACES[case]
    path = write_space(tmp_path, text)
    with pytest.raises(SearchSpaceError) as err:
        ss.load_search_space(path)
    message = str(err.value)
    assert "\n" not in message and path in message
    assert expected in message


def test_unknown_preset_names_the_presets():
    with pytest.raises(SearchSpaceError, match=r"expected a YAML file or a preset \(.*seeds"):
        ss.load_search_space("nonesuch")


def proposed_texts(p: ss.Parameter) -> list[str]:
    """Every text a study can send for `p`: bounds and values, integers also as `128.0`."""
    if p.type == "categorical":
        return list(p.values)
    values = [p.min, p.max] if p.type in ("double", "integer") else list(p.values)
    return sorted({t for v in values for t in (contract.format_value(v), repr(float(v)))})


PRESET_MODELS = [(preset, model) for model, spec in MODELS.items() for preset in spec.presets]


@pytest.mark.parametrize("preset, model", PRESET_MODELS, ids=[f"{p}-{m}" for p, m in PRESET_MODELS])
def test_every_value_of_every_preset_passes_the_flags_of_each_model_it_fits(
    preset, model, data_dir
):
    """Vertex may propose any bound and any discrete value, and may render integers as 128.0."""
    space = ss.load_search_space(preset, MODELS[model].all_hyperparameters())
    for p in space.all_parameters():
        for text in proposed_texts(p):
            hparams, _ = parse_args(
                ["--data", data_dir, f"--model={model}", f"--{p.parameter_id}={text}"]
            )
            value = hparams.hyperparameters()[p.parameter_id]
            if p.type == "categorical":
                assert value == text
            else:
                assert float(value) == pytest.approx(float(text))


# Presets whose `model` is a search parameter (`backbones`): each model with its own values.
CHOICE_MODELS = [
    (preset, model)
    for preset in ss.preset_names()
    for model in model_choice.models_of(ss.load_search_space(preset, open_ended=True))
]


@pytest.mark.parametrize("preset, model", CHOICE_MODELS, ids=[f"{p}-{m}" for p, m in CHOICE_MODELS])
def test_every_value_a_model_choice_proposes_to_a_model_passes_its_flags(preset, model, data_dir):
    """A trial of `model` gets the shared parameters and that model's own, and --model last."""
    space = model_choice.per_model(ss.load_search_space(preset))[model]
    for p in space.all_parameters():
        for text in proposed_texts(p):
            hparams, _ = parse_args(
                [
                    "--data",
                    data_dir,
                    "--model=cnn",
                    f"--{p.parameter_id}={text}",
                    f"--model={model}",
                ]
            )
            assert hparams.model == model
            value = hparams.hyperparameters()[p.parameter_id]
            assert value == text if p.type == "categorical" else float(value) == float(text)


def test_every_preset_fits_some_model_and_every_model_has_a_preset():
    fitted = {preset for preset, _ in PRESET_MODELS} | {preset for preset, _ in CHOICE_MODELS}
    assert fitted == set(ss.preset_names())
    assert all(spec.presets for spec in MODELS.values())


def test_a_space_from_yaml_passes_the_trainer_flags_at_every_bound(tmp_path, data_dir):
    path = write_space(
        tmp_path,
        "parameters:\n"
        "  - {id: batch_size, type: integer, min: 8, max: 64, scale: log}\n"
        "  - {id: momentum, type: double, min: 0.5, max: 0.999, scale: reverse_log}\n"
        "  - {id: num_units, type: discrete, values: [32, 64.0, 256]}\n"
        "  - {id: optimizer, type: categorical, values: [adam, sgd]}\n",
    )
    for p in ss.load_search_space(path).all_parameters():
        for text in proposed_texts(p):
            parse_args(["--data", data_dir, f"--{p.parameter_id}={text}"])


@pytest.mark.parametrize(
    "flag, expected",
    [
        ("--num_units=128.5", "--num_units=128.5: expected an integer >= 1"),
        ("--momentum=1", "--momentum=1: expected a number in [0, 1)"),
        ("--learning_rate=nan", "--learning_rate=nan: expected a number > 0"),
        ("--epochs=ten", "--epochs=ten: expected an integer >= 1"),
        (
            "--metric_tag=accuracy",
            "--metric_tag=accuracy: say val_accuracy (the validation accuracy this tag always "
            "meant)",
        ),
        (
            "--metric_tag=auc",
            "--metric_tag=auc: expected one of val_accuracy, val_loss, model_size_mb, latency_ms",
        ),
    ],
)
def test_the_trainer_refuses_values_outside_the_contract_in_one_line(flag, expected, data_dir):
    with pytest.raises(ConfigError) as err:
        parse_args(["--data", data_dir, flag])
    assert str(err.value) == expected


def test_contradictory_goal_is_refused_and_the_goal_follows_the_metric():
    assert Settings(metric_tag="val_loss").study.goal == "minimize"
    assert Settings().study.goal == "maximize" and Settings().study.metric_tag == "val_accuracy"
    with pytest.raises(SettingsError, match="metric 'val_loss' with goal='maximize'"):
        Settings(metric_tag="val_loss", goal="maximize")
    with pytest.raises(SettingsError, match="metric 'f1'"):
        Settings(metric_tag="f1")


def test_flags_are_written_one_way():
    assert contract.flag("num_units", 128.0) == "--num_units=128"
    assert contract.flag("learning_rate", 0.01) == "--learning_rate=0.01"
    assert contract.flag("data", "/d") == "--data=/d"


def test_preparation_defaults_are_one_set_for_prepare_run_and_the_component():
    """`prepare` and `run` split the same source identically by default."""
    import inspect

    from dataprep import prepare as prepare_lib
    from pipelines.app import data_commands

    cli = inspect.signature(data_commands.prepare).parameters
    lib = inspect.signature(prepare_lib.prepare_dataset).parameters
    settings = Settings()
    for name in ("image_size", "validation_fraction", "test_fraction", "seed"):
        expected = getattr(contract.PREPARATION, name)
        assert cli[name].default.default == expected, name
        assert lib[name].default == expected, name
        assert settings.value(name) == expected, name
    assert (
        cli["channels"].default.default == lib["channels"].default == contract.PREPARATION.channels
    )
