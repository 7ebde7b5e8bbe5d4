"""Hyperparameters and runtime settings of one training run (no TensorFlow import)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from trainer.contract import (
    DEFAULT_METRIC_TAG,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    DEFAULT_SEED,
    DISTRIBUTIONS,
    METRIC_TAGS,
    PRECISIONS,
    TRAINER_HYPERPARAMETERS,
    ContractError,
    retired_tag,
)
from trainer.models import MODELS

ConfigError = ContractError  # a bad hyperparameter or setting: one line naming the value


@dataclasses.dataclass(frozen=True)
class HParams:
    """What one training run trains: the model, its hyperparameters and the trainer's own.

    Travels whole from the flags to the builder and the export.

    Attributes:
        learning_rate: The optimizer's learning rate, > 0.
        optimizer: `sgd` or `adam`.
        momentum: SGD momentum in [0, 1) (ignored by adam).
        batch_size: Examples per replica per step, >= 1.
        epochs: Passes over the training split, >= 1.
        model: A catalogue name or `package.module:function` (`trainer.models`).
        weights: The backbone's weights: `imagenet`, `none` or a file (pretrained models).
        model_params: Values of the model's own hyperparameters (e.g. `num_units`).
    """

    learning_rate: float = float(TRAINER_HYPERPARAMETERS["learning_rate"].default)
    optimizer: str = str(TRAINER_HYPERPARAMETERS["optimizer"].default)
    momentum: float = float(TRAINER_HYPERPARAMETERS["momentum"].default)
    batch_size: int = int(TRAINER_HYPERPARAMETERS["batch_size"].default)
    epochs: int = int(TRAINER_HYPERPARAMETERS["epochs"].default)
    model: str = DEFAULT_MODEL
    weights: str = "none"
    model_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, spec in TRAINER_HYPERPARAMETERS.items():
            value = getattr(self, name)
            if not spec.accepts(value):
                raise ConfigError(f"--{name}={value}: expected {spec.expected}")
        if self.model in MODELS:  # a reference is checked when its module is imported
            own = {h.name: h for h in MODELS[self.model].hyperparameters}
            for name, value in self.model_params.items():
                if name not in own:
                    raise ConfigError(f"--{name}: model {self.model} has no such hyperparameter")
                if not own[name].accepts(value):
                    raise ConfigError(f"--{name}={value}: expected {own[name].expected}")

    def hyperparameters(self) -> dict[str, Any]:
        """Every tuned value by flag name: the trainer's own and the model's."""
        trainer = {name: getattr(self, name) for name in TRAINER_HYPERPARAMETERS}
        return {**trainer, **self.model_params}


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Where the data comes from and where the run writes.

    Attributes:
        data: Prepared dataset directory (local or gs://).
        model_dir: Final SavedModel location; None skips the export.
        checkpoint_dir: Per-epoch checkpoints; None disables resume.
        tensorboard_dir: TensorBoard event files; None disables them.
        metric_tag: Hypertune metric tag (a validation metric name).
        distribution: One of DISTRIBUTIONS.
        seed: Seed for shuffling and initialisation.
        precision: One of PRECISIONS; `auto` is resolved by `trainer.precision` when training.
        expected_gpus: GPUs the replica was given (a cloud pool's accelerator_count); the
            trainer refuses to train when it sees fewer. 0: no expectation.
        features: A feature cache folder (`python -m trainer.features`); a matching entry
            is trained on instead of the images (`trainer.stages`). "": off.
    """

    data: str
    model_dir: str | None = None
    checkpoint_dir: str | None = None
    tensorboard_dir: str | None = None
    metric_tag: str = DEFAULT_METRIC_TAG
    distribution: str = "auto"
    seed: int = DEFAULT_SEED
    precision: str = DEFAULT_PRECISION
    expected_gpus: int = 0
    features: str = ""

    def __post_init__(self) -> None:
        if self.expected_gpus < 0:
            raise ConfigError(f"--expected_gpus={self.expected_gpus}: expected an integer >= 0")
        if self.distribution not in DISTRIBUTIONS:
            raise ConfigError(
                f"--distribution={self.distribution}: expected one of {', '.join(DISTRIBUTIONS)}"
            )
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"--precision={self.precision}: expected one of {', '.join(PRECISIONS)}"
            )
        if refusal := retired_tag(self.metric_tag, "--metric_tag"):
            raise ConfigError(refusal)
        if self.metric_tag not in METRIC_TAGS:
            raise ConfigError(
                f"--metric_tag={self.metric_tag}: expected one of {', '.join(METRIC_TAGS)}"
            )


def env_default(name: str) -> str | None:
    """Return an environment variable, or None when unset or empty."""
    value = os.environ.get(name, "")
    return value or None
