"""Preparation at scale (issue 52): memory and time against the number of images, stored bytes.

Synthetic 256-px JPEG folders of 4 classes (a coloured shape per class on a smooth, slightly
noisy background, PIL quality 75) are prepared at 224 px with ``python -m dataprep.prepare``,
each run a process of its own:

* the curve: peak memory (RSS of the process and of its whole tree, sampled every 50 ms)
  and wall time at `--counts` images, for ``--record-format raw`` and ``encoded``;
* bytes written ÷ the source's bytes;
* `--prepare-workers` 1 → 2 at the largest count (encoded);
* the stored image: bytes per image and mean absolute error against the raw pixels, for
  PNG and JPEG at several qualities, per image size (what `auto` and `JPEG_QUALITY` rest on);
* the trainer's input pipeline alone (`trainer.data.read_split`: read, decode), images/s
  per core, raw vs encoded, at 128 and 224 px;
* the trainer at equal work on raw vs encoded records (`bench_trainer`'s worker: epoch time,
  final validation accuracy, median over `--seeds` seeds).

Usage: ``python -m benchmarks.bench_prepare_scale [--quick] [--counts 1000 4000 16000]``.
Writes ``benchmarks/results/prepare_scale.json``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "prepare_scale"
SOURCE_SIZE = 256
CLASSES = 4
FORMATS = ("raw", "encoded")
MB = 1 << 20


def write_jpegs(folder: Path, count: int, *, size: int = SOURCE_SIZE, seed: int = 0) -> int:
    """`count` JPEGs in `CLASSES` class folders; returns their bytes in all."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size] / size
    total = 0
    for index in range(count):
        label = index % CLASSES
        base = rng.uniform(40, 200, size=3)
        pixels = base + 40 * np.stack([x, y, 1 - x], axis=-1) + rng.normal(0, 6, (size, size, 3))
        top, left = rng.integers(0, size // 2, size=2)
        side = size // 3
        colour = np.zeros(3)
        colour[label % 3] = 255
        patch = pixels[top : top + side, left : left + side]
        if label == 3:  # stripes: the fourth class differs by shape, not colour
            patch[::8] = 255
        else:
            patch[:] = colour
        path = folder / f"c{label}" / f"{index:06d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(path, "JPEG", quality=75)
        total += path.stat().st_size
    return total


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and every process under it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            with open(f"/proc/{current}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total


def measured_run(command: Sequence[str]) -> dict[str, float]:
    """Run `command`; its wall time, the peak RSS of its tree and of its largest process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], tree_rss(process.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = process.stdout.read() if process.stdout else b""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    if process.returncode:
        raise RuntimeError(f"{command} failed:\n{output.decode()[-2000:]}")
    return {
        "wall_s": round(time.perf_counter() - start, 2),
        "peak_tree_mb": round(peak[0] / MB, 1),
        "peak_process_mb": round(usage.ru_maxrss / 1024, 1),  # kB on Linux
    }


def prepare_case(
    folder: Path, out: Path, *, stored: str, workers: int, image_size: int
) -> dict[str, Any]:
    """Prepare `folder` in a process of its own: time, memory, bytes written."""
    result = out.with_suffix(".json")
    command = [
        sys.executable, "-m", "dataprep.prepare", f"--source={folder}", f"--output={out}",
        f"--image_size={image_size}", f"--record_format={stored}",
        f"--prepare_workers={workers}", f"--result={result}",
    ]  # fmt: skip
    figures = measured_run(command)
    metadata = json.loads(result.read_text())["metadata"]
    written = sum(
        shard["size"] for split in metadata["splits"].values() for shard in split["shards"]
    )
    return {**figures, "written_bytes": written, "record_format": metadata["record_format"]}


def curve(workdir: Path, counts: Sequence[int], image_size: int) -> list[dict[str, Any]]:
    """Each count × format (and 2 workers at the largest count): one preparation each."""
    rows = []
    for count in counts:
        folder = workdir / f"src-{count}"
        source_bytes = write_jpegs(folder, count)
        cases = [(stored, 1) for stored in FORMATS]
        if count == max(counts):
            cases.append(("encoded", 2))
        for stored, workers in cases:
            out = workdir / f"out-{count}-{stored}-{workers}"
            row = prepare_case(folder, out, stored=stored, workers=workers, image_size=image_size)
            row.update(images=count, workers=workers, source_bytes=source_bytes)
            row["written_over_source"] = round(row["written_bytes"] / source_bytes, 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
            subprocess.run(["rm", "-rf", str(out)], check=True)
        subprocess.run(["rm", "-rf", str(folder)], check=True)
    return rows


def encodings(sizes: Sequence[int], count: int) -> list[dict[str, Any]]:
    """Bytes per stored image and mean absolute error vs raw, per format and image size."""
    import numpy as np
    from PIL import Image

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-enc-") as tmp:
        write_jpegs(Path(tmp), count)
        sources = [Image.open(p).convert("RGB") for p in sorted(Path(tmp).rglob("*.jpg"))]
        for size in sizes:
            images = [
                np.asarray(img.resize((size, size), Image.Resampling.BILINEAR)) for img in sources
            ]
            raw = size * size * 3
            for name, options in [("png", {"format": "PNG"})] + [
                (f"jpeg{q}", {"format": "JPEG", "quality": q}) for q in (75, 90, 95)
            ]:
                stored, error = 0, 0.0
                for pixels in images:
                    buffer = io.BytesIO()
                    Image.fromarray(pixels).save(buffer, **options)
                    stored += buffer.tell()
                    back = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
                    error += float(np.abs(back.astype(int) - pixels.astype(int)).mean())
                rows.append(
                    {
                        "image_size": size,
                        "format": name,
                        "bytes_per_image": round(stored / len(images)),
                        "raw_over_stored": round(raw * len(images) / stored, 2),
                        "mean_abs_error": round(error / len(images), 3),
                    }
                )
    return rows


def input_rates(workdir: Path, sizes: Sequence[int], count: int, repeats: int) -> list[dict]:
    """The trainer's read + decode alone, images/s and per core, raw vs encoded records."""
    import tensorflow as tf

    from dataprep.prepare import prepare_dataset
    from trainer import data

    cores = len(os.sched_getaffinity(0))
    folder = workdir / "src-input"
    write_jpegs(folder, count)
    rows = []
    for size in sizes:
        for stored in FORMATS:
            out = workdir / f"input-{size}-{stored}"
            metadata = prepare_dataset(
                str(folder), str(out), image_size=size, record_format=stored, test_fraction=0.1
            )
            images = int(metadata["splits"]["train"]["count"])
            dataset = data.read_split(str(out), metadata, "train").batch(64).prefetch(2)
            times = []
            for _ in range(repeats + 1):
                start = time.perf_counter()
                for batch, _ in dataset:
                    tf.reduce_sum(tf.cast(batch[:, 0, 0, 0], tf.int32))
                times.append(time.perf_counter() - start)
            rate = images / common.median(common.steady(times))
            rows.append(
                {
                    "image_size": size,
                    "record_format": stored,
                    "images_per_second": round(rate, 1),
                    "per_core": round(rate / cores, 1),
                    "cores": cores,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def trainer_runs(
    workdir: Path, count: int, image_size: int, seeds: int, epochs: int
) -> dict[str, Any]:
    """The trainer on raw and encoded records at equal work: epoch time, validation accuracy."""
    from benchmarks import bench_trainer
    from dataprep.prepare import prepare_dataset

    folder = workdir / "src-trainer"
    write_jpegs(folder, count)
    results: dict[str, Any] = {}
    for stored in FORMATS:
        out = workdir / f"trainer-{stored}"
        prepare_dataset(str(folder), str(out), image_size=image_size, record_format=stored)
        data = {"prepared": str(out), "seeds_folder": str(folder), "image_size": image_size}
        runs = [
            bench_trainer.run_worker(
                "ours", "none", data, epochs=epochs, batch_size=32, seed=42 + i
            )
            for i in range(seeds)
        ]
        summary = bench_trainer.summarize(runs)
        results[stored] = {"summary": summary, "runs": runs}
        print(stored, json.dumps(summary), flush=True)
    return results


def headline(figures: dict[str, Any]) -> list[list[str]]:
    """The README rows: the memory curve, bytes, workers, input rates, trainer accuracy."""
    rows = []
    for stored in FORMATS:
        points = [r for r in figures["curve"] if r["record_format"] == stored and r["workers"] == 1]
        rows.append(
            [
                f"prepare {stored}: peak RSS (tree) at "
                + "/".join(f"{r['images']:,}" for r in points),
                " / ".join(f"{r['peak_tree_mb']:.0f} MB" for r in points),
            ]
        )
        rows.append(
            [f"prepare {stored}: wall, written ÷ source", " / ".join(
                f"{r['wall_s']:.1f} s, {r['written_over_source']}×" for r in points
            )]
        )  # fmt: skip
    largest = max(r["images"] for r in figures["curve"])
    by_workers = {
        r["workers"]: r
        for r in figures["curve"]
        if r["images"] == largest and r["record_format"] == "encoded"
    }
    if 2 in by_workers:
        rows.append(
            [
                f"prepare_workers 1 → 2 at {largest:,} (encoded): wall, peak tree",
                f"{by_workers[1]['wall_s']:.1f} → {by_workers[2]['wall_s']:.1f} s, "
                f"{by_workers[1]['peak_tree_mb']:.0f} → {by_workers[2]['peak_tree_mb']:.0f} MB",
            ]
        )
    for row in figures.get("input", []):
        rows.append(
            [
                f"input read+decode {row['image_size']} px {row['record_format']}",
                f"{row['images_per_second']:.0f} images/s ({row['per_core']:.0f} per core)",
            ]
        )
    for stored, result in figures.get("trainer", {}).items():
        summary = result["summary"]
        rows.append(
            [
                f"trainer on {stored}: epoch s, final val_accuracy (median)",
                f"{common.fmt(summary.get('epoch_seconds'))} s, "
                f"{common.fmt(summary.get('final_val_accuracy'))}",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--input-count", type=int, default=1000)
    parser.add_argument("--trainer-count", type=int, default=1024)
    parser.add_argument("--trainer-size", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument(
        "--parts", nargs="+", default=["curve", "encodings", "input", "trainer"],
        choices=["curve", "encodings", "input", "trainer"],
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.counts, args.input_count, args.trainer_count = [40, 80], 40, 64
        args.seeds, args.epochs = 1, 2
    figures: dict[str, Any] = {"source": f"{SOURCE_SIZE}-px JPEG q75, {CLASSES} classes"}
    with tempfile.TemporaryDirectory(prefix="bench-prepare-scale-") as tmp:
        workdir = Path(tmp)
        if "curve" in args.parts:
            figures["curve"] = curve(workdir, args.counts, args.image_size)
        if "encodings" in args.parts:
            figures["encodings"] = encodings([32, 64, 96, 128, 224], min(args.input_count, 200))
        if "input" in args.parts:
            figures["input"] = input_rates(workdir, [128, 224], args.input_count, repeats=3)
        if "trainer" in args.parts:
            figures["trainer"] = trainer_runs(
                workdir, args.trainer_count, args.trainer_size, args.seeds, args.epochs
            )
    common.finish(NAME, figures, headline(figures) if "curve" in figures else [], args)


if __name__ == "__main__":
    main()
