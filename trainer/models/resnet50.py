"""Seed 001's model: a ResNet50 backbone, global average pooling, Dense(num_units), logits."""

from __future__ import annotations

from collections.abc import Sequence

import keras

from trainer.models import backbones

# Its blocks from the bottom: the stem (conv1, pool1) and the stages conv2 … conv5.
BLOCK_OF = backbones.block_by_pattern(r"^(conv[2-5]|conv1|pool1)")
_STEM = {"conv1", "pool1"}


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
    inputs = backbones.image_input(image_shape, input_dtype)
    # `preprocess_input` expects 0-255 RGB: it flips to BGR and subtracts ImageNet's means.
    x = keras.applications.resnet50.preprocess_input(inputs * 255.0)
    backbone = backbones.load_backbone(
        keras.applications.ResNet50, weights, input_shape=tuple(int(d) for d in image_shape)
    )
    backbones.set_trainable_blocks(backbone, trainable_blocks, stem_as_one(BLOCK_OF))
    return backbones.classifier(
        backbone,
        inputs,
        backbone(x),
        num_units=num_units,
        num_classes=num_classes,
        name="hpt_resnet50",
    )


def stem_as_one(block_of):
    """`block_of` with conv1 and pool1 counted as one block, the stem."""
    return lambda name: "stem" if block_of(name) in _STEM else block_of(name)
