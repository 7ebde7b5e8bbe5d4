"""The one training loop: a custom loop serving MirroredStrategy and MultiWorkerMirroredStrategy.

Keras 3 `fit` fails under MultiWorkerMirroredStrategy (keras-team/keras#20585),
so training is `strategy.run` over a distributed dataset with the optimizer's
`apply_gradients` (which all-reduces gradients across replicas).
"""

from __future__ import annotations

import dataclasses
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

from trainer import (
    contract,
    distribute,
    feature_keys,
    part_cost,
    precision,
    records,
    stages,
    summaries,
)
from trainer.config import HParams, RunConfig
from trainer.contract import EXPLODED_LOSS_FACTOR, exploded
from trainer.models import ModelSpec, model_spec

EpochCallback = Callable[[int, dict[str, float]], None]


@dataclasses.dataclass
class TrainResult:
    """What a run produced.

    `whole_model()` is the whole model holding the trained weights (float32, undistributed,
    built on its first call: a worker that does not export never builds it);
    `trained_part()` the weights of what trained (the whole model's, from images).
    """

    history: list[dict[str, float]]
    whole_model: Callable[[], keras.Model]
    trained_part: Callable[[], list[np.ndarray]]
    metadata: dict[str, Any]
    replicas_in_sync: int  # devices training in step (TF's name): all processes' together
    training_tasks: int  # processes that train: chief + workers (1 without a cluster)
    is_chief: bool
    start_epoch: int
    strategy: str
    precision: precision.Choice
    first_step_seconds: float | None = None  # since process start; None when resumed past the end
    source: str = "images"  # or the feature cache entry trained on
    frozen_depth: int = 0  # the entry's frozen depth (0: trained on images)
    cache_keys: dict[str, Any] = dataclasses.field(default_factory=dict)  # the entry's keys
    trained_model: keras.Model | None = None  # what trained (on a cache: the part above it)
    frozen_part_cost: dict[str, Any] = dataclasses.field(default_factory=dict)  # the entry's

    @property
    def weights(self) -> list[np.ndarray]:
        """The whole model's weights (builds it if it was not yet)."""
        return [np.asarray(w) for w in self.whole_model().get_weights()]


class Diverged(ArithmeticError):
    """The loss stopped being finite or exploded: the run learnt nothing usable (no export)."""

    def __init__(self, epoch: int, loss: float, what: str = "train_loss", why: str = ""):
        super().__init__(f"training diverged at epoch {epoch} ({what}={loss:.4g}{why})")
        self.epoch = epoch
        self.loss = loss


def check_exploded(history: list[dict[str, float]], num_classes: int) -> None:
    """Refuse a run whose last validation loss exploded (`contract.exploded`).

    A loss finite at every epoch can still be far beyond a uniform guess's (a from-scratch
    network whose BatchNorm statistics never settled): its predictions are noise, and the
    same parameters retrained in the final job diverge.

    Raises:
        Diverged: The last epoch's `val_loss` is over `EXPLODED_LOSS_FACTOR` chance losses.
    """
    last = history[-1] if history else {}
    loss = last.get("val_loss")
    if loss is not None and exploded(loss, num_classes):
        chance = math.log(max(num_classes, 2))
        why = f", over {EXPLODED_LOSS_FACTOR:g}x the chance loss {chance:.3g}"
        raise Diverged(int(last.get("epoch", 0)), loss, "val_loss", why)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _checkpoint_dir_for(run: RunConfig, is_chief: bool, task_id: int) -> str | None:
    """Chief checkpoints to the real dir; other workers to a throwaway dir (TF's MWMS pattern)."""
    if not run.checkpoint_dir:
        return None
    if is_chief:
        return run.checkpoint_dir
    name = f"{contract.WORKER_CHECKPOINT_PREFIX}{task_id}-{uuid.uuid4().hex[:8]}"
    return posixpath.join(run.checkpoint_dir, name)


def check_image_shape(spec: ModelSpec, image_shape: list[int], data_dir: str) -> None:
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


def _data_and_model(
    hparams: HParams,
    run: RunConfig,
    spec: ModelSpec,
    metadata: dict[str, Any],
    entry: stages.Entry | None,
    strategy: tf.distribute.Strategy,
    global_batch: int,
) -> tuple[stages.Data, stages.Built]:
    """The batches and the model to train (the model built in `strategy`'s scope).

    Without a feature `entry`, the images and the whole model; with a matching one, its
    features and only what trains above its depth.
    """
    image_shape = metadata["image_shape"]
    num_classes = len(metadata["class_names"])
    dtype = keras.mixed_precision.global_policy().compute_dtype
    if entry is None:
        batches = stages.image_data(strategy, run, metadata, global_batch, dtype)
    else:
        batches = stages.feature_data(strategy, run, entry, global_batch, dtype)
    with strategy.scope():
        if entry is None:
            built = stages.whole_model(spec, hparams, image_shape, num_classes, dtype)
        else:
            built = stages.cached_model(
                spec, hparams, entry, image_shape, num_classes, dtype, run.seed
            )
    return batches, built


