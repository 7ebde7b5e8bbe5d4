"""The one template of the pretrained-backbone builders: weights, trainable blocks, the head.

A backbone from `keras.applications` is built with its weights (`imagenet`, none, or a
weights file), its top `trainable_blocks` blocks left trainable (a frozen BatchNorm
layer runs in inference mode), and topped with global average pooling, a hidden
Dense layer and float32 logits (seed 001's head, with logits instead of softmax).
What a backbone is (its blocks, their outputs, its size, its defaults) is its
`ModelSpec`'s (`trainer/models/__init__.py`); its builder module names only the
`keras.applications` constructor and the preprocessing its weights expect
(`transfer_builder`).
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import tensorflow as tf

from trainer.contract import ContractError
from trainer.models import MODELS


class WeightsError(ContractError):
    """Pretrained weights that cannot be had; the message is one line naming the remedy."""


def local_weights(weights: str | None) -> str | None:
    """`weights` as Keras's `weights=` argument takes it: `imagenet`, None, or a local file.

    A gs:// (or other remote) file is copied to a local temporary file first.

    Raises:
        WeightsError: The file does not exist.
    """
    if weights in (None, "none"):
        return None
    if weights == "imagenet":
        return weights
    if not tf.io.gfile.exists(weights):
        raise WeightsError(f"--weights={weights}: no such file (expected a Keras weights file)")
    if "://" not in weights:
        return weights
    folder = tempfile.mkdtemp(prefix="hpt-weights-")
    local = os.path.join(folder, posixpath.basename(weights))
    tf.io.gfile.copy(weights, local, overwrite=True)
    return local


def load_backbone(
    factory: Callable[..., keras.Model], weights: str | None, **kwargs
) -> keras.Model:
    """`factory(weights=..., include_top=False, **kwargs)`, failing in one line on weights.

    Raises:
        WeightsError: The weights file is missing or does not fit, or ImageNet's weights
            cannot be downloaded (no network: pass a file with --weights).
    """
    resolved = local_weights(weights)
    try:
        return factory(weights=resolved, include_top=False, **kwargs)
    except Exception as err:  # Keras raises a bare Exception when a download fails
        if resolved is None:
            raise
        reason = " ".join(str(err).split())[:200]
        if weights == "imagenet":
            raise WeightsError(
                f"--weights=imagenet: cannot download the ImageNet weights ({reason}); "
                "pass --weights PATH to a Keras weights file (local or gs://)"
            ) from None
        raise WeightsError(
            f"--weights={weights}: cannot load it into the backbone ({reason})"
        ) from None


def set_trainable_blocks(
    backbone: keras.Model, blocks: int, block_of: Callable[[str], str]
) -> list[str]:
    """Leave the top `blocks` blocks of `backbone` trainable and freeze the rest.

    Args:
        backbone: The pretrained network.
        blocks: How many of its blocks, counted from the top, train.
        block_of: A layer name → the name of its block.

    Returns:
        The names of the blocks that train, bottom to top.
    """
    order: list[str] = []
    for layer in backbone.layers:
        if layer.weights and block_of(layer.name) not in order:
            order.append(block_of(layer.name))
    training = order[len(order) - blocks :] if blocks else []
    backbone.trainable = True
    for layer in backbone.layers:
        layer.trainable = block_of(layer.name) in training
    return training


def head_layers(num_units: int, num_classes: int) -> list[keras.layers.Layer]:
    """The head after the pooling: Dense(num_units, relu) → float32 logits.

    Their initial weights are seeded from Python's `random` (which the trainer seeds), drawn
    before anything else is built: the head starts the same whether the backbone is built
    beside it or not (a cached trial, `trainer.frozen`), so both train alike.
    """
    hidden_seed, logits_seed = random.randrange(2**31), random.randrange(2**31)
    return [
        keras.layers.Dense(
            num_units,
            activation="relu",
            name="hidden",
            kernel_initializer=keras.initializers.GlorotUniform(hidden_seed),
        ),
        keras.layers.Dense(
            num_classes,
            name="logits",
            dtype="float32",
            kernel_initializer=keras.initializers.GlorotUniform(logits_seed),
        ),
    ]


def head_model(
    feature_channels: int, num_classes: int, *, num_units: int, input_dtype: str
) -> keras.Model:
    """Pooled backbone features → the head's logits: what a frozen backbone's trial trains."""
    inputs = keras.Input(shape=(int(feature_channels),), dtype=input_dtype, name="features")
    x = inputs
    for layer in head_layers(num_units, num_classes):
        x = layer(x)
    return keras.Model(inputs, x, name="head")


@dataclasses.dataclass(frozen=True)
class Backbone:
    """One `keras.applications` backbone as a transfer model uses it (fixed per model).

    Attributes:
        factory: The `keras.applications` constructor.
        to_backbone: The preprocessing its weights expect, inside the model (images in [0, 1]).
        block_of: A layer name → the name of its block (`set_trainable_blocks`).
        name: The built model's name.
        factory_kwargs: More arguments of `factory`.
    """

    factory: Callable[..., keras.Model]
    to_backbone: Callable[[keras.KerasTensor], keras.KerasTensor]
    block_of: Callable[[str], str]
    name: str
    factory_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def transfer_model(
    backbone: Backbone,
    image_shape: Sequence[int],
    num_classes: int,
    *,
    num_units: int,
    trainable_blocks: int,
    weights: str | None,
    input_dtype: str,
) -> keras.Model:
    """Images in [0, 1] → `to_backbone` → the backbone → GAP → Dense(num_units) → logits.

    Args:
        backbone: The backbone and what it needs (`Backbone`).
        image_shape: (height, width, 3) of the inputs.
        num_classes: Output classes.
        num_units: Units of the head's hidden layer.
        trainable_blocks: Top blocks of the backbone that train.
        weights: `imagenet`, None/`none`, or a Keras weights file (local or gs://).
        input_dtype: The dtype images arrive in.
    """
    head = head_layers(num_units, num_classes)  # first: its seeds do not depend on the backbone
    shape = tuple(int(d) for d in image_shape)
    inputs = keras.Input(shape=shape, name="image", dtype=input_dtype)
    model = load_backbone(
        backbone.factory, weights, input_shape=shape, **dict(backbone.factory_kwargs)
    )
    set_trainable_blocks(model, trainable_blocks, backbone.block_of)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(model(backbone.to_backbone(inputs)))
    for layer in head:
        x = layer(x)
    return keras.Model(inputs, x, name=backbone.name)


def transfer_builder(
    model: str,
    factory: Callable[..., keras.Model],
    to_backbone: Callable[[keras.KerasTensor], keras.KerasTensor],
    **factory_kwargs: Any,
) -> Callable[..., keras.Model]:
    """The builder of catalogue model `model`: `factory`'s backbone as its spec declares it.

    Args:
        model: Its name in `MODELS` (blocks, hyperparameters' defaults, default weights).
        factory: The `keras.applications` constructor.
        to_backbone: The preprocessing its weights expect, inside the model (images in [0, 1]).
        **factory_kwargs: More arguments of `factory`.
    """
    spec = MODELS[model]
    if spec.backbone is None:
        raise ContractError(f"model {model}: its ModelSpec declares no backbone")
    backbone = Backbone(
        factory, to_backbone, spec.backbone.block_of, f"hpt_{model}", factory_kwargs
    )
    defaults = {h.name: h.default for h in spec.hyperparameters}

    def build(
        image_shape: Sequence[int],
        num_classes: int,
        *,
        num_units: int = int(defaults["num_units"]),
        trainable_blocks: int = int(defaults["trainable_blocks"]),
        weights: str | None = spec.default_weights,
        input_dtype: str = "float32",
    ) -> keras.Model:
        """Images in [0, 1] → preprocessing → the backbone → GAP → Dense → logits.

        Args:
            image_shape: (height, width, 3) of the inputs, in [0, 1].
            num_classes: Output classes.
            num_units: Units of the head's hidden layer.
            trainable_blocks: Top blocks that train: all of them by default, 0 a frozen
                backbone.
            weights: `imagenet`, None/`none`, or a Keras weights file (local or gs://).
            input_dtype: The dtype images arrive in.
        """
        return transfer_model(
            backbone,
            image_shape,
            num_classes,
            num_units=num_units,
            trainable_blocks=trainable_blocks,
            weights=weights,
            input_dtype=input_dtype,
        )

    return build
