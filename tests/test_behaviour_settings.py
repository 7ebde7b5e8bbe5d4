"""Every refusal of `Settings`, at its boundary: the bad value is refused, the edge accepted.

A setting refused only at run time costs a cloud submission (or a whole local study):
each check of `pipelines/settings.py` has a row here, and a row of the largest or
smallest value it must still accept, so a `<` turned `<=` fails too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipelines import settings as settings_module
from pipelines import settings_cloud, settings_sections
from pipelines.settings import Settings, SettingsError
from trainer.contract import MIN_IMAGE_SIZE

# (overrides, the start of the one-line message): every check in `_check`, one row or more.
REFUSED = [
    ({"image_size": MIN_IMAGE_SIZE - 1}, f"image_size={MIN_IMAGE_SIZE - 1}: expected an integer"),
    ({"model": "resnet"}, "model='resnet': expected one of cnn, resnet50"),
    ({"display_name": "p" * 123}, "display_name='" + "p" * 123 + "': expected at most 128"),
    ({"model_display_name": "m" * 129}, "model_display_name='" + "m" * 129 + "': expected at most"),
    ({"model": "teammodels.tiny"}, "model='teammodels.tiny': expected one of"),
    ({"model": "resnet50", "image_size": 31}, "image_size=31: expected an integer >= 32"),
    ({"weights": "imagenet"}, "weights='imagenet': model cnn has no pretrained backbone"),
    ({"model": "resnet50", "weights": " "}, "weights=' ': expected imagenet, none or a file"),
    ({"validation_fraction": 1.0}, "validation_fraction=1.0: expected a number in [0, 1)"),
    ({"validation_fraction": -0.1}, "validation_fraction=-0.1: expected a number in [0, 1)"),
    ({"test_fraction": 1.0}, "test_fraction=1.0: expected a number in [0, 1)"),
    ({"test_fraction": -0.01}, "test_fraction=-0.01: expected a number in [0, 1)"),
    ({"max_bad_fraction": 1.0}, "max_bad_fraction=1.0: expected a fraction in [0, 1)"),
    ({"seed": -1}, "seed=-1: expected an integer in [0, 4294967295]"),
    ({"seed": 2**32}, "seed=4294967296: expected an integer in [0, 4294967295]"),
    ({"record_format": "png"}, "record_format='png': expected one of auto, raw, encoded"),
    ({"prepare_workers": 0}, "prepare_workers=0: expected an integer >= 1"),
    (
        {"validation_fraction": 0.6, "test_fraction": 0.4},
        "test_fraction=0.4: expected validation_fraction + test_fraction < 1",
    ),
    ({"metric_tag": "auc"}, "metric 'auc': expected one of val_accuracy, val_loss"),
    (
        {"metric_tag": "accuracy"},
        "metric_tag=accuracy: say val_accuracy (the validation accuracy this tag always meant)",
    ),
    ({"metric_tag": "loss"}, "metric_tag=loss: say val_loss (the validation loss"),
    ({"metric_tag": "val_loss", "goal": "maximize"}, "metric 'val_loss' with goal='maximize'"),
    ({"metric_tag": "val_accuracy", "goal": "minimize"}, "metric 'val_accuracy' with goal="),
    ({"goal": "sideways"}, "goal='sideways': expected one of maximize, minimize"),
    ({"algorithm": "BAYES"}, "algorithm='BAYES': expected one of"),
    ({"measurement_selection": "FIRST"}, "measurement_selection='FIRST': expected one of"),
    ({"max_trials": 0, "parallel_trials": 1}, "max_trials=0: expected an integer >= 1"),
    ({"parallel_trials": 0}, "parallel_trials=0: expected an integer in [1, max_trials="),
    ({"parallel_trials": 4, "max_trials": 3}, "parallel_trials=4: expected an integer in"),
    ({"max_failed_trials": -1}, "max_failed_trials=-1: expected an integer >= 0"),
    ({"epochs": 0}, "epochs=0: expected an integer >= 1"),
    ({"scheduler": "sha"}, "scheduler='sha': expected one of none, median, asha, hyperband"),
    (
        {"scheduler": "asha", "early_stopping": True},
        "early_stopping=True: expected false with scheduler=asha (early_stopping=true means",
    ),
    ({"min_epochs": 0}, "min_epochs=0: expected an integer >= 1 (the first rung)"),
    ({"reduction_factor": 1}, "reduction_factor=1: expected an integer >= 2"),
    ({"max_study_hours": -1}, "max_study_hours=-1: expected a number >= 0 (0: no limit)"),
    ({"max_trials_no_progress": -1}, "max_trials_no_progress=-1: expected an integer >= 0 (0: no"),
    (
        {"scheduler": "hyperband", "min_epochs": 10},
        "min_epochs=10: expected an integer below epochs=10 (scheduler=hyperband",
    ),
    ({"batch_size": 0}, "batch_size=0: expected an integer >= 1"),
    ({"precision": "float16"}, "precision='float16': expected one of"),
    ({"feature_cache": "on"}, "feature_cache='on': expected one of auto, off"),
    ({"workers": -1}, "workers=-1: expected an integer >= 0 (workers besides the chief)"),
    ({"trial_workers": -1}, "trial_workers=-1: expected an integer >= 0 (each trial's workers"),
    (
        {"kubeflow_trial_nodes": 3, "trial_workers": 1},
        "kubeflow_trial_nodes=3 and trial_workers=1: they disagree; expected "
        "kubeflow_trial_nodes = trial_workers + 1",
    ),
    (
        {"kubeflow_trial_nodes": 1, "trial_workers": 2},
        "kubeflow_trial_nodes=1 and trial_workers=2: they disagree",
    ),
    ({"trial_accelerator_count": -1}, "trial_accelerator_count=-1: expected an integer >= 0"),
    ({"final_accelerator_count": -1}, "final_accelerator_count=-1: expected an integer >= 0"),
    (
        {"trial_scheduling": "preemptible"},
        "trial_scheduling='preemptible': expected one of standard",
    ),
    ({"final_scheduling": "SPOT"}, "final_scheduling='SPOT': expected one of standard, spot, flex"),
    ({"max_wait_hours": -1}, "max_wait_hours=-1: expected a number of hours >= 0 (0: no limit)"),
    (
        {"trial_scheduling": "spot", "max_wait_hours": 5},
        "max_wait_hours=5: applies to flex_start jobs only (trial_scheduling=spot, final_sched",
    ),
    ({"trial_threshold": "high"}, "trial_threshold='high': expected a number or null"),
    ({"eval_threshold": "high"}, "eval_threshold='high': expected a number or null"),
    ({"project": "X"}, "project='X': expected a Google Cloud project id"),
    ({"region": "Mars"}, "region='Mars': expected a Google Cloud region"),
    ({"pipeline_root": "/tmp/root"}, "pipeline_root='/tmp/root': expected a gs:// URI"),
    ({"kubeflow_host": "localhost:8080"}, "kubeflow_host='localhost:8080': expected an http"),
    ({"kubeflow_namespace": "Team_A"}, "kubeflow_namespace='Team_A': expected a namespace"),
    ({"data_pvc": "My PVC"}, "data_pvc='My PVC': expected a PersistentVolumeClaim name"),
    ({"data_mount_path": "mnt/hpt"}, "data_mount_path='mnt/hpt': expected an absolute path"),
    ({"kubeflow_timeout_s": 59}, "kubeflow_timeout_s=59: expected an integer >= 60"),
    ({"kubeflow_job_api": "tfjobs"}, "kubeflow_job_api='tfjobs': expected auto | tfjob | trainjob"),
    ({"kubeflow_pending_grace_s": 29}, "kubeflow_pending_grace_s=29: expected an integer >= 30"),
    (
        {"kubeflow_spot_node_label": "gke-spot"},
        "kubeflow_spot_node_label='gke-spot': expected key=value, the node label of the spot pool",
    ),
    ({"model_registry_url": "mr.example"}, "model_registry_url='mr.example': expected an http"),
    ({"kubeflow_trial_nodes": 0}, "kubeflow_trial_nodes=0: expected an integer >= 1 (pods"),
    ({"kubeflow_token": "a b"}, "kubeflow_token: expected a bearer token without spaces"),
    ({"kubeflow_cookie": "session"}, "kubeflow_cookie: expected NAME=VALUE"),
    (
        {"kubeflow_token": "t", "kubeflow_token_file": "/var/run/token"},
        "kubeflow_token, kubeflow_token_file: set together; give one",
    ),
    ({"kubeflow_cpu": "two"}, "kubeflow_cpu='two': expected a CPU quantity"),
    ({"kubeflow_memory": "8 GB"}, "kubeflow_memory='8 GB': expected a memory quantity"),
    ({"service_account": "me@gmail.com"}, "service_account='me@gmail.com': expected a service"),
    ({"tensorboard": "my-board"}, "tensorboard='my-board': expected projects/P/locations/L/"),
    (
        {"tensorboard": "projects/p/locations/l/tensorboards/1"},
        "tensorboard='projects/p/locations/l/tensorboards/1': Vertex uploads a job's TensorBoard",
    ),
    ({"kms_key": "my-key"}, "kms_key='my-key': expected projects/P/locations/L/keyRings"),
    ({"network": "default"}, "network='default': expected projects/NUMBER/global/networks"),
    ({"parent_model": "hpt-cnn"}, "parent_model='hpt-cnn': expected projects/P/locations/L"),
    ({"labels": {"Team": "ml"}}, "labels=Team=ml: expected lowercase letters"),
    ({"labels": {"team": "ML"}}, "labels=team=ML: expected lowercase letters"),
    ({"tracking": "wandb"}, "tracking='wandb': expected one of auto, mlflow, vertex, off"),
    ({"tracking_uri": "localhost:5000"}, "tracking_uri='localhost:5000': expected an MLflow"),
]

# The edge each check must still accept (the last valid value next to a refused one).
ACCEPTED = [
    {"image_size": MIN_IMAGE_SIZE},
    {"display_name": "p" * 122, "model_display_name": "m" * 128},
    {"model": "resnet50", "image_size": 32, "weights": "gs://bucket/resnet50.weights.h5"},
    {"model": "teammodels.tiny:build", "image_size": MIN_IMAGE_SIZE},
    {"validation_fraction": 0.0, "test_fraction": 0.0},
    {"max_bad_fraction": 0.0},
    {"validation_fraction": 0.6, "test_fraction": 0.39},
    {"metric_tag": "val_loss"},
    {"metric_tag": "val_loss", "goal": "minimize"},
    {"max_trials": 1, "parallel_trials": 1},
    {"max_trials": 3, "parallel_trials": 3},
    {"max_failed_trials": 0},
    {"seed": 0},
    {"seed": 2**32 - 1},
    {"epochs": 1, "batch_size": 1},
    {"scheduler": "asha", "min_epochs": 9, "reduction_factor": 2},
    {"scheduler": "median", "early_stopping": True},
    {"max_study_hours": 0.0, "max_trials_no_progress": 0},
    {"final_scheduling": "flex_start", "max_wait_hours": 0.0},
    {"workers": 0, "trial_accelerator_count": 0, "final_accelerator_count": 0},
    {"trial_workers": 0},
    {"trial_threshold": 0.9, "eval_threshold": 1},
    {"kubeflow_timeout_s": 60},
    {"kubeflow_job_api": "trainjob"},
    {"kubeflow_pending_grace_s": 30},
    {"kubeflow_spot_node_label": "example.com/pool=spot-a100"},
    {"kubeflow_cookie": "oauth2_proxy=abc; other=1"},
    {"kubeflow_cpu": "500m", "kubeflow_memory": "512Mi"},
    {"project": "my-project", "region": "europe-west4", "pipeline_root": "s3://bucket/root"},
    {"kubeflow_host": "http://localhost:8080", "model_registry_url": "https://mr:443"},
    {"kubeflow_namespace": "team-a", "data_pvc": "hpt-data", "data_mount_path": "/data"},
    {"service_account": "hpt@my-project.iam.gserviceaccount.com"},
    {"service_account": "123-compute@developer.gserviceaccount.com"},
    {"kms_key": "projects/p/locations/l/keyRings/r/cryptoKeys/k"},
    {"network": "projects/123/global/networks/vpc"},
    {"parent_model": "projects/p/locations/l/models/42"},
    {"labels": {"team": "vision", "run_kind": "nightly-1"}},
    {"tracking": "off", "tracking_uri": "http://127.0.0.1:5000"},
    {"tracking": "mlflow", "tracking_uri": "sqlite:///runs/latest/mlflow.db"},
    {"tracking": "vertex"},
]


@pytest.mark.parametrize(("overrides", "message"), REFUSED)
def test_each_bad_setting_is_refused_in_one_line_naming_it(overrides, message):
    with pytest.raises(SettingsError) as err:
        Settings(**overrides)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("overrides", ACCEPTED)
def test_the_last_valid_value_of_each_check_is_accepted(overrides):
    settings = Settings(**overrides)
    assert {k: settings.value(k) for k in overrides} == overrides


def test_fractions_summing_to_one_are_refused_before_a_run_is_submitted():
    """No split left to train on: refused when the settings load, not at the prepare step."""
    with pytest.raises(SettingsError, match="validation_fraction \\+ test_fraction < 1"):
        settings_module.load_settings(
            overrides={"validation_fraction": 0.7, "test_fraction": 0.3}, environ={}
        )


def _names_the_checks_refuse() -> set[str]:
    """The setting names quoted in every check of Settings and of its sections."""
    named = set()
    for module in (settings_module, settings_sections, settings_cloud):
        tree = ast.parse(Path(module.__file__).read_text())
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef) and "check" in function.name:
                named |= {
                    node.value
                    for node in ast.walk(function)
                    if isinstance(node, ast.Constant) and node.value in settings_module.SECTION_OF
                }
    return named


def test_every_setting_the_checks_name_has_a_refusal_row():
    """A new check in a section (`check`) needs a row in REFUSED (and its edge in ACCEPTED)."""
    named = _names_the_checks_refuse()
    assert len(named) >= 40  # the walk sees the sections' checks
    refused = {name for overrides, _ in REFUSED for name in overrides}
    assert named - refused == set()


def test_kubeflow_trial_nodes_is_read_as_trial_workers_plus_one_and_said_once(tmp_path, capsys):
    config = tmp_path / "hpt.yaml"
    config.write_text("kubeflow_trial_nodes: 3\n")
    loaded = settings_module.load_settings(config=config, environ={})
    assert loaded.training.trial_workers == 2  # what every target reads
    assert loaded.kubeflow.kubeflow_trial_nodes is None  # read once, into trial_workers
    assert loaded.replace(trial_workers=4).training.trial_workers == 4  # no stale count
    assert Settings(kubeflow_trial_nodes=3, trial_workers=2).training.trial_workers == 2
    assert Settings(kubeflow_trial_nodes=1).training.trial_workers == 0  # the smallest count
    said = capsys.readouterr().err.splitlines()
    assert said == [
        "note: kubeflow_trial_nodes=3 is read as trial_workers=2 "
        "(pods per trial = trial_workers + 1); say trial_workers"
    ]
    notes: list[str] = []
    settings_module.load_settings(
        config=config, overrides={"trial_workers": 2}, environ={}, notes=notes
    )
    assert notes == [said[0].removeprefix("note: ")]


def test_kubeflow_trial_nodes_disagreeing_with_trial_workers_is_one_line_and_no_note(
    tmp_path, capsys
):
    config = tmp_path / "hpt.yaml"
    config.write_text("kubeflow_trial_nodes: 3\ntrial_workers: 1\n")
    with pytest.raises(SettingsError) as refused:
        settings_module.load_settings(config=config, environ={})
    assert str(refused.value) == (
        "kubeflow_trial_nodes=3 and trial_workers=1: they disagree; expected "
        "kubeflow_trial_nodes = trial_workers + 1 (pods per trial), or trial_workers alone"
    )
    assert capsys.readouterr().err == ""  # the refusal alone, no note about reading it
