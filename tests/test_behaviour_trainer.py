"""What a trial reports for a minimized metric: the validation loss every epoch, 1e9 if diverged.

On the synthetic data train and validation accuracy are both 1.0 after a few epochs, so
only a loss tells the reported metric's source apart: it is checked epoch by epoch.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_trainer
from trainer.contract import DIVERGED_METRIC_VALUE

pytestmark = pytest.mark.slow


def loss_trial(data: str, tmp_path: Path, *flags: str, **env: str) -> tuple[list[dict], str]:
    """Run the trainer as HPT trial 5 with `--metric_tag=val_loss`: its reports and its stderr."""
    metrics_file = tmp_path / "hypertune" / "output.metrics"
    result = run_trainer(
        [f"--data={data}", "--metric_tag=val_loss", f"--model_dir={tmp_path / 'model'}", *flags],
        CLOUD_ML_HP_METRIC_FILE=str(metrics_file),
        CLOUD_ML_TRIAL_ID="5",
        **env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    return [r for r in reports if "val_loss" in r], result.stderr


def test_every_epoch_reports_the_validation_loss_not_the_training_loss(synthetic_data, tmp_path):
    reports, _ = loss_trial(synthetic_data, tmp_path, "--epochs=3", "--learning_rate=0.05")
    history = json.loads((tmp_path / "model" / "model.json").read_text())["history"]
    assert [r["global_step"] for r in reports] == ["1", "2", "3"]
    for report, epoch in zip(reports, history, strict=True):
        assert float(report["val_loss"]) == pytest.approx(epoch["val_loss"], rel=1e-6)
        assert float(report["val_loss"]) != pytest.approx(epoch["train_loss"], rel=1e-3)


def test_a_diverging_loss_trial_reports_the_worst_loss(synthetic_data, tmp_path):
    """0.0 would make a diverged trial the best of a loss study: it reports 1e9."""
    reports, stderr = loss_trial(synthetic_data, tmp_path, "--epochs=2", "--learning_rate=1000")
    worst = DIVERGED_METRIC_VALUE["minimize"]
    assert worst == 1e9  # the README's promise
    assert float(reports[-1]["val_loss"]) == worst
    assert f"reported val_loss={worst} (the worst value), nothing exported" in stderr
    assert not (tmp_path / "model").exists()


# A team model whose inference pass alone overflows: training is finite, validation NaN.
NAN_AT_INFERENCE = textwrap.dedent(
    """
    import keras


    class NanAtInference(keras.layers.Layer):
        def call(self, x, training=False):
            return x if training else x * float("nan")


    def build(image_shape, num_classes):
        inputs = keras.Input(shape=tuple(image_shape))
        x = keras.layers.GlobalAveragePooling2D()(inputs)
        x = NanAtInference()(keras.layers.Dense(num_classes)(x))
        return keras.Model(inputs, x)
    """
)


def test_a_nan_validation_loss_beside_a_finite_training_loss_reports_the_worst(
    synthetic_data, tmp_path
):
    (tmp_path / "nanmodel.py").write_text(NAN_AT_INFERENCE)
    reports, stderr = loss_trial(
        synthetic_data,
        tmp_path,
        "--epochs=1",
        "--model=nanmodel:build",
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
    )
    assert [float(r["val_loss"]) for r in reports] == [DIVERGED_METRIC_VALUE["minimize"]]
    assert "reported val_loss=1000000000.0 (the worst value)" in stderr
    assert not (tmp_path / "model").exists()


# A team model whose inference pass always bets everything on class 0: finite, but its
# validation loss is far beyond a uniform guess's (as a from-scratch BatchNorm network's can be).
EXPLODES_AT_INFERENCE = NAN_AT_INFERENCE.replace(
    'x * float("nan")', "keras.ops.concatenate([x[:, :1] + 1e6, x[:, 1:]], axis=-1)"
)


def test_an_exploded_but_finite_validation_loss_is_a_diverged_trial(synthetic_data, tmp_path):
    """Case 2 of issue 51: val_loss=245 at chance was reported as a result and then picked."""
    (tmp_path / "hugemodel.py").write_text(EXPLODES_AT_INFERENCE)
    reports, stderr = loss_trial(
        synthetic_data,
        tmp_path,
        "--epochs=1",
        "--model=hugemodel:build",
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
    )
    assert float(reports[-1]["val_loss"]) == DIVERGED_METRIC_VALUE["minimize"]
    assert "reported val_loss=1000000000.0 (the worst value), nothing exported" in stderr
    said = next(line for line in stderr.splitlines() if "training diverged" in line)
    assert said.startswith("trainer: training diverged at epoch 1 (val_loss=")
    assert "over 20x the chance loss" in said
    assert not (tmp_path / "model").exists()
