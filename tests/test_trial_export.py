"""A trial on the feature cache saves its trained part; the whole model is rebuilt from it.

`trainer/trial_export.py`: an HPT trial (`CLOUD_ML_TRIAL_ID`) that trained on a cache
writes `trained_part.npz` + model.json (costs measured on the whole serving model), not
the SavedModel; `python -m trainer.trial_export` writes the whole model from it, which
serves PNG bytes, has the whole backbone and predicts as the whole export of the same
training does. A job (no trial id) exports the whole model as before.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_trainer
from tests.synthetic import CLASS_NAMES, make_images, write_dataset
from tests.test_feature_training import png_bytes
from trainer.config import HParams, RunConfig

pytestmark = pytest.mark.slow
MOBILENET = "mobilenet_v3_small"


def weights_file(path: Path, seed: int) -> str:
    """A random MobileNetV3Small backbone's weights file (what `--weights PATH` loads)."""
    import keras

    keras.utils.set_random_seed(seed)
    backbone = keras.applications.MobileNetV3Small(
        weights=None, include_top=False, input_shape=(32, 32, 3)
    )
    backbone.save_weights(str(path))
    keras.backend.clear_session()
    return str(path)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[str, str, Path]:
    """A 32 px dataset, a weights file, and its cache for trainable_blocks 0 and 2."""
    from trainer import features

    root = tmp_path_factory.mktemp("trial_export")
    data = write_dataset(str(root / "data"))
    weights = weights_file(root / "backbone.weights.h5", seed=3)
    cache = root / "features"
    args = [f"--data={data}", f"--output={cache}", f"--model={MOBILENET}", f"--weights={weights}"]
    assert features.main([*args, "--precision=float32", "--trainable_blocks=0,2"]) == 0
    return data, weights, cache


def trainer_flags(data: str, weights: str, cache: Path, trainable_blocks: int) -> list[str]:
    return [
        f"--data={data}",
        f"--model={MOBILENET}",
        f"--weights={weights}",
        "--precision=float32",
        f"--trainable_blocks={trainable_blocks}",
        "--optimizer=adam",
        "--learning_rate=0.01",
        "--epochs=2",
        "--batch_size=16",
        f"--features={cache}",
    ]


def serve(model_dir: Path, images: np.ndarray) -> tuple[np.ndarray, int]:
    import tensorflow as tf

    loaded = tf.saved_model.load(str(model_dir))
    out = loaded.signatures["serving_default"](
        image_bytes=tf.constant([png_bytes(i) for i in images])
    )
    return out["probabilities"].numpy(), len(loaded.model_variables)


@functools.cache
def whole_variable_count() -> int:
    from trainer.models import MODELS, build_model

    return len(build_model(MODELS[MOBILENET], {}, "none", (32, 32, 3), 2).variables)


def test_a_cached_trial_saves_its_trained_part_and_the_command_rebuilds_the_whole_model(
    setup, tmp_path
):
    from trainer import trial_export
    from trainer.contract import COST_METRICS

    data, weights, cache = setup
    trial_dir = tmp_path / "trial" / "model"
    metrics = tmp_path / "hypertune.metrics"
    proc = run_trainer(
        trainer_flags(data, weights, cache, 0),
        timeout=600,
        CLOUD_ML_TRIAL_ID="3",
        CLOUD_ML_HP_METRIC_FILE=str(metrics),
        AIP_MODEL_DIR=str(trial_dir),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in trial_dir.iterdir()) == ["model.json", "trained_part.npz"]
    card = json.loads((trial_dir / "model.json").read_text())
    assert card["export"]["kind"] == "trained_part" and card["export"]["frozen_depth"] == 13
    assert card["export"]["cache_keys"]["weights"] == weights
    command = f"python -m trainer.trial_export --trial_dir={trial_dir} --model_dir=OUT"
    assert card["export"]["whole_model"] == command
    assert f"the whole model: {command}" in proc.stderr
    # The cost is the whole serving model's, reported as every trial's is.
    reported = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    cost = {k: float(r[k]) for r in reported for k in COST_METRICS if k in r}
    assert sorted(cost) == sorted(COST_METRICS) and card["cost"] == pytest.approx(cost)

    whole_dir = tmp_path / "whole"
    assert trial_export.main([f"--trial_dir={trial_dir}", f"--model_dir={whole_dir}"]) == 0
    pngs, _ = make_images(6, 32, seed=4)
    probabilities, count = serve(whole_dir, pngs)
    assert probabilities.shape == (6, len(CLASS_NAMES))
    assert count == whole_variable_count()  # the whole backbone, not the head
    on_disk = sum(p.stat().st_size for p in (whole_dir / "variables").iterdir())
    assert cost["model_size_mb"] == pytest.approx(on_disk / 1e6, rel=0.05)
    rebuilt = json.loads((whole_dir / "model.json").read_text())
    assert rebuilt["export"] == {"kind": "whole", "rebuilt_from": str(trial_dir)}
    assert rebuilt["hyperparameters"] == card["hyperparameters"]


