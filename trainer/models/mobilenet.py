"""A CPU-friendly transfer model: MobileNetV3Small, global average pooling, Dense, logits."""

from __future__ import annotations

from collections.abc import Sequence

import keras

from trainer.models import backbones

# Its blocks from the bottom: the stem `conv`, expanded_conv … expanded_conv_10, `conv_1`.
BLOCK_OF = backbones.block_by_pattern(r"^(expanded_conv(?:_\d+)?|conv_1|conv)(?:_|$)")


def build(
    image_shape: Sequence[int],
    num_classes: int,
    *,
    num_units: int = 256,
    trainable_blocks: int = 13,
    weights: str | None = "imagenet",
    input_dtype: str = "float32",
) -> keras.Model:
    """MobileNetV3Small (its own 0-255 rescaling inside) → GAP → Dense → logits.

    Args:
        image_shape: (height, width, 3) of the inputs, in [0, 1].
        num_classes: Output classes.
        num_units: Units of the head's hidden layer.
        trainable_blocks: Top blocks that train: 13 all, 0 a frozen backbone.
        weights: `imagenet`, None/`none`, or a Keras weights file (local or gs://).
        input_dtype: The dtype images arrive in.
    """
    inputs = backbones.image_input(image_shape, input_dtype)
    backbone = backbones.load_backbone(
        keras.applications.MobileNetV3Small,
        weights,
        input_shape=tuple(int(d) for d in image_shape),
        include_preprocessing=True,  # it rescales 0-255 inputs itself
    )
    backbones.set_trainable_blocks(backbone, trainable_blocks, BLOCK_OF)
    return backbones.classifier(
        backbone,
        inputs,
        backbone(inputs * 255.0),
        num_units=num_units,
        num_classes=num_classes,
        name="hpt_mobilenet_v3_small",
    )
