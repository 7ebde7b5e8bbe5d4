"""How `load_settings` merges flags, YAML and `HPT_*` variables, and what it refuses.

Written against mutmut's survivors in `pipelines/settings.py` (docs/mutation.md): each test
pins what a user sees — the value a run gets, or the one line it is refused with.
"""

from __future__ import annotations

import pytest

from pipelines.settings import (
    ENV_PREFIX,
    Settings,
    SettingsError,
    load_settings,
    parse_labels,
    require_cloud,
)


def refusal(**kwargs) -> str:
    kwargs.setdefault("environ", {})
    with pytest.raises(SettingsError) as err:
        load_settings(**kwargs)
    return str(err.value)


def test_a_renamed_variable_is_refused_naming_the_new_one():
    assert refusal(environ={"HPT_REPLICAS": "2"}) == (
        "HPT_REPLICAS: say HPT_WORKERS (the final job's workers besides the chief)"
    )
    # set but empty is unset, as for every HPT_* variable
    assert load_settings(environ={"HPT_REPLICAS": ""}).training.workers == 1


def test_a_bad_variable_is_named_with_its_value_even_when_the_value_holds_a_colon():
    assert refusal(environ={"HPT_EPOCHS": "abc"}) == "HPT_EPOCHS='abc': expected int"
    assert refusal(environ={"HPT_EPOCHS": "3: 4"}) == "HPT_EPOCHS='3: 4': expected int"
    assert refusal(overrides={"epochs": "abc"}) == "epochs='abc': expected int"


def test_a_bad_variable_under_a_flag_or_yaml_value_is_not_read(tmp_path):
    assert (
        load_settings(environ={"HPT_EPOCHS": "abc"}, overrides={"epochs": 3}).training.epochs == 3
    )
    config = tmp_path / "c.yaml"
    config.write_text("epochs: 4\n")
    settings = load_settings(config=config, environ={"HPT_EPOCHS": "abc"})
    assert settings.training.epochs == 4
    config.write_text("epochs: abc\n")
    assert refusal(config=config) == "epochs='abc': expected int"


def test_each_variable_reaches_its_setting_and_an_empty_one_is_unset():
    settings = load_settings(environ={"HPT_EPOCHS": "7", "HPT_REGION": "", "HPT_SEED": "5"})
    assert (settings.training.epochs, settings.data.seed) == (7, 5)
    assert settings.cloud.region == Settings().cloud.region
    assert ENV_PREFIX == "HPT_"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("yes", True),
        ("ON", True),
        ("1", True),
        ("true", True),
        ("no", False),
        ("Off", False),
        ("0", False),
        ("false", False),
    ],
)
def test_boolean_spellings(raw, expected):
    assert load_settings(environ={"HPT_EARLY_STOPPING": raw}).study.early_stopping is expected


def test_numbers_are_taken_only_in_their_type():
    assert refusal(environ={"HPT_EARLY_STOPPING": "maybe"}) == (
        "HPT_EARLY_STOPPING='maybe': expected bool"
    )
    assert refusal(overrides={"epochs": 2.5}) == "epochs=2.5: expected int"
    assert load_settings(environ={}, overrides={"epochs": 2.0}).training.epochs == 2
    assert (
        load_settings(environ={}, overrides={"feature_cache": False}).training.feature_cache
        == "off"
    )


def test_objectives_that_disagree_with_an_explicit_metric_tag_are_refused_in_one_line():
    line = refusal(overrides={"metric_tag": "val_accuracy", "objectives": "val_loss"})
    assert line == (
        "objectives=val_loss: the first (primary) objective must be metric_tag=val_accuracy; "
        "set metric_tag to val_loss or leave it unset"
    )
    agreeing = load_settings(
        environ={}, overrides={"metric_tag": "val_loss", "objectives": "val_loss"}
    )
    assert agreeing.study.objectives == ("val_loss",)
    alone = load_settings(environ={}, overrides={"objectives": "val_loss"})
    assert (alone.study.metric_tag, alone.study.goal) == ("val_loss", "minimize")


def test_the_parallel_default_is_lowered_to_an_explicit_max_trials_and_says_so():
    notes: list[str] = []
    settings = load_settings(environ={}, overrides={"max_trials": 2}, notes=notes)
    assert settings.study.parallel_trials == 2
    assert notes == ["parallel_trials lowered from its default 3 to max_trials=2"]
    notes.clear()
    equal = load_settings(environ={}, overrides={"max_trials": 3}, notes=notes)
    assert (equal.study.parallel_trials, notes) == (3, [])
    # without an explicit max_trials, a lower default bound changes nothing
    lowered = load_settings(
        environ={}, defaults={"max_trials": 2, "parallel_trials": 2}, notes=notes
    )
    assert (lowered.study.parallel_trials, notes) == (2, [])
    assert load_settings(environ={}, overrides={"max_trials": 1}).study.parallel_trials == 1


def test_an_explicit_parallel_count_is_never_lowered():
    line = refusal(overrides={"max_trials": 2, "parallel_trials": 3})
    assert "parallel_trials" in line and "\n" not in line


def test_labels_in_every_spelling():
    assert parse_labels("a=1, b = 2,,") == {"a": "1", "b": "2"}
    assert parse_labels(["team=x", "env=dev"]) == {"team": "x", "env": "dev"}
    assert parse_labels({"k": 1}) == {"k": "1"}
    with pytest.raises(SettingsError) as err:
        parse_labels("a=1,oops")
    assert str(err.value) == "label 'oops': expected key=value"
    assert load_settings(environ={"HPT_LABELS": "a=1"}).cloud.labels == {"a": "1"}


def test_a_missing_cloud_setting_names_all_three_places():
    settings = Settings(project="my-project", pipeline_root="gs://b/r")
    require_cloud(settings)
    with pytest.raises(SettingsError) as err:
        require_cloud(Settings(project="my-project"))
    assert str(err.value) == (
        "pipeline_root is not set: pass --pipeline-root, put pipeline_root in the config "
        "file, or set HPT_PIPELINE_ROOT"
    )
    with pytest.raises(SettingsError, match="^project is not set: pass --project,"):
        require_cloud(Settings(), "project")
