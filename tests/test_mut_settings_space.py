"""The study a run's settings ask for, as compile and run check it before anything starts.

Each case is a user's setting and what the study gets or the one line that refuses it:
the model's default preset, a preset that does not fit the model (and the presets that
do), a space file that does not fit (no preset advice), the algorithm's and objectives'
rules, and the pipeline's `objectives` parameter. Written for mutmut (`make mutmut
MODULES=pipelines/settings_space.py`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.settings import Settings, SettingsError
from pipelines.settings_space import listed_objectives, settings_model, study_space
from pipelines.study.search_space import SearchSpaceError
from trainer.contract import ContractError


def _ids(settings: Settings) -> list[str]:
    return [p.parameter_id for p in study_space(settings).parameters]


def test_each_model_studies_its_own_default_preset_unless_one_is_set():
    assert _ids(Settings(model="cnn")) == _ids(Settings(model="cnn", search_space="default"))
    assert "trainable_blocks" not in _ids(Settings(model="cnn"))
    transfer = _ids(Settings(model="resnet50", search_space="transfer"))
    assert _ids(Settings(model="resnet50")) == transfer and "trainable_blocks" in transfer
    assert _ids(Settings(model="resnet50", search_space="optimizer")) != transfer


def test_a_preset_that_does_not_fit_the_model_names_every_preset_that_does():
    with pytest.raises(SearchSpaceError) as err:
        study_space(Settings(model="cnn", search_space="transfer"))
    assert str(err.value) == (
        "transfer: parameter 'trainable_blocks': the trainer has no flag --trainable_blocks "
        "(expected one of learning_rate, optimizer, momentum, batch_size, epochs, num_units)"
        " — preset 'transfer' does not fit model cnn; presets that fit: default, optimizer, seeds"
    )


def test_a_space_file_that_does_not_fit_is_refused_without_preset_advice(tmp_path: Path):
    path = tmp_path / "space.yaml"
    path.write_text(
        yaml.safe_dump(
            {"parameters": [{"id": "trainable_blocks", "type": "integer", "min": 0, "max": 2}]}
        )
    )
    with pytest.raises(SearchSpaceError) as err:
        study_space(Settings(model="cnn", search_space=str(path)))
    assert "--trainable_blocks" in str(err.value) and "preset" not in str(err.value)


def test_the_study_gets_the_settings_objectives_primary_first():
    space = study_space(Settings(objectives=("val_accuracy", "latency_ms:min")))
    assert [(m.metric_id, m.goal) for m in space.metrics] == [
        ("val_accuracy", "maximize"),
        ("latency_ms", "minimize"),
    ]
    (only,) = study_space(Settings(metric_tag="val_loss", objectives=("val_loss",))).metrics
    assert (only.metric_id, only.goal) == ("val_loss", "minimize")


def test_a_grid_over_a_continuous_parameter_is_refused_for_the_settings_algorithm():
    study_space(Settings(algorithm="RANDOM_SEARCH"))
    with pytest.raises(SearchSpaceError, match="grid"):
        study_space(
            Settings(algorithm="GRID_SEARCH")
        )  # the default space has a DOUBLE learning rate


def test_the_pipeline_lists_objectives_only_beyond_the_metric_tag_alone():
    assert listed_objectives(Settings()) == []
    assert listed_objectives(Settings(metric_tag="val_loss", objectives=("val_loss",))) == []
    two = Settings(objectives=("val_accuracy", "latency_ms:min"))
    assert listed_objectives(two) == ["val_accuracy", "latency_ms:min"]


def test_a_model_reference_not_importable_here_is_refused_only_where_it_must_import():
    settings = Settings(model="elsewhere.models:build", image_size=32)
    known = settings_model(settings)  # compile: noted, built where it runs
    assert not known.checked and "elsewhere" in known.note
    with pytest.raises(SettingsError) as err:
        settings_model(settings, importable=True)  # run: it must import here
    assert str(err.value) == known.note


def test_weights_the_model_cannot_take_are_refused_in_one_line():
    with pytest.raises(SettingsError) as err:
        settings_model(Settings(model="cnn", weights="imagenet"))
    assert str(err.value) == (
        "weights='imagenet': model cnn has no pretrained backbone (expected none)"
    )
    assert settings_model(Settings(model="resnet50", weights="imagenet")).checked


def test_the_study_metric_step_gives_each_objective_its_goal_primary_first():
    from components.study_metric import study_metric

    assert study_metric.python_func("val_loss", [], []) == (
        [{"metric_id": "val_loss", "goal": 2}],
        "minimize",
        "BEST_MEASUREMENT",
    )
    assert study_metric.python_func("val_accuracy", ["val_accuracy", "latency_ms:min"], []) == (
        [{"metric_id": "val_accuracy", "goal": 1}, {"metric_id": "latency_ms", "goal": 2}],
        "maximize",
        "LAST_MEASUREMENT",
    )
    with pytest.raises(ContractError, match=r"^metric_tag=accuracy: say val_accuracy \("):
        study_metric.python_func("accuracy", [], [])


def test_the_presets_named_as_fitting_each_model():
    from pipelines.settings_space import fitting_presets

    assert fitting_presets(settings_model(Settings(model="cnn"))) == [
        "default",
        "optimizer",
        "seeds",
    ]
    resnet = settings_model(Settings(model="resnet50"))
    assert fitting_presets(resnet) == ["default", "optimizer", "seeds", "transfer"]
    # a model built where it runs: its own flags are unknown here, so any preset may fit
    elsewhere = settings_model(Settings(model="elsewhere.models:build", image_size=32))
    assert fitting_presets(elsewhere) == ["default", "optimizer", "seeds", "transfer"]


def test_a_model_built_elsewhere_may_study_flags_this_machine_cannot_check():
    settings = Settings(model="elsewhere.models:build", image_size=32, search_space="transfer")
    assert "trainable_blocks" in _ids(settings)  # its builder's flag, checked where it runs


def test_an_unusable_model_reference_is_refused_with_the_checks_own_line():
    with pytest.raises(SettingsError) as err:
        settings_model(Settings(model="json:nosuch", image_size=32))  # importable, no builder
    assert str(err.value) == "model=json:nosuch: json has no function nosuch"
