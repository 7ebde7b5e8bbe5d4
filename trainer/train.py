"""The one training loop: a custom loop serving MirroredStrategy and MultiWorkerMirroredStrategy.

Keras 3 `fit` fails under MultiWorkerMirroredStrategy (keras-team/keras#20585),
so training is `strategy.run` over a distributed dataset with the optimizer's
`apply_gradients` (which all-reduces gradients across replicas).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import math
import os
import posixpath
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from trainer import data, distribute, precision, records
from trainer.config import HParams, RunConfig
from trainer.models import ModelSpec, build_model, model_spec

EpochCallback = Callable[[int, dict[str, float]], None]

# Training input iterators, kept alive until the process exits: deleting one waits on
# in-flight input work nobody needs (1.2-1.5 s in 2 runs of 3 here; 0.4-0.5 s in every
# forked MirroredStrategy trial, where it used to die with `main`'s locals). Only the
# latest is kept: a process that trains again (tests) lets the one before go.
_KEPT_UNTIL_EXIT: list[Any] = []


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
    precision: precision.Choice
    first_step_seconds: float | None = None  # since process start; None when resumed past the end


class Diverged(ArithmeticError):
    """The loss stopped being finite: the run learnt nothing usable (nothing is exported)."""

    def __init__(self, epoch: int, loss: float):
        super().__init__(f"training diverged at epoch {epoch} (train_loss={loss})")
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


def check_images(spec: ModelSpec, image_shape: list[int], data_dir: str) -> None:
    """Refuse images the model cannot take (too small, or the wrong number of channels).

    Raises:
        records.DatasetError: One line naming the shape and what the model needs.
    """
    if min(image_shape[:2]) < spec.min_image_size:
        raise records.DatasetError(
            f"{data_dir}: image_shape={image_shape}, expected at least "
            f"{spec.min_image_size} pixels per side for model {spec.name}"
        )
    if image_shape[2] not in spec.channels:
        raise records.DatasetError(
            f"{data_dir}: image_shape={image_shape}, model {spec.name} takes "
            f"{' or '.join(map(str, spec.channels))} channel(s)"
        )


def make_optimizer(hparams: HParams) -> keras.optimizers.Optimizer:
    """The optimizer `hparams` names (momentum means something under SGD only)."""
    if hparams.optimizer == "adam":
        return keras.optimizers.Adam(hparams.learning_rate)
    return keras.optimizers.SGD(hparams.learning_rate, momentum=hparams.momentum)


def process_seconds() -> float | None:
    """Seconds since this process started (Linux's /proc; None elsewhere)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return uptime - started_ticks / os.sysconf("SC_CLK_TCK")


def resolve_precision(requested: str) -> precision.Choice:
    """`requested` resolved on this machine (its CPU flags, oneDNN's settings, its GPUs)."""
    return precision.choose(
        requested,
        precision.cpu_flags(),
        distribute.gpu_capabilities(),
        precision.onednn_limit(os.environ),
    )


def evaluation_step(
    model: keras.Model, loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor], element_spec: Any
) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """The validation step: (images, labels) → (summed loss, correct count).

    Traced once for `element_spec` (its batch size unknown), not once more for a split's
    last, partial batch (that second trace cost each process ~40 ms at 32 px here).
    """

    @tf.function(autograph=False, input_signature=list(element_spec))
    def eval_step(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = model(images, training=False)
        correct = tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels)
        return tf.reduce_sum(loss_fn(labels, logits)), tf.reduce_sum(tf.cast(correct, tf.float32))

    return eval_step


