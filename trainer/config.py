"""Hyperparameters and runtime settings of one training run (no TensorFlow import)."""

from __future__ import annotations

import dataclasses
import os

DISTRIBUTIONS = ("auto", "mirrored", "multi_worker", "none")
# Compute precision: mixed_bfloat16 keeps float32 variables and needs no loss scaling
# (bf16 units: recent CPUs such as AVX512-BF16/AMX, A100/H100 GPUs, TPUs).
PRECISIONS = ("float32", "mixed_bfloat16")


class ConfigError(ValueError):
    """A bad hyperparameter or setting; the message is one line naming the value."""


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

    learning_rate: float = 0.01
    momentum: float = 0.9
    num_units: int = 128
    batch_size: int = 32
    epochs: int = 5

    def __post_init__(self) -> None:
        checks = [
            ("learning_rate", self.learning_rate > 0, "a number > 0"),
            ("momentum", 0 <= self.momentum < 1, "a number in [0, 1)"),
            ("num_units", self.num_units >= 1, "an integer >= 1"),
            ("batch_size", self.batch_size >= 1, "an integer >= 1"),
            ("epochs", self.epochs >= 1, "an integer >= 1"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise ConfigError(f"--{name}={getattr(self, name)}: expected {expected}")


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
        precision: One of PRECISIONS (Keras mixed-precision policy while training).
    """

    data: str
    model_dir: str | None = None
    checkpoint_dir: str | None = None
    tensorboard_dir: str | None = None
    metric_tag: str = "accuracy"
    distribution: str = "auto"
    seed: int = 42
    precision: str = "float32"

    def __post_init__(self) -> None:
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


# Validation metrics the trainer can report to hypertune (aliases of the val_ metrics).
METRIC_TAGS = ("accuracy", "loss", "val_accuracy", "val_loss")


def env_default(name: str) -> str | None:
    """Return an environment variable, or None when unset or empty."""
    value = os.environ.get(name, "")
    return value or None
