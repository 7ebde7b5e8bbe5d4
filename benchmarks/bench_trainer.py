"""Trainer benchmark (issue 8, item 1): our trainer against the seeds' trainer, side by side.

Same data (the bundled sample as encoded RGB PNGs, `--source-size` pixels, like
horses_or_humans' 300), same hardware, same strategy, same hyperparameters:

* ours: `trainer.train.train` on the dataset prepared once at `--image-size`
  (raw uint8 TFRecords, cached, prefetched, custom loop);
* the seeds': `benchmarks.seed_trainer` (TFDS-style encoded images decoded and
  resized every epoch, `model.fit`, no prefetch) on the same splits' files.

Each (trainer, strategy) run is its own process (a strategy over logical CPUs must
be set before TensorFlow starts); runs alternate ours/seeds so drift hits both,
and run i of both trainers uses seed 42 + i (initialisation and shuffling).
Strategies: MirroredStrategy over 2 logical CPUs (`HPT_LOGICAL_DEVICES=2`, what a
local trial uses) and no strategy. Figures: epoch time (with validation) and
training images/s, medians over every epoch but each run's first (warm-up); the
validation accuracy both reach after the same number of epochs (median over the
runs' seeds); the ratios. Hyperparameters default to lr 0.003, momentum 0.9: at
the codelab's lr 0.01 and a global batch of 128 both trainers diverge on this
data in most runs (measured: 0.1 accuracy = chance for both), which makes the
"equal accuracy" comparison meaningless. Ours also runs with
`--precision mixed_bfloat16` ("ours-bf16").

Usage: ``python -m benchmarks.bench_trainer [--quick] [--epochs 8] [--runs 3]``.
Writes ``benchmarks/results/trainer.json``. `bench_gpu` reuses `run_worker`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "trainer"
# "ours-bf16": our trainer with --precision mixed_bfloat16 (float32 variables and export).
TRAINERS = ("ours", "seeds", "ours-bf16")
STRATEGIES = {"mirrored": {"HPT_LOGICAL_DEVICES": "2"}, "none": {}}
# "Equal accuracy": ours may trail the seeds by at most this much validation accuracy.
ACCURACY_TOLERANCE = 0.03
RESULT_PREFIX = "RESULT "
XLA_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


def prepare_data(workdir: Path, image_size: int, source_size: int | None) -> dict[str, Any]:
    """Write the sample as image files, prepare it, and lay out the same splits for the seeds."""
    from benchmarks.bench_input import write_source
    from benchmarks.seed_trainer import write_tfds_folder
    from dataprep.prepare import prepare_dataset

    images, prepared, seeds = workdir / "images", workdir / "prepared", workdir / "seeds"
    description = write_source(images, source_size)
    seconds, metadata = common.timed(
        lambda: prepare_dataset(str(images), str(prepared), image_size=image_size)
    )
    counts = write_tfds_folder(str(prepared), metadata, images, seeds)
    return {
        "source": description,
        "image_size": image_size,
        "prepared": str(prepared),
        "seeds_folder": str(seeds),
        "prepare_seconds": round(seconds, 3),
        "counts": counts,
    }


# --- one run, in its own process ---------------------------------------------------------


def worker_args(options: dict[str, Any]) -> list[str]:
    """Command-line flags of a worker process for `options`."""
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in options.items()]
    return [sys.executable, "-m", "benchmarks.bench_trainer", "worker", *flags]


def run_worker(
    trainer: str,
    distribution: str,
    data: dict[str, Any],
    *,
    epochs: int,
    batch_size: int,
    seed: int = 42,
    env: dict[str, str] | None = None,
    mixed_precision: bool = False,
    xla: bool = False,
    learning_rate: float = 0.003,
    momentum: float = 0.9,
) -> dict[str, Any]:
    """Train once in a fresh process; return its per-epoch history and facts."""
    options = {
        "learning_rate": learning_rate,
        "momentum": momentum,
        "trainer": trainer,
        "distribution": distribution,
        "prepared": data["prepared"],
        "seeds_folder": data["seeds_folder"],
        "image_size": data["image_size"],
        "epochs": epochs,
        "batch_size": batch_size,
        "seed": seed,
        "mixed_precision": int(mixed_precision),
    }
    extra = dict(env or {})
    if xla:
        extra["TF_XLA_FLAGS"] = XLA_FLAGS
    wall, process = common.run_command(worker_args(options), env=common.bench_env(**extra))
    lines = [line for line in process.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        raise RuntimeError(f"worker printed no result:\n{process.stdout[-2000:]}")
    result = json.loads(lines[-1][len(RESULT_PREFIX) :])
    result["process_seconds"] = round(wall, 3)
    return result


def device_description() -> dict[str, Any]:
    """The accelerator TensorFlow sees (GPU name and count), or the CPU."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return {"type": "CPU", "count": 0, "name": None}
    details = tf.config.experimental.get_device_details(gpus[0])
    return {"type": "GPU", "count": len(gpus), "name": details.get("device_name")}