def train(hparams: HParams, run: RunConfig, on_epoch: EpochCallback | None = None) -> TrainResult:
    """Train under `run.precision` resolved on this machine; exports stay float32.

    The policy (and whether Grappler rewrites graphs, `distribute.graph_rewrites`) is set
    for the run and restored afterwards.
    """
    choice = resolve_precision(run.precision)
    _log(choice.line)
    keras.mixed_precision.set_global_policy(choice.policy)
    try:
        with distribute.graph_rewrites() as rewrites:
            return _train(hparams, run, choice, rewrites, on_epoch)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def _train(
    hparams: HParams,
    run: RunConfig,
    choice: precision.Choice,
    rewrites: bool,
    on_epoch: EpochCallback | None,
) -> TrainResult:
    """Train the model on a prepared dataset, resuming from the last checkpoint if any.

    Args:
        hparams: Hyperparameters.
        run: Data location, output directories and distribution.
        choice: The resolved precision (its policy is already set).
        rewrites: Whether Grappler rewrites the step graphs (already set).
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
    spec = model_spec(hparams.model)
    check_images(spec, image_shape, run.data)
    num_classes = len(metadata["class_names"])
    tf.random.set_seed(run.seed)
    keras.utils.set_random_seed(run.seed)

    compute_dtype = keras.mixed_precision.global_policy().compute_dtype
    dist_train = strategy.distribute_datasets_from_function(
        data.train_input_fn(run.data, metadata, global_batch, run.seed, compute_dtype)
    )
    iterator = iter(dist_train)
    _KEPT_UNTIL_EXIT[:] = [iterator]
    # tf.data starts reading when a batch is first asked for, and the first batch needs a
    # whole shuffle window (the whole split, at 768 images). So it is asked for now, from
    # another thread, while this one builds the model and traces the step (here: first step
    # 0.15 s sooner, median of 6 alternated runs; epoch 1's input wait 12-16 % -> 1 %).
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="first-batch")
    first_batch = pool.submit(next, iterator)
    pool.shutdown(wait=False)  # its one task still runs
    batches = itertools.chain((pending.result() for pending in [first_batch]), iterator)
    with strategy.scope():
        model = build_model(
            spec, hparams.model_params, hparams.weights, image_shape, num_classes, compute_dtype
        )
        optimizer = make_optimizer(hparams)
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

    # No autograph: the steps have no tensor-dependent Python control flow, and converting
    # them (and Keras' layers) costs start-up time and writes a temporary file per function.
    @tf.function(autograph=False)
    def train_step(images: Any, labels: Any) -> tuple[tf.Tensor, tf.Tensor]:
        loss_sum, correct = strategy.run(step_fn, args=(images, labels))
        return (
            strategy.reduce(tf.distribute.ReduceOp.SUM, loss_sum, axis=None),
            strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None),
        )

    train_step.get_concrete_function(*iterator.element_spec)  # traced while the batch comes

    val_data = data.eval_dataset(
        run.data, metadata, "validation", max(global_batch, 64), compute_dtype
    )

    eval_step = evaluation_step(model, loss_fn, val_data.element_spec)

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
        f"chief + {max(cluster.num_workers, 1) - 1} worker(s), global batch {global_batch}, "
        f"{steps_per_epoch} steps/epoch, epochs {start_epoch + 1}..{hparams.epochs}, "
        f"{choice.policy}, graph rewrites {'on' if rewrites else 'off (CPU only)'}, op threads "
        f"{tf.config.threading.get_intra_op_parallelism_threads() or 'auto'}/"
        f"{tf.config.threading.get_inter_op_parallelism_threads() or 'auto'} (intra/inter)"
    )
    first_step: float | None = None
    # Long epochs also show progress within the epoch (every quarter).
    progress_every = steps_per_epoch // 4 if steps_per_epoch >= 40 else 0
    for epoch in range(start_epoch + 1, hparams.epochs + 1):
        started = time.perf_counter()
        loss_total, correct_total, input_wait = 0.0, 0.0, 0.0
        for step in range(1, steps_per_epoch + 1):
            asked = time.perf_counter()
            images, labels = next(batches)
            input_wait += time.perf_counter() - asked  # the step before has finished: pure wait
            loss_sum, correct = train_step(images, labels)
            loss_total += float(loss_sum)
            correct_total += float(correct)
            if first_step is None:
                first_step = process_seconds()
                if first_step is not None:
                    _log(f"first step done {first_step:.2f}s after the process started")
            if progress_every and step % progress_every == 0 and step < steps_per_epoch:
                _log(
                    f"  step {step}/{steps_per_epoch} of epoch {epoch}: "
                    f"train_loss={loss_total / (step * global_batch):.4f}"
                )
        seen = steps_per_epoch * global_batch
        train_seconds = time.perf_counter() - started
        metrics = {
            "epoch": float(epoch),
            "train_loss": loss_total / seen,
            "train_accuracy": correct_total / seen,
            **validate(),
            "seconds": time.perf_counter() - started,
            "images_per_second": seen / train_seconds,
            "input_wait": input_wait / train_seconds,
        }
        if not all(math.isfinite(metrics[k]) for k in ("train_loss", "val_loss")):
            raise Diverged(epoch, metrics["train_loss"])
        history.append(metrics)
        epoch_counter.assign(epoch)
        if manager:
            manager.save(checkpoint_number=epoch)
        if summary:
            with summary.as_default(step=epoch):
                for key in (
                    "train_loss",
                    "train_accuracy",
                    "val_loss",
                    "val_accuracy",
                    "images_per_second",
                ):
                    tf.summary.scalar(key, metrics[key])
            summary.flush()
        _log(
            f"epoch {epoch}/{hparams.epochs}: train_loss={metrics['train_loss']:.4f} "
            f"train_accuracy={metrics['train_accuracy']:.4f} val_loss={metrics['val_loss']:.4f} "
            f"val_accuracy={metrics['val_accuracy']:.4f} "
            f"({metrics['seconds']:.1f}s, {metrics['images_per_second']:.0f} img/s, "
            f"input wait {metrics['input_wait']:.0%})"
        )
        if on_epoch:
            on_epoch(epoch, metrics)

    if not history:  # resumed after the last epoch: measure the restored model once, and say it
        history.append({"epoch": float(hparams.epochs), **validate()})
        _log(f"already past epoch {hparams.epochs}: measured the restored model once")
        if on_epoch:  # a rerun trial reports its measurement instead of reporting nothing
            on_epoch(hparams.epochs, history[-1])
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
        precision=choice,
        first_step_seconds=first_step,
    )
