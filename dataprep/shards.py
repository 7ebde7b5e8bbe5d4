"""Shard tasks: a shard is a list of source images → one TFRecord file, written as a stream.

The shard plan is computed once from the listing and the split plan (`plan_shards`): each
split's planned items are dealt round-robin into its shards, so every task is independent
and can run in this process or in another one (`dataprep.fanout`). A task decodes,
resizes and stores its images one batch at a time and writes them as they come: what it
holds is a few batches, never the split (`DECODE_BATCH`). The file is written under a
temporary name and renamed when complete.

What is deterministic: the same listing, options and seed give the same tasks (files,
items and their order), and each task writes the same bytes (a folder's or the sample's
images in plan order, a TFDS split's in its stored order), whether tasks run here or in
other processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import posixpath
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from dataprep import splitting
from dataprep.sources import Source, plain
from trainer import preprocess, records
from trainer.contract import ENCODED, JPEG_QUALITY

# Splits larger than num_shards × this (as raw pixels) get more shards.
TARGET_SHARD_BYTES = 256 << 20
# Decoded images handed from tf.data to Python at a time: each element handed over costs
# ~0.35 ms here (0.6 s of the sample's 0.8 s preparation when taken one by one).
DECODE_BATCH = 64
# Batches decoded ahead of the writer: with DECODE_BATCH, the most a task holds.
DECODE_AHEAD = 2
PARTIAL_SUFFIX = ".partial"
# Shards one process writes from one read of the source (their files open at once).
WRITERS_AT_ONCE = 16
PLAN_FILE = "plan.json"
# Finished shards' receipts (`<file>.json`: what its task returned), until the metadata is written.
RECEIPTS_DIR = "done"
# What makes two plans the same plan (a rerun keeps the other's finished shards).
PLAN_IDENTITY = ("source", "image_shape", "record_format", "tasks")


@dataclasses.dataclass(frozen=True)
class ShardTask:
    """One shard: the `items` of source split `origin` it holds, in write order, and its file."""

    split: str
    origin: str
    file: str
    items: tuple[splitting.LabelledItem, ...]


@dataclasses.dataclass(frozen=True)
class ShardResult:
    """What a task wrote: the shard's description, its labels, and the items it could not read."""

    split: str
    origin: str
    shard: dict[str, Any]
    labels: list[int]
    bad: list[splitting.LabelledItem]


def shard_count(count: int, image_shape: Sequence[int], num_shards: int) -> int:
    """Files for a split: `num_shards`, more when shards would exceed TARGET_SHARD_BYTES."""
    size = count * math.prod(int(d) for d in image_shape)
    return max(num_shards, math.ceil(size / TARGET_SHARD_BYTES))


def plan_shards(
    plans: Mapping[str, splitting.SplitPlan], image_shape: Sequence[int], num_shards: int
) -> list[ShardTask]:
    """Every split's shard tasks, in split order; item i of a split goes to shard i mod n."""
    tasks = []
    for split in records.SPLITS:
        items = plans[split].items
        count = max(1, min(shard_count(len(items), image_shape, num_shards), len(items)))
        tasks += [
            ShardTask(
                split,
                plans[split].origin,
                records.shard_name(split, index, count),
                tuple(items[index::count]),
            )
            for index in range(count)
        ]
    return tasks


def plan_document(
    tasks: Sequence[ShardTask], *, source: str, image_shape: Sequence[int], stored: str
) -> dict[str, Any]:
    """The plan as `PLAN_FILE` holds it: the source, image shape, record format, every task."""
    document = {
        "source": source,
        "image_shape": list(image_shape),
        "record_format": stored,
        "tasks": [dataclasses.asdict(t) for t in tasks],
    }
    return dict(json.loads(json.dumps(document)))  # as read back: tuples as lists


def write_plan(directory: str, document: Mapping[str, Any]) -> None:
    """Write a plan (a `plan_document`, with anything else a fan-out reads) as PLAN_FILE."""
    with tf.io.gfile.GFile(posixpath.join(directory, PLAN_FILE), "w") as f:
        json.dump(document, f)


