"""The model catalogue: every model the trainer builds, by name, TF-free.

("Catalogue", not "registry": the registry is where trained models are versioned, the
local one in `pipelines/targets/local/registry.py`, Vertex's and Kubeflow's services.)

A model is a `ModelSpec`: its name, its builder (`module:function`, imported only when
the model is built), the hyperparameters the builder takes (its tunable flags, beside
the trainer's own `trainer.contract.TRAINER_HYPERPARAMETERS`), its input constraints,
whether it takes pretrained weights, and the search-space presets that fit it.

Adding a built-in model is one builder module under `trainer/models/` and one entry in
`MODELS`. A team's own model enters by reference (`package.module:function`): its
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
        blocks: Block units of a pretrained backbone, the ones its `trainable_blocks`
            counts; a trial's frozen depth is `blocks - trainable_blocks`, and its frozen
            prefix can be cached (`trainer.feature_keys`). 0: never cached (the CNN, a
            team's builder: its prefix may not be a pure function of the image).
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
    blocks: int = 0
    own_metrics: bool = False

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
        fields = {k: v for k, v in data.items() if k != "hyperparameters"}
        for key in ("channels", "presets"):
            fields[key] = tuple(fields[key])
        return cls(**fields, hyperparameters=hyperparameters)


def _units(default: int) -> Hyperparameter:
    return Hyperparameter("num_units", int, default, 1, help="units of the head's hidden layer")


def _trainable_blocks(blocks: int, what: str) -> Hyperparameter:
    return Hyperparameter(
        "trainable_blocks",
        int,
        blocks,
        0,
        blocks,
        help=f"top blocks of the backbone that train: 0 frozen, {blocks} all ({what})",
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
        ModelSpec(
            "resnet50",
            "trainer.models.resnet50:build",
            (_units(1016), _trainable_blocks(5, "stem and 4 stages")),
            min_image_size=32,
            channels=(3,),
            pretrained=True,
            default_weights="imagenet",
            presets=("transfer", "optimizer"),
            typed_input=True,
            description="seed 001: ResNet50 backbone, GAP, Dense(num_units), fine-tuned",
            blocks=5,
        ),
        ModelSpec(
            "mobilenet_v3_small",
            "trainer.models.mobilenet:build",
            (_units(256), _trainable_blocks(13, "stem, 11 blocks and the last conv")),
            min_image_size=32,
            channels=(3,),
            pretrained=True,
            default_weights="imagenet",
            presets=("transfer", "optimizer"),
            typed_input=True,
            description="MobileNetV3Small backbone (CPU-friendly), GAP, Dense(num_units)",
            blocks=13,
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