def _train(
    hparams: HParams,
    run: RunConfig,
    choice: precision.Choice,
    rewrites: bool,
    on_epoch: EpochCallback | None,
) -> TrainResult:
    """Train on a prepared dataset (or its feature cache), resuming from a checkpoint if any.

    The stages: data (images, or a matching feature entry's features), model (the whole
    model, or only what trains above the cached depth), loop, and the whole model for the
    export, built when first asked for (`trainer.stages`).

    Args:
        hparams: Hyperparameters.
        run: Data location, output directories and distribution.
        choice: The resolved precision (its policy is already set).
        rewrites: Whether Grappler rewrites the step graphs (already set).
        on_epoch: Called on every worker after each epoch with (epoch, metrics).

    Returns:
        History of per-epoch metrics and the trained model (`TrainResult`).
    """
    metadata = records.read_metadata(run.data)
    strategy, cluster = distribute.make_strategy(run.distribution)
    global_batch = hparams.batch_size * strategy.num_replicas_in_sync
    spec = model_spec(hparams.model)
    check_image_shape(spec, metadata["image_shape"], run.data)
    tf.random.set_seed(run.seed)
    keras.utils.set_random_seed(run.seed)

    entry = stages.find_entry(hparams, run, spec, metadata, choice.policy)
    batches, built = _data_and_model(hparams, run, spec, metadata, entry, strategy, global_batch)
    steps_per_epoch = max(1, int(metadata["splits"]["train"]["count"]) // global_batch)
    loop = _Loop(hparams, run, strategy, cluster, global_batch, steps_per_epoch)
    history, start_epoch, first_step = loop.fit(built.model, batches, choice, rewrites, on_epoch)
    check_exploded(history, len(metadata["class_names"]))
    return TrainResult(
        history=history,
        whole_model=built.whole,
        trained_part=built.model.get_weights,
        metadata=metadata,
        replicas_in_sync=strategy.num_replicas_in_sync,
        training_tasks=max(cluster.num_training_tasks, 1),
        is_chief=cluster.is_chief,
        start_epoch=start_epoch,
        strategy=distribute.strategy_name(strategy),
        precision=choice,
        first_step_seconds=first_step,
        source=batches.source,
        frozen_depth=built.depth,
        cache_keys=(
            {k: entry.metadata[k] for k in feature_keys.KEY_FIELDS if k in entry.metadata}
            if entry
            else {}
        ),
        trained_model=built.model,
        frozen_part_cost=dict(entry.metadata.get(part_cost.STORED_KEY) or {}) if entry else {},
    )


@dataclasses.dataclass
class _Checkpointed:
    """The loop's state that checkpoints hold, restored if a checkpoint exists."""

    optimizer: keras.optimizers.Optimizer
    epoch_counter: tf.Variable
    checkpoint: tf.train.Checkpoint
    manager: tf.train.CheckpointManager | None
    write_dir: str | None
    start_epoch: int


@dataclasses.dataclass
class _Loop:
    """The loop stage: checkpoints, the train and validation steps, epochs, reports."""

    hparams: HParams
    run: RunConfig
    strategy: tf.distribute.Strategy
    cluster: Any
    global_batch: int
    steps_per_epoch: int

    def fit(
        self,
        model: keras.Model,
        batches: stages.Data,
        choice: precision.Choice,
        rewrites: bool,
        on_epoch: EpochCallback | None,
    ) -> tuple[list[dict[str, float]], int, float | None]:
        """Train `model` on `batches`; (history, epoch resumed after, first step's time)."""
        hparams, run, cluster = self.hparams, self.run, self.cluster
        state = self._restore(model)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        train_step = self._train_step(model, state.optimizer, loss_fn)
        train_step.get_concrete_function(*batches.element_spec)  # traced while the batch comes
        validate = _validator(
            evaluation_step(model, loss_fn, batches.validation.element_spec), batches.validation
        )
        summary = (
            summaries.open_writer(run.tensorboard_dir, hparams)
            if run.tensorboard_dir and cluster.is_chief
            else None
        )
        history: list[dict[str, float]] = []
        self._log_start(state.start_epoch, choice, rewrites, batches.source)
        first_step: float | None = None
        for epoch in range(state.start_epoch + 1, hparams.epochs + 1):
            started = time.perf_counter()
            trained, rates, first_step = self._epoch(epoch, train_step, batches, first_step)
            seconds = {"seconds": time.perf_counter() - started}  # validation included
            metrics = {**trained, **validate(), **seconds, **rates}
            for name in ("train_loss", "val_loss"):
                if not math.isfinite(metrics[name]):
                    raise Diverged(epoch, metrics[name], name)
            history.append(metrics)
            self._record(epoch, metrics, state, summary)
            if on_epoch:
                on_epoch(epoch, metrics)

        if not history:  # resumed after the last epoch: measure the restored model once, and say it
            history.append({"epoch": float(hparams.epochs), **validate()})
            _log(f"already past epoch {hparams.epochs}: measured the restored model once")
            if on_epoch:  # a rerun trial reports its measurement instead of reporting nothing
                on_epoch(hparams.epochs, history[-1])
        if state.write_dir and not cluster.is_chief and tf.io.gfile.exists(state.write_dir):
            tf.io.gfile.rmtree(state.write_dir)
        return history, state.start_epoch, first_step

    def _restore(self, model: keras.Model) -> _Checkpointed:
        """The optimizer and epoch counter, from the latest checkpoint if there is one."""
        run, cluster = self.run, self.cluster
        with self.strategy.scope():
            optimizer = make_optimizer(self.hparams)
            optimizer.build(model.trainable_variables)
            epoch_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
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
        return _Checkpointed(optimizer, epoch_counter, checkpoint, manager, write_dir, start_epoch)

    def _train_step(
        self, model: keras.Model, optimizer: keras.optimizers.Optimizer, loss_fn: Any
    ) -> Any:
        """The distributed train step: (images, labels) → (summed loss, correct count)."""
        strategy, global_batch = self.strategy, self.global_batch

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

        return train_step

    def _log_start(
        self, start_epoch: int, choice: precision.Choice, rewrites: bool, source: str
    ) -> None:
        strategy, cluster = self.strategy, self.cluster
        _log(
            f"training: {distribute.strategy_name(strategy)}, "
            f"{strategy.num_replicas_in_sync} replica(s) in sync, "
            f"chief + {max(cluster.num_training_tasks, 1) - 1} worker(s), "
            f"global batch {self.global_batch}, "
            f"{self.steps_per_epoch} steps/epoch, "
            f"epochs {start_epoch + 1}..{self.hparams.epochs}, "
            f"{choice.policy}, graph rewrites {'on' if rewrites else 'off (CPU only)'}, op threads "
            f"{tf.config.threading.get_intra_op_parallelism_threads() or 'auto'}/"
            f"{tf.config.threading.get_inter_op_parallelism_threads() or 'auto'} (intra/inter), "
            f"on {source}"
        )

    def _epoch(
        self, epoch: int, train_step: Any, batches: stages.Data, first_step: float | None
    ) -> tuple[dict[str, float], dict[str, float], float | None]:
        """One epoch's training steps: (its training metrics, its rates, the first step's time)."""
        steps_per_epoch, global_batch = self.steps_per_epoch, self.global_batch
        # Long epochs also show progress within the epoch (every quarter).
        progress_every = steps_per_epoch // 4 if steps_per_epoch >= 40 else 0
        started = time.perf_counter()
        loss_total, correct_total, input_wait = 0.0, 0.0, 0.0
        for step in range(1, steps_per_epoch + 1):
            asked = time.perf_counter()
            images, labels = next(batches.batches)
            input_wait += time.perf_counter() - asked  # the step before has finished
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
        trained = {
            "epoch": float(epoch),
            "train_loss": loss_total / seen,
            "train_accuracy": correct_total / seen,
        }
        rates = {
            "images_per_second": seen / train_seconds,
            "input_wait": input_wait / train_seconds,
        }
        return trained, rates, first_step

    def _record(
        self, epoch: int, metrics: dict[str, float], state: _Checkpointed, summary: Any
    ) -> None:
        """Checkpoint the epoch, write its TensorBoard scalars (chief) and its log line."""
        state.epoch_counter.assign(epoch)
        if state.manager:
            state.manager.save(checkpoint_number=epoch)
        if summary:
            summaries.write_epoch(summary, epoch, metrics)
        _log(
            f"epoch {epoch}/{self.hparams.epochs}: train_loss={metrics['train_loss']:.4f} "
            f"train_accuracy={metrics['train_accuracy']:.4f} "
            f"val_loss={metrics['val_loss']:.4f} "
            f"val_accuracy={metrics['val_accuracy']:.4f} "
            f"({metrics['seconds']:.1f}s, {metrics['images_per_second']:.0f} img/s, "
            f"input wait {metrics['input_wait']:.0%})"
        )


def _validator(eval_step: Any, val_data: Any) -> Callable[[], dict[str, float]]:
    """The validation pass (every worker the whole split, locally: the same numbers everywhere)."""

    def validate() -> dict[str, float]:
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

    return validate
