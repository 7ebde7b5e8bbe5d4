"""TensorBoard for one training run (chief only): scalars per epoch and the HParams session.

Written to `RunConfig.tensorboard_dir` (`--tensorboard_dir`, by default
`AIP_TENSORBOARD_LOG_DIR`: Vertex sets it when a job has a `tensorboard`, the local
executors set it for every trial to `<study>/<trial id>/logs/` and for the final job to
`<job>/logs/`). So `tensorboard --logdir <study folder>` lists every trial, its curves, and
in the HParams dashboard one row per trial (its session: the hyperparameters it trained
with, under its trial id). One event per epoch, none per step: the cost is a file write an
epoch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api  # preloaded with the trainer

from trainer.config import HParams

# The metrics an epoch writes (each a scalar at the epoch as its step).
SCALARS = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "images_per_second")
TRIAL_ENV = "CLOUD_ML_TRIAL_ID"  # set by Vertex HPT and the local study for every trial


def session_values(hparams: HParams) -> dict[str, bool | int | float | str]:
    """The HParams session's values: the trainer's hyperparameters, the model and its own."""
    values: dict[str, Any] = {
        "learning_rate": hparams.learning_rate,
        "optimizer": hparams.optimizer,
        "momentum": hparams.momentum,
        "batch_size": hparams.batch_size,
        "epochs": hparams.epochs,
        "model": hparams.model,
        **dict(hparams.model_params),
    }
    return {k: v if isinstance(v, bool | int | float | str) else str(v) for k, v in values.items()}


def open_writer(directory: str, hparams: HParams, env: Mapping[str, str] | None = None) -> Any:
    """A summary writer on `directory` that has written this run's HParams session."""
    env = os.environ if env is None else env
    writer = tf.summary.create_file_writer(directory)
    with writer.as_default():
        hparams_api.hparams(session_values(hparams), trial_id=env.get(TRIAL_ENV) or None)
    writer.flush()
    return writer


def write_epoch(writer: Any, epoch: int, metrics: Mapping[str, float]) -> None:
    """The epoch's `SCALARS`, at step `epoch`."""
    with writer.as_default(step=epoch):
        for key in SCALARS:
            tf.summary.scalar(key, metrics[key])
    writer.flush()
