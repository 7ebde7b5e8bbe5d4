"""Input benchmark: preparation throughput, and per-epoch input time prepared vs the seeds' way.

Runs on the bundled sample (scikit-learn digits) prepared at 150×150, offline:

* preparation: `dataprep.prepare.prepare_dataset` on the sample image folder (images/s);
* one training epoch of input, side by side, median of `--repeats`:
  - the seeds' way: a TFDS builder over the same training images (`tfds.ImageFolder`,
    decoding every epoch) mapped with the seeds' `preprocess_data`
    (`tf.image.resize` + /255), shuffled and batched, no cache, no prefetch;
  - the trainer's way: `trainer.data.train_input_fn` on the prepared shards, first
    epoch (reads the shards, fills the cache) and a later epoch (from the cache).

Usage: ``.venv/bin/python benchmarks/bench_input.py [--image-size 150] [--repeats 5]``.
Writes ``benchmarks/results/input.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import tensorflow as tf
import tensorflow_datasets as tfds
from PIL import Image
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, seed_trainer  # noqa: E402
from dataprep import sources  # noqa: E402
from dataprep.prepare import prepare_dataset  # noqa: E402
from trainer import data, records  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "input.json"


def seeds_epoch(folder: Path, image_size: int, batch_size: int, steps: int) -> tf.data.Dataset:
    """The seeds' input: TFDS load, then `preprocess_data` (resize + scale) every epoch."""

    preprocess_data = functools.partial(seed_trainer.preprocess_data, image_size=image_size)
    builder = tfds.ImageFolder(str(folder))
    dataset = builder.as_dataset(split="train", as_supervised=True, shuffle_files=False)
    return dataset.map(preprocess_data).shuffle(1000).batch(batch_size).take(steps)


def trainer_batches(prepared: str, metadata: dict, batch_size: int) -> Iterator:
    """The trainer's input: its training input function on the prepared shards (endless)."""
    dataset_fn = data.train_input_fn(prepared, metadata, batch_size, seed=0)
    return iter(dataset_fn(tf.distribute.InputContext()))


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def consume(batches: Iterator, steps: int) -> None:
    for _ in range(steps):
        next(batches)


def link_train_split(prepared: str, metadata: dict, images: Path, folder: Path) -> None:
    """Hard-link the prepared train split's source images into `folder/train/<class>/`."""
    for _, _, key in records.read_examples(prepared, metadata, "train"):
        target = folder / "train" / key
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(images / key, target)


def write_source(folder: Path, source_size: int | None) -> str:
    """The sample as PNGs: native 8x8 greyscale, or upscaled to RGB `source_size` squares."""
    sources.write_sample_folder(str(folder))
    if source_size is None:
        return "digits 8x8 grey PNG"
    for path in folder.rglob("*.png"):
        image = Image.open(path).convert("RGB")
        image.resize((source_size, source_size), Image.Resampling.BILINEAR).save(path)
    return f"digits {source_size}x{source_size} RGB PNG"


def run_case(source_size: int | None, args: argparse.Namespace) -> dict:
    """Prepare the sample and time epochs of both input pipelines, side by side."""
    with tempfile.TemporaryDirectory(prefix="bench-input-") as tmp:
        images, prepared, seeds_folder = (
            Path(tmp, "images"),
            Path(tmp, "prepared"),
            Path(tmp, "seeds"),
        )
        description = write_source(images, source_size)
        start = time.perf_counter()
        metadata = prepare_dataset(str(images), str(prepared), image_size=args.image_size)
        prepare_seconds = time.perf_counter() - start
        link_train_split(str(prepared), metadata, images, seeds_folder)

        steps = metadata["splits"]["train"]["count"] // args.batch_size
        runs: dict[str, list[float]] = {"seeds": [], "prepared_first": [], "prepared_cached": []}
        # Warm-up (tracing, page cache) of both pipelines, not timed.
        consume(iter(seeds_epoch(seeds_folder, args.image_size, args.batch_size, 1)), 1)
        consume(trainer_batches(str(prepared), metadata, args.batch_size), steps)
        for _ in range(args.repeats):
            epoch = seeds_epoch(seeds_folder, args.image_size, args.batch_size, steps)
            runs["seeds"].append(timed(lambda epoch=epoch: consume(iter(epoch), steps)))
            batches = trainer_batches(str(prepared), metadata, args.batch_size)
            runs["prepared_first"].append(timed(lambda b=batches: consume(b, steps)))
            runs["prepared_cached"].append(timed(lambda b=batches: consume(b, steps)))

    median = {name: statistics.median(times) for name, times in runs.items()}
    return {
        "source": description,
        "preparation": {
            "images": metadata["source_images"],
            "seconds": round(prepare_seconds, 3),
            "images_per_second": round(metadata["source_images"] / prepare_seconds, 1),
        },
        "epoch": {"train_images": steps * args.batch_size, "steps": steps},
        "epoch_seconds_median": {name: round(value, 4) for name, value in median.items()},
        "epoch_seconds_runs": {name: [round(t, 4) for t in times] for name, times in runs.items()},
        "ratio_seeds_over_prepared": {
            "first_epoch": round(median["seeds"] / median["prepared_first"], 2),
            "cached_epoch": round(median["seeds"] / median["prepared_cached"], 2),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--source-size",
        type=int,
        default=300,
        help="Also run with the sample upscaled to this size (horses_or_humans: 300); 0: skip.",
    )
    args = parser.parse_args()

    cases = [None] + ([args.source_size] if args.source_size else [])
    result = {
        "image_size": args.image_size,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "cases": [run_case(source_size, args) for source_size in cases],
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            **common.cpu(),
            "tensorflow": tf.__version__,
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(json.dumps(result, indent=2))


# Table rows: label, (section, key) in a case's results, format.
ROWS = [
    ("preparation (images/s)", ("preparation", "images_per_second"), "{:.0f}"),
    ("preparation (s)", ("preparation", "seconds"), "{:.2f}"),
    ("epoch: seeds' way (s)", ("epoch_seconds_median", "seeds"), "{:.3f}"),
    ("epoch: prepared, 1st (s)", ("epoch_seconds_median", "prepared_first"), "{:.3f}"),
    ("epoch: prepared, cached (s)", ("epoch_seconds_median", "prepared_cached"), "{:.3f}"),
    ("seeds / prepared, 1st", ("ratio_seeds_over_prepared", "first_epoch"), "{:.1f}x"),
    ("seeds / prepared, cached", ("ratio_seeds_over_prepared", "cached_epoch"), "{:.1f}x"),
]


def print_table(result: dict) -> None:
    cases = result["cases"]
    table = Table(
        title=f"Input pipeline at {result['image_size']}x{result['image_size']}, batch "
        f"{result['batch_size']}, median of {result['repeats']} "
        f"({cases[0]['epoch']['train_images']} images per epoch)"
    )
    table.add_column("measure")
    for case in cases:
        table.add_column(case["source"], justify="right")
    for label, (section, key), fmt in ROWS:
        table.add_row(label, *(fmt.format(case[section][key]) for case in cases))
    Console().print(table)


if __name__ == "__main__":
    main()
