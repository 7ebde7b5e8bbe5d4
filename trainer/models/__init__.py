"""The model catalogue: every model the trainer builds, by name, TF-free.

("Catalogue", not "registry": the registry is where trained models are versioned, the
local one in `pipelines/targets/local/registry.py`, Vertex's and Kubeflow's services.)

A model is a `ModelSpec`: its name, its builder (`module:function`, imported only when
the model is built), the hyperparameters the builder takes (its tunable flags, beside
the trainer's own `trainer.contract.TRAINER_HYPERPARAMETERS`), its input constraints,
whether it takes pretrained weights, and the search-space presets that fit it.

Adding a built-in model is one builder module under `trainer/models/` and one entry in
`MODELS`; a pretrained backbone's entry also declares its blocks (`BackboneSpec`), and
its builder is `trainer.models.backbones.transfer_builder` over a `keras.applications`
constructor. A team's own model enters by reference (`package.module:function`): its
keyword-only arguments are its hyperparameters (`trainer.models.custom`).

Every builder has the signature `build(image_shape, num_classes, *, <hyperparameters>)`
and returns a Keras model mapping images in [0, 1] to class logits; preprocessing the
model needs (a backbone's own scaling) lives inside the model, so training, evaluation
and the serving signature apply the same thing. Built-in builders also take
`input_dtype` (the policy's compute dtype the images arrive in) and, when pretrained,
`weights` (`imagenet`, None, or a local weights file).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from typing import Any

from trainer.contract import (
    DEFAULT_MODEL,
    MIN_IMAGE_SIZE,
    TRAINER_HYPERPARAMETERS,
    ContractError,
    Hyperparameter,
)


@dataclasses.dataclass(frozen=True)
class BackboneSpec:
    """A pretrained backbone's facts, TF-free: its blocks, where they end, what they output.

    Attributes:
        block_outputs: (stride, channels) of the backbone's output after 1, 2, ... of its
            blocks, bottom to top; the last is the whole backbone's, which the head pools
            (`tests/test_features.py` checks them against the built model).
        block_pattern: A regex whose first group, matched at a layer's name, is its block
            (a layer it does not match is a block of its own name).
        block_aliases: (group, block) pairs naming several groups one block.
        params: Its parameters without its top (Keras's applications table).
    """

    block_outputs: tuple[tuple[int, int], ...]
    block_pattern: str
    block_aliases: tuple[tuple[str, str], ...] = ()
    params: int = 0

    def block_of(self, layer: str) -> str:
        """The name of the block the backbone's layer named `layer` belongs to."""
        match = _compiled(self.block_pattern).match(layer)
        block = match.group(1) if match else layer
        return dict(self.block_aliases).get(block, block)

    @property
    def pooled_width(self) -> int:
        """Channels of the pooled vector the head takes."""
        return self.block_outputs[-1][1]


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """What the pipeline and the trainer know of a model before building it.

    Attributes:
        name: The `model` setting's value (a catalogue name or `package.module:function`).
        builder: `module:function` of the builder.
        hyperparameters: The builder's own tunable flags (keyword-only arguments).
        min_image_size: Smallest image side the model takes, in pixels.
        channels: Image channel counts the model takes.
        pretrained: Takes `weights` (imagenet, none or a file); else only `none`.
        default_weights: `weights` when the setting is unset.
        presets: Search-space presets that fit it; the first is its default.
        typed_input: The builder takes `input_dtype` (built-in models do).
        description: One line for listings.
        backbone: A pretrained backbone's blocks and size; None for a model without one
            (the CNN, a team's builder: its prefix may not be a pure function of the image).
        own_metrics: The builder reports metrics of its own (a team's `hpt_metrics` hook,
            `trainer/cost_metrics.py`); without it a model reports `METRIC_GOALS`' tags only.
    """

    name: str
    builder: str
    hyperparameters: tuple[Hyperparameter, ...] = ()
    min_image_size: int = 1
    channels: tuple[int, ...] = (1, 3)
    pretrained: bool = False
    default_weights: str = "none"
    presets: tuple[str, ...] = ("optimizer",)
    typed_input: bool = False
    description: str = ""
    backbone: BackboneSpec | None = None
    own_metrics: bool = False

    @property
    def blocks(self) -> int:
        """Block units its `trainable_blocks` counts (0: never cached).

        A trial's frozen depth is `blocks - trainable_blocks`, and its frozen prefix can
        be cached (`trainer.feature_keys`).
        """
        return len(self.backbone.block_outputs) if self.backbone else 0

    def all_hyperparameters(self) -> dict[str, Hyperparameter]:
        """The trainer's own tunable flags and this model's, by name."""
        return {**TRAINER_HYPERPARAMETERS, **{h.name: h for h in self.hyperparameters}}

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON (`trainer.models.custom` hands it across a process)."""
        return {
            **dataclasses.asdict(self),
            "hyperparameters": [
                {**dataclasses.asdict(h), "kind": h.kind.__name__} for h in self.hyperparameters
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelSpec:
        """The inverse of `to_json`."""
        kinds = {"int": int, "float": float, "str": str}
        hyperparameters = tuple(
            Hyperparameter(**{**h, "kind": kinds[h["kind"]], "choices": tuple(h["choices"])})
            for h in data["hyperparameters"]
        )
        fields = {k: v for k, v in data.items() if k not in ("hyperparameters", "backbone")}
        for key in ("channels", "presets"):
            fields[key] = tuple(fields[key])
        backbone = data.get("backbone")
        if backbone:
            backbone = BackboneSpec(
                block_outputs=tuple(tuple(pair) for pair in backbone["block_outputs"]),
                block_pattern=backbone["block_pattern"],
                block_aliases=tuple(tuple(pair) for pair in backbone["block_aliases"]),
                params=backbone["params"],
            )
        return cls(**fields, hyperparameters=hyperparameters, backbone=backbone)


def _units(default: int) -> Hyperparameter:
    return Hyperparameter("num_units", int, default, 1, help="units of the head's hidden layer")


def transfer_spec(
    name: str, module: str, num_units: int, backbone: BackboneSpec, what: str, description: str
) -> ModelSpec:
    """The spec of a pretrained backbone's transfer model (`backbones.transfer_builder`).

    Args:
        name: The `model` setting's value.
        module: Its builder's module under `trainer/models/` (`build` in it).
        num_units: The head's hidden units by default.
        backbone: Its blocks and size; `trainable_blocks` ranges over its blocks.
        what: What its blocks are, for the `trainable_blocks` flag's help.
        description: One line for listings.
    """
    blocks = len(backbone.block_outputs)
    trainable = Hyperparameter(
        "trainable_blocks",
        int,
        blocks,
        0,
        blocks,
        help=f"top blocks of the backbone that train: 0 frozen, {blocks} all ({what})",
    )
    return ModelSpec(
        name,
        f"trainer.models.{module}:build",
        (_units(num_units), trainable),
        min_image_size=32,
        channels=(3,),
        pretrained=True,
        default_weights="imagenet",
        presets=("transfer", "optimizer"),
        typed_input=True,
        description=description,
        backbone=backbone,
    )


# The catalogue: one entry per built-in model.
MODELS: Mapping[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "cnn",
            "trainer.models.cnn:build",
            (_units(128),),
            min_image_size=MIN_IMAGE_SIZE,
            presets=("default", "seeds", "optimizer"),
            typed_input=True,
            description="the seeds' CNN: conv 16/32/64, Dense(num_units), SGD",
        ),
        transfer_spec(
            "resnet50",
            "resnet50",
            1016,
            BackboneSpec(  # the stem (conv1, pool1) and the stages conv2 … conv5
                ((4, 64), (4, 256), (8, 512), (16, 1024), (32, 2048)),
                r"^(conv[2-5]|conv1|pool1)",
                block_aliases=(("conv1", "stem"), ("pool1", "stem")),
                params=23_587_712,
            ),
            "stem and 4 stages",
            "seed 001: ResNet50 backbone, GAP, Dense(num_units), fine-tuned",
        ),
        transfer_spec(
            "mobilenet_v3_small",
            "mobilenet",
            256,
            BackboneSpec(  # the stem `conv`, expanded_conv … expanded_conv_10, `conv_1`
                ((2, 16), (4, 16), (8, 24), (8, 24), (16, 40), (16, 40), (16, 40), (16, 48))
                + ((16, 48), (32, 96), (32, 96), (32, 96), (32, 576)),
                r"^(expanded_conv(?:_\d+)?|conv_1|conv)(?:_|$)",
                params=939_120,
            ),
            "stem, 11 blocks and the last conv",
            "MobileNetV3Small backbone (CPU-friendly), GAP, Dense(num_units)",
        ),
    )
}


def is_reference(model: str) -> bool:
    """Whether `model` names a builder by reference (`package.module:function`)."""
    return ":" in model


def model_spec(model: str = DEFAULT_MODEL) -> ModelSpec:
    """The spec of a catalogued model, or of a builder by reference (imports its module).

    Raises:
        ContractError: Unknown name, or a reference that is not a usable builder.
    """
    if model in MODELS:
        return MODELS[model]
    if is_reference(model):
        from trainer.models import custom  # the user's module may import TensorFlow

        return custom.inspect_builder(model)
    raise ContractError(
        f"model={model!r}: expected one of {', '.join(MODELS)} or package.module:function"
    )


def check_weights(spec: ModelSpec, weights: str | None) -> str:
    """`weights` for `spec` (None: its default), or a one-line refusal.

    Raises:
        ContractError: Pretrained weights for a model that takes none.
    """
    weights = weights or spec.default_weights
    if not weights.strip():
        raise ContractError(f"weights={weights!r}: expected imagenet, none or a file path")
    if weights != "none" and not spec.pretrained:
        raise ContractError(
            f"weights={weights!r}: model {spec.name} has no pretrained backbone (expected none)"
        )
    return weights


def builder_of(spec: ModelSpec) -> Any:
    """The builder function of `spec` (imports its module: TensorFlow, for built-in models)."""
    from trainer.models import custom

    return custom.load_builder(spec.builder)


def build_model(
    spec: ModelSpec,
    model_params: Mapping[str, Any],
    weights: str,
    image_shape: Any,
    num_classes: int,
    input_dtype: str = "float32",
) -> Any:
    """The Keras model `spec` builds with its hyperparameters `model_params`.

    Args:
        spec: The model.
        model_params: Values of its own hyperparameters (absent ones take their defaults).
        weights: `imagenet`, `none` or a weights file (pretrained models only).
        image_shape: (height, width, channels) of the images, in [0, 1].
        num_classes: Classes of the logits.
        input_dtype: The dtype images arrive in (the policy's compute dtype).
    """
    kwargs = dict(model_params)
    if spec.pretrained:
        kwargs["weights"] = None if weights == "none" else weights
    if spec.typed_input:
        kwargs["input_dtype"] = input_dtype
    return builder_of(spec)(tuple(int(d) for d in image_shape), int(num_classes), **kwargs)
