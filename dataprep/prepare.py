"""Prepare a dataset once for every trial and the final training.

Images are decoded and resized once (with the serving signature's own
`trainer.preprocess.decode_and_resize`), stored as raw uint8 TFRecord shards
in the `trainer.records` format, with `metadata.json` written last, all or
nothing. The same source and seed give byte-identical shards.

Decoding runs in parallel with tf.data; one split's decoded images are held in
memory before they are written (e.g. cassava's train split at 150×150: ~380 MB).

`python -m dataprep.prepare --source S --output O … --result R` prepares and writes
the metadata and `metadata.json`'s sha256 as JSON to R: the preparation step runs it
as a process of its own (`step_process`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainer.gc_pause import collector_paused

with collector_paused():  # a fresh step process: TensorFlow's import 0.3-0.4 s sooner
    import numpy as np
    import tensorflow as tf

    from dataprep import splitting
    from dataprep.sources import IMAGE_EXTENSIONS, PreparationError, Source, open_source, plain
    from trainer import preprocess, records, staging
    from trainer.contract import PREPARATION

__all__ = ["IO_ERRORS", "PreparationError", "prepare_dataset", "report_lines"]

# Storage errors preparation can meet (permissions, a missing bucket): callers show one line.
IO_ERRORS = (OSError, tf.errors.OpError)

DEFAULT_NUM_SHARDS = 8
CHANNELS = (1, 3)
# Splits larger than num_shards × this get more shards.
TARGET_SHARD_BYTES = 256 << 20
# Decoded images handed from tf.data to Python at a time.
DECODE_BATCH = 64
# How many bad files a failure message names.
NAMED_BAD_FILES = 3

# Called with (images processed, images in total).
Progress = Callable[[int, int], None]
Example = tuple[np.ndarray, int, str]


def prepare_dataset(
    source: str,
    output: str,
    *,
    image_size: int = PREPARATION.image_size,
    validation_fraction: float = PREPARATION.validation_fraction,
    test_fraction: float = PREPARATION.test_fraction,
    seed: int = PREPARATION.seed,
    channels: int = PREPARATION.channels,
    max_bad_fraction: float = PREPARATION.max_bad_fraction,
    num_shards: int = DEFAULT_NUM_SHARDS,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Decode, resize and shard `source` into a prepared dataset at `output`.

    Long only by its keyword options, the preparation's interface (the CLI, the step and the
    benchmarks pass them by name); the work is in `plan`, `_SplitWriter` and `_described`.

    Args:
        source: ``sample``, ``tfds:<name>``, or an image folder (local or gs://)
            laid out ``<class>/*`` or ``<split>/<class>/*``.
        output: Directory to create (local or gs://).
        image_size: Side of the square images, >= preprocess.MIN_IMAGE_SIZE.
        validation_fraction: Share of train carved out as validation when the
            source has no validation split.
        test_fraction: Share of train carved out as test when the source has none.
        seed: Seed of the split membership and order.
        channels: 1 (greyscale) or 3 (RGB); images are converted.
        max_bad_fraction: Share of unreadable images that are skipped (and listed in
            the metadata) before the preparation fails.
        num_shards: Minimum number of files per split.
        overwrite: Replace a non-empty `output` instead of failing.
        progress: Called as images are decoded with (done, total).

    Returns:
        The metadata written to ``metadata.json``.

    Raises:
        PreparationError: Bad arguments or source, too many bad images. Nothing is
            left at `output` (or beside it) then.
    """
    check_options(
        image_size=image_size,
        validation_fraction=validation_fraction,
        test_fraction=test_fraction,
        seed=seed,
        channels=channels,
        max_bad_fraction=max_bad_fraction,
        num_shards=num_shards,
    )
    check_output(output, source=source, overwrite=overwrite)
    image_shape = (image_size, image_size, channels)
    with open_source(source) as opened:
        plans = plan(
            opened, validation_fraction=validation_fraction, test_fraction=test_fraction, seed=seed
        )
        total = sum(len(p.items) for p in plans.values())
        skipped = _SkippedImages(source, total, max_bad_fraction, image_shape)
        counter = _Counter(total, progress)
        writer = _SplitWriter(source, opened, image_shape, num_shards, counter, skipped)
        with staging.staged_directory(output, markers=(records.METADATA_FILE,)) as stage:
            splits = {split: writer.write(stage, split, plans[split]) for split in records.SPLITS}
            metadata = {
                **_described(writer, splits, total),
                "seed": seed,
                "validation_fraction": validation_fraction,
                "test_fraction": test_fraction,
                "prepared_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            }
            records.write_metadata(stage, metadata)
    return {"format_version": records.FORMAT_VERSION, **metadata}


def _described(writer: _SplitWriter, splits: dict[str, Any], total: int) -> dict[str, Any]:
    """What the metadata says of the source and its written `splits` (`total` images planned)."""
    opened = writer.opened
    return {
        "class_names": list(opened.class_names),
        "image_shape": list(writer.image_shape),
        "splits": splits,
        "source": opened.spec,
        "source_description": opened.description,
        "source_images": total,
        "skipped": writer.skipped.files,
        "ignored": ignored_summary(getattr(opened, "ignored", [])),
        "nested": dict(getattr(opened, "nested", {})),
        "thin_classes": thin_classes(splits, opened.class_names),
    }


@dataclasses.dataclass
class _SplitWriter:
    """Decodes one split's planned images and writes its shards (bad ones skipped, counted)."""

    source: str
    opened: Source
    image_shape: tuple[int, int, int]
    num_shards: int
    counter: _Counter
    skipped: _SkippedImages

    def write(self, stage: str, split: str, planned: splitting.SplitPlan) -> dict[str, Any]:
        """The split's summary for the metadata, its shards written under `stage`."""
        opened, image_shape = self.opened, self.image_shape
        examples, bad = decode_split(opened, planned, image_shape, self.counter.advance)
        self.counter.advance(len(bad))
        self.skipped.add(opened, planned, bad)
        if not examples:
            raise PreparationError(
                f"--source={self.source}: split '{split}' has no readable images"
            )
        labels = [label for _, label, _ in examples]
        return {
            **records.split_summary(labels, opened.class_names),
            "source_split": planned.origin,
            "shards": records.write_shards(
                stage, split, examples, shard_count(len(examples), image_shape, self.num_shards)
            ),
        }


class _Counter:
    """Images processed so far, reported to a Progress callback."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total = total
        self.done = 0
        self._progress = progress

    def advance(self, count: int = 1) -> None:
        self.done += count
        if count and self._progress is not None:
            self._progress(self.done, self.total)


class _SkippedImages:
    """Unreadable images so far, with the reason of each; past the cap, a PreparationError."""

    def __init__(
        self, source: str, total: int, max_bad_fraction: float, image_shape: Sequence[int]
    ) -> None:
        self.files: list[dict[str, str]] = []
        self._source = source
        self._total = total
        self._max_bad_fraction = max_bad_fraction
        self._image_shape = image_shape

    def add(
        self, source: Source, plan: splitting.SplitPlan, bad: Sequence[splitting.LabelledItem]
    ) -> None:
        count = len(self.files) + len(bad)
        if count <= self._max_bad_fraction * self._total:
            self.files += explain_bad(source, plan, bad, self._image_shape)
            return
        newly_named = explain_bad(source, plan, bad[:NAMED_BAD_FILES], self._image_shape)
        named = (self.files + newly_named)[:NAMED_BAD_FILES]
        first = ", ".join(f"{s['file']} ({s['reason']})" for s in named)
        raise PreparationError(
            f"--source={self._source}: {count} of {self._total} images are unreadable or corrupt, "
            f"more than --max-bad-fraction={self._max_bad_fraction} allows; first: {first}"
        )


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


def skipped_lines(metadata: dict[str, Any]) -> list[str]:
    """What a person should know was left out: unreadable images and files that are not images."""
    lines = []
    skipped = metadata.get("skipped") or []
    if skipped:
        named = ", ".join(f"{s['file']} ({s['reason']})" for s in skipped[:NAMED_BAD_FILES])
        more = (
            f" and {len(skipped) - NAMED_BAD_FILES} more" if len(skipped) > NAMED_BAD_FILES else ""
        )
        lines.append(f"skipped {len(skipped)} unreadable image(s): {named}{more}")
    ignored = metadata.get("ignored") or {}
    if ignored.get("count"):
        kinds = ", ".join(f"{ext} {n}" for ext, n in sorted(ignored["by_extension"].items()))
        lines.append(
            f"ignored {ignored['count']} file(s) that are not images ({kinds}; read: "
            f"{'/'.join(IMAGE_EXTENSIONS)}): {', '.join(ignored['first'])}"
            + (" …" if ignored["count"] > len(ignored["first"]) else "")
        )
    nested = metadata.get("nested") or {}
    if nested:
        named = ", ".join(f"{k} ({n})" for k, n in list(nested.items())[:NAMED_BAD_FILES])
        lines.append(
            f"not read: {sum(nested.values())} image(s) in {len(nested)} folder(s) nested in "
            f"class folders (a class folder holds its images directly): {named}"
            + (" …" if len(nested) > NAMED_BAD_FILES else "")
        )
    for name, missing in (metadata.get("thin_classes") or {}).items():
        lines.append(
            f"warning: class '{name}' has no {' and no '.join(missing)} image (too few "
            f"images to be in every split); its {'/'.join(missing)} metrics leave it out"
        )
    return lines


def report_lines(write: Callable[[str], None], every: float = 0.1) -> Progress:
    """A Progress callback that writes a line each time another `every` of the images is done."""

    def report(done: int, total: int) -> None:
        if done == total or done % max(int(total * every), 1) == 0:
            write(f"prepared {done}/{total} images")

    return report


def check_options(
    *,
    image_size: int,
    validation_fraction: float,
    test_fraction: float,
    seed: int,
    channels: int,
    max_bad_fraction: float,
    num_shards: int,
) -> None:
    """Raise PreparationError naming the first bad option."""
    minimum = preprocess.MIN_IMAGE_SIZE
    checks = [
        (
            "image-size",
            image_size,
            _is_int(image_size) and image_size >= minimum,
            f"an integer >= {minimum} (the CNN needs at least {minimum} pixels per side)",
        ),
        (
            "validation-fraction",
            validation_fraction,
            0 <= validation_fraction < 1,
            "a fraction in [0, 1)",
        ),
        ("test-fraction", test_fraction, 0 <= test_fraction < 1, "a fraction in [0, 1)"),
        ("seed", seed, _is_int(seed) and seed >= 0, "an integer >= 0"),
        ("channels", channels, channels in CHANNELS, "1 (greyscale) or 3 (RGB)"),
        ("max-bad-fraction", max_bad_fraction, 0 <= max_bad_fraction < 1, "a fraction in [0, 1)"),
        ("num-shards", num_shards, _is_int(num_shards) and num_shards >= 1, "an integer >= 1"),
    ]
    for name, value, ok, expected in checks:
        if not ok:
            raise PreparationError(f"--{name}={value}: expected {expected}")
    if validation_fraction + test_fraction >= 1:
        raise PreparationError(
            f"--validation-fraction={validation_fraction} + --test-fraction={test_fraction}"
            f" = {validation_fraction + test_fraction:g}: expected a sum < 1 (train keeps the rest)"
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def check_output(output: str, *, source: str, overwrite: bool) -> None:
    """Refuse an output that is a file, is not empty (unless `overwrite`) or lies in `source`."""
    if not output:
        raise PreparationError("--output is empty: expected a directory path")
    if tf.io.gfile.exists(output) and not tf.io.gfile.isdir(output):
        raise PreparationError(f"--output={output}: exists and is not a directory")
    if not overwrite and staging.has_content(output):
        raise PreparationError(
            f"--output={output}: exists and is not empty; expected a new or empty directory "
            "(or --overwrite to replace it)"
        )
    if staging.is_local(output) and staging.is_local(source) and os.path.isdir(source):
        inside = os.path.commonpath([os.path.abspath(output), os.path.abspath(source)])
        if inside == os.path.abspath(source):
            raise PreparationError(
                f"--output={output}: inside the source folder {source}; expected a directory "
                "outside it"
            )


def plan(
    source: Source, *, validation_fraction: float, test_fraction: float, seed: int
) -> dict[str, splitting.SplitPlan]:
    """Every split's items: the source's own splits, the others carved out of train."""
    fractions = {"validation": validation_fraction, "test": test_fraction}
    carve = {split: f for split, f in fractions.items() if split not in source.splits}
    for split, fraction in carve.items():
        if fraction <= 0:
            raise PreparationError(
                f"--{split}-fraction={fraction}: {source.spec} has no {split} split, so one is "
                "carved out of train; expected a fraction > 0"
            )
    plans = splitting.plan_splits(source.splits, carve, seed)
    train_size = len(source.splits["train"])
    for split in records.SPLITS:
        if not plans[split].items:
            flags = " and ".join(f"--{s}-fraction={f}" for s, f in carve.items())
            raise PreparationError(
                f"{flags} leave the {split} split empty ({train_size} images in train); "
                "expected other fractions or more images"
            )
    return plans


def decode_split(
    source: Source,
    plan: splitting.SplitPlan,
    image_shape: Sequence[int],
    advance: Callable[[], None],
) -> tuple[list[Example], list[splitting.LabelledItem]]:
    """Decode and resize a split's images in parallel, in plan order.

    Returns:
        The (image, label, key) examples, and the items that could not be read or decoded.
    """
    dataset = source.read(plan.origin, plan.items).map(
        plain(
            lambda encoded, label, key: (preprocess.decode_and_resize(encoded, image_shape), key)
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=False,  # the plan's order is restored below
    )
    # In batches: each element handed to Python costs ~0.35 ms here (0.6 s of the sample's
    # 0.8 s preparation when taken one by one); the images all have one shape by now.
    batches = dataset.ignore_errors().batch(DECODE_BATCH).prefetch(tf.data.AUTOTUNE)
    decoded: dict[str, np.ndarray] = {}
    for images, keys in batches.as_numpy_iterator():
        for image, key in zip(images, keys, strict=True):
            decoded[key.decode()] = image
            advance()
    examples = [(decoded[key], label, key) for key, label in plan.items if key in decoded]
    bad = [item for item in plan.items if item[0] not in decoded]
    return examples, bad


def explain_bad(
    source: Source,
    plan: splitting.SplitPlan,
    bad: Sequence[splitting.LabelledItem],
    image_shape: Sequence[int],
) -> list[dict[str, str]]:
    """Why each bad item failed: unreadable, or the decoder's first error line."""
    reasons = dict.fromkeys((key for key, _ in bad), "unreadable file")
    if bad:
        for encoded, _, key in source.read(plan.origin, bad).ignore_errors().as_numpy_iterator():
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


def shard_count(count: int, image_shape: Sequence[int], num_shards: int) -> int:
    """Files for a split: `num_shards`, more when shards would exceed TARGET_SHARD_BYTES."""
    size = count * math.prod(int(d) for d in image_shape)
    return max(num_shards, math.ceil(size / TARGET_SHARD_BYTES))


def preload() -> None:
    """Import what preparing the bundled sample needs (for `pipelines.jobs.fork_server`)."""
    from PIL import Image  # noqa: F401


def main(argv: Sequence[str] | None = None) -> int:
    """Prepare, print progress lines, write the result to `--result`; errors propagate."""
    parser = argparse.ArgumentParser(prog="python -m dataprep.prepare", description=__doc__)
    parser.add_argument("--source", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--image_size", type=int, default=PREPARATION.image_size)
    parser.add_argument(
        "--validation_fraction", type=float, default=PREPARATION.validation_fraction
    )
    parser.add_argument("--test_fraction", type=float, default=PREPARATION.test_fraction)
    parser.add_argument("--seed", type=int, default=PREPARATION.seed)
    parser.add_argument("--max_bad_fraction", type=float, default=PREPARATION.max_bad_fraction)
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --output")
    parser.add_argument("--result", required=True, help="local file for the result (JSON)")
    args = parser.parse_args(argv)
    metadata = prepare_dataset(
        args.source,
        args.output,
        image_size=args.image_size,
        validation_fraction=args.validation_fraction,
        test_fraction=args.test_fraction,
        seed=args.seed,
        max_bad_fraction=args.max_bad_fraction,
        overwrite=args.overwrite,
        progress=report_lines(lambda line: print(line, flush=True)),
    )
    for line in skipped_lines(metadata):
        print(line, flush=True)
    digest = records.file_digest(posixpath.join(args.output, records.METADATA_FILE))
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump({"metadata": metadata, "metadata_sha256": digest["sha256"]}, f)
    return 0


if __name__ == "__main__":
    from trainer.quick_exit import exit_without_teardown

    exit_without_teardown(main())