def train_ours(args: argparse.Namespace) -> dict[str, Any]:
    """Our trainer, in this process."""
    from trainer import records, train
    from trainer.config import HParams, RunConfig

    hparams = HParams(
        batch_size=args.batch_size,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        momentum=args.momentum,
    )
    precision = "mixed_bfloat16" if args.trainer == "ours-bf16" else "float32"
    run = RunConfig(
        data=args.prepared, distribution=args.distribution, seed=args.seed, precision=precision
    )
    result = train.train(hparams, run)
    global_batch = args.batch_size * result.replicas_in_sync
    count = int(records.read_metadata(args.prepared)["splits"]["train"]["count"])
    images = count // global_batch * global_batch
    history = [
        {**epoch, "train_seconds": images / epoch["images_per_second"]} for epoch in result.history
    ]
    return {"history": history, "replicas": result.replicas_in_sync, "train_images": images}


def train_seeds(args: argparse.Namespace) -> dict[str, Any]:
    """The seeds' trainer, in this process, under the strategy ours would use."""
    from benchmarks import seed_trainer
    from trainer import distribute

    strategy, _ = distribute.make_strategy(args.distribution)
    return seed_trainer.train(
        args.seeds_folder,
        strategy=strategy,
        epochs=args.epochs,
        batch_size=args.batch_size,
        image_size=args.image_size,
        seed=args.seed,
        learning_rate=args.learning_rate,
        momentum=args.momentum,
    )


