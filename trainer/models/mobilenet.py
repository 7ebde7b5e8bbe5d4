"""A CPU-friendly transfer model: MobileNetV3Small, global average pooling, Dense, logits."""

from __future__ import annotations

from collections.abc import Sequence

import keras

from trainer.models import backbones

# Its blocks from the bottom: the stem `conv`, expanded_conv … expanded_conv_10, `conv_1`.
BLOCK_OF = backbones.block_by_pattern(r"^(expanded_conv(?:_\d+)?|conv_1|conv)(?:_|$)")
BACKBONE = backbones.Backbone(
    keras.applications.MobileNetV3Small,
    to_backbone=lambda images: images * 255.0,  # it rescales 0-255 inputs itself
    block_of=BLOCK_OF,
    name="hpt_mobilenet_v3_small",
    factory_kwargs={"include_preprocessing": True},
)


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
    return backbones.transfer_model(
        BACKBONE,
        image_shape,
        num_classes,
        num_units=num_units,
        trainable_blocks=trainable_blocks,
        weights=weights,
        input_dtype=input_dtype,
    )
