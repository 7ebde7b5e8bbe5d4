"""The one training loop: a custom loop serving MirroredStrategy and MultiWorkerMirroredStrategy.

Keras 3 `fit` fails under MultiWorkerMirroredStrategy (keras-team/keras#20585),
so training is `strategy.run` over a distributed dataset with the optimizer's
`apply_gradients` (which all-reduces gradients across replicas).
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from trainer import data, distribute, preprocess, records
from trainer.config import HParams, RunConfig
from trainer.model import build_model

EpochCallback = Callable[[int, dict[str, float]], None]


@dataclasses.dataclass
class TrainResult:
    """What a run produced."""

    history: list[dict[str, float]]
    weights: list[np.ndarray]
    metadata: dict[str, Any]
    replicas: int
    num_workers: int
    is_chief: bool
    start_epoch: int
    strategy: str


class Diverged(ArithmeticError):
    """The loss stopped being finite: the run learnt nothing usable (nothing is exported)."""

    def __init__(self, epoch: int, loss: float):
        super().__init__(f"training diverged at epoch {epoch} (loss={loss})")
        self.epoch = epoch
        self.loss = loss


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _checkpoint_dir_for(run: RunConfig, is_chief: bool, task_id: int) -> str | None:
    """Chief checkpoints to the real dir; other workers to a throwaway dir (TF's MWMS pattern)."""
    if not run.checkpoint_dir:
        return None
    if is_chief:
        return run.checkpoint_dir
    return posixpath.join(run.checkpoint_dir, f".worker-{task_id}-{uuid.uuid4().hex[:8]}")


def train(hparams: HParams, run: RunConfig, on_epoch: EpochCallback | None = None) -> TrainResult:
    """Train under `run.precision` (the policy is restored afterwards, so exports are float32)."""
    keras.mixed_precision.set_global_policy(run.precision)
    try:
        return _train(hparams, run, on_epoch)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def _train(hparams: HParams, run: RunConfig, on_epoch: EpochCallback | None) -> TrainResult:
    """Train the CNN on a prepared dataset, resuming from the last checkpoint if any.

    Args:
        hparams: Hyperparameters.
        run: Data location, output directories and distribution.
        on_epoch: Called on every worker after each epoch with (epoch, metrics).

    Returns:
        History of per-epoch metrics and the final weights.
    """
    metadata = records.read_metadata(run.data)
    strategy, cluster = distribute.make_strategy(run.distribution)
    replicas = strategy.num_replicas_in_sync
    global_batch = hparams.batch_size * replicas
    train_count = int(metadata["splits"]["train"]["count"])
    steps_per_epoch = max(1, train_count // global_batch)
    image_shape = metadata["image_shape"]
    if min(image_shape[:2]) < preprocess.MIN_IMAGE_SIZE:
        raise records.DatasetError(
            f"{run.data}: image_shape={image_shape}, expected at least "
            f"{preprocess.MIN_IMAGE_SIZE} pixels per side for the CNN"
        )
    num_classes = len(metadata["class_names"])
    tf.random.set_seed(run.seed)
    keras.utils.set_random_seed(run.seed)

    with strategy.scope():
        model = build_model(image_shape, num_classes, hparams.num_units)
        optimizer = keras.optimizers.SGD(hparams.learning_rate, momentum=hparams.momentum)
        optimizer.build(model.trainable_variables)
        epoch_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")

    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch_counter)
    write_dir = _checkpoint_dir_for(run, cluster.is_chief, cluster.task_id)
    manager = (
        tf.train.CheckpointManager(checkpoint, write_dir, max_to_keep=2) if write_dir else None
    )
    if run.checkpoint_dir:
        latest = tf.train.latest_checkpoint(run.checkpoint_dir)
        if latest:
            checkpoint.restore(latest).assert_existing_objects_matched()
    start_epoch = int(epoch_counter.numpy())
    if start_epoch:
        _log(f"resuming from checkpoint after epoch {start_epoch}")

    dist_train = strategy.distribute_datasets_from_function(
        data.train_input_fn(run.data, metadata, global_batch, run.seed)
    )
    iterator = iter(dist_train)

    def step_fn(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = loss_fn(labels, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        correct = tf.reduce_sum(
            tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
        )
        return tf.reduce_sum(per_example), correct

    @tf.function
    def train_step(it: Any) -> tuple[tf.Tensor, tf.Tensor]:
        loss_sum, correct = strategy.run(step_fn, args=next(it))
        return (
            strategy.reduce(tf.distribute.ReduceOp.SUM, loss_sum, axis=None),
            strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None),
        )

    val_data = data.eval_dataset(run.data, metadata, "validation", max(global_batch, 64))

    @tf.function
    def eval_step(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = model(images, training=False)
        correct = tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels)
        return tf.reduce_sum(loss_fn(labels, logits)), tf.reduce_sum(tf.cast(correct, tf.float32))

    def validate() -> dict[str, float]:
        # Every worker evaluates the whole split locally: no collective, same numbers everywhere.
        total_loss, total_correct, total_seen = 0.0, 0.0, 0
        for images, labels in val_data:
            batch_loss, batch_correct = eval_step(images, labels)
            total_loss += float(batch_loss)
            total_correct += float(batch_correct)
            total_seen += int(labels.shape[0])
        return {
            "val_loss": total_loss / max(total_seen, 1),
            "val_accuracy": total_correct / max(total_seen, 1),
        }

    summary = (
        tf.summary.create_file_writer(run.tensorboard_dir)
        if run.tensorboard_dir and cluster.is_chief
        else None
    )
    history: list[dict[str, float]] = []
    _log(
        f"training: {distribute.strategy_name(strategy)}, {replicas} replica(s) in sync, "
        f"{cluster.num_workers or 1} worker(s), global batch {global_batch}, "
        f"{steps_per_epoch} steps/epoch, epochs {start_epoch + 1}..{hparams.epochs}, "
        f"{run.precision}"
    )
    # Long epochs also show progress within the epoch (every quarter).
    progress_every = steps_per_epoch // 4 if steps_per_epoch >= 40 else 0
    for epoch in range(start_epoch + 1, hparams.epochs + 1):
        started = time.perf_counter()
        loss_total, correct_total = 0.0, 0.0
        for step in range(1, steps_per_epoch + 1):
            loss_sum, correct = train_step(iterator)
            loss_total += float(loss_sum)
            correct_total += float(correct)
            if progress_every and step % progress_every == 0 and step < steps_per_epoch:
                _log(
                    f"  step {step}/{steps_per_epoch} of epoch {epoch}: "
                    f"loss={loss_total / (step * global_batch):.4f}"
                )
        seen = steps_per_epoch * global_batch
        train_seconds = time.perf_counter() - started
        metrics = {
            "epoch": float(epoch),
            "loss": loss_total / seen,
            "accuracy": correct_total / seen,
            **validate(),
            "seconds": time.perf_counter() - started,
            "images_per_second": seen / train_seconds,
        }
        if not all(math.isfinite(metrics[k]) for k in ("loss", "val_loss")):
            raise Diverged(epoch, metrics["loss"])
        history.append(metrics)
        epoch_counter.assign(epoch)
        if manager:
            manager.save(checkpoint_number=epoch)
        if summary:
            with summary.as_default(step=epoch):
                for key in ("loss", "accuracy", "val_loss", "val_accuracy", "images_per_second"):
                    tf.summary.scalar(key, metrics[key])
            summary.flush()
        _log(
            f"epoch {epoch}/{hparams.epochs}: loss={metrics['loss']:.4f} "
            f"accuracy={metrics['accuracy']:.4f} val_loss={metrics['val_loss']:.4f} "
            f"val_accuracy={metrics['val_accuracy']:.4f} "
            f"({metrics['seconds']:.1f}s, {metrics['images_per_second']:.0f} img/s)"
        )
        if on_epoch:
            on_epoch(epoch, metrics)

    if not history:  # resumed after the last epoch: measure the restored model once
        history.append({"epoch": float(hparams.epochs), **validate()})
    if write_dir and not cluster.is_chief and tf.io.gfile.exists(write_dir):
        tf.io.gfile.rmtree(write_dir)
    return TrainResult(
        history=history,
        weights=[np.asarray(w) for w in model.get_weights()],
        metadata=metadata,
        replicas=replicas,
        num_workers=max(cluster.num_workers, 1),
        is_chief=cluster.is_chief,
        start_epoch=start_epoch,
        strategy=distribute.strategy_name(strategy),
    )
