"""Prepare a dataset once for every trial and the final training.

Images are decoded and resized once (with the serving signature's own
`trainer.preprocess.decode_and_resize`), stored as raw uint8 pixels or JPEG bytes
(`record_format`) in TFRecord shards of the `trainer.records` format, with
`metadata.json` written last, all or nothing. The same source, options and seed give
byte-identical shards, whatever `prepare_workers` is.

The work is a set of independent shard tasks planned once from the listing
(`dataprep.shards`), written as streams: memory depends on the batch and the number of
workers, not on the number of images. `plan.json` beside the shards records the plan.

`python -m dataprep.prepare --source S --output O … --result R` prepares and writes
the metadata and `metadata.json`'s sha256 as JSON to R: the preparation step runs it
as a process of its own (`step_process`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import posixpath
from collections.abc import Callable, Sequence
from typing import Any

from trainer.gc_pause import collector_paused

with collector_paused():  # a fresh step process: TensorFlow's import 0.3-0.4 s sooner
    import numpy as np
    import tensorflow as tf

    from dataprep import fanout, resume, shards, splitting, summary
    from dataprep.sources import IMAGE_EXTENSIONS, PreparationError, Source, open_source
    from dataprep.summary import (
        NAMED_BAD_FILES,
        Counter,
        Progress,
        SkippedImages,
        Splits,
        described,
        ignored_summary,
        thin_classes,
    )
    from trainer import preprocess, records, staging
    from trainer.contract import PREPARATION, RECORD_FORMATS, record_format_for

__all__ = [
    "IO_ERRORS",
    "PreparationError",
    "ignored_summary",
    "prepare_dataset",
    "report_lines",
    "thin_classes",
]

# Storage errors preparation can meet (permissions, a missing bucket): callers show one line.
IO_ERRORS = (OSError, tf.errors.OpError)

DEFAULT_NUM_SHARDS = 8
CHANNELS = (1, 3)


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
    record_format: str = PREPARATION.record_format,
    prepare_workers: int = PREPARATION.prepare_workers,
    num_shards: int = DEFAULT_NUM_SHARDS,
    overwrite: bool = False,
    reuse: bool = False,
    progress: Progress | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Decode, resize and shard `source` into a prepared dataset at `output`.

    Long only by its keyword options, the preparation's interface (the CLI, the step and the
    benchmarks pass them by name); the work is in `plan`, `dataprep.shards`, `Splits` and
    `described`.

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
        record_format: ``raw`` (uint8 pixels), ``encoded`` (JPEG) or ``auto`` (by image
            size: `trainer.contract.record_format_for`).
        prepare_workers: Shard tasks run at once: 1 in this process, more in processes.
        num_shards: Minimum number of files per split.
        overwrite: Replace a non-empty `output` instead of failing.
        reuse: Keep a finished dataset of the same plan at `output` whole, its shards
            checked (size and sha256), and say so (`dataprep.resume.finished_dataset`).
        progress: Called as images are decoded with (done, total).
        say: Called with a line when an earlier run had left shards here
            (`dataprep.resume`: kept, or cleared for another plan) or a dataset (`reuse`).

    Returns:
        The metadata written to ``metadata.json``.

    Raises:
        PreparationError: Bad arguments or source, too many bad images. Nothing is
            left at `output` (or beside it) then. Any other failure (an interrupt, a
            storage error) keeps the finished shards beside `output` for a rerun
            (`dataprep.resume`).
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
    check_storage(record_format=record_format, prepare_workers=prepare_workers)
    check_output(output, source=source, overwrite=overwrite)
    image_shape = (image_size, image_size, channels)
    stored = record_format_for(record_format, image_size)
    with open_source(source) as opened:
        plans = plan(
            opened, validation_fraction=validation_fraction, test_fraction=test_fraction, seed=seed
        )
        tasks = shards.plan_shards(plans, image_shape, num_shards)
        total = sum(len(p.items) for p in plans.values())
        skipped = SkippedImages(source, total, max_bad_fraction, image_shape)
        counter = Counter(total, progress)
        document = shards.plan_document(
            tasks, source=opened.spec, image_shape=image_shape, stored=stored
        )
        if reuse and (finished := _finished(output, document, total, max_bad_fraction, say)):
            return finished
        with staging.staged_directory(
            output,
            markers=(records.METADATA_FILE,),
            resumable=True,  # an interrupted run's finished shards are kept for the next
            discard_on=(PreparationError,),
        ) as stage:
            kept, note = resume.kept_shards(stage, document)
            if note:
                say(note)
            shards.write_plan(stage, document)
            splits = Splits(source, opened, counter, skipped)
            results = fanout.run_tasks(
                opened,
                [task for task in tasks if task.file not in kept],
                stage,
                image_shape=image_shape,
                stored=stored,
                workers=prepare_workers,
                advance=counter.advance,
            )
            with contextlib.closing(results):  # on a refusal, workers stop before the stage goes
                counter.advance(sum(r.shard["count"] for r in kept.values()))
                for result in resume.in_plan_order(tasks, kept, results):
                    splits.add(result)
            options = dict(
                record_format=stored,
                seed=seed,
                validation_fraction=validation_fraction,
                test_fraction=test_fraction,
            )
            about = summary.source_part(opened, total)
            metadata = described(about, image_shape, skipped, splits.summaries(), options)
            records.write_metadata(stage, metadata)
            resume.drop_receipts(stage)  # kept until the metadata lists every shard
    return {"format_version": records.FORMAT_VERSION, **metadata}


def _finished(
    output: str,
    document: dict[str, Any],
    total: int,
    max_bad_fraction: float,
    say: Callable[[str], None],
) -> dict[str, Any] | None:
    """A finished dataset of this plan at `output`, kept whole (said), or None: prepare it."""
    metadata, note = resume.finished_dataset(output, document)
    if metadata is not None and len(metadata["skipped"]) > max_bad_fraction * total:
        metadata, note = None, f"{output}: more unreadable images than --max-bad-fraction allows"
    if metadata is None:
        if note:
            say(note)
        return None
    count = sum(len(metadata["splits"][split]["shards"]) for split in records.SPLITS)
    say(f"reused the dataset prepared earlier at {output} ({count} shards, the same plan)")
    return metadata


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
    """A Progress callback that writes a line each time another `every` of the images is done.

    Progress comes a batch or a shard at a time: a line when a step of `every` is crossed.
    """
    written = [0]  # steps of `every` said so far

    def report(done: int, total: int) -> None:
        steps = done // max(int(total * every), 1)
        if done == total or steps > written[0]:
            written[0] = steps
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


def check_storage(*, record_format: str, prepare_workers: int) -> None:
    """Raise PreparationError naming a bad record format or worker count."""
    if record_format not in RECORD_FORMATS:
        raise PreparationError(
            f"--record-format={record_format}: expected one of {', '.join(RECORD_FORMATS)}"
        )
    if not (_is_int(prepare_workers) and prepare_workers >= 1):
        raise PreparationError(f"--prepare-workers={prepare_workers}: expected an integer >= 1")


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
    parser.add_argument("--record_format", default=PREPARATION.record_format)
    parser.add_argument("--prepare_workers", type=int, default=PREPARATION.prepare_workers)
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --output")
    parser.add_argument(
        "--reuse", action="store_true", help="keep a finished dataset of the same plan there"
    )
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
        record_format=args.record_format,
        prepare_workers=args.prepare_workers,
        overwrite=args.overwrite,
        reuse=args.reuse,
        progress=report_lines(lambda line: print(line, flush=True)),
        say=lambda line: print(line, flush=True),
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
