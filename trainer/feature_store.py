"""Feature cache entries on disk: their keys, lookup, atomic writing and tf.data readers.

The format and the keys are `trainer.feature_keys`'s (TF-free); this module reads and
writes them. Shards mirror the dataset's shards (same names, same record order), so the
readers here shard and shuffle the features as `trainer.data` does the images.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import posixpath
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import tensorflow as tf

from trainer import data, feature_keys, records, staging

FEATURES = {
    "features": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def weights_fingerprint(weights: str, seed: int) -> str:
    """`imagenet` by name, `none` by the seed of its random backbone, a file by its sha256."""
    if weights == "imagenet":
        return weights
    if weights == "none":
        return f"none:seed={int(seed)}"
    return "sha256:" + records.file_digest(weights)["sha256"]


PREPARED_AT = "prepared_at"  # when, not what: the same data prepared again is the same dataset


def dataset_fingerprint(data_dir: str) -> str:
    """The sha256 of the dataset's metadata.json (every shard's sha256) less `prepared_at`.

    Every run prepares the dataset afresh into its own folder: with the time of preparation
    in the key, a rerun on the same data could never reuse a cache.
    """
    with tf.io.gfile.GFile(posixpath.join(data_dir, records.METADATA_FILE)) as f:
        metadata = json.load(f)
    metadata.pop(PREPARED_AT, None)
    canonical = json.dumps(metadata, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def expected_keys(
    model: str,
    weights: str,
    image_shape: Sequence[int],
    policy: str,
    depth: int,
    data_dir: str,
    seed: int,
    weights_sha: str | None = None,
) -> dict[str, Any]:
    """The keys an entry must hold to be used by a run with these settings."""
    return {
        "model": model,
        "weights": weights,
        "weights_fingerprint": weights_sha or weights_fingerprint(weights, seed),
        "image_shape": [int(d) for d in image_shape],
        "precision": policy,
        "frozen_depth": int(depth),
        "dataset_fingerprint": dataset_fingerprint(data_dir),
    }


def entry_dir(features_dir: str, model: str, depth: int) -> str:
    """The folder of the entry for `model` at frozen `depth`."""
    return posixpath.join(features_dir, feature_keys.entry_name(model, depth))


def read_entry(path: str) -> dict[str, Any] | None:
    """A complete entry's metadata (None: no complete entry there, or another format)."""
    meta_path = posixpath.join(path, feature_keys.METADATA_FILE)
    if not tf.io.gfile.exists(meta_path):
        return None
    with tf.io.gfile.GFile(meta_path) as f:
        metadata: dict[str, Any] = json.load(f)
    if metadata.get("format_version") != feature_keys.FORMAT_VERSION:
        return None
    return metadata


def lookup(path: str, expected: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """(metadata, "") of the entry at `path` when every key matches, else (None, why not)."""
    metadata = read_entry(path)
    if metadata is None:
        return None, f"no complete entry at {path}"
    differ = feature_keys.mismatches(expected, metadata)
    if differ:
        return None, f"{path} has other keys ({'; '.join(differ)})"
    return metadata, ""


@contextlib.contextmanager
def staged_entry(path: str) -> Iterator[str]:
    """A folder to write an entry into that becomes `path` only when the block succeeds.

    metadata.json is the completeness marker, written last.
    """
    with staging.staged_directory(path, markers=(feature_keys.METADATA_FILE,)) as stage:
        yield stage


def encode(features: Any, label: int) -> bytes:
    """One example: float32 feature values (raw bytes) and the label."""
    feature = {
        "features": tf.train.Feature(bytes_list=tf.train.BytesList(value=[features.tobytes()])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString(deterministic=True)


def write_metadata(stage: str, metadata: dict[str, Any]) -> None:
    """Write the entry's metadata.json (the last file of a complete entry)."""
    path = posixpath.join(stage, feature_keys.METADATA_FILE)
    with tf.io.gfile.GFile(path, "w") as f:
        json.dump(
            {"format_version": feature_keys.FORMAT_VERSION, **metadata}, f, indent=2, sort_keys=True
        )


def decode_fn(shape: Sequence[int]) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """A tf.data map function: serialized example → (float32 features, int32 label)."""
    dims = [int(d) for d in shape]

    @tf.autograph.experimental.do_not_convert
    def decode(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        parsed = tf.io.parse_single_example(serialized, FEATURES)
        values = tf.reshape(tf.io.decode_raw(parsed["features"], tf.float32), dims)
        return values, tf.cast(parsed["label"], tf.int32)

    return decode


def _batches(
    dataset: tf.data.Dataset,
    metadata: dict[str, Any],
    split: str,
    dtype: str,
    batch: Callable[[tf.data.Dataset], tf.data.Dataset],
) -> tf.data.Dataset:
    """Features cast to `dtype` (exact: they were computed in it), cached when they fit."""

    @tf.autograph.experimental.do_not_convert
    def cast(values: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.cast(values, dtype), labels

    dataset = dataset.map(cast, data.AUTOTUNE)
    size = int(metadata["splits"][split]["count"]) * int(metadata["feature_bytes"])
    if size <= data.CACHE_LIMIT_BYTES:
        dataset = dataset.cache()
    return batch(dataset).prefetch(data.AUTOTUNE)


def train_input_fn(
    path: str, metadata: dict[str, Any], global_batch_size: int, seed: int, dtype: str
) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """`trainer.data.train_input_fn` over an entry: same sharding, shuffle and batching."""
    decode = decode_fn(metadata["feature_shape"])

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = data.read_split(
            path,
            metadata,
            "train",
            num_pipelines=context.num_input_pipelines,
            pipeline_id=context.input_pipeline_id,
            decode=decode,
        )
        per_replica = context.get_per_replica_batch_size(global_batch_size)
        return _batches(
            dataset,
            metadata,
            "train",
            dtype,
            lambda d: (
                d.shuffle(data.SHUFFLE_BUFFER, seed=seed + context.input_pipeline_id)
                .repeat()
                .batch(per_replica, drop_remainder=True)
            ),
        )

    return dataset_fn


def eval_dataset(
    path: str, metadata: dict[str, Any], split: str, batch_size: int, dtype: str
) -> tf.data.Dataset:
    """A whole split's features, unsharded and in order, in batches."""
    decode = decode_fn(metadata["feature_shape"])
    dataset = data.read_split(path, metadata, split, decode=decode)
    return _batches(dataset, metadata, split, dtype, lambda d: d.batch(batch_size))
