"""The trainer's contract, in one TF-free place: its flags, their types and ranges, its metrics.

Everything outside the trainer that must agree with it imports this module: the
settings, the CLI, the components, the search-space loader (a space that
proposes a value the trainer would refuse is refused when it is loaded) and the
dataset preparation defaults. Importing it never imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any


class ContractError(ValueError):
    """A value outside the trainer's contract; the message is one line naming it."""


@dataclasses.dataclass(frozen=True)
class Hyperparameter:
    """One tunable trainer flag `--<name>=<value>` and the values the trainer accepts.

    Attributes:
        name: Flag name (the search-space parameter id).
        kind: `float` or `int`; an `int` flag also accepts integral floats (`128.0`),
            as HPT services may render integers.
        default: Value when the flag is absent.
        minimum: Lowest accepted value.
        maximum: Highest accepted value; None for no bound.
        exclusive_minimum: `minimum` itself is refused.
        exclusive_maximum: `maximum` itself is refused.
        help: One line for `--help`.
    """

    name: str
    kind: type
    default: float | int
    minimum: float
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    help: str = ""

    @property
    def expected(self) -> str:
        """The accepted range in words: `a number in [0, 1)`, `an integer >= 1`."""
        what = "an integer" if self.kind is int else "a number"
        if self.maximum is None:
            return f"{what} {'>' if self.exclusive_minimum else '>='} {_number(self.minimum)}"
        left = "(" if self.exclusive_minimum else "["
        right = ")" if self.exclusive_maximum else "]"
        return f"{what} in {left}{_number(self.minimum)}, {_number(self.maximum)}{right}"

    def accepts(self, value: float) -> bool:
        """Whether the trainer accepts `value` for this flag."""
        if not math.isfinite(value):
            return False
        if self.kind is int and not float(value).is_integer():
            return False
        above = value > self.minimum if self.exclusive_minimum else value >= self.minimum
        if self.maximum is None:
            return above
        below = value < self.maximum if self.exclusive_maximum else value <= self.maximum
        return above and below

    def parse(self, text: str) -> float | int:
        """The flag's text as its value.

        Raises:
            ContractError: Not a number of the right kind, or out of range.
        """
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise ContractError(f"--{self.name}={text}: expected {self.expected}") from None
        if not self.accepts(value):
            raise ContractError(f"--{self.name}={text}: expected {self.expected}")
        return int(value) if self.kind is int else value


HYPERPARAMETERS: Mapping[str, Hyperparameter] = {
    h.name: h
    for h in (
        Hyperparameter(
            "learning_rate", float, 0.01, 0.0, exclusive_minimum=True, help="SGD learning rate"
        ),
        Hyperparameter(
            "momentum", float, 0.9, 0.0, 1.0, exclusive_maximum=True, help="SGD momentum"
        ),
        Hyperparameter("num_units", int, 128, 1, help="units of the last hidden Dense layer"),
        Hyperparameter("batch_size", int, 32, 1, help="examples per replica per step"),
        Hyperparameter("epochs", int, 5, 1, help="passes over the training split"),
    )
}

# Validation metrics the trainer reports to hypertune, each with the only goal that makes sense.
METRIC_GOALS: Mapping[str, str] = {
    "accuracy": "maximize",
    "val_accuracy": "maximize",
    "loss": "minimize",
    "val_loss": "minimize",
}
METRIC_TAGS = tuple(METRIC_GOALS)
GOALS = ("maximize", "minimize")
DEFAULT_METRIC_TAG = "accuracy"
# What a diverged trial reports for each goal: finite, and worse than any real value.
DIVERGED_METRIC_VALUE: Mapping[str, float] = {"maximize": 0.0, "minimize": 1e9}

DISTRIBUTIONS = ("auto", "mirrored", "multi_worker", "none")
# Compute precision: mixed_bfloat16 keeps float32 variables and needs no loss scaling
# (bf16 units: recent CPUs such as AVX512-BF16/AMX, A100/H100 GPUs, TPUs). `auto`, the
# default, is resolved by the trainer on the machine that trains (`trainer.precision`),
# so payloads carry `auto` and every trial machine picks what is native to it.
AUTO_PRECISION = "auto"
PRECISIONS = (AUTO_PRECISION, "float32", "mixed_bfloat16")
DEFAULT_PRECISION = AUTO_PRECISION
DEFAULT_SEED = 42


@dataclasses.dataclass(frozen=True)
class PreparationDefaults:
    """Dataset preparation defaults, shared by `prepare`, `run` and the prepare component."""

    image_size: int = 150
    validation_fraction: float = 0.2
    test_fraction: float = 0.1
    seed: int = DEFAULT_SEED
    channels: int = 3
    max_bad_fraction: float = 0.01


PREPARATION = PreparationDefaults()
MIN_IMAGE_SIZE = 22  # the CNN's three conv + pool stages need 22 px per side


def metric_goal(tag: str) -> str:
    """The goal of a metric tag the trainer reports.

    Raises:
        ContractError: The trainer does not report `tag`.
    """
    if tag not in METRIC_GOALS:
        raise ContractError(f"metric {tag!r}: expected one of {', '.join(METRIC_TAGS)}")
    return METRIC_GOALS[tag]


def check_goal(tag: str, goal: str) -> None:
    """Refuse a goal that contradicts the metric (`loss` maximized, `accuracy` minimized).

    Raises:
        ContractError: Unknown metric, unknown goal, or the wrong goal for the metric.
    """
    if goal not in GOALS:
        raise ContractError(f"goal={goal!r}: expected one of {', '.join(GOALS)}")
    expected = metric_goal(tag)
    if goal != expected:
        raise ContractError(f"metric {tag!r} with goal={goal!r}: {tag} is only ever {expected}d")


def format_value(value: Any) -> str:
    """A value as flag text: integral floats without `.0` (`128.0` → `128`)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def flag(name: str, value: Any) -> str:
    """`--<name>=<value>`, the one way every target writes a trainer flag."""
    return f"--{name}={format_value(value)}"


def _number(value: float) -> str:
    return format_value(float(value))
