"""`Settings` by concern: sections read by `settings.<section>.<field>`, written flat by users."""

from __future__ import annotations

import dataclasses

import pytest

from pipelines import images
from pipelines.settings import FIELDS, SECTION_OF, SECTIONS, Settings, SettingsError, load_settings


def test_each_flat_name_is_in_exactly_the_section_whose_dataclass_declares_it():
    declared = [
        (f.name, section) for section, kind in SECTIONS.items() for f in dataclasses.fields(kind)
    ]
    assert dict(declared) == SECTION_OF
    assert len(declared) == len(SECTION_OF) == len(FIELDS)  # no name in two sections
    assert list(SECTIONS) == [
        "data",
        "study",
        "architecture",
        "training",
        "machines",
        "images",
        "cloud",
        "kubeflow",
        "local",
        "results",
    ]
    assert not set(SECTIONS) & set(SECTION_OF)  # a section's name is never a field's


def test_a_flat_setting_lands_in_its_section_and_the_flat_name_is_gone_from_settings():
    settings = Settings(max_trials=5, parallel_trials=2, kubeflow_host="http://kfp:8080")
    assert settings.study.max_trials == 5 and settings.study.parallel_trials == 2
    assert settings.kubeflow.kubeflow_host == "http://kfp:8080"
    assert not hasattr(settings, "max_trials")  # a reader left flat fails, it is not None


# An unknown name is refused with the setting it is near (issue 51, 13).
EPOCH = r"^unknown setting 'epoch' \(did you mean 'epochs'\?\)$"


def test_flat_round_trips_and_value_reads_one_field_by_its_flat_name():
    settings = Settings(epochs=3, labels={"team": "vision"}, model="resnet50")
    flat = settings.flat()
    assert list(flat) == list(SECTION_OF)
    assert Settings(**flat) == settings
    assert settings.value("epochs") == 3 == settings.training.epochs
    assert settings.value("model") == "resnet50" == settings.architecture.model
    with pytest.raises(SettingsError, match=EPOCH):
        settings.value("epoch")


def test_replace_changes_the_named_fields_only_and_checks_again():
    settings = Settings(epochs=3, max_trials=6)
    changed = settings.replace(epochs=4)
    assert changed.training.epochs == 4 and changed.study.max_trials == 6
    assert settings.training.epochs == 3  # frozen: a copy
    with pytest.raises(SettingsError, match=r"^epochs=0: expected an integer >= 1"):
        settings.replace(epochs=0)
    with pytest.raises(SettingsError, match=EPOCH):
        settings.replace(epoch=4)
    copy = dataclasses.replace  # it passes the sections back to Settings(**flat)
    with pytest.raises(SettingsError, match=r"^unknown setting 'architecture'$"):
        copy(settings, study=settings.study)  # sections are not flat names


def test_unknown_and_renamed_flat_keys_are_refused_in_one_line():
    with pytest.raises(
        SettingsError, match=(r"^unknown setting 'max_trial' \(did you mean 'max_trials'\?\)$")
    ):
        Settings(max_trial=3)
    with pytest.raises(SettingsError, match=r"^replicas: say workers \(the final job's"):
        Settings(replicas=2)


def test_defaults_by_flat_name_and_a_fresh_one_for_each_mutable_default():
    assert Settings.default("output") == "runs/latest"
    assert Settings.default("kubeflow_pending_grace_s") == 600
    first, second = Settings(), Settings()
    assert first.cloud.labels == {} and first.cloud.labels is not second.cloud.labels
    with pytest.raises(
        SettingsError, match=(r"^unknown setting 'outputs' \(did you mean 'output'\?\)$")
    ):
        Settings.default("outputs")


def test_defaults_derived_across_sections_are_filled_once_from_the_other_section():
    settings = Settings(model="teammodels.tiny:build_model", region="europe-west4")
    assert settings.cloud.model_display_name == "hpt-tiny"  # from architecture.model
    assert settings.images.serving_image == images.serving_image_uri("europe-west4")
    lossy = Settings(metric_tag="val_loss")
    assert (lossy.study.goal, lossy.study.objectives) == ("minimize", ("val_loss",))
    own = Settings(model_display_name="mine", serving_image="my/serving:1")
    assert (own.cloud.model_display_name, own.images.serving_image) == ("mine", "my/serving:1")


def test_a_check_spanning_two_sections_sees_both():
    with pytest.raises(SettingsError, match=r"^image_size=31: expected an integer >= 32"):
        Settings(model="resnet50", image_size=31)
    assert Settings(model="cnn", image_size=31).data.image_size == 31


def test_loaded_settings_come_from_every_spelling_into_sections():
    settings = load_settings(
        overrides={"epochs": 2},
        environ={"HPT_KUBEFLOW_NAMESPACE": "team-a", "HPT_MAX_TRIALS": "4"},
        defaults={"parallel_trials": 2},
    )
    assert settings.training.epochs == 2 and settings.study.max_trials == 4
    assert settings.kubeflow.kubeflow_namespace == "team-a"
    assert settings.study.parallel_trials == 2


def test_secrets_stay_out_of_the_repr_of_their_section_and_of_settings():
    settings = Settings(kubeflow_token="s3cr3t")
    assert "s3cr3t" not in repr(settings) and "s3cr3t" not in repr(settings.kubeflow)
    assert settings.kubeflow.kubeflow_token == "s3cr3t"


def test_the_local_and_kubeflow_sections_are_exactly_what_their_target_alone_reads():
    from pipelines.settings import FIELDS_OF
    from pipelines.wiring import TARGETS

    for target in ("local", "kubeflow"):  # vertex shares the cloud section with kubeflow
        assert TARGETS[target].settings == set(FIELDS_OF[target]), target
