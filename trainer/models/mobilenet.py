"""A CPU-friendly transfer model: MobileNetV3Small, global average pooling, Dense, logits.

Its blocks, size and defaults: its `ModelSpec` (`trainer/models/__init__.py`).
"""

from __future__ import annotations

import keras

from trainer.models import backbones

build = backbones.transfer_builder(
    "mobilenet_v3_small",
    keras.applications.MobileNetV3Small,
    to_backbone=lambda images: images * 255.0,  # it rescales 0-255 inputs itself
    include_preprocessing=True,
)
