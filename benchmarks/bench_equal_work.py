"""Equal work, whole process (issue 18): `python -m trainer.task` against the seeds' trainer.

Both sides train the same images for the same epochs with the same model and
hyperparameters, each as a whole process timed from spawn to exit (imports,
input, training, validation, the hypertune report; ours also exports its
SavedModel, which the seeds' codelab does not):

* source: the bundled digits as 300×300 RGB PNGs (the seeds' horses_or_humans
  kind), split into folders: 768 training images (12 full batches of 64, so
  `model.fit`'s last partial batch cannot make the seeds do less or more),
  192 validation, 96 test;
* ours: `python -m trainer.task` with its defaults (precision `auto`; and
  `--precision float32` forced) on the set prepared once at 150 px (preparation
  is a pipeline step that every trial and the final job reuse; its time is
  reported beside);
* the seeds': `python -m benchmarks.seed_trainer`, the codelab's `main()`:
  `MirroredStrategy()`, TFDS ImageFolder, decode and resize to 150 px every epoch,
  `model.fit`, hypertune report.

Runs alternate (seeds, ours auto, ours float32, rotating the order each round)
so drift hits every side; run i of each side uses seed 42 + i. Figures: median
wall seconds, the ratios seeds ÷ ours, median CPU seconds (user + system) of the
whole-process sides, ours' first step (seconds after its process started, from its
model card), its input wait (share of steady-state step time spent waiting for a
batch), and the final validation accuracy of both. CPU time is the work done: the
seeds' wall time varies by half from run to run at the same CPU time (it idles
between decoding and training), so it says what the wall-time ratio rests on.

Hyperparameters: lr 0.003, momentum 0.9, 64 units, batch 64 (`--learning-rate`
to change). At the issue's lr 0.01 both trainers diverge to chance on this data
(measured here: seeds 0.099, ours 0.104 after 5 epochs), and equal chance-level
accuracies say nothing.

Usage: ``python -m benchmarks.bench_equal_work [--quick] [--runs 3] [--epochs 5]``;
``--train-images 4992 --sides ours`` measures the input wait at a realistic size.
Writes ``benchmarks/results/equal_work.json``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "equal_work"
SPLITS = {"train": 768, "validation": 192, "test": 96}
SOURCE_SIZE = 300
IMAGE_SIZE = 150
SIDES = ("seeds", "ours", "ours-float32", "ours-forked")
# ours-forked: the same command as `ours`, forked from a preloaded trainer as a local trial
# is (`pipelines.jobs.fork_server`); timed from the request to its exit, the server started before.
RESULT_PREFIX = "RESULT "


def write_source(folder: Path, counts: dict[str, int], size: int) -> None:
    """The digits as `size`² RGB PNGs in `<split>/<class>/` folders, `counts` per split."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = np.round(digits.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
    total = sum(counts.values())
    # More images than the 1,797 digits (an input-wait run) repeats them under other names.
    order = np.resize(np.random.default_rng(0).permutation(len(pixels)), total)
    start = 0
    for split, count in counts.items():
        for number, index in enumerate(order[start : start + count], start=start):
            target = folder / split / str(digits.target[index])
            target.mkdir(parents=True, exist_ok=True)
            image = Image.fromarray(pixels[index], mode="L").convert("RGB")
            image.resize((size, size), Image.Resampling.BILINEAR).save(target / f"{number}.png")
        start += count


def seeds_folder(source: Path, folder: Path) -> None:
    """The seeds' TFDS layout of the same files: `train/` and `test/` (our validation)."""
    from benchmarks.seed_trainer import TFDS_SPLITS

    for split, tfds_split in TFDS_SPLITS.items():
        for path in (source / split).rglob("*.png"):
            target = folder / tfds_split / path.relative_to(source / split)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.hardlink_to(path)


