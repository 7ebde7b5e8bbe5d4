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
        kind: `float`, `int` or `str`; an `int` flag also accepts integral floats (`128.0`),
            as HPT services may render integers.
        default: Value when the flag is absent.
        minimum: Lowest accepted number; None for no bound (and for `str`).
        maximum: Highest accepted number; None for no bound.
        exclusive_minimum: `minimum` itself is refused.
        exclusive_maximum: `maximum` itself is refused.
        choices: The accepted values of a `str` flag (a categorical search parameter).
        help: One line for `--help`.
    """

    name: str
    kind: type
    default: float | int | str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: tuple[str, ...] = ()
    help: str = ""

    @property
    def expected(self) -> str:
        """The accepted values in words: `a number in [0, 1)`, `an integer >= 1`, `one of a, b`."""
        if self.kind is str:
            return f"one of {', '.join(self.choices)}" if self.choices else "a string"
        what = "an integer" if self.kind is int else "a number"
        if self.minimum is None and self.maximum is None:
            return what
        if self.maximum is None:
            return f"{what} {'>' if self.exclusive_minimum else '>='} {_number(self.minimum)}"
        if self.minimum is None:
            return f"{what} {'<' if self.exclusive_maximum else '<='} {_number(self.maximum)}"
        left = "(" if self.exclusive_minimum else "["
        right = ")" if self.exclusive_maximum else "]"
        return f"{what} in {left}{_number(self.minimum)}, {_number(self.maximum)}{right}"

    def accepts(self, value: Any) -> bool:
        """Whether the trainer accepts `value` for this flag."""
        if self.kind is str:
            return isinstance(value, str) and (not self.choices or value in self.choices)
        if isinstance(value, str | bool) or not isinstance(value, int | float):
            return False
        if not math.isfinite(value):
            return False
        if self.kind is int and not float(value).is_integer():
            return False
        if self.minimum is not None:
            low = self.minimum
            if value < low or (self.exclusive_minimum and value == low):
                return False
        if self.maximum is not None:
            high = self.maximum
            if value > high or (self.exclusive_maximum and value == high):
                return False
        return True

    def parse(self, text: str) -> float | int | str:
        """The flag's text as its value.

        Raises:
            ContractError: Not a value of the right kind, or out of range.
        """
        if self.kind is str:
            if not self.accepts(text):
                raise ContractError(f"--{self.name}={text}: expected {self.expected}")
            return text
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise ContractError(f"--{self.name}={text}: expected {self.expected}") from None
        if not self.accepts(value):
            raise ContractError(f"--{self.name}={text}: expected {self.expected}")
        return int(value) if self.kind is int else value


OPTIMIZERS = ("sgd", "adam")
# The trainer's own tunable flags, whatever the model. A model adds its own (`trainer.models`).
TRAINER_HYPERPARAMETERS: Mapping[str, Hyperparameter] = {
    h.name: h
    for h in (
        Hyperparameter(
            "learning_rate", float, 0.01, 0.0, exclusive_minimum=True, help="learning rate"
        ),
        Hyperparameter("optimizer", str, "sgd", choices=OPTIMIZERS, help="optimizer"),
        Hyperparameter(
            "momentum", float, 0.9, 0.0, 1.0, exclusive_maximum=True, help="SGD momentum (sgd only)"
        ),
        Hyperparameter("batch_size", int, 32, 1, help="examples per replica per step"),
        # Also fixed per run (`FIXED_TRAINER_SETTINGS`): the `epochs` setting's default too.
        Hyperparameter("epochs", int, 10, 1, help="passes over the training split"),
    )
}
# Flags that mean something under one optimizer only (a conditional search parameter).
OPTIMIZER_ONLY = {"momentum": "sgd"}

# The model the trainer builds: a catalogue name (`trainer.models.MODELS`) or a team's own
# builder by reference, `package.module:function`. `weights` are a pretrained backbone's.
DEFAULT_MODEL = "cnn"
WEIGHTS_CHOICES = ("imagenet", "none")  # or a path (local or gs://) to a Keras weights file
# The trainer's flags that are not hyperparameters (a model's own may not take these names).
RUN_FLAGS = (
    "data",
    "model",
    "weights",
    "model_dir",
    "checkpoint_dir",
    "tensorboard_dir",
    "metric_tag",
    "distribution",
    "seed",
    "precision",
    "expected_gpus",
    "features",  # a feature cache folder (`trainer.feature_keys`); "" = off
)
# The `feature_cache` setting: `auto` caches a frozen backbone's outputs once per study where
# trials freeze a prefix (`trainer.feature_keys`: the entrypoint, the flag, the entries); `off`
# trains every trial from images.
FEATURE_CACHE_CHOICES = ("auto", "off")
DEFAULT_FEATURE_CACHE = "auto"
# The trainer flags a run fixes for every trial and the final job alike (not tuned), each with
# its kind: the one list the payloads are built from (`pipelines/jobs/trainer_args.py`), which
# the settings, the pipeline's parameters and the job-spec components are checked against.
FIXED_TRAINER_SETTINGS: Mapping[str, type] = {
    "model": str,
    "weights": str,
    "epochs": int,
    "batch_size": int,
    "metric_tag": str,
    "precision": str,
    "seed": int,
}

# Validation metrics the trainer reports to hypertune, each with the only goal that makes sense.
# (Its history also holds train_accuracy/train_loss; evaluation reports test_accuracy/test_loss.)
METRIC_GOALS: Mapping[str, str] = {
    "val_accuracy": "maximize",
    "val_loss": "minimize",
    "model_size_mb": "minimize",
    "latency_ms": "minimize",
}
# The trial's cost, measured once after training and reported with its last step
# (`trainer/cost_metrics.py`): the exported variables' MB and the serving function's median ms.
COST_METRICS = ("model_size_mb", "latency_ms")
METRIC_TAGS = tuple(METRIC_GOALS)
TRAINER = "trainer"  # the trainer's name in its own messages (`trainer: error: …`)
# The trainer's exit code for a set-up it refuses (bad flags, data or weights): every trial
# of a study would fail the same way, so the study stops at the first.
EXIT_SETUP_ERROR = 2
GOALS = ("maximize", "minimize")
DEFAULT_METRIC_TAG = "val_accuracy"
# Where cloudml-hypertune writes (its env variable, and its default path when unset): the
# trainer reports there, the Katib trial template sets it, the local study reads it.
METRIC_FILE_ENV = "CLOUD_ML_HP_METRIC_FILE"
DEFAULT_METRIC_FILE = "/tmp/hypertune/output.metrics"
# Tags once accepted for the validation metric, refused now with the spelling to use: beside
# train_accuracy and test_accuracy a bare `accuracy` could be read as any of the three.
RETIRED_METRIC_TAGS: Mapping[str, str] = {"accuracy": "val_accuracy", "loss": "val_loss"}
# What a diverged trial reports for each goal: finite, and worse than any real value.
DIVERGED_METRIC_VALUE: Mapping[str, float] = {"maximize": 0.0, "minimize": 1e9}
# A loss this many times the chance loss (ln num_classes: a uniform guess) has exploded: the
# trial learnt nothing usable, as much as one whose loss is NaN (`exploded`).
EXPLODED_LOSS_FACTOR = 20.0
# The fix a diverged trial, and a study whose every trial diverged, names.
DIVERGED_FIX = "lower the learning_rate range"


def exploded(loss: float, num_classes: int) -> bool:
    """Whether a loss is not finite, or beyond `EXPLODED_LOSS_FACTOR` times the chance loss."""
    chance = math.log(max(num_classes, 2))
    return not math.isfinite(loss) or loss > EXPLODED_LOSS_FACTOR * chance


def diverged_report(metrics: Mapping[str, float]) -> bool:
    """Whether `metrics` are what a diverged trial reports: each known tag at its worst value.

    The one test every target applies to a trial's final measurement (a service records
    the report as a succeeded trial's): at least one tag of `METRIC_GOALS`, each at its
    goal's `DIVERGED_METRIC_VALUE` (a team's own tags are not looked at).
    """
    known = {tag: value for tag, value in metrics.items() if tag in METRIC_GOALS}
    return bool(known) and all(
        value == DIVERGED_METRIC_VALUE[METRIC_GOALS[tag]] for tag, value in known.items()
    )


# A worker's throwaway checkpoints, inside the checkpoint folder (only the chief's are kept):
# `<checkpoint_dir>/.worker-<task>-<random>`, removed by the worker when it ends.
WORKER_CHECKPOINT_PREFIX = ".worker-"

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
    record_format: str = "auto"
    prepare_workers: int = 1  # one process; tf.data already decodes on every core in it


PREPARATION = PreparationDefaults()
PREPARED_METADATA = "metadata.json"  # what marks a prepared dataset (`hpt-pipeline prepare`)
# How prepared images are stored (`trainer.records`): `raw` uint8 pixels (nothing to decode),
# `encoded` JPEG bytes the trainer decodes once, before its in-memory cache; `auto` picks by
# image size (`record_format_for`; measured: benchmarks/bench_prepare_scale.py).
RAW, ENCODED, AUTO_FORMAT = "raw", "encoded", "auto"
RECORD_FORMATS = (AUTO_FORMAT, RAW, ENCODED)
# `auto` stores images of this side and larger encoded: below it, raw pixels are small and
# JPEG's block artefacts are a larger share of the image.
ENCODED_FROM_SIZE = 96
JPEG_QUALITY = 90  # `encoded` records' JPEG quality


def record_format_for(record_format: str, image_size: int) -> str:
    """The stored format (`raw` or `encoded`) a `record_format` setting gives at `image_size`."""
    if record_format != AUTO_FORMAT:
        return record_format
    return ENCODED if image_size >= ENCODED_FROM_SIZE else RAW


IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp")  # what decode_image reads
MIN_IMAGE_SIZE = 22  # the smallest side any built-in model takes (the CNN's three conv + pool)


def retired_tag(tag: str, name: str = "metric_tag") -> str | None:
    """The one-line refusal of a retired metric tag (`name=tag: say ...`), None for any other."""
    if tag not in RETIRED_METRIC_TAGS:
        return None
    new = RETIRED_METRIC_TAGS[tag]
    meant = new.replace("val_", "validation ")
    return f"{name}={tag}: say {new} (the {meant} this tag always meant)"


def metric_goal(tag: str) -> str:
    """The goal of a metric tag the trainer reports.

    Raises:
        ContractError: The trainer does not report `tag` (a retired tag: its new spelling).
    """
    if refusal := retired_tag(tag):
        raise ContractError(refusal)
    if tag not in METRIC_GOALS:
        raise ContractError(f"metric {tag!r}: expected one of {', '.join(METRIC_TAGS)}")
    return METRIC_GOALS[tag]


def check_goal(tag: str, goal: str) -> None:
    """Refuse a goal that contradicts the metric (`val_loss` maximized, `val_accuracy` minimized).

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


def _number(value: float | None) -> str:
    return format_value(None if value is None else float(value))
