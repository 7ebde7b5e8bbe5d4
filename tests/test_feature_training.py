"""Trials and the final job on a feature cache: same results as from images, whole exports."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import start_trainer
from tests.synthetic import CLASS_NAMES, make_images, write_dataset
from trainer.config import HParams, RunConfig

pytestmark = pytest.mark.slow
MOBILENET = "mobilenet_v3_small"


@pytest.fixture(scope="module")
def data32(tmp_path_factory) -> str:
    return write_dataset(str(tmp_path_factory.mktemp("data32")))


@pytest.fixture(scope="module")
def cache(data32, tmp_path_factory) -> Path:
    """Entries for trainable_blocks 0 and 2 (depths 13 and 11), random backbone, seed 42."""
    from trainer import features

    out = tmp_path_factory.mktemp("features")
    args = [f"--data={data32}", f"--output={out}", f"--model={MOBILENET}", "--weights=none"]
    assert features.main([*args, "--precision=float32", "--trainable_blocks=0,2"]) == 0
    return out


def hparams(trainable_blocks: int) -> HParams:
    return HParams(
        learning_rate=0.01,
        optimizer="adam",
        batch_size=16,
        epochs=3,
        model=MOBILENET,
        weights="none",
        model_params={"trainable_blocks": trainable_blocks},
    )


def png_bytes(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def serve(model_dir: Path, images: np.ndarray) -> tuple[np.ndarray, int]:
    import tensorflow as tf

    loaded = tf.saved_model.load(str(model_dir))
    out = loaded.signatures["serving_default"](
        image_bytes=tf.constant([png_bytes(i) for i in images])
    )
    return out["probabilities"].numpy(), len(loaded.model_variables)


@pytest.mark.parametrize("trainable_blocks", [0, 2])
def test_a_cached_trial_trains_as_from_images_and_exports_the_whole_model(
    data32, cache, tmp_path, capsys, trainable_blocks
):
    from trainer import export, train
    from trainer.models import MODELS, build_model

    results = {}
    for name, features in (("images", ""), ("cached", str(cache))):
        run = RunConfig(data=data32, precision="float32", features=features)
        results[name] = train.train(hparams(trainable_blocks), run)
        export.export_model(
            results[name].weights,
            model_dir=str(tmp_path / name),
            image_shape=[32, 32, 3],
            class_names=list(CLASS_NAMES),
            hparams=hparams(trainable_blocks),
            card={},
        )
    err = capsys.readouterr().err
    assert f"features: training on {cache / f'{MOBILENET}-frozen{13 - trainable_blocks}'}" in err
    images, cached = results["images"], results["cached"]
    assert images.source == "images" and cached.source.endswith(f"-frozen{13 - trainable_blocks}")
    for a, b in zip(images.history, cached.history, strict=True):
        assert abs(a["val_accuracy"] - b["val_accuracy"]) <= 0.01
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-3, abs=1e-4)
    # The export is the whole model (backbone included), serving PNG bytes as the uncached one.
    pngs, _ = make_images(8, 32, seed=5)
    from_images, count = serve(tmp_path / "images", pngs)
    from_cache, cached_count = serve(tmp_path / "cached", pngs)
    whole = build_model(MODELS[MOBILENET], {}, "none", (32, 32, 3), 2)
    assert cached_count == count == len(whole.variables)
    np.testing.assert_allclose(from_cache, from_images, atol=2e-3)


def test_the_trainer_uses_an_entry_only_when_every_key_matches(
    data32, cache, tmp_path, tmp_path_factory, capsys
):
    from trainer import records, stages
    from trainer.models import MODELS

    spec = MODELS[MOBILENET]
    meta = records.read_metadata(data32)

    def found(data: str, policy: str, **run_args) -> bool:
        run = RunConfig(data=data, features=str(cache), **run_args)
        return stages.find_entry(hparams(0), run, spec, records.read_metadata(data), policy)

    assert found(data32, "float32")
    assert not found(data32, "mixed_bfloat16")
    assert "not used (" in capsys.readouterr().err
    assert not found(data32, "float32", seed=7)  # another random backbone
    other = write_dataset(str(tmp_path_factory.mktemp("other")), counts=(48, 32, 32))
    assert not found(other, "float32")
    assert "dataset_fingerprint: " in capsys.readouterr().err
    bigger = write_dataset(str(tmp_path_factory.mktemp("bigger")), size=40)
    assert not found(bigger, "float32")
    assert "image_shape: [32, 32, 3] != [40, 40, 3]" in capsys.readouterr().err
    whole = hparams(13)
    assert not stages.find_entry(
        whole, RunConfig(data=data32, features=str(cache)), spec, meta, "float32"
    )
    assert "trainable_blocks=13: the whole network trains" in capsys.readouterr().err


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_the_final_job_trains_on_features_under_multi_worker_mirrored(data32, cache, tmp_path):
    chief_port, worker_port = free_ports(2)
    cluster = {"chief": [f"127.0.0.1:{chief_port}"], "worker": [f"127.0.0.1:{worker_port}"]}
    procs = {}
    for task_type in ("chief", "worker"):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": 0}})
        procs[task_type] = start_trainer(
            [
                f"--data={data32}",
                f"--model={MOBILENET}",
                "--weights=none",
                "--precision=float32",
                "--trainable_blocks=0",
                "--optimizer=adam",
                "--epochs=2",
                "--batch_size=8",
                f"--features={cache}",
                f"--model_dir={tmp_path / task_type / 'model'}",
            ],
            TF_CONFIG=tf_config,
        )
    try:
        outputs = {name: proc.communicate(timeout=300)[0] for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert procs["chief"].returncode == 0, outputs["chief"][-3000:]
    assert procs["worker"].returncode == 0, outputs["worker"][-3000:]
    for output in outputs.values():
        assert f"features: training on {cache / f'{MOBILENET}-frozen13'}" in output
        assert "MultiWorkerMirroredStrategy, 2 replica(s) in sync, chief + 1 worker(s)" in output
    # 96 training images, global batch 16: 6 steps, each worker reading half of the 4 shards.
    assert "6 steps/epoch" in outputs["chief"]
    card = json.loads((tmp_path / "chief" / "model" / "model.json").read_text())
    assert card["training"]["trained_on"].endswith("-frozen13")
    assert not (tmp_path / "worker").exists()
    probabilities, _ = serve(tmp_path / "chief" / "model", make_images(4, 32, seed=9)[0])
    assert probabilities.shape == (4, 2)
