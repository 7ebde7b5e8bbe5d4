"""Settings: precedence flags > YAML > env > defaults, and one-line validation errors."""

import pytest

from pipelines.settings import SettingsError, load_settings, require_cloud


def test_precedence(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("max_trials: 7\nepochs: 3\nlabels: {team: ml}\n")
    env = {
        "HPT_MAX_TRIALS": "5",
        "HPT_EPOCHS": "2",
        "HPT_BATCH_SIZE": "64",
        "HPT_REGION": "europe-west4",
    }
    s = load_settings(
        config=config,
        overrides={"epochs": 9, "seed": None},
        environ=env,
        defaults={"batch_size": 16},
    )
    assert (s.training.epochs, s.study.max_trials, s.training.batch_size, s.cloud.region) == (
        9,
        7,
        64,
        "europe-west4",
    )
    assert s.cloud.labels == {"team": "ml"} and s.data.seed == 42


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"region": "Mars"}, "region='Mars': expected a Google Cloud region"),
        ({"project": "X"}, "project='X': expected a Google Cloud project id"),
        ({"pipeline_root": "/tmp/root"}, "pipeline_root='/tmp/root': expected a gs:// URI"),
        ({"kms_key": "my-key"}, "kms_key='my-key': expected projects/P/locations/L/keyRings"),
        ({"algorithm": "BAYES"}, "algorithm='BAYES': expected one of ALGORITHM_UNSPECIFIED"),
        (
            {"parallel_trials": 9, "max_trials": 3},
            "parallel_trials=9: expected an integer in [1, max_trials=3]",
        ),
        ({"image_size": 10}, "image_size=10: expected an integer >= 22"),
        ({"labels": "Team=ML"}, "labels=Team=ML: expected lowercase"),
        ({"epochs": "three"}, "epochs='three': expected int"),
        ({"service_account": "me@gmail.com"}, "service_account='me@gmail.com'"),
    ],
)
def test_bad_values_name_themselves(overrides, message):
    with pytest.raises(SettingsError) as err:
        load_settings(overrides=overrides, environ={})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_config_file_errors(tmp_path):
    with pytest.raises(SettingsError, match="unknown setting 'max_trails'"):
        (tmp_path / "c.yaml").write_text("max_trails: 3\n")
        load_settings(config=tmp_path / "c.yaml", environ={})
    with pytest.raises(SettingsError, match="file not found"):
        load_settings(config=tmp_path / "missing.yaml", environ={})


def test_missing_cloud_settings_are_named():
    with pytest.raises(SettingsError, match="project is not set: pass --project.*HPT_PROJECT"):
        require_cloud(load_settings(environ={}))
