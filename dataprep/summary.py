"""What the metadata says of written shards: splits, skipped images, the source described.

Shard results come in as tasks finish (`Splits`), in this process or from workers, or
from the receipts of a fan-out's groups (`dataprep.fanout_steps`); unreadable images are
named with a reason and counted against `--max-bad-fraction` (`SkippedImages`).
"""

from __future__ import annotations

import datetime
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from dataprep import shards, splitting
from dataprep.sources import PreparationError, Source
from trainer import preprocess, records

# How many bad files a failure message names.
NAMED_BAD_FILES = 3

# The options `metadata.json` records, in its order.
METADATA_OPTIONS = ("record_format", "seed", "validation_fraction", "test_fraction")

# Called with (images processed, images in total).
Progress = Callable[[int, int], None]


def source_part(opened: Source, total: int) -> dict[str, Any]:
    """What the metadata says of the opened source (`total` images planned), from its listing."""
    return {
        "class_names": list(opened.class_names),
        "source": opened.spec,
        "source_description": opened.description,
        "source_images": total,
        "ignored": ignored_summary(getattr(opened, "ignored", [])),
        "nested": dict(getattr(opened, "nested", {})),
    }


def described(
    source: dict[str, Any],
    image_shape: Sequence[int],
    skipped: SkippedImages,
    splits: dict[str, Any],
    options: dict[str, Any],
) -> dict[str, Any]:
    """`metadata.json`'s content: the written `splits` of `source` (a `source_part`).

    `options`: the record format stored, the seed and the fractions the splits were planned with.
    """
    return {
        "class_names": source["class_names"],
        "image_shape": list(image_shape),
        "splits": splits,
        "source": source["source"],
        "source_description": source["source_description"],
        "source_images": source["source_images"],
        "skipped": skipped.files,
        "ignored": source["ignored"],
        "nested": source["nested"],
        "thin_classes": thin_classes(splits, source["class_names"]),
        **{key: options[key] for key in METADATA_OPTIONS},
        "prepared_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


class Splits:
    """Each split's shards and labels as tasks finish; bad items counted against the cap."""

    def __init__(
        self, source: str, opened: Source, counter: Counter, skipped: SkippedImages
    ) -> None:
        self._source = source
        self._opened = opened
        self._counter = counter
        self._skipped = skipped
        self._results: dict[str, list[shards.ShardResult]] = {s: [] for s in records.SPLITS}

    def add(self, result: shards.ShardResult) -> None:
        """Record one finished task (its unreadable items named, or past the cap, refused)."""
        self._counter.advance(len(result.bad))
        self._skipped.add(self._opened, result.origin, result.bad)
        self._results[result.split].append(result)

    def summaries(self) -> dict[str, Any]:
        """Every split's summary for the metadata, shards in file order."""
        summaries = {}
        for split, results in self._results.items():
            results = sorted(results, key=lambda r: r.shard["file"])
            labels = [label for r in results for label in r.labels]
            if not labels:
                raise PreparationError(
                    f"--source={self._source}: split '{split}' has no readable images"
                )
            summaries[split] = {
                **records.split_summary(labels, self._opened.class_names),
                "source_split": results[0].origin,
                "shards": [r.shard for r in results],
            }
        return summaries


class Counter:
    """Images processed so far, reported to a Progress callback."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total = total
        self.done = 0
        self._progress = progress

    def advance(self, count: int = 1) -> None:
        """Count `count` more images done."""
        self.done += count
        if count and self._progress is not None:
            self._progress(self.done, self.total)


class SkippedImages:
    """Unreadable images so far, with the reason of each; past the cap, a PreparationError."""

    def __init__(
        self, source: str, total: int, max_bad_fraction: float, image_shape: Sequence[int]
    ) -> None:
        self.files: list[dict[str, str]] = []
        self._source = source
        self._total = total
        self._max_bad_fraction = max_bad_fraction
        self._image_shape = image_shape

    def add(self, source: Source, origin: str, bad: Sequence[splitting.LabelledItem]) -> None:
        """Name `bad` (items of `origin`) with their reasons, or refuse them past the cap."""
        count = len(self.files) + len(bad)
        if count <= self._max_bad_fraction * self._total:
            self.files += explain_bad(source, origin, bad, self._image_shape)
            return
        newly_named = explain_bad(source, origin, bad[:NAMED_BAD_FILES], self._image_shape)
        named = (self.files + newly_named)[:NAMED_BAD_FILES]
        first = ", ".join(f"{s['file']} ({s['reason']})" for s in named)
        raise PreparationError(
            f"--source={self._source}: {count} of {self._total} images are unreadable or corrupt, "
            f"more than --max-bad-fraction={self._max_bad_fraction} allows; first: {first}"
        )


def explain_bad(
    source: Source,
    origin: str,
    bad: Sequence[splitting.LabelledItem],
    image_shape: Sequence[int],
) -> list[dict[str, str]]:
    """Why each bad item failed: unreadable, or the decoder's first error line."""
    reasons = dict.fromkeys((key for key, _ in bad), "unreadable file")
    if bad:
        for encoded, _, key in source.read(origin, bad).ignore_errors().as_numpy_iterator():
            try:
                preprocess.decode_and_resize(tf.constant(encoded), image_shape)
                reasons[key.decode()] = "failed once, decoded on retry (transient read error?)"
            except tf.errors.OpError as error:
                reasons[key.decode()] = _first_line(error.message)
    return [{"file": key, "reason": reason} for key, reason in reasons.items()]


def _first_line(message: str) -> str:
    """A TF error message without its ``{{function_node ...}}`` prefix and ``[Op:...]`` suffix."""
    message = (re.sub(r"^\{\{.*?\}\}\s*", "", message.strip()).splitlines() or [""])[0]
    return re.sub(r"\s*\[Op:\w+\].*$", "", message)


def ignored_summary(files: Sequence[str]) -> dict[str, Any]:
    """Files of a folder source that are not images: their count by extension, the first few."""
    by_extension: dict[str, int] = {}
    for name in files:
        extension = posixpath.splitext(posixpath.basename(name))[1].lower() or "(none)"
        by_extension[extension] = by_extension.get(extension, 0) + 1
    return {
        "count": len(files),
        "by_extension": by_extension,
        "first": list(files[:NAMED_BAD_FILES]),
    }


def thin_classes(splits: Mapping[str, Any], class_names: Sequence[str]) -> dict[str, list[str]]:
    """Classes missing from some split (too few images to be in each): class → those splits.

    The rule: a class is kept with the images it has, and the splits it has none in are
    said (`skipped_lines`); a class needs at least one image per split to be in each.
    """
    missing: dict[str, list[str]] = {}
    for split in records.SPLITS:
        counts = splits[split].get("per_class") or {}
        for name in class_names:
            if not counts.get(name):
                missing.setdefault(name, []).append(split)
    return missing
