"""The trainer's data and model stages, from images (today's path) or from a feature cache.

`trainer.train` runs data → model → loop → export. From images, the data stage reads
the prepared dataset and the model stage builds the whole model. From a feature cache
(`--features`, an entry whose keys all match this run), the data stage reads the
frozen prefix's outputs, sharded, shuffled and batched as the images would be, and the
model stage builds only what trains: for a frozen backbone (trainable_blocks=0) the
head alone, the backbone being built only for the export, never traced; for a partial
depth, the model's layers above the boundary. Either way the export stage gets the
whole model's weights (`Built.full_weights`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from trainer import data, feature_keys, feature_store, frozen
from trainer.config import HParams, RunConfig
from trainer.models import ModelSpec, backbones, build_model

# Training input iterators, kept alive until the process exits: deleting one waits on
# in-flight input work nobody needs (1.2-1.5 s in 2 runs of 3 here; 0.4-0.5 s in every
# forked MirroredStrategy trial, where it used to die with `main`'s locals). Only the
# latest is kept: a process that trains again (tests) lets the one before go.
_KEPT_UNTIL_EXIT: list[Any] = []


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclasses.dataclass
class Data:
    """The data stage's result.

    Attributes:
        batches: Distributed training batches (inputs, labels), forever.
        element_spec: The distributed iterator's element spec (the train step's signature).
        validation: The whole validation split, in batches, on every worker.
        source: `images` or the feature entry's folder.
    """

    batches: Iterator[Any]
    element_spec: Any
    validation: tf.data.Dataset
    source: str


@dataclasses.dataclass
class Built:
    """The model stage's result.

    Attributes:
        model: What the train and evaluation steps call (inputs → logits).
        full_weights: The whole model's weights (preprocessing, backbone, trained layers),
            as the export builds it.
    """

    model: keras.Model
    full_weights: Callable[[], list[np.ndarray]]


@dataclasses.dataclass(frozen=True)
class Entry:
    """A feature cache entry this run can use: its folder and metadata."""

    path: str
    metadata: dict[str, Any]

    @property
    def depth(self) -> int:
        """Frozen blocks of the backbone the entry's features come out of."""
        return int(self.metadata["frozen_depth"])


def find_entry(
    hparams: HParams, run: RunConfig, spec: ModelSpec, metadata: dict[str, Any], policy: str
) -> Entry | None:
    """The feature entry matching this run, or None (with one log line saying why not)."""
    if not run.features:
        return None
    trainable = int(hparams.model_params.get("trainable_blocks", spec.blocks))
    if not feature_keys.is_cacheable(spec.blocks, trainable):
        why = (
            f"model {spec.name} declares no frozen blocks"
            if not spec.blocks
            else f"trainable_blocks={trainable}: the whole network trains"
        )
        _log(f"features: not used ({why}); training from images")
        return None
    depth = feature_keys.frozen_depth(spec.blocks, trainable)
    path = feature_store.entry_dir(run.features, spec.name, depth)
    expected = feature_store.expected_keys(
        spec.name, hparams.weights, metadata["image_shape"], policy, depth, run.data, run.seed
    )
    found, why = feature_store.lookup(path, expected)
    if found is None:
        _log(f"features: not used ({why}); training from images")
        return None
    _log(f"features: training on {path} (frozen depth {depth}, trainable_blocks={trainable})")
    return Entry(path, found)


def _first_batch_early(dist_train: Any) -> tuple[Iterator[Any], Any]:
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
    return batches, iterator.element_spec


def image_data(
    strategy: tf.distribute.Strategy,
    run: RunConfig,
    metadata: dict[str, Any],
    global_batch: int,
    dtype: str,
) -> Data:
    """Training and validation batches of images in [0, 1] as `dtype`."""
    dist_train = strategy.distribute_datasets_from_function(
        data.train_input_fn(run.data, metadata, global_batch, run.seed, dtype)
    )
    batches, element_spec = _first_batch_early(dist_train)
    validation = data.eval_dataset(run.data, metadata, "validation", max(global_batch, 64), dtype)
    return Data(batches, element_spec, validation, "images")


def feature_data(
    strategy: tf.distribute.Strategy, run: RunConfig, entry: Entry, global_batch: int, dtype: str
) -> Data:
    """Training and validation batches of an entry's features, cast to `dtype`."""
    dist_train = strategy.distribute_datasets_from_function(
        feature_store.train_input_fn(entry.path, entry.metadata, global_batch, run.seed, dtype)
    )
    batches, element_spec = _first_batch_early(dist_train)
    validation = feature_store.eval_dataset(
        entry.path, entry.metadata, "validation", max(global_batch, 64), dtype
    )
    return Data(batches, element_spec, validation, entry.path)


def _weights_of(model: keras.Model) -> Callable[[], list[np.ndarray]]:
    return lambda: [np.asarray(w) for w in model.get_weights()]


def whole_model(
    spec: ModelSpec, hparams: HParams, image_shape: Any, num_classes: int, dtype: str
) -> Built:
    """The whole model, trained on images (build it in the strategy's scope)."""
    model = build_model(
        spec, hparams.model_params, hparams.weights, image_shape, num_classes, dtype
    )
    return Built(model, _weights_of(model))


def cached_model(
    spec: ModelSpec,
    hparams: HParams,
    entry: Entry,
    image_shape: Any,
    num_classes: int,
    dtype: str,
    seed: int,
) -> Built:
    """Only what trains above the entry's depth (build it in the strategy's scope).

    A frozen backbone's trial builds the head alone, and the whole model (with its
    pretrained weights) only when the export asks for its weights: seeded with the run's
    `seed` first, as the run and `python -m trainer.features` build it, so a random
    backbone (`--weights none`) is the one the features came from.
    """
    if entry.depth < spec.blocks:
        model = build_model(
            spec, hparams.model_params, hparams.weights, image_shape, num_classes, dtype
        )
        return Built(frozen.trainable_part(model, spec, entry.depth, dtype), _weights_of(model))
    units = spec.all_hyperparameters()["num_units"].default
    head = backbones.head_model(
        entry.metadata["feature_shape"][-1],
        num_classes,
        num_units=int(hparams.model_params.get("num_units", units)),
        input_dtype=dtype,
    )

    def full_weights() -> list[np.ndarray]:
        keras.utils.set_random_seed(seed)
        with tf.distribute.get_strategy().scope():  # the default strategy: plain variables
            model = build_model(
                spec, hparams.model_params, hparams.weights, image_shape, num_classes, "float32"
            )
        for name in frozen.HEAD_LAYERS:
            model.get_layer(name).set_weights(head.get_layer(name).get_weights())
        return [np.asarray(w) for w in model.get_weights()]

    return Built(head, full_weights)
