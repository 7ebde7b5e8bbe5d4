"""The trainer's model computes the seeds' function."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from benchmarks.seed_trainer import create_model
from trainer.model import build_model

SHAPE = (40, 40, 3)
CLASSES = 3


def seeds_twin(ours: keras.Model) -> keras.Model:
    """The seeds' codelab model (ReLU before pooling, softmax head) with our weights."""
    seeds = create_model(8, 0.01, 0.9, CLASSES, image_size=SHAPE[0])
    seeds.set_weights(ours.get_weights())
    return seeds


def test_pooling_before_relu_computes_the_seeds_function_and_gradients() -> None:
    keras.utils.set_random_seed(7)
    ours = build_model(SHAPE, CLASSES, 8)
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
