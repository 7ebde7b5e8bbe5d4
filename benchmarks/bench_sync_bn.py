"""Synchronised BatchNorm in the final multi-worker job (issue 30, item 7): measured, not assumed.

The final job trains under MultiWorkerMirroredStrategy; by default each replica
normalises with its own batch's statistics (Keras's default, and seed 001's). With
`synchronized=True` every BatchNorm layer all-reduces its batch statistics across the
replicas at every step: statistics over the global batch, at the price of three
collectives per BatchNorm layer per step (ResNet50 has 53).

Both sides run the product's own final job: the `worker_pool_specs` of a chief and one
worker (`pipelines.jobs.worker_pools.training_worker_pool_specs`) run by the local job
executor, `python -m trainer.task` per replica with `TF_CONFIG` on loopback, on the
bundled digits prepared once. The sides differ only in the model:

* `per-replica`: `--model resnet50 --weights none` (what the pipeline runs);
* `synchronized`: `--model benchmarks.sync_bn_models:resnet50` (the same builder with
  every BatchNorm layer switched to synchronised statistics).

Each per-replica batch size is run with both sides, alternating, `--runs` times (run i
uses seed 42 + i). Figures, medians: whole-job wall seconds, steady training images/s
(the chief's model card), final validation accuracy and the last epoch's training
accuracy (batch statistics: what synchronisation changes); the cost ratio.

Usage: ``python -m benchmarks.bench_sync_bn [--quick] [--runs 2] [--batch-sizes 8,32]``.
Writes ``benchmarks/results/sync_bn.json``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import bench_equal_work, common

NAME = "sync_bn"
SIDES = {
    "per-replica": "resnet50",
    "synchronized": "benchmarks.sync_bn_models:resnet50",
}
COUNTS = {"train": 768, "validation": 256, "test": 8}
QUICK = {"runs": 1, "epochs": 1, "batch_sizes": "4", "image_size": 32}
QUICK_COUNTS = {"train": 16, "validation": 8, "test": 8}


def run_side(side: str, batch_size: int, work: Path, args: Any, seed: int) -> dict[str, Any]:
    """One final job (chief + 1 worker) of `side`; its wall time and the chief's figures."""
    from pipelines.jobs.local_job import run_custom_job
    from pipelines.jobs.worker_pools import training_worker_pool_specs

    base = work / f"job-{side}-{batch_size}-{seed}"
    trainer_flags = [
        f"--data={work / 'prepared'}",
        f"--model={SIDES[side]}",
        "--weights=none",
        "--optimizer=adam",
        f"--learning_rate={args.learning_rate}",
        f"--epochs={args.epochs}",
        f"--batch_size={batch_size}",
        f"--seed={seed}",
    ]
    pools = training_worker_pool_specs(
        image_uri="local",
        command=[sys.executable, "-m", "trainer.task"],
        args=trainer_flags,
        worker_count=1,
    )
    env = common.bench_env(PYTHONPATH=str(common.ROOT))
    wall, _ = common.timed(
        lambda: run_custom_job(
            pools,
            str(base),
            extra_env={k: env[k] for k in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL")},
            log_dir=str(base / "logs"),
            cwd=str(common.ROOT),
        )
    )
    figures = bench_equal_work.card_figures(base / "model")
    card = json.loads((base / "model" / "model.json").read_text())
    return {"wall": wall, "train_accuracy": card["final_metrics"]["train_accuracy"], **figures}


def benchmark(args: Any) -> dict[str, Any]:
    """Prepare the digits once, then alternate the sides `args.runs` times per batch size."""
    from dataprep.prepare import prepare_dataset

    counts = QUICK_COUNTS if args.quick else COUNTS
    batch_sizes = [int(b) for b in str(args.batch_sizes).split(",")]
    runs: dict[int, dict[str, list[dict[str, Any]]]] = {
        b: {side: [] for side in SIDES} for b in batch_sizes
    }
    with tempfile.TemporaryDirectory(prefix="bench-sync-bn-") as tmp:
        work = Path(tmp)
        bench_equal_work.write_source(work / "source", counts, args.image_size)
        prepare_dataset(str(work / "source"), str(work / "prepared"), image_size=args.image_size)
        for index in range(args.runs):
            for batch_size in batch_sizes:
                order = list(SIDES)[:: 1 if index % 2 == 0 else -1]
                for side in order:
                    result = run_side(side, batch_size, work, args, 42 + index)
                    runs[batch_size][side].append(result)
                    print(
                        f"run {index + 1}/{args.runs} batch {batch_size}/replica {side}: "
                        f"{result['wall']:.1f} s, {result['images_per_second']:.1f} img/s, "
                        f"val_accuracy {result['val_accuracy']:.3f}",
                        flush=True,
                    )
    median = {
        b: {side: bench_equal_work.summarize(r) for side, r in by.items()} for b, by in runs.items()
    }
    return {
        "settings": {
            "splits": counts,
            "batch_sizes": batch_sizes,
            **{k: getattr(args, k) for k in ("image_size", "epochs", "runs", "learning_rate")},
            "replicas": 2,
        },
        "runs": runs,
        "median": median,
    }


def headline(figures: dict[str, Any]) -> list[list[str]]:
    """Per batch size: wall, images/s and accuracy of both sides, and the cost ratio."""
    s = figures["settings"]
    rows = [
        [
            "work",
            f"ResNet50 (no pretrained weights), chief + 1 worker (MultiWorkerMirroredStrategy), "
            f"{s['splits']['train']} train / {s['splits']['validation']} val digits at "
            f"{s['image_size']}px, {s['epochs']} epochs, Adam({s['learning_rate']}), "
            f"{s['runs']} runs",
        ]
    ]
    for batch_size, by in figures["median"].items():
        per, sync = by["per-replica"], by["synchronized"]
        cost = common.fmt(common.ratio(sync["wall"], per["wall"]), ".2f", "×")
        rows += [
            [
                f"batch {batch_size}/replica: job wall s, per-replica / synchronized",
                f"{per['wall']:.1f} / {sync['wall']:.1f} (synchronized costs {cost})",
            ],
            [
                f"batch {batch_size}/replica: training images/s, per-replica / synchronized",
                f"{per['images_per_second']:.1f} / {sync['images_per_second']:.1f}",
            ],
            [
                f"batch {batch_size}/replica: final val accuracy, per-replica / synchronized",
                f"{per['val_accuracy']:.3f} / {sync['val_accuracy']:.3f}",
            ],
            [
                f"batch {batch_size}/replica: last epoch's train accuracy, per-replica / "
                "synchronized",
                f"{per['train_accuracy']:.3f} / {sync['train_accuracy']:.3f}",
            ],
        ]
    return rows


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    parser = common.base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=2, help="alternated runs per side (2)")
    parser.add_argument("--epochs", type=int, default=6, help="epochs per job (6)")
    parser.add_argument(
        "--batch-sizes", default="8,32", help="per-replica batch sizes, comma-separated (8,32)"
    )
    parser.add_argument("--image-size", type=int, default=32, help="training side, px (32)")
    parser.add_argument("--learning-rate", type=float, default=0.001, help="Adam's (0.001)")
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    figures = benchmark(args)
    common.finish(NAME, figures, headline(figures), args)


if __name__ == "__main__":
    main()
