"""The model as a search parameter: checked per model, Vertex's conditional specs, Optuna's
define-by-run proposals, the study's image size and weights, and Katib's refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines import vertex_types
from pipelines.settings import Settings
from pipelines.settings_space import study_space
from pipelines.study import model_choice
from pipelines.study.search_space import (
    SearchSpaceError,
    from_dict,
    load_search_space,
)
from pipelines.study.spec_reader import parse_study_spec_parameters

CHOICE = {
    "parameters": [
        {"id": "learning_rate", "type": "double", "min": 0.001, "max": 0.1, "scale": "log"},
        {
            "id": "model",
            "type": "categorical",
            "values": ["cnn", "mobilenet_v3_small"],
            "conditional": [
                {
                    "id": "num_units",
                    "type": "discrete",
                    "values": [16, 32],
                    "parent_values": ["cnn"],
                },
                {
                    "id": "trainable_blocks",
                    "type": "discrete",
                    "values": [0, 13],
                    "parent_values": ["mobilenet_v3_small"],
                },
            ],
        },
    ]
}


def _space(data=None):
    return from_dict(data or CHOICE)


def _with(**model_changes):
    data = {"parameters": [dict(CHOICE["parameters"][0]), {**CHOICE["parameters"][1]}]}
    data["parameters"][1].update(model_changes)
    return data


def test_the_backbones_preset_loads_each_model_with_its_own_parameters():
    space = load_search_space("backbones")
    assert model_choice.models_of(space) == ("cnn", "mobilenet_v3_small", "resnet50")
    per_model = {
        m: {p.parameter_id for p in s.all_parameters()}
        for m, s in model_choice.per_model(space).items()
    }
    assert "trainable_blocks" not in per_model["cnn"]
    assert "trainable_blocks" in per_model["resnet50"] and "model" not in per_model["resnet50"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (  # a top-level parameter every model must take: cnn has no trainable_blocks
            {
                "parameters": [
                    {"id": "trainable_blocks", "type": "discrete", "values": [0, 2]},
                    {"id": "model", "type": "categorical", "values": ["cnn", "resnet50"]},
                ]
            },
            "model cnn: parameter 'trainable_blocks': the trainer has no flag --trainable_blocks",
        ),
        (  # 13 blocks is mobilenet's whole backbone, more than resnet50 has
            _with(
                values=["cnn", "resnet50"],
                conditional=[
                    {
                        "id": "trainable_blocks",
                        "type": "discrete",
                        "values": [0, 13],
                        "parent_values": ["resnet50"],
                    }
                ],
            ),
            "model resnet50: parameter 'trainable_blocks': value 13 is refused by the trainer",
        ),
        (
            _with(values=["cnn", "vgg16"], conditional=[]),
            "parameter 'model': value 'vgg16' is not a model (expected one of cnn",
        ),
        (
            {"parameters": [{"id": "model", "type": "discrete", "values": [1, 2]}]},
            "parameter 'model': a discrete, expected categorical",
        ),
        (
            {
                "parameters": [
                    {
                        "id": "optimizer",
                        "type": "categorical",
                        "values": ["sgd", "adam"],
                        "conditional": [
                            {
                                "id": "model",
                                "type": "categorical",
                                "values": ["cnn"],
                                "parent_values": ["sgd"],
                            }
                        ],
                    }
                ]
            },
            "parameter 'model': a model choice is a top-level parameter, not conditional",
        ),
    ],
)
def test_a_model_choice_the_trainer_cannot_take_is_refused_in_one_line(data, message, tmp_path):
    import yaml

    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SearchSpaceError, match=".*") as err:
        load_search_space(str(path))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_vertex_gets_conditional_specs_under_each_model_value_strict_parse():
    space = _space()
    specs = space.to_study_spec_parameters()
    (model_spec,) = [s for s in specs if s["parameter_id"] == "model"]
    assert model_spec["categorical_value_spec"] == {"values": ["cnn", "mobilenet_v3_small"]}
    parents = {
        c["parameter_spec"]["parameter_id"]: c["parent_categorical_values"]["values"]
        for c in model_spec["conditional_parameter_specs"]
    }
    assert parents == {"num_units": ["cnn"], "trainable_blocks": ["mobilenet_v3_small"]}
    for spec in specs:  # the API's own message types refuse anything else
        vertex_types.parse("StudySpec.ParameterSpec", spec)
    assert parse_study_spec_parameters(specs) == space.parameters


def test_optuna_proposes_only_the_chosen_models_own_parameters():
    from pipelines.study.optuna_study import make_optuna_study
    from pipelines.study.sampler import suggest

    space = _space()
    study = make_optuna_study(
        space,
        [],
        algorithm="ALGORITHM_UNSPECIFIED",
        seed=3,
        max_trial_count=12,
        early_stopping=None,
    )
    seen = set()
    for _ in range(12):
        trial = study.ask()
        params = suggest(trial, space.parameters)
        own = {"cnn": {"num_units"}, "mobilenet_v3_small": {"trainable_blocks"}}[params["model"]]
        assert set(params) == {"learning_rate", "model", *own}, params
        seen.add(params["model"])
        study.tell(trial, 0.5)
    assert seen == {"cnn", "mobilenet_v3_small"}


def _settings(tmp_path, space_file=None, **changes):
    import yaml

    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(CHOICE))
    return Settings(image_size=32).replace(search_space=space_file or str(path), **changes)


def test_the_study_image_size_must_suit_every_model_in_the_choice(tmp_path):
    assert model_choice.models_of(study_space(_settings(tmp_path))) == (
        "cnn",
        "mobilenet_v3_small",
    )
    with pytest.raises(SearchSpaceError) as err:
        study_space(_settings(tmp_path, image_size=24))
    assert "model mobilenet_v3_small (in the search space's model choice)" in str(err.value)
    assert "needs 32 px per side" in str(err.value) or "at least 32" in str(err.value)


def test_weights_set_for_the_study_must_suit_every_model_unset_is_each_models_own(tmp_path):
    with pytest.raises(SearchSpaceError) as err:
        study_space(_settings(tmp_path, model="mobilenet_v3_small", weights="imagenet"))
    assert "model cnn (in the search space's model choice)" in str(err.value)
    assert "model cnn has no pretrained backbone" in str(err.value)
    study_space(_settings(tmp_path, weights="none"))  # none suits every model


def test_katib_refuses_a_model_choice_with_conditional_parameters():
    from pipelines.targets.kubeflow.experiment import KatibSpecError, _parameter

    (_, model) = _space().parameters
    with pytest.raises(
        KatibSpecError, match="parameter 'model': conditional parameters are not supported by Katib"
    ):
        _parameter(model)


def test_the_trial_and_the_final_job_train_the_model_their_parameters_name(synthetic_data):
    """`--model=<value>` is appended after the run's fixed `--model` (Vertex's rule): it wins."""
    from pipelines.jobs.trainer_args import parameter_args, trainer_flags
    from trainer import flags

    fixed = dict(
        model="cnn",
        weights="",
        epochs=1,
        batch_size=8,
        metric_tag="val_accuracy",
        precision="auto",
        seed=1,
    )
    args = trainer_flags(synthetic_data, fixed) + parameter_args(
        {"model": "mobilenet_v3_small", "trainable_blocks": 2.0}
    )
    hparams, _ = flags.parse_args(args)
    assert hparams.model == "mobilenet_v3_small"
    assert hparams.model_params["trainable_blocks"] == 2
    assert hparams.weights == "imagenet"  # unset weights: the chosen model's own default


def _kubeflow_env(monkeypatch, tmp_path):
    for name, value in (
        ("HPT_TRAINER_IMAGE", "registry.example.com/hpt/trainer:v1"),
        ("HPT_COMPONENTS_IMAGE", "registry.example.com/hpt/components:v1"),
        ("HPT_DATA_PVC", "hpt-data"),
        ("HOME", str(tmp_path / "home")),
    ):
        monkeypatch.setenv(name, value)
    import yaml

    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(CHOICE))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"search_space": str(space), "weights": "none"}))
    return config


KATIB_REFUSAL = (
    "hpt-pipeline: error: search_space: parameter 'model': conditional parameters are not "
    "supported by Katib (kubeflow target); flatten the search space"
)


@pytest.mark.parametrize(
    "command",
    [
        ["compile", "--target=kubeflow", "--output={out}"],
        [
            "submit",
            "--target=kubeflow",
            "--host=http://kfp.example.com:8080",
            "--namespace=team-a",  # the `kubeflow` namespace is refused first
            "--dry-run",
        ],
    ],
)
def test_kubeflow_refuses_the_conditional_model_choice_in_one_line(command, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from pipelines.app.cli import app

    config = _kubeflow_env(monkeypatch, tmp_path)
    out = tmp_path / "kf.yaml"
    args = [a.format(out=out) for a in command] + [f"--config={config}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [KATIB_REFUSAL]
    assert not out.exists()


@pytest.mark.parametrize(("weights", "expected"), [(None, ""), ("none", "none")])
def test_unset_weights_stay_unset_in_a_model_choice_payload(weights, expected, tmp_path):
    """Each model then takes its own default; the fixed cnn's `none` would starve the others."""
    import yaml

    from pipelines.compiler import compile_pipeline

    settings = _settings(tmp_path, weights=weights)
    spec = yaml.safe_load(
        Path(compile_pipeline("local", settings, str(tmp_path / "p.yaml"))).read_text()
    )
    assert spec["root"]["inputDefinitions"]["parameters"]["weights"]["defaultValue"] == expected
