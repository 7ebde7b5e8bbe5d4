"""The trainer's model is the seeds' function, and its input is what the model would compute."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from benchmarks.seed_trainer import create_model
from trainer import data, records
from trainer.models.cnn import build as build_model

SHAPE = (40, 40, 3)
CLASSES = 3


def seeds_twin(ours: keras.Model) -> keras.Model:
    """The seeds' codelab model (ReLU before pooling, softmax head) with our weights."""
    seeds = create_model(8, 0.01, 0.9, CLASSES, image_size=SHAPE[0])
    seeds.set_weights(ours.get_weights())
    return seeds


def test_pooling_before_relu_computes_the_seeds_function_and_gradients() -> None:
    keras.utils.set_random_seed(7)
    ours = build_model(SHAPE, CLASSES, num_units=8)
    seeds = seeds_twin(ours)
    # Negative inputs and biases too, so that pooled windows hold negative maxima.
    images = tf.random.uniform((6, *SHAPE), -1.0, 1.0, seed=1)
    labels = tf.constant([0, 1, 2, 0, 1, 2])
    for layer in ours.layers:
        if isinstance(layer, keras.layers.Conv2D):
            layer.bias.assign(tf.random.normal(layer.bias.shape, stddev=0.2, seed=2))
    seeds.set_weights(ours.get_weights())

    def loss_and_grads(model: keras.Model, from_logits: bool) -> tuple[np.ndarray, list]:
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits)
        with tf.GradientTape() as tape:
            out = model(images, training=True)
            loss = loss_fn(labels, out)
        probabilities = tf.nn.softmax(out) if from_logits else out
        return probabilities.numpy(), tape.gradient(loss, model.trainable_variables)

    ours_p, ours_g = loss_and_grads(ours, from_logits=True)
    seeds_p, seeds_g = loss_and_grads(seeds, from_logits=False)
    np.testing.assert_allclose(ours_p, seeds_p, rtol=1e-5, atol=1e-6)
    assert len(ours_g) == len(seeds_g) == 10
    for mine, theirs in zip(ours_g, seeds_g, strict=True):
        assert float(tf.reduce_max(tf.abs(theirs))) > 0  # every layer learns
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-6)


def test_the_model_takes_images_in_the_dtype_it_is_fed() -> None:
    assert build_model(SHAPE, CLASSES, num_units=8).inputs[0].dtype == "float32"
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = build_model(SHAPE, CLASSES, num_units=8, input_dtype="bfloat16")
        assert model.inputs[0].dtype == "bfloat16"
        assert model(tf.zeros((1, *SHAPE), tf.bfloat16)).dtype == tf.float32  # logits
        assert [w.dtype for w in model.weights] == ["float32"] * 10  # variables stay float32
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("cache_limit", [1 << 40, 1, 0])
def test_scaled_batches_equal_the_float_images_cast_whether_cached_or_not(
    synthetic_data: str, monkeypatch: pytest.MonkeyPatch, dtype: str, cache_limit: int
) -> None:
    """Scaled then cached, cached as uint8 and scaled per batch, or not cached: same values."""
    metadata = records.read_metadata(synthetic_data)
    raw = np.stack(
        [image.numpy() for image, _ in data.read_split(synthetic_data, metadata, "validation")]
    )
    expected = tf.cast(tf.constant(raw, tf.float32) / 255.0, dtype).numpy()
    monkeypatch.setattr(data, "CACHE_LIMIT_BYTES", cache_limit)
    batches = list(data.eval_dataset(synthetic_data, metadata, "validation", 8, dtype))
    got = np.concatenate([images.numpy() for images, _ in batches])
    assert batches[0][0].dtype == dtype
    np.testing.assert_array_equal(got, expected)
    assert got.min() >= 0 and got.max() <= 1 and got.max() > 0.5


def test_the_cache_limit_counts_the_dtype_the_images_are_kept_in(synthetic_data: str) -> None:
    metadata = records.read_metadata(synthetic_data)
    decoded = data.split_bytes(metadata, "train")
    assert decoded == metadata["splits"]["train"]["count"] * int(np.prod(metadata["image_shape"]))
    assert data.split_bytes(metadata, "train", "bfloat16") == 2 * decoded
    assert data.split_bytes(metadata, "train", "float32") == 4 * decoded


def test_training_batches_come_in_the_compute_dtype(synthetic_data: str) -> None:
    metadata = records.read_metadata(synthetic_data)
    dataset_fn = data.train_input_fn(synthetic_data, metadata, 16, seed=0, dtype="bfloat16")
    images, labels = next(iter(dataset_fn(tf.distribute.InputContext())))
    assert images.dtype == tf.bfloat16 and images.shape == (16, *metadata["image_shape"])
    assert labels.shape == (16,)


def test_the_validation_step_is_traced_once_whatever_the_last_batch(synthetic_data: str) -> None:
    """A split's last batch is partial; it must not cost the process a second trace."""
    from trainer.train import evaluation_step

    metadata = records.read_metadata(synthetic_data)
    count = metadata["splits"]["validation"]["count"]
    batch = count // 2 + 1  # two batches, the second one partial
    dataset = data.eval_dataset(synthetic_data, metadata, "validation", batch)
    keras.utils.set_random_seed(3)
    model = build_model(metadata["image_shape"], len(metadata["class_names"]), num_units=8)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    step = evaluation_step(model, loss_fn, dataset.element_spec)
    sizes, loss, correct = [], 0.0, 0.0
    for images, labels in dataset:
        sizes.append(int(labels.shape[0]))
        batch_loss, batch_correct = step(images, labels)
        loss, correct = loss + float(batch_loss), correct + float(batch_correct)
    assert sizes == [batch, count - batch] and step.experimental_get_tracing_count() == 1
    every_image = np.concatenate([images.numpy() for images, _ in dataset])
    every_label = np.concatenate([labels.numpy() for _, labels in dataset])
    logits = model(every_image, training=False)
    expected_loss = float(tf.reduce_sum(loss_fn(every_label, logits)))
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
    assert correct == float(np.sum(np.argmax(logits, -1) == every_label))
