"""The trainer's data and model stages, from images (today's path) or from a feature cache.

`trainer.train` runs data → model → loop → export. From images, the data stage reads
the prepared dataset and the model stage builds the whole model. From a feature cache
(`--features`, an entry whose keys all match this run), the data stage reads the
frozen prefix's outputs, sharded, shuffled and batched as the images would be, and the
model stage builds only what trains: for a frozen backbone (trainable_blocks=0) the
head alone, the backbone being built only for the export, never traced; for a partial
depth, the model's layers above the boundary. Either way the export stage gets the
whole model (`Built.whole`), built once, when it is first asked for.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import itertools
import sys
from collections.abc import Callable, Iterator, Sequence
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
        whole: The whole model (preprocessing, backbone, trained layers) holding the
            trained weights: float32, undistributed (saving it needs no collective),
            built on the first call and the same object on every later one.
        depth: The frozen depth of the feature entry trained on (0: from images).
    """

    model: keras.Model
    whole: Callable[[], keras.Model]
    depth: int = 0


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


@contextlib.contextmanager
def float32_build() -> Iterator[None]:
    """Build in float32 whatever the run's policy (the export's dtype), outside any strategy."""
    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        with tf.distribute.get_strategy().scope():  # the default strategy: plain variables
            yield
    finally:
        keras.mixed_precision.set_global_policy(policy)


def _copy_of(
    trained: keras.Model, spec: ModelSpec, hparams: HParams, image_shape: Any, num_classes: int
) -> Callable[[], keras.Model]:
    """A fresh whole model holding `trained`'s weights, built when first asked for."""

    @functools.cache
    def whole() -> keras.Model:
        with float32_build():  # no pretrained weights to load: the trained ones replace them all
            model = build_model(spec, hparams.model_params, "none", image_shape, num_classes)
        model.set_weights(trained.get_weights())
        return model

    return whole


def assemble(
    spec: ModelSpec,
    hparams: HParams,
    image_shape: Sequence[int],
    num_classes: int,
    seed: int,
    depth: int,
    trained: Sequence[np.ndarray],
) -> keras.Model:
    """The whole model: its pretrained part, and `trained` for what trains above `depth`.

    Seeded with the run's `seed` first, as the run and `python -m trainer.features` build
    it, so a random backbone (`--weights none`) is the one the features came from.
    Float32, undistributed; `trained` is the weights of `frozen.trainable_part` at `depth`.
    """
    with float32_build():
        keras.utils.set_random_seed(seed)
        model = build_model(
            spec, hparams.model_params, hparams.weights, image_shape, num_classes, "float32"
        )
        frozen.trainable_part(model, spec, depth, "float32").set_weights(list(trained))
    return model


def whole_model(
    spec: ModelSpec, hparams: HParams, image_shape: Any, num_classes: int, dtype: str
) -> Built:
    """The whole model, trained on images (build it in the strategy's scope)."""
    model = build_model(
        spec, hparams.model_params, hparams.weights, image_shape, num_classes, dtype
    )
    return Built(model, _copy_of(model, spec, hparams, image_shape, num_classes))


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

    A frozen backbone's trial builds the head alone; the whole model (its pretrained
    weights, the trained head) is built once, when the export asks for it (`assemble`).
    """
    if entry.depth < spec.blocks:
        model = build_model(
            spec, hparams.model_params, hparams.weights, image_shape, num_classes, dtype
        )
        trained = frozen.trainable_part(model, spec, entry.depth, dtype)
        copy = _copy_of(model, spec, hparams, image_shape, num_classes)
        return Built(trained, copy, entry.depth)
    units = spec.all_hyperparameters()["num_units"].default
    head = backbones.head_model(
        entry.metadata["feature_shape"][-1],
        num_classes,
        num_units=int(hparams.model_params.get("num_units", units)),
        input_dtype=dtype,
    )

    @functools.cache
    def whole() -> keras.Model:
        weights = head.get_weights()
        return assemble(spec, hparams, image_shape, num_classes, seed, entry.depth, weights)

    return Built(head, whole, entry.depth)
