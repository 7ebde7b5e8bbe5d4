"""Units of the trainer: cluster resolution, chief rules, all-or-nothing export commits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trainer import cluster
from trainer.config import ConfigError, HParams


def test_cluster_spec_is_translated_to_tf_config():
    spec = {
        "cluster": {"workerpool0": ["a:1"], "workerpool1": ["b:1", "c:1"], "workerpool2": []},
        "task": {"type": "workerpool1", "index": 1, "trial": "3"},
    }
    env = {"CLUSTER_SPEC": json.dumps(spec)}
    info = cluster.resolve(env)
    assert json.loads(env["TF_CONFIG"]) == {
        "cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1"]},
        "task": {"type": "worker", "index": 1},
    }
    assert (info.task_type, info.task_id, info.num_training_tasks, info.is_chief) == (
        "worker",
        1,
        3,
        False,
    )


def test_tf_config_wins_over_cluster_spec():
    env = {
        "TF_CONFIG": json.dumps(
            {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}
        ),
        "CLUSTER_SPEC": json.dumps(
            {"cluster": {"workerpool0": ["z:9"]}, "task": {"type": "workerpool0", "index": 0}}
        ),
    }
    info = cluster.resolve(env)
    assert info.cluster == {"worker": ["a:1", "b:1"]}
    assert info.is_chief  # no chief key: worker 0 is chief


@pytest.mark.parametrize(
    ("members", "task_type", "index", "chief"),
    [
        ({"chief": ["a"], "worker": ["b"]}, "chief", 0, True),
        ({"chief": ["a"], "worker": ["b"]}, "worker", 0, False),
        ({"worker": ["a", "b"]}, "worker", 0, True),
        ({"worker": ["a", "b"]}, "worker", 1, False),
        ({"chief": ["a"], "evaluator": ["e"]}, "evaluator", 0, False),
        ({}, None, 0, True),
    ],
)
def test_chief_rule(members, task_type, index, chief):
    assert cluster.is_chief(members, task_type, index) is chief


def test_logical_devices_variable_is_validated():
    assert cluster.requested_logical_devices({}) == 0
    assert cluster.requested_logical_devices({cluster.LOGICAL_DEVICES_ENV: "4"}) == 4
    with pytest.raises(ValueError, match="HPT_LOGICAL_DEVICES=two"):
        cluster.requested_logical_devices({cluster.LOGICAL_DEVICES_ENV: "two"})


def test_cpu_threads_variable_is_validated():
    assert cluster.requested_cpu_threads({}) == 0
    assert cluster.requested_cpu_threads({cluster.CPU_THREADS_ENV: "2"}) == 2
    with pytest.raises(ValueError, match="HPT_CPU_THREADS=-1: expected an integer >= 0"):
        cluster.requested_cpu_threads({cluster.CPU_THREADS_ENV: "-1"})


def test_hparams_name_the_bad_value():
    with pytest.raises(ConfigError, match=r"--num_units=0: expected an integer >= 1"):
        HParams(model_params={"num_units": 0})
    with pytest.raises(ConfigError, match=r"--trainable_blocks: model cnn has no such"):
        HParams(model_params={"trainable_blocks": 1})
    with pytest.raises(ConfigError, match=r"--optimizer=rmsprop: expected one of sgd, adam"):
        HParams(optimizer="rmsprop")


def _tiny_export(model_dir: str, **card):
    from trainer import export
    from trainer.config import HParams
    from trainer.models.cnn import build as build_model

    weights = build_model((24, 24, 3), 2, num_units=4).get_weights()
    return export.export_model(
        weights,
        model_dir=model_dir,
        image_shape=(24, 24, 3),
        class_names=("a", "b"),
        hparams=HParams(model_params={"num_units": 4}),
        card=card,
    )


def test_export_replaces_an_old_model_atomically(tmp_path):
    model_dir = tmp_path / "model"
    _tiny_export(str(model_dir), run=1)
    _tiny_export(str(model_dir), run=2)
    assert json.loads((model_dir / "model.json").read_text()) == {"run": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no staging/old dirs left


def test_failed_export_leaves_the_old_model_untouched(tmp_path, monkeypatch):
    import tensorflow as tf

    model_dir = tmp_path / "model"
    _tiny_export(str(model_dir), run=1)

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(tf.saved_model, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        _tiny_export(str(model_dir), run=2)
    assert json.loads((model_dir / "model.json").read_text()) == {"run": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_object_store_commit_copies_markers_last(monkeypatch):
    import tensorflow as tf

    copied: list[str] = []
    real_copy = tf.io.gfile.copy

    def recording_copy(src, dst, overwrite=False):
        copied.append(dst.rsplit("/", 1)[-1])
        return real_copy(src, dst, overwrite=overwrite)

    monkeypatch.setattr(tf.io.gfile, "copy", recording_copy)
    _tiny_export("ram://bucket/models/m1")
    assert set(copied[-2:]) == {"saved_model.pb", "model.json"}
    assert len(copied) > 2
    loaded = tf.saved_model.load("ram://bucket/models/m1")
    out = loaded.signatures["serving_default"](
        image_bytes=tf.constant([tf.io.encode_png(np.zeros((30, 40, 3), np.uint8)).numpy()])
    )
    assert out["probabilities"].shape == (1, 2)


def test_a_batchnorm_model_serves_what_it_was_trained_to_with_its_moving_statistics(tmp_path):
    """The export carries every variable, BatchNorm's non-trainable statistics included."""
    import keras
    import tensorflow as tf

    from trainer import export
    from trainer.config import HParams
    from trainer.models import MODELS, build_model

    shape, classes = (32, 32, 3), 3
    model = build_model(MODELS["mobilenet_v3_small"], {}, "none", shape, classes)
    rng = np.random.default_rng(0)
    norms = [
        layer
        for layer in model._flatten_layers()
        if isinstance(layer, keras.layers.BatchNormalization)
    ]
    assert norms
    for layer in norms:  # statistics no fresh model has: the export must carry them
        layer.moving_mean.assign(rng.normal(0.0, 0.5, layer.moving_mean.shape))
        layer.moving_variance.assign(rng.uniform(0.5, 2.0, layer.moving_variance.shape))
    images = rng.integers(0, 256, (2, *shape), dtype=np.uint8)
    expected = tf.nn.softmax(model(images.astype(np.float32) / 255.0, training=False)).numpy()
    export.export_model(
        model.get_weights(),
        model_dir=str(tmp_path / "model"),
        image_shape=shape,
        class_names=("a", "b", "c"),
        hparams=HParams(model="mobilenet_v3_small", weights="none"),
        card={},
    )
    serve = tf.saved_model.load(str(tmp_path / "model")).signatures["serving_default"]
    encoded = [tf.io.encode_png(image).numpy() for image in images]
    served = serve(image_bytes=tf.constant(encoded))["probabilities"].numpy()
    np.testing.assert_allclose(served, expected, atol=1e-5)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> str:
    from tests.synthetic import write_dataset

    return write_dataset(str(tmp_path_factory.mktemp("tiny")), counts=(16, 16, 16))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["cnn", "resnet50", "mobilenet_v3_small"])