def worker_main(argv: list[str]) -> None:
    """Entry point of a worker process: train, print one ``RESULT {json}`` line."""
    parser = argparse.ArgumentParser(prog="bench_trainer worker")
    parser.add_argument("--trainer", choices=TRAINERS, required=True)
    parser.add_argument("--distribution", choices=tuple(STRATEGIES), required=True)
    parser.add_argument("--prepared", required=True)
    parser.add_argument("--seeds-folder", required=True)
    parser.add_argument("--image-size", type=int, required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--mixed-precision", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=0.003)
    parser.add_argument("--momentum", type=float, default=0.9)
    args = parser.parse_args(argv)
    import keras

    if args.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_float16")
    result = (train_seeds if args.trainer == "seeds" else train_ours)(args)
    result.update(
        trainer=args.trainer,
        distribution=args.distribution,
        device=device_description(),
        mixed_precision=bool(args.mixed_precision),
        xla=bool(os.environ.get("TF_XLA_FLAGS")),
    )
    print(RESULT_PREFIX + json.dumps(result), flush=True)


# --- figures -------------------------------------------------------------------------------


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over every run's epochs after the first, and the final validation accuracy."""
    steady = [epoch for run in runs for epoch in common.steady(run["history"])]
    return {
        "epoch_seconds": round(common.median(e["seconds"] for e in steady), 4),
        "train_seconds": round(common.median(e["train_seconds"] for e in steady), 4),
        "images_per_second": round(common.median(e["images_per_second"] for e in steady), 1),
        "final_val_accuracy": round(
            common.median(r["history"][-1]["val_accuracy"] for r in runs), 4
        ),
        "process_seconds": round(common.median(r["process_seconds"] for r in runs), 2),
        "epochs_timed": len(steady),
        "train_images": runs[0]["train_images"],
        "replicas": runs[0]["replicas"],
        "runs": [
            {
                "epoch_seconds": [round(e["seconds"], 4) for e in r["history"]],
                "images_per_second": [round(e["images_per_second"], 1) for e in r["history"]],
                "val_accuracy": [round(e["val_accuracy"], 4) for e in r["history"]],
                **{k: r[k] for k in ("device", "process_seconds", "jit_compile") if k in r},
            }
            for r in runs
        ],
    }


def compare(ours: dict[str, Any], seeds: dict[str, Any]) -> dict[str, Any]:
    """How much faster ours is, and whether it got there at equal accuracy."""
    gap = ours["final_val_accuracy"] - seeds["final_val_accuracy"]
    speedup = common.ratio(ours["images_per_second"], seeds["images_per_second"])
    epoch_ratio = common.ratio(seeds["epoch_seconds"], ours["epoch_seconds"])
    return {
        "speedup_images_per_second": round(speedup, 2) if speedup else None,
        "speedup_epoch_time": round(epoch_ratio, 2) if epoch_ratio else None,
        "accuracy_gap": round(gap, 4),
        "equal_accuracy": gap >= -ACCURACY_TOLERANCE,
    }


def benchmark(data: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Every strategy, `runs` alternating runs of both trainers; summaries and ratios."""
    cases: dict[str, Any] = {}
    for distribution, env in STRATEGIES.items():
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in TRAINERS}
        for index in range(args.runs):
            order = TRAINERS if index % 2 == 0 else TRAINERS[::-1]
            for trainer in order:
                print(f"{distribution}: {trainer} run {index + 1}/{args.runs}", flush=True)
                runs[trainer].append(
                    run_worker(
                        trainer,
                        distribution,
                        data,
                        epochs=args.epochs,
                        batch_size=args.batch_size,
                        seed=42 + index,
                        env=env,
                        learning_rate=args.learning_rate,
                        momentum=args.momentum,
                    )
                )
        summaries = {t: summarize(r) for t, r in runs.items()}
        cases[distribution] = {
            **summaries,
            "comparison": compare(summaries["ours"], summaries["seeds"]),
            "comparison_bf16": compare(summaries["ours-bf16"], summaries["seeds"]),
        }
    return cases


def headline(cases: dict[str, Any], epochs: int) -> list[list[str]]:
    """README rows: per strategy, images/s of both, the speed-up, the accuracies."""
    rows = []
    for distribution, case in cases.items():
        ours, seeds, comparison = case["ours"], case["seeds"], case["comparison"]
        bf16, comparison_bf16 = case["ours-bf16"], case["comparison_bf16"]
        label = "Mirrored 2 CPU" if distribution == "mirrored" else "no strategy"
        rows += [
            [
                f"trainer, {label}: images/s ours / seeds",
                f"{ours['images_per_second']:.0f} / {seeds['images_per_second']:.0f} "
                f"= {common.fmt(comparison['speedup_images_per_second'], '.2f', '×')}",
            ],
            [
                f"trainer, {label}: epoch s ours / seeds",
                f"{ours['epoch_seconds']:.2f} / {seeds['epoch_seconds']:.2f}",
            ],
            [
                f"trainer, {label}: val accuracy after {epochs} epochs ours / seeds",
                f"{ours['final_val_accuracy']:.3f} / {seeds['final_val_accuracy']:.3f}"
                f"{'' if comparison['equal_accuracy'] else ' (ours lower)'}",
            ],
            [
                f"trainer, {label}: ours mixed_bfloat16 images/s (val accuracy) / seeds",
                f"{bf16['images_per_second']:.0f} ({bf16['final_val_accuracy']:.3f}) "
                f"= {common.fmt(comparison_bf16['speedup_images_per_second'], '.2f', '×')}"
                f"{'' if comparison_bf16['equal_accuracy'] else ' (lower accuracy)'}",
            ],
        ]
    return rows


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker"]:
        worker_main(argv[1:])
        return
    parser = common.base_parser(__doc__)
    parser.add_argument("--image-size", type=int, default=150)
    parser.add_argument("--source-size", type=int, default=300, help="0: the native 8x8 digits")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument(
        "--runs", type=int, default=3, help="runs per trainer and strategy (seeds 42, 43, ...)"
    )
    parser.add_argument("--batch-size", type=int, default=64, help="per replica (codelab: 64)")
    parser.add_argument("--learning-rate", type=float, default=0.003)
    parser.add_argument("--momentum", type=float, default=0.9)
    args = parser.parse_args(argv)
    if args.quick:
        args.image_size, args.source_size, args.epochs, args.runs = 48, 96, 2, 1
    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as tmp:
        data = prepare_data(Path(tmp), args.image_size, args.source_size or None)
        cases = benchmark(data, args)
    figures = {
        "settings": {
            k: getattr(args, k)
            for k in (
                "image_size",
                "source_size",
                "epochs",
                "runs",
                "batch_size",
                "learning_rate",
                "momentum",
            )
        },
        "data": {k: data[k] for k in ("source", "counts", "prepare_seconds")},
        "accuracy_tolerance": ACCURACY_TOLERANCE,
        "cases": cases,
    }
    common.finish(NAME, figures, headline(cases, args.epochs), args)


if __name__ == "__main__":
    main()
