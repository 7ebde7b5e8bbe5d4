"""Seed 001's model: a ResNet50 backbone, global average pooling, Dense(num_units), logits.

Its blocks, size and defaults: its `ModelSpec` (`trainer/models/__init__.py`).
"""

from __future__ import annotations

import keras

from trainer.models import backbones

build = backbones.transfer_builder(
    "resnet50",
    keras.applications.ResNet50,
    # `preprocess_input` expects 0-255 RGB: it flips to BGR and subtracts ImageNet's means.
    to_backbone=lambda images: keras.applications.resnet50.preprocess_input(images * 255.0),
)
