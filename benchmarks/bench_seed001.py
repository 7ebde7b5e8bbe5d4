"""Equal work, whole process (issue 30, item 8): ours against seed 001's trainer on ResNet50.

Both sides train the same images for the same epochs with the same model (ResNet50
with no pretrained weights, GAP, Dense(1016, relu), a `num_classes` head), Adam(1e-4)
and batch, each as a whole process timed from spawn to exit (imports, input,
training, validation every epoch, saving: seed 001's `model.save`, our export):

* source: the bundled digits as RGB PNGs of ``--source-size`` px in class folders;
  the training count must be a multiple of the batch (our trainer runs full
  batches only, `model.fit` a full pass: otherwise one side would do less);
* seed 001: ``python -m benchmarks.seed001_trainer`` (`MultiWorkerMirroredStrategy()`
  as the codelab, one worker here; TFDS ImageFolder, decode + resize every epoch,
  `model.fit`, `model.save`);
* ours: ``python -m trainer.task --model resnet50 --weights none --optimizer adam
  --learning_rate 0.0001 --num_units 1016 --trainable_blocks 5`` on the set prepared
  once at ``--image-size`` (its time reported beside), with its default precision
  (`auto`) and with ``--precision float32``.

Rounds alternate the sides (order rotating each round), run i uses seed 42 + i.
Figures: median wall and CPU seconds, seed 001 ÷ ours (medians and per round),
training images/s, final validation accuracy of both. Where a GPU is visible the same
rounds also run on it (and the CPU rows with ``CUDA_VISIBLE_DEVICES=-1``).

Usage: ``python -m benchmarks.bench_seed001 [--quick] [--runs 3] [--image-size 64]
[--train-images 128]``. Writes ``benchmarks/results/seed001.json``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import bench_equal_work, bench_gpu, common

NAME = "seed001"
SIDES = ("seed001", "ours", "ours-float32")
OURS_FLAGS = (
    "--model=resnet50",
    "--weights=none",
    "--optimizer=adam",
    "--learning_rate=0.0001",
    "--num_units=1016",
    "--trainable_blocks=5",
)
QUICK = {"runs": 1, "epochs": 1, "image_size": 32, "source_size": 40, "batch_size": 8}
QUICK_COUNTS = {"train": 16, "validation": 8, "test": 8}


def run_side(side: str, device: str, work: Path, args: Any, seed: int) -> dict[str, Any]:
    """One whole-process run of `side` on `device`; its wall and CPU time and what it reported."""
    env = common.bench_env(**(bench_gpu.CPU_ONLY if device == "cpu" else {}))
    model_dir = work / f"model-{device}-{side}-{seed}"
    flags = [f"--epochs={args.epochs}", f"--batch_size={args.batch_size}", f"--seed={seed}"]
    flags.append(f"--model_dir={model_dir}")
    cpu_before = common.children_cpu_seconds()
    if side == "seed001":
        argv = [sys.executable, "-m", "benchmarks.seed001_trainer", f"--folder={work / 'seeds'}"]
        argv += [f"--image_size={args.image_size}", f"--strategy={args.strategy}", *flags]
        wall, process = common.run_command(argv, env=env)
        line = [x for x in process.stdout.splitlines() if x.startswith("RESULT ")][-1]
        result = json.loads(line.removeprefix("RESULT "))
        history = result["history"]
        figures = {
            "val_accuracy": history[-1]["val_accuracy"],
            "images_per_second": common.median(
                e["images_per_second"] for e in common.steady(history)
            ),
            "strategy": result["strategy"],
        }
    else:
        argv = [sys.executable, "-m", "trainer.task", f"--data={work / 'prepared'}", *OURS_FLAGS]
        argv += [*flags, *(["--precision=float32"] if side == "ours-float32" else [])]
        wall, _ = common.run_command(argv, env=env)
        figures = bench_equal_work.card_figures(model_dir)
    return {"wall": wall, "cpu": common.children_cpu_seconds() - cpu_before, **figures}


def benchmark(args: Any) -> dict[str, Any]:
    """Write and prepare the images once, then alternate the sides `args.runs` times per device."""
    from dataprep.prepare import prepare_dataset

    counts = dict(QUICK_COUNTS) if args.quick else {}
    counts = counts or {"train": args.train_images, "validation": args.val_images, "test": 8}
    found = bench_gpu.detect_devices()
    devices = ["cpu", *(["gpu"] if found["gpus"] else [])]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {d: {s: [] for s in SIDES} for d in devices}
    with tempfile.TemporaryDirectory(prefix="bench-seed001-") as tmp:
        work = Path(tmp)
        bench_equal_work.write_source(work / "source", counts, args.source_size)
        bench_equal_work.seeds_folder(work / "source", work / "seeds")
        prepare_seconds, _ = common.timed(
            lambda: prepare_dataset(
                str(work / "source"), str(work / "prepared"), image_size=args.image_size
            )
        )
        for index in range(args.runs):
            order = SIDES[index % len(SIDES) :] + SIDES[: index % len(SIDES)]
            for device in devices:
                for side in order:
                    result = run_side(side, device, work, args, 42 + index)
                    runs[device][side].append(result)
                    print(
                        f"run {index + 1}/{args.runs} {device} {side}: {result['wall']:.1f} s, "
                        f"val_accuracy {result['val_accuracy']:.3f}",
                        flush=True,
                    )
    return {
        "devices": found,
        "settings": {
            "splits": counts,
            **{k: getattr(args, k) for k in ("source_size", "image_size", "epochs", "runs")},
            **{k: getattr(args, k) for k in ("batch_size", "strategy")},
            "ours_flags": list(OURS_FLAGS),
        },
        "prepare_seconds": round(prepare_seconds, 3),
        "runs": runs,
        "paired_ratios": {
            device: {
                side: [s["wall"] / o["wall"] for s, o in zip(by["seed001"], by[side], strict=True)]
                for side in SIDES[1:]
            }
            for device, by in runs.items()
        },
        "median": {
            device: {side: bench_equal_work.summarize(r) for side, r in by.items()}
            for device, by in runs.items()
        },
    }


def headline(figures: dict[str, Any]) -> list[list[str]]:
    """The table's rows: the work, then per device wall and CPU times, ratios, accuracies."""
    s = figures["settings"]
    rows = [
        [
            "equal work",
            f"{s['splits']['train']} train / {s['splits']['validation']} val images, "
            f"{s['source_size']}px PNG → {s['image_size']}px, {s['epochs']} epochs, "
            f"batch {s['batch_size']}, ResNet50 (no pretrained weights) + Dense(1016), "
            f"Adam(1e-4), {s['runs']} runs",
        ],
        ["preparation, once (ours), s", common.fmt(figures["prepare_seconds"], ".2f")],
    ]
    for device, med in figures["median"].items():
        seed, paired = med["seed001"], figures["paired_ratios"][device]
        rows.append(
            [f"{device}: whole process s, seed 001 ({seed['strategy']})", f"{seed['wall']:.2f}"]
        )
        for side, label in (("ours", "default (auto → {})"), ("ours-float32", "float32")):
            ours = med[side]
            rows.append(
                [
                    f"{device}: whole process s, ours {label.format(ours['precision'])}",
                    f"{ours['wall']:.2f} = "
                    f"{common.fmt(common.ratio(seed['wall'], ours['wall']), '.2f', '×')} seed 001's"
                    f" (per round {min(paired[side]):.2f}-{max(paired[side]):.2f}×)",
                ]
            )
        auto, f32 = med["ours"], med["ours-float32"]
        cpu = [
            f"{m['cpu']:.1f} = {common.fmt(bench_equal_work.cpu_ratio(seed, m), '.2f', '×')}"
            for m in (auto, f32)
        ]
        rows += [
            [
                f"{device}: CPU s, seed 001 / ours auto / ours float32",
                f"{seed['cpu']:.1f} / {cpu[0]} / {cpu[1]}",
            ],
            [
                f"{device}: training images/s, seed 001 / ours auto / ours float32",
                " / ".join(f"{m['images_per_second']:.1f}" for m in (seed, auto, f32)),
            ],
            [
                f"{device}: final val accuracy, seed 001 / ours auto / ours float32",
                " / ".join(f"{m['val_accuracy']:.3f}" for m in (seed, auto, f32)),
            ],
        ]
    return rows


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    parser = common.base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=3, help="alternated runs per side (3)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per run (2, seed 001's)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch per step (64)")
    parser.add_argument("--image-size", type=int, default=64, help="training side, px (64)")
    parser.add_argument("--source-size", type=int, default=128, help="PNG side, px (128)")
    parser.add_argument("--train-images", type=int, default=128, help="a multiple of the batch")
    parser.add_argument("--val-images", type=int, default=64, help="validation images (64)")
    parser.add_argument(
        "--strategy", default="multi_worker", help="seed 001's strategy (multi_worker)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    elif args.train_images % args.batch_size:
        parser.error(f"--train-images {args.train_images}: not a multiple of the batch")
    figures = benchmark(args)
    common.finish(NAME, figures, headline(figures), args)


if __name__ == "__main__":
    main()