def forked_run(server: Any, argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one run forked from `server`, request to exit."""
    import time

    from pipelines.jobs.fork_client import ForkedProcess

    start = time.perf_counter()
    child = server.spawn(argv, env, str(common.ROOT))
    if not isinstance(child, ForkedProcess):
        raise RuntimeError(f"not forked: {child}")
    output = child.stdout.read().decode(errors="replace")
    child.stdout.close()
    if child.wait() != 0:
        raise RuntimeError(f"forked run failed:\n{output[-2000:]}")
    return time.perf_counter() - start


def run_side(side: str, work: Path, args: Any, seed: int, server: Any = None) -> dict[str, Any]:
    """One whole-process run of `side`; its wall time and what it reported."""
    metric_file = work / f"{side}-{seed}.metrics"
    common_flags = [
        f"--epochs={args.epochs}",
        f"--batch_size={args.batch_size}",
        f"--learning_rate={args.learning_rate}",
        "--momentum=0.9",
        "--num_units=64",
        f"--seed={seed}",
    ]
    env = common.bench_env(CLOUD_ML_HP_METRIC_FILE=str(metric_file))
    cpu_before = common.children_cpu_seconds()
    if side == "seeds":
        argv = [sys.executable, "-m", "benchmarks.seed_trainer", f"--folder={work / 'seeds'}"]
        wall, process = common.run_command([*argv, *common_flags], env=env)
        lines = [x for x in process.stdout.splitlines() if x.startswith(RESULT_PREFIX)]
        history = json.loads(lines[-1][len(RESULT_PREFIX) :])["history"]
        return {
            "wall": wall,
            "cpu": common.children_cpu_seconds() - cpu_before,
            "val_accuracy": history[-1]["val_accuracy"],
        }
    model_dir = work / f"model-{side}-{seed}"
    argv = [sys.executable, "-m", "trainer.task", f"--data={work / 'prepared'}"]
    argv += [f"--model_dir={model_dir}", *common_flags]
    if side == "ours-float32":
        argv.append("--precision=float32")
    cpu: dict[str, float] = {}
    if side == "ours-forked":  # the child is the fork server's: its CPU time is not ours to read
        wall = forked_run(server, argv, env)
    else:
        wall, _ = common.run_command([*argv], env=env)
        cpu["cpu"] = common.children_cpu_seconds() - cpu_before
    return {"wall": wall, **cpu, **card_figures(model_dir)}


def card_figures(model_dir: Path) -> dict[str, Any]:
    """What our trainer's model card says of a run: accuracy, first step, input wait, speed."""
    card = json.loads((model_dir / "model.json").read_text())
    steady = common.steady(card["history"])
    return {
        "val_accuracy": card["final_metrics"]["val_accuracy"],
        "first_step": card["training"]["first_step_seconds"],
        "input_wait": common.median(e["input_wait"] for e in steady),
        "images_per_second": common.median(e["images_per_second"] for e in steady),
        "precision": card["training"]["precision"],
        "precision_reason": card["training"]["precision_reason"],
    }


def benchmark(args: Any) -> dict[str, Any]:
    """Prepare the data once, then run every side `args.runs` times, alternating."""
    from dataprep.prepare import prepare_dataset

    counts = {k: max(v // (8 if args.quick else 1), 1) for k, v in SPLITS.items()}
    if args.train_images:
        counts["train"] = args.train_images
    with tempfile.TemporaryDirectory(prefix="bench-equal-work-") as tmp:
        work = Path(tmp)
        write_source(work / "source", counts, SOURCE_SIZE)
        seeds_folder(work / "source", work / "seeds")
        prepare_seconds, _ = common.timed(
            lambda: prepare_dataset(
                str(work / "source"), str(work / "prepared"), image_size=IMAGE_SIZE
            )
        )
        sides = tuple(args.sides)
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        server, server_ready = None, None
        if "ours-forked" in sides:
            from pipelines.jobs.fork_client import ForkServer

            server_ready, server = common.timed(
                lambda: ForkServer.start(cwd=str(common.ROOT), env=common.bench_env())
            )
            ready_seconds, ready = common.timed(server.ready)
            server_ready += ready_seconds
            if not ready:
                raise RuntimeError(f"fork server unavailable: {server.unavailable}")
        for index in range(args.runs):
            order = sides[index % len(sides) :] + sides[: index % len(sides)]
            for side in order:
                result = run_side(side, work, args, 42 + index, server)
                runs[side].append(result)
                print(
                    f"run {index + 1}/{args.runs} {side}: {result['wall']:.2f} s, "
                    f"val_accuracy {result['val_accuracy']:.3f}",
                    flush=True,
                )
    if server is not None:
        server.close()
    paired = {
        side: [s["wall"] / o["wall"] for s, o in zip(runs["seeds"], runs[side], strict=True)]
        for side in sides
        if side != "seeds" and "seeds" in runs
    }
    return {
        "paired_ratios": paired,
        "settings": {
            "splits": counts,
            "source_size": SOURCE_SIZE,
            "image_size": IMAGE_SIZE,
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "learning_rate": args.learning_rate,
            "runs": args.runs,
        },
        "prepare_seconds": round(prepare_seconds, 3),
        "fork_server_ready_seconds": server_ready and round(server_ready, 3),
        "runs": runs,
        "median": {side: summarize(results) for side, results in runs.items()},
    }


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of every numeric figure over a side's runs."""
    keys = [k for k, v in results[0].items() if isinstance(v, int | float)]
    summary: dict[str, Any] = {k: round(common.median(r[k] for r in results), 4) for k in keys}
    summary.update({k: v for k, v in results[0].items() if isinstance(v, str)})
    return summary


def cpu_ratio(seeds: dict[str, Any], ours: dict[str, Any]) -> float | None:
    """The seeds' CPU seconds over ours (None when either was not measured)."""
    if seeds.get("cpu") is None or ours.get("cpu") is None:
        return None
    return common.ratio(seeds["cpu"], ours["cpu"])


def headline(figures: dict[str, Any]) -> list[list[str]]:
    """The table's rows: wall times and ratios, first step, input wait, accuracies."""
    med = figures["median"]
    if not set(SIDES) - {"ours-forked"} <= set(med):
        return [[f"{side}: {key}", str(value)] for side in med for key, value in med[side].items()]
    seeds, auto, f32 = med["seeds"], med["ours"], med["ours-float32"]
    settings = figures["settings"]
    work = (
        f"{settings['splits']['train']} train / {settings['splits']['validation']} val images, "
        f"{settings['source_size']}px PNG → {settings['image_size']}px, "
        f"{settings['epochs']} epochs, batch {settings['batch_size']}, {settings['runs']} runs"
    )
    rows = [
        ["equal work", work],
        ["whole process s: seeds", common.fmt(seeds["wall"], ".2f")],
        [
            f"whole process s: ours, default (auto → {auto['precision']})",
            f"{common.fmt(auto['wall'], '.2f')} = "
            f"{common.fmt(common.ratio(seeds['wall'], auto['wall']), '.2f', '×')} the seeds'",
        ],
        [
            "whole process s: ours, --precision float32",
            f"{common.fmt(f32['wall'], '.2f')} = "
            f"{common.fmt(common.ratio(seeds['wall'], f32['wall']), '.2f', '×')} the seeds'",
        ],
        [
            "seeds ÷ ours per round, median (min-max): auto / float32",
            " / ".join(
                f"{common.median(r):.2f}× ({min(r):.2f}-{max(r):.2f})"
                for r in (
                    figures["paired_ratios"]["ours"],
                    figures["paired_ratios"]["ours-float32"],
                )
            ),
        ],
        [
            "CPU s, user + system: seeds / ours auto / ours float32",
            f"{common.fmt(seeds.get('cpu'), '.1f')} / "
            f"{common.fmt(auto.get('cpu'), '.1f')} = "
            f"{common.fmt(cpu_ratio(seeds, auto), '.2f', '×')} / "
            f"{common.fmt(f32.get('cpu'), '.1f')} = "
            f"{common.fmt(cpu_ratio(seeds, f32), '.2f', '×')}",
        ],
        [
            "ours: first step, s after process start (auto / float32)",
            f"{common.fmt(auto['first_step'], '.2f')} / {common.fmt(f32['first_step'], '.2f')}",
        ],
        [
            "ours: input wait, share of step time (auto / float32)",
            f"{common.fmt(100 * auto['input_wait'], '.1f', '%')} / "
            f"{common.fmt(100 * f32['input_wait'], '.1f', '%')}",
        ],
        [
            "ours: training images/s (auto / float32)",
            f"{common.fmt(auto['images_per_second'], '.0f')} / "
            f"{common.fmt(f32['images_per_second'], '.0f')}",
        ],
        [
            "final val accuracy: seeds / ours auto / ours float32",
            f"{seeds['val_accuracy']:.3f} / {auto['val_accuracy']:.3f} / {f32['val_accuracy']:.3f}",
        ],
        ["preparation, once (ours), s", common.fmt(figures["prepare_seconds"], ".2f")],
    ]
    forked = med.get("ours-forked")
    if forked:
        rows[-1:-1] = [
            [
                "local trial, forked from the preloaded trainer (auto): s, first step s",
                f"{common.fmt(forked['wall'], '.2f')} = "
                f"{common.fmt(common.ratio(seeds['wall'], forked['wall']), '.2f', '×')} the "
                f"seeds'; first step {common.fmt(forked['first_step'], '.2f')} "
                f"(server ready once in {common.fmt(figures['fork_server_ready_seconds'], '.2f')})",
            ]
        ]
    return rows


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    parser = common.base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=3, help="alternated runs per side (3)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs per run (5)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch per step (64)")
    parser.add_argument("--learning-rate", type=float, default=0.003, help="both sides (0.003)")
    parser.add_argument(
        "--train-images", type=int, default=0, help="training images (768; more repeat the digits)"
    )
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES), help="who runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.epochs = 1, 1
    figures = benchmark(args)
    common.finish(NAME, figures, headline(figures), args)


if __name__ == "__main__":
    main()
