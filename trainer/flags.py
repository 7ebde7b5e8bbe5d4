"""The trainer's command line (`python -m trainer.task`): Vertex-style flags, parsed and checked.

Flags take both `--name=value` (what Vertex HPT appends) and `--name value`.
Output directories default to the `AIP_*` variables Vertex sets when a job has
a `base_output_directory`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from trainer.config import ConfigError, HParams, RunConfig, env_default
from trainer.contract import (
    DEFAULT_METRIC_TAG,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    DEFAULT_SEED,
    DISTRIBUTIONS,
    METRIC_TAGS,
    OPTIMIZER_ONLY,
    PRECISIONS,
    TRAINER,
    TRAINER_HYPERPARAMETERS,
)
from trainer.feature_keys import FEATURES_FLAG
from trainer.models import MODELS, ModelSpec, check_weights, model_spec

PROG = TRAINER


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump) and exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print `trainer: error: <message>` and exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(spec: ModelSpec | None = None) -> argparse.ArgumentParser:
    """The trainer's command-line flags, with the hyperparameters of the model `spec`."""
    p = OneLineParser(prog=PROG, description=__doc__, allow_abbrev=False)
    spec = spec or model_spec()
    for h in spec.all_hyperparameters().values():  # checked in parse_args: `128.0` is fine
        p.add_argument(f"--{h.name}", help=f"{h.help}: {h.expected} ({h.default})")
    p.add_argument("--data", required=True, help="prepared dataset directory (local or gs://)")
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"one of {', '.join(MODELS)}, or package.module:function (a team's own builder)",
    )
    p.add_argument(
        "--weights",
        default=None,
        help="imagenet, none, or a Keras weights file, local or gs:// (pretrained models; "
        "default: the model's own)",
    )
    p.add_argument("--model_dir", default=env_default("AIP_MODEL_DIR"))
    p.add_argument("--checkpoint_dir", default=env_default("AIP_CHECKPOINT_DIR"))
    p.add_argument("--tensorboard_dir", default=env_default("AIP_TENSORBOARD_LOG_DIR"))
    p.add_argument(
        "--metric_tag", default=DEFAULT_METRIC_TAG, help=f"one of {', '.join(METRIC_TAGS)}"
    )
    p.add_argument("--distribution", default="auto", help=f"one of {', '.join(DISTRIBUTIONS)}")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="shuffling and initialisation")
    p.add_argument(
        "--precision",
        default=DEFAULT_PRECISION,
        help=f"one of {', '.join(PRECISIONS)} (auto: bf16 where the hardware has it natively)",
    )
    p.add_argument(
        "--expected_gpus", type=int, default=0, help="GPUs this replica was given (0: any)"
    )
    p.add_argument(
        f"--{FEATURES_FLAG}",
        default="",
        help="a feature cache folder (python -m trainer.features): train on a matching "
        "entry's frozen-backbone outputs ('': from images)",
    )
    return p


def requested_model(argv: Sequence[str] | None) -> str:
    """The `--model` among the flags, else the default (its hyperparameters are the flags')."""
    first = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    first.add_argument("--model", default=DEFAULT_MODEL)
    return first.parse_known_args(argv)[0].model


def parse_args(argv: Sequence[str] | None = None) -> tuple[HParams, RunConfig]:
    """Parse and validate flags; raise ConfigError naming the first bad value."""
    spec = model_spec(requested_model(argv))
    args = build_parser(spec).parse_args(argv)
    values: dict[str, Any] = {
        h.name: h.default if getattr(args, h.name) is None else h.parse(getattr(args, h.name))
        for h in spec.all_hyperparameters().values()
    }
    trainer_own = {name: values.pop(name) for name in TRAINER_HYPERPARAMETERS}
    for name, only_under in OPTIMIZER_ONLY.items():
        if getattr(args, name) is not None and trainer_own["optimizer"] != only_under:
            print(
                f"{PROG}: --{name} ignored: it means something under --optimizer={only_under} "
                f"only (this run: {trainer_own['optimizer']})",
                file=sys.stderr,
            )
    hparams = HParams(
        **trainer_own,
        model=args.model,
        weights=check_weights(spec, args.weights),
        model_params=values,
    )
    run = RunConfig(
        data=args.data,
        model_dir=args.model_dir,
        checkpoint_dir=args.checkpoint_dir,
        tensorboard_dir=args.tensorboard_dir,
        metric_tag=args.metric_tag,
        distribution=args.distribution,
        seed=args.seed,
        precision=args.precision,
        expected_gpus=args.expected_gpus,
        features=getattr(args, FEATURES_FLAG),
    )
    if "://" not in run.data and not os.path.isfile(os.path.join(run.data, "metadata.json")):
        raise ConfigError(
            f"--data={run.data}: expected a prepared dataset directory with metadata.json"
        )
    return hparams, run
