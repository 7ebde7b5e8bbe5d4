"""The prepared-dataset format: TFRecord shards of decoded images + `metadata.json`.

Layout of a prepared dataset directory::

    metadata.json
    train-00000-of-00004.tfrecord ...
    validation-00000-of-00002.tfrecord ...
    test-00000-of-00002.tfrecord ...

Each record is a `tf.train.Example` with `image`, `label` (int64) and `source` (the
original file name, for provenance). `image` is the already resized image, stored as
`metadata.json`'s `record_format` says: `raw` (uint8 bytes of an H×W×C array, nothing to
decode) or `encoded` (JPEG bytes, decoded by the reader's parallel map). A dataset
prepared before `record_format` existed is `raw`. `metadata.json` holds the format
version, class names, image shape, record format, counts per split and per class, and
every shard's file name, record count, size and sha256.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from trainer.contract import ENCODED, RAW

FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"
SPLITS = ("train", "validation", "test")

FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}
SOURCE_FEATURE = {"source": tf.io.FixedLenFeature([], tf.string, default_value="")}


class DatasetError(ValueError):
    """A prepared dataset that is missing, of another format version, or unusable."""


def shard_name(split: str, index: int, count: int) -> str:
    """File name of one shard, e.g. ``train-00001-of-00004.tfrecord``."""
    return f"{split}-{index:05d}-of-{count:05d}.tfrecord"


def record_format(metadata: dict[str, Any]) -> str:
    """How a prepared dataset stores its images (`raw` when its metadata predates the choice)."""
    return str(metadata.get("record_format", RAW))


def encode_example(image: np.ndarray | bytes, label: int, source: str = "") -> bytes:
    """Serialize one image and its label: a decoded uint8 array (raw) or encoded bytes."""
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3:
            raise ValueError(f"image must be an H×W×C uint8 array, got {image.dtype} {image.shape}")
        image = image.tobytes()
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
        "source": tf.train.Feature(bytes_list=tf.train.BytesList(value=[source.encode()])),
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    # Deterministic: map fields are otherwise serialized in a per-process hash order,
    # and equal inputs must give byte-identical shards.
    return example.SerializeToString(deterministic=True)


def write_shards(
    out_dir: str,
    split: str,
    examples: Sequence[tuple[np.ndarray, int, str]],
    num_shards: int,
) -> list[dict[str, Any]]:
    """Write examples round-robin into `num_shards` files; return their descriptions.

    Args:
        out_dir: Directory to write into (local or gs://).
        split: Split name, used in the file names.
        examples: (image, label, source) tuples, in the order they are written.
        num_shards: Number of files; each gets every num_shards-th example.

    Returns:
        One dict per shard: ``file``, ``count``, ``size``, ``sha256``.
    """
    num_shards = max(1, min(num_shards, len(examples)))
    tf.io.gfile.makedirs(out_dir)
    shards = []
    for index in range(num_shards):
        name = shard_name(split, index, num_shards)
        path = posixpath.join(out_dir, name)
        count = 0
        with tf.io.TFRecordWriter(path) as writer:
            for image, label, source in examples[index::num_shards]:
                writer.write(encode_example(image, label, source))
                count += 1
        shards.append({"file": name, "count": count, **file_digest(path)})
    return shards


def file_digest(path: str) -> dict[str, Any]:
    """Size in bytes and sha256 of a file (local or gs://)."""
    digest = hashlib.sha256()
    size = 0
    with tf.io.gfile.GFile(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


def split_summary(labels: Iterable[int], class_names: Sequence[str]) -> dict[str, Any]:
    """Count and per-class counts of one split's labels."""
    counts = np.bincount(np.asarray(list(labels), dtype=np.int64), minlength=len(class_names))
    return {
        "count": int(counts.sum()),
        "per_class": {name: int(n) for name, n in zip(class_names, counts, strict=True)},
    }


def read_metadata(data_dir: str) -> dict[str, Any]:
    """Load and check `metadata.json` of a prepared dataset.

    Raises:
        DatasetError: No metadata file (not a prepared dataset) or another format version.
    """
    path = posixpath.join(data_dir, METADATA_FILE)
    if not tf.io.gfile.exists(path):
        raise DatasetError(f"{data_dir}: not a prepared dataset ({METADATA_FILE} not found)")
    with tf.io.gfile.GFile(path) as f:
        metadata: dict[str, Any] = json.load(f)
    if metadata.get("format_version") != FORMAT_VERSION:
        raise DatasetError(
            f"{path}: format_version={metadata.get('format_version')}, expected {FORMAT_VERSION}"
        )
    return metadata


def write_metadata(out_dir: str, metadata: dict[str, Any]) -> str:
    """Write `metadata.json` (sorted keys, so equal inputs give equal bytes)."""
    path = posixpath.join(out_dir, METADATA_FILE)
    with tf.io.gfile.GFile(path, "w") as f:
        json.dump({"format_version": FORMAT_VERSION, **metadata}, f, indent=2, sort_keys=True)
    return path


def shard_paths(data_dir: str, metadata: dict[str, Any], split: str) -> list[str]:
    """Full paths of a split's shard files, in order."""
    return [posixpath.join(data_dir, s["file"]) for s in metadata["splits"][split]["shards"]]


def decode_fn(image_shape: Sequence[int], stored: str = RAW):
    """Return a tf.data map function: serialized Example → (uint8 image, int32 label).

    `stored` is the dataset's `record_format` (`raw` or `encoded`).
    """
    shape = [int(d) for d in image_shape]
    if stored not in (RAW, ENCODED):
        raise DatasetError(f"record_format={stored!r}: expected {RAW} or {ENCODED}")

    @tf.autograph.experimental.do_not_convert  # plain ops: converting it only costs start-up
    def decode(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        parsed = tf.io.parse_single_example(serialized, FEATURES)
        image = decode_image(parsed["image"], shape, stored)
        return image, tf.cast(parsed["label"], tf.int32)

    return decode


def decode_image(stored_image: tf.Tensor, shape: Sequence[int], stored: str) -> tf.Tensor:
    """One record's `image` bytes → its H×W×C uint8 image."""
    if stored == ENCODED:
        image = tf.io.decode_jpeg(stored_image, channels=int(shape[-1]))
    else:
        image = tf.io.decode_raw(stored_image, tf.uint8)
    return tf.reshape(image, shape)


def read_examples(
    data_dir: str, metadata: dict[str, Any], split: str
) -> Iterator[tuple[np.ndarray, int, str]]:
    """Yield a split's (uint8 image, label, source) shard by shard (for checks, not training)."""
    shape = [int(d) for d in metadata["image_shape"]]
    stored = record_format(metadata)
    for serialized in tf.data.TFRecordDataset(shard_paths(data_dir, metadata, split)):
        parsed = tf.io.parse_single_example(serialized, {**FEATURES, **SOURCE_FEATURE})
        image = decode_image(parsed["image"], shape, stored).numpy()
        yield image, int(parsed["label"]), parsed["source"].numpy().decode()
