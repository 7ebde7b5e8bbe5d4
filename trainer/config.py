"""Hyperparameters and runtime settings of one training run (no TensorFlow import)."""

from __future__ import annotations

import dataclasses
import os

from trainer.contract import (
    DEFAULT_METRIC_TAG,
    DEFAULT_PRECISION,
    DEFAULT_SEED,
    DISTRIBUTIONS,
    HYPERPARAMETERS,
    METRIC_TAGS,
    PRECISIONS,
    ContractError,
)

ConfigError = ContractError  # a bad hyperparameter or setting: one line naming the value


@dataclasses.dataclass(frozen=True)
class HParams:
    """Tunable hyperparameters (the seeds' three plus batch size and epochs).

    Attributes:
        learning_rate: SGD learning rate, > 0.
        momentum: SGD momentum in [0, 1).
        num_units: Units of the last hidden Dense layer, >= 1.
        batch_size: Examples per replica per step, >= 1.
        epochs: Passes over the training split, >= 1.
    """

    learning_rate: float = float(HYPERPARAMETERS["learning_rate"].default)
    momentum: float = float(HYPERPARAMETERS["momentum"].default)
    num_units: int = int(HYPERPARAMETERS["num_units"].default)
    batch_size: int = int(HYPERPARAMETERS["batch_size"].default)
    epochs: int = int(HYPERPARAMETERS["epochs"].default)

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            spec, value = HYPERPARAMETERS[field.name], getattr(self, field.name)
            if not spec.accepts(value):
                raise ConfigError(f"--{field.name}={value}: expected {spec.expected}")


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
        if self.metric_tag not in METRIC_TAGS:
            raise ConfigError(
                f"--metric_tag={self.metric_tag}: expected one of {', '.join(METRIC_TAGS)}"
            )


def env_default(name: str) -> str | None:
    """Return an environment variable, or None when unset or empty."""
    value = os.environ.get(name, "")
    return value or None