def hparams(trainable_blocks: int, weights: str) -> HParams:
    return HParams(
        learning_rate=0.01,
        optimizer="adam",
        batch_size=16,
        epochs=2,
        model=MOBILENET,
        weights=weights,
        model_params={"trainable_blocks": trainable_blocks},
    )


@dataclasses.dataclass(frozen=True)
class SavedTrial:
    """One training on the cache, saved both ways: the trial's part and the whole export."""

    hparams: HParams
    run: RunConfig
    frozen_depth: int
    trial_dir: Path
    whole_dir: Path


@pytest.fixture(scope="module")
def saved_trials(setup, tmp_path_factory):
    """`trainable_blocks` → its `SavedTrial`, trained once for the module on first request."""
    from trainer import export, train, trial_export

    data, weights, cache = setup
    trials: dict[int, SavedTrial] = {}

    def saved(trainable_blocks: int) -> SavedTrial:
        if trainable_blocks in trials:
            return trials[trainable_blocks]
        folder = tmp_path_factory.mktemp(f"saved{trainable_blocks}")
        params = hparams(trainable_blocks, weights)
        run = RunConfig(data=data, precision="float32", features=str(cache), seed=11)
        result = train.train(params, run)
        shape, names = [32, 32, 3], list(CLASS_NAMES)
        module = export.ServingModule(result.whole_model(), shape, names)
        export.save_module(module, model_dir=str(folder / "whole"), card={})
        card = {
            "model": {"name": MOBILENET, "weights": weights},
            "hyperparameters": params.hyperparameters(),
            "dataset": {"image_shape": shape, "class_names": names},
            "training": {"seed": run.seed},
            "export": trial_export.card_section(result.frozen_depth, result.cache_keys, "T"),
        }
        trial_export.save(result.trained_part(), model_dir=str(folder / "trial"), card=card)
        trials[trainable_blocks] = SavedTrial(
            params, run, result.frozen_depth, folder / "trial", folder / "whole"
        )
        return trials[trainable_blocks]

    return saved


@pytest.mark.parametrize("trainable_blocks", [0, 2])
def test_the_rebuilt_model_predicts_as_the_whole_export_of_the_same_training(
    saved_trials, tmp_path, trainable_blocks
):
    from trainer import export, train, trial_export

    trial = saved_trials(trainable_blocks)
    assert trial.frozen_depth == 13 - trainable_blocks
    trial_export.rebuild(str(trial.trial_dir), str(tmp_path / "rebuilt"))
    pngs, _ = make_images(8, 32, seed=6)
    expected, count = serve(trial.whole_dir, pngs)
    found, rebuilt_count = serve(tmp_path / "rebuilt", pngs)
    assert rebuilt_count == count == whole_variable_count()
    np.testing.assert_allclose(found, expected, atol=1e-5)
    # And as the same trial trained from images (no cache) serves, within float error.
    from_images = train.train(trial.hparams, dataclasses.replace(trial.run, features=""))
    assert from_images.frozen_depth == 0 and from_images.source == "images"
    module = export.ServingModule(from_images.whole_model(), [32, 32, 3], list(CLASS_NAMES))
    export.save_module(module, model_dir=str(tmp_path / "images"), card={})
    np.testing.assert_allclose(found, serve(tmp_path / "images", pngs)[0], atol=2e-3)


def test_the_rebuild_refuses_other_weights_and_a_folder_that_is_not_a_cached_trial(
    saved_trials, tmp_path, capsys
):
    from trainer import trial_export

    trial = saved_trials(0)
    other = weights_file(tmp_path / "other.weights.h5", seed=9)
    argv = [f"--trial_dir={trial.trial_dir}", f"--model_dir={tmp_path / 'out'}"]
    capsys.readouterr()
    assert trial_export.main([*argv, f"--weights={other}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"trainer.trial_export: error: --weights={other}: fingerprint sha256:")
    assert "the backbone weights it trained on" in err and "\n" not in err
    assert not (tmp_path / "out").exists()
    argv = [f"--trial_dir={trial.whole_dir}", f"--model_dir={tmp_path / 'out'}"]
    assert trial_export.main(argv) == 2
    assert "expected a cached trial's folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_job_on_the_cache_exports_the_whole_model(setup, tmp_path):
    data, weights, cache = setup
    proc = run_trainer(
        [*trainer_flags(data, weights, cache, 0), f"--model_dir={tmp_path / 'model'}"],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "features: training on" in proc.stderr
    assert (tmp_path / "model" / "saved_model.pb").exists()
    assert "export" not in json.loads((tmp_path / "model" / "model.json").read_text())
    _, count = serve(tmp_path / "model", make_images(2, 32, seed=1)[0])
    assert count == whole_variable_count()