def read_plan(directory: str) -> dict[str, Any] | None:
    """The plan written in `directory`, or None when there is none."""
    path = posixpath.join(directory, PLAN_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return dict(json.load(f))


def tasks_of(document: Mapping[str, Any]) -> list[ShardTask]:
    """The shard tasks of a plan read back."""
    return [
        ShardTask(
            t["split"], t["origin"], t["file"], tuple((str(k), int(v)) for k, v in t["items"])
        )
        for t in document["tasks"]
    ]


def write_receipt(directory: str, result: ShardResult) -> None:
    """Record that `result`'s shard is complete (after its rename): `RECEIPTS_DIR/<file>.json`."""
    folder = posixpath.join(directory, RECEIPTS_DIR)
    tf.io.gfile.makedirs(folder)
    path = posixpath.join(folder, result.shard["file"] + ".json")
    with tf.io.gfile.GFile(path + PARTIAL_SUFFIX, "w") as f:
        json.dump(dataclasses.asdict(result), f)
    tf.io.gfile.rename(path + PARTIAL_SUFFIX, path, overwrite=True)


def read_receipt(directory: str, task: ShardTask) -> ShardResult | None:
    """The receipt of `task`'s shard if its file is there as recorded (`intact`); else None."""
    path = posixpath.join(directory, RECEIPTS_DIR, task.file + ".json")
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        found = json.load(f)
    if not intact(directory, found["shard"]):
        return None  # truncated, replaced or changed since: written again
    shard = {**found["shard"], "count": int(found["shard"]["count"])}
    bad = [(str(k), int(v)) for k, v in found["bad"]]
    labels = [int(label) for label in found["labels"]]
    return ShardResult(found["split"], found["origin"], shard, labels, bad)


def intact(directory: str, shard: Mapping[str, Any]) -> bool:
    """Whether `shard`'s file (a receipt's or the metadata's entry) is in `directory` as written.

    Its size first (a truncated file is found without reading it), then its sha256: a file
    of the right size with other bytes (rewritten, corrupted in place) is not the shard.
    """
    path = posixpath.join(directory, shard["file"])
    if not tf.io.gfile.exists(path) or tf.io.gfile.stat(path).length != int(shard["size"]):
        return False
    return bool(records.file_digest(path)["sha256"] == shard["sha256"])


def stored_images(
    source: Source,
    origin: str,
    items: Sequence[splitting.LabelledItem],
    image_shape: Sequence[int],
    stored: str,
) -> tf.data.Dataset:
    """Batches of (stored image, key) of the readable `items`: raw uint8 or JPEG bytes.

    Items that cannot be read or decoded are left out (the caller names them).
    """

    def store(encoded: tf.Tensor, label: tf.Tensor, key: tf.Tensor) -> tuple[tf.Tensor, ...]:
        del label  # the tasks' items carry it
        image = preprocess.decode_and_resize(encoded, image_shape)
        if stored == ENCODED:
            return tf.io.encode_jpeg(image, quality=JPEG_QUALITY), key
        return image, key

    dataset = source.read(origin, items).map(
        plain(store), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    return dataset.ignore_errors().batch(DECODE_BATCH).prefetch(DECODE_AHEAD)


def write_shards(
    source: Source,
    tasks: Sequence[ShardTask],
    directory: str,
    *,
    image_shape: Sequence[int],
    stored: str,
    advance: Callable[[int], None] = lambda count: None,
) -> list[ShardResult]:
    """Decode, resize, store and write tasks of one split to ``directory/<file>`` as they come.

    The tasks share one read of the source (a pipeline per task costs ~0.06 s here: a
    second on the sample's 24 shards); each image goes to its own task's file, so every
    shard holds what `write_shard` alone would write, in the same order.

    Args:
        source: The opened source (only its `read` is used).
        tasks: Shards of one split (at most `WRITERS_AT_ONCE`: their files are open at once).
        directory: Where the shards go (local or gs://); each written as ``<file>.partial``,
            renamed when complete.
        image_shape: (H, W, C) of the stored images.
        stored: `raw` or `encoded`.
        advance: Called with the number of images read so far in each batch.

    Returns:
        Per task: its shard's file, count, size and sha256, its labels, its unreadable items
        (each also left as the shard's receipt, `write_receipt`).
    """
    task_of = {key: index for index, task in enumerate(tasks) for key, _ in task.items}
    label_of = {key: label for task in tasks for key, label in task.items}
    paths = [posixpath.join(directory, task.file) for task in tasks]
    labels: list[list[int]] = [[] for _ in tasks]
    written: set[str] = set()
    items = [item for task in tasks for item in task.items]
    batches = stored_images(source, tasks[0].origin, items, image_shape, stored)
    with contextlib.ExitStack() as stack:
        writers = [stack.enter_context(tf.io.TFRecordWriter(p + PARTIAL_SUFFIX)) for p in paths]
        for images, keys in batches.as_numpy_iterator():
            for image, raw_key in zip(images, keys, strict=True):
                key = raw_key.decode()
                index = task_of[key]
                writers[index].write(records.encode_example(image, label_of[key], key))
                labels[index].append(label_of[key])
                written.add(key)
            advance(len(keys))
    results = []
    for task, path, task_labels in zip(tasks, paths, labels, strict=True):
        tf.io.gfile.rename(path + PARTIAL_SUFFIX, path, overwrite=True)
        bad = [item for item in task.items if item[0] not in written]
        shard = {"file": task.file, "count": len(task_labels), **records.file_digest(path)}
        results.append(ShardResult(task.split, task.origin, shard, task_labels, bad))
        write_receipt(directory, results[-1])
    return results


def write_shard(
    source: Source, task: ShardTask, directory: str, *, image_shape: Sequence[int], stored: str
) -> ShardResult:
    """One task alone (`write_shards` of it): what a worker process runs."""
    return write_shards(source, [task], directory, image_shape=image_shape, stored=stored)[0]


def groups(tasks: Sequence[ShardTask]) -> list[list[ShardTask]]:
    """Consecutive tasks of one split, at most `WRITERS_AT_ONCE` a group, in order."""
    found: list[list[ShardTask]] = []
    for task in tasks:
        if found and found[-1][0].split == task.split and len(found[-1]) < WRITERS_AT_ONCE:
            found[-1].append(task)
        else:
            found.append([task])
    return found
