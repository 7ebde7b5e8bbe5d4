"""A transfer model cut at a block boundary: the frozen prefix and the part that trains.

A built-in transfer model is images → preprocessing → backbone (a nested Keras model)
→ `pool` → `hidden` → `logits` (`trainer.models.backbones.transfer_model`). At frozen
depth d (the bottom d blocks frozen), `prefix` maps images to the tensor that crosses
the boundary (at the whole backbone's depth: the pooled vector, the pooling having no
weights), and `trainable` maps that tensor to logits through the very layers of the
model: training it trains the model, whose weights the export saves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import keras

from trainer.models import ModelSpec

HEAD_LAYERS = ("hidden", "logits")  # the layers after the pooling, in order


class NotCacheable(ValueError):
    """The model has no single tensor at the boundary asked for; the message is one line."""


def backbone_of(model: keras.Model) -> keras.Model:
    """The nested backbone of a transfer model."""
    return next(layer for layer in model.layers if isinstance(layer, keras.Model))


def _producer(tensor: keras.KerasTensor) -> keras.Operation:
    return tensor._keras_history.operation  # noqa: SLF001  # the functional graph's own record


def _inputs_of(layer: keras.Operation) -> list[keras.KerasTensor]:
    return list(layer._inbound_nodes[0].input_tensors)  # noqa: SLF001  # the layer is called once


def block_boundary(
    backbone: keras.Model, depth: int, of: Callable[[str], str]
) -> keras.KerasTensor:
    """The one tensor of `backbone` that crosses from its bottom `depth` blocks to the rest.

    Layers without weights and without a block in their name (activations) belong to the
    block of the layer that feeds them.

    Raises:
        NotCacheable: Several tensors cross the boundary (no single cut there).
    """
    order: list[str] = []
    for layer in backbone.layers:
        if layer.weights and of(layer.name) not in order:
            order.append(of(layer.name))
    frozen = set(order[:depth])
    in_prefix: dict[int, bool] = {}
    crossing: dict[int, keras.KerasTensor] = {}
    for layer in backbone.operations:  # layers and bare ops (hard-swish's), in graph order
        inputs = _inputs_of(layer) if layer._inbound_nodes else []  # noqa: SLF001
        if isinstance(layer, keras.layers.InputLayer) or not inputs:
            in_prefix[id(layer)] = True
            continue
        block = of(layer.name)
        if block in order:
            in_prefix[id(layer)] = block in frozen
        else:
            in_prefix[id(layer)] = all(in_prefix[id(_producer(t))] for t in inputs)
        if not in_prefix[id(layer)]:
            for tensor in inputs:
                if in_prefix[id(_producer(tensor))]:
                    crossing[id(tensor)] = tensor
    if len(crossing) != 1:
        raise NotCacheable(
            f"{backbone.name}: {len(crossing)} tensors cross the boundary after {depth} "
            "block(s), expected one"
        )
    return next(iter(crossing.values()))


def _top(backbone: keras.Model, spec: ModelSpec, depth: int) -> keras.KerasTensor:
    if not 1 <= depth <= spec.blocks:
        raise NotCacheable(f"model {spec.name}: frozen depth {depth} not in [1, {spec.blocks}]")
    if depth == spec.blocks or spec.backbone is None:
        return backbone.output
    return block_boundary(backbone, depth, spec.backbone.block_of)


def prefix_model(model: keras.Model, spec: ModelSpec, depths: Sequence[int]) -> keras.Model:
    """Images → the features at each of `depths` (one pass through the shared bottom).

    At the whole backbone's depth the features are pooled (the pooling has no weights).

    Raises:
        NotCacheable: A depth out of [1, spec.blocks], or with no single tensor there.
    """
    backbone = backbone_of(model)
    tops = [_top(backbone, spec, depth) for depth in depths]
    bottom = keras.Model(backbone.input, tops, name=f"{backbone.name}_bottom")
    to_backbone = keras.Model(model.input, _inputs_of(backbone)[0])  # the preprocessing
    images = keras.Input(shape=model.input.shape[1:], dtype=model.input.dtype, name="image")
    found = bottom(to_backbone(images))
    found = found if isinstance(found, list | tuple) else [found]
    pool = model.get_layer("pool")
    outputs = [
        pool(x) if depth == spec.blocks else x for depth, x in zip(depths, found, strict=True)
    ]
    return keras.Model(images, outputs, name=f"{model.name}_frozen")


def trainable_part(
    model: keras.Model, spec: ModelSpec, depth: int, input_dtype: str
) -> keras.Model:
    """Features at frozen `depth` → logits, through `model`'s own layers from there on.

    Raises:
        NotCacheable: A depth out of [1, spec.blocks], or with no single tensor there.
    """
    backbone = backbone_of(model)
    top = _top(backbone, spec, depth)
    pool = model.get_layer("pool")
    if depth == spec.blocks:
        shape = tuple(int(d) for d in pool.compute_output_shape(top.shape)[1:])
        inputs = keras.Input(shape=shape, dtype=input_dtype, name="features")
        x = inputs
    else:
        tail = keras.Model(top, backbone.output, name=f"{backbone.name}_top")
        inputs = keras.Input(shape=top.shape[1:], dtype=input_dtype, name="features")
        x = pool(tail(inputs))
    for name in HEAD_LAYERS:
        x = model.get_layer(name)(x)
    return keras.Model(inputs, x, name=f"{model.name}_trainable")
