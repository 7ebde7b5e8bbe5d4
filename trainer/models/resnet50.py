"""Seed 001's model: a ResNet50 backbone, global average pooling, Dense(num_units), logits."""

from __future__ import annotations

from collections.abc import Sequence

import keras

from trainer.models import backbones

# Its blocks from the bottom: the stem (conv1, pool1) and the stages conv2 … conv5.
BLOCK_OF = backbones.block_by_pattern(
    r"^(conv[2-5]|conv1|pool1)", aliases={"conv1": "stem", "pool1": "stem"}
)
BACKBONE = backbones.Backbone(
    keras.applications.ResNet50,
    # `preprocess_input` expects 0-255 RGB: it flips to BGR and subtracts ImageNet's means.
    to_backbone=lambda images: keras.applications.resnet50.preprocess_input(images * 255.0),
    block_of=BLOCK_OF,
    name="hpt_resnet50",
)


def build(
    image_shape: Sequence[int],
    num_classes: int,
    *,
    num_units: int = 1016,
    trainable_blocks: int = 5,
    weights: str | None = "imagenet",
    input_dtype: str = "float32",
) -> keras.Model:
    """ResNet50 (caffe-style preprocessing inside the model) → GAP → Dense → logits.

    Args:
        image_shape: (height, width, 3) of the inputs, in [0, 1].
        num_classes: Output classes.
        num_units: Units of the head's hidden layer (seed 001: 1016).
        trainable_blocks: Top blocks that train: 5 the whole network (seed 001), 0 a
            frozen backbone, 1-4 its top stages.
        weights: `imagenet`, None/`none`, or a Keras weights file (local or gs://).
        input_dtype: The dtype images arrive in.
    """
    return backbones.transfer_model(
        BACKBONE,
        image_shape,
        num_classes,
        num_units=num_units,
        trainable_blocks=trainable_blocks,
        weights=weights,
        input_dtype=input_dtype,
    )
