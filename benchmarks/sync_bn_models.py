"""Seed 001's ResNet50 with synchronised BatchNorm, as a team's builder (`bench_sync_bn`).

It is the registered builder with every BatchNormalization layer switched to
`synchronized=True` (Keras 3, TensorFlow backend: the batch statistics are all-reduced
across the replicas of the strategy at every training step). It enters the trainer as
any team's model does, `--model benchmarks.sync_bn_models:resnet50`, so the benchmark
compares the product's own path with and without synchronisation and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras

from trainer.models import resnet50 as resnet50_builder


def synchronize_batch_norm(model: keras.Model) -> int:
    """Switch every BatchNormalization layer inside `model` to synchronised statistics.

    Returns:
        How many layers were switched.
    """
    switched = 0
    for layer in model.layers:
        if isinstance(layer, keras.Model):  # a nested backbone
            switched += synchronize_batch_norm(layer)
        elif isinstance(layer, keras.layers.BatchNormalization):
            layer.synchronized = True
            switched += 1
    return switched


def resnet50(
    image_shape: Sequence[int],
    num_classes: int,
    *,
    num_units: int = 1016,
    trainable_blocks: int = 5,
    weights: Any = None,
    input_dtype: str = "float32",
) -> keras.Model:
    """`trainer.models.resnet50.build` with synchronised BatchNorm."""
    model = resnet50_builder.build(
        image_shape,
        num_classes,
        num_units=num_units,
        trainable_blocks=trainable_blocks,
        weights=weights,
        input_dtype=input_dtype,
    )
    synchronize_batch_norm(model)
    return model


resnet50.min_image_size = 32  # type: ignore[attr-defined]  # as the registered resnet50