def test_the_export_serves_encoded_images_as_the_trained_model_scores_them(
    tiny_data, tmp_path, model
):
    """Serving parity, per built-in model family, through the job's own export.

    One training step (BatchNorm's moving statistics are then no fresh model's), exported as
    the final job exports (`trainer.task.export_and_measure`); the SavedModel's
    `serving_default` on PNG bytes against the trained model on the same images decoded and
    scaled to [0, 1]. Tolerance: 1e-5 on each probability (float32 throughout, the same
    weights; only the traced graph's op order differs from the eager call).
    """
    import tensorflow as tf

    from tests.synthetic import make_images
    from trainer import task, train
    from trainer.config import RunConfig
    from trainer.models import MODELS

    assert sorted(MODELS) == sorted(["cnn", "resnet50", "mobilenet_v3_small"])  # every family
    hparams = HParams(model=model, weights="none", batch_size=16, epochs=1, momentum=0.0)
    run = RunConfig(data=tiny_data, model_dir=str(tmp_path / "model"), precision="float32")
    result = train.train(hparams, run)
    task.export_and_measure(hparams, run, result)

    images, _ = make_images(6, 32, seed=9)
    encoded = [tf.io.encode_png(image).numpy() for image in images]
    decoded = np.stack([tf.io.decode_png(b, channels=3).numpy() for b in encoded])
    trained = result.trained_model(decoded.astype(np.float32) / 255.0, training=False)
    expected = tf.nn.softmax(trained, axis=-1).numpy()
    serve = tf.saved_model.load(str(tmp_path / "model")).signatures["serving_default"]
    served = serve(image_bytes=tf.constant(encoded))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, rtol=0, atol=1e-5)
    assert served["class_id"].numpy().tolist() == expected.argmax(-1).tolist()


def test_the_trainer_process_never_imports_scikit_learn():
    """Keras would import it for wrappers the trainer never uses (0.8 s per process)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from trainer import task\n"
        "task.skip_unused_imports()\n"
        "import tensorflow, keras\n"
        "assert keras.layers.Dense(2)\n"
        "try:\n"
        "    import sklearn\n"
        "except ImportError:\n"
        "    print('blocked')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "blocked"


@pytest.mark.parametrize(("task_type", "reports"), [("chief", True), ("worker", False)])
def test_only_the_chief_of_a_multi_worker_trial_writes_the_hypertune_report(
    tmp_path, monkeypatch, task_type, reports
):
    """A trial with workers (`trial_workers`): every replica has the trial's id and metric
    file, as on Vertex; only the chief reports, so one report per trial, the chief's."""
    from types import SimpleNamespace

    from trainer import devices, task, train

    metric_file = tmp_path / "hypertune" / "output.metrics"
    cluster_spec = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}
    tf_config = {"cluster": cluster_spec, "task": {"type": task_type, "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "3")
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(metric_file))
    monkeypatch.setattr(devices, "announce", lambda expected: "trainer: devices (test)")
    monkeypatch.setattr(task, "export_and_measure", lambda *args: {})

    def trained(hparams, run, on_epoch=None):  # what train.train hands back, one epoch in
        if on_epoch:
            on_epoch(1, {"val_accuracy": 0.75, "val_loss": 0.5})
        return SimpleNamespace(is_chief=task_type == "chief", history=[{"epoch": 1.0}])

    monkeypatch.setattr(train, "train", trained)
    (tmp_path / "metadata.json").write_text("{}")  # the flags' check; training is replaced
    assert task.main(["--data", str(tmp_path), "--epochs=1"]) == 0
    assert metric_file.exists() is reports
    if reports:
        lines = [json.loads(x) for x in metric_file.read_text().splitlines()]
        reported = {k: x[k] for x in lines for k in ("val_accuracy", "val_loss") if k in x}
        assert reported == {"val_accuracy": "0.75", "val_loss": "0.5"}  # one line per tag
        assert {x["global_step"] for x in lines} == {"1"}
