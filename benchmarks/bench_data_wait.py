"""Input benchmark, part 2 (issue 8, item 2): batches/s of both readers, and does the trainer wait?

`bench_input` times an epoch of input of each pipeline alone (its `run_case`, reused
here as is). This adds what item 2 asks on top:

* batches/s: the seeds' pipeline (decode + resize every epoch), our reader's first
  epoch (reads the shards, fills the cache) and a later one (from the cache);
* whether our trainer waits for data: `trainer.train.train` run with its real input,
  then with its input replaced by one batch of it held in memory and repeated (no
  input work at all), in the same process, alternating. The data wait is
  ``1 - images/s(real) / images/s(in memory)`` over steady epochs (each run's first,
  tracing and cache filling, left out); ~0 means the input keeps up. Also the
  headroom: our reader's cached batches/s over the trainer's steps/s, and the
  same for the seeds' pipeline (below 1: the seeds' trainer is data-bound).

No strategy (one process; the local trials' MirroredStrategy feeds both replicas
from the same single pipeline). Usage: ``python -m benchmarks.bench_data_wait [--quick]``.
Writes ``benchmarks/results/data_wait.json``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks import common

NAME = "data_wait"


def input_alone(args: argparse.Namespace) -> list[dict[str, Any]]:
    """`bench_input.run_case` for each source, with batches/s derived from its epoch medians."""
    from benchmarks import bench_input

    options = argparse.Namespace(
        image_size=args.image_size, batch_size=args.batch_size, repeats=args.repeats
    )
    cases = []
    for source_size in args.source_sizes:
        case = bench_input.run_case(source_size or None, options)
        steps = case["epoch"]["steps"]
        case["batches_per_second"] = {
            name: round(steps / seconds, 1)
            for name, seconds in case["epoch_seconds_median"].items()
        }
        cases.append(case)
    return cases


def in_memory_input_fn(real_input_fn: Any) -> Any:
    """A `train_input_fn` stand-in: the first batch of the real input, cached and repeated."""

    def input_fn(*args: Any, **kwargs: Any) -> Any:
        real = real_input_fn(*args, **kwargs)
        return lambda context: real(context).take(1).cache().repeat()

    return input_fn


def train_rates(prepared: str, args: argparse.Namespace) -> dict[str, Any]:
    """Steady images/s of our trainer with its real input and with data held in memory."""
    from trainer import data, train
    from trainer.config import HParams, RunConfig

    hparams = HParams(batch_size=args.batch_size, epochs=args.epochs)
    run = RunConfig(data=prepared, distribution="none")
    fake = in_memory_input_fn(data.train_input_fn)
    epochs: dict[str, list[float]] = {"real": [], "in_memory": []}
    for _ in range(args.runs):
        real = train.train(hparams, run).history
        with mock.patch.object(data, "train_input_fn", fake):
            memory = train.train(hparams, run).history
        epochs["real"] += [e["images_per_second"] for e in common.steady(real)]
        epochs["in_memory"] += [e["images_per_second"] for e in common.steady(memory)]
    real_ips, memory_ips = common.median(epochs["real"]), common.median(epochs["in_memory"])
    return {
        "images_per_second": {"real": round(real_ips, 1), "in_memory": round(memory_ips, 1)},
        "steps_per_second": round(real_ips / args.batch_size, 2),
        "data_wait_fraction": round(max(0.0, 1.0 - real_ips / memory_ips), 3),
        "epochs": {k: [round(v, 1) for v in values] for k, values in epochs.items()},
    }


def headline(cases: list[dict[str, Any]], trainer: dict[str, Any], size: int) -> list[list[str]]:
    """README rows: preparation, batches/s of both readers, the data wait and the headroom."""
    rows = []
    for case in cases:
        rate = case["batches_per_second"]
        rows.append(
            [
                f"preparation, {case['source']} → {size}px: images/s",
                f"{case['preparation']['images_per_second']:.0f}",
            ]
        )
        rows.append(
            [
                f"input alone, {case['source']} → {size}px: batches/s seeds / ours 1st / cached",
                f"{rate['seeds']:.0f} / {rate['prepared_first']:.0f} / "
                f"{rate['prepared_cached']:.0f}",
            ]
        )
    rows.append(
        [
            "trainer waiting for data (share of step time, no strategy)",
            f"{trainer['data_wait_fraction']:.0%}",
        ]
    )
    rows.append(
        [
            "input headroom: batches/s ÷ trainer steps/s, ours cached / seeds",
            f"{trainer['headroom']['ours_cached']:.1f}× / {trainer['headroom']['seeds']:.1f}×",
        ]
    )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--image-size", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5, help="input epochs timed per pipeline")
    parser.add_argument(
        "--source-sizes",
        type=int,
        nargs="+",
        default=[0, 300],
        help="source image sides (0: the native 8x8 digits; 300: like horses_or_humans)",
    )
    parser.add_argument("--epochs", type=int, default=4, help="training epochs per run")
    parser.add_argument("--runs", type=int, default=2, help="real / in-memory run pairs")
    args = parser.parse_args(argv)
    if args.quick:
        args.image_size, args.repeats, args.source_sizes = 48, 1, [96]
        args.epochs, args.runs = 2, 1
    cases = input_alone(args)
    with tempfile.TemporaryDirectory(prefix="bench-wait-") as tmp:
        from benchmarks.bench_trainer import prepare_data

        prepared = prepare_data(Path(tmp), args.image_size, args.source_sizes[-1] or None)
        trainer = train_rates(prepared["prepared"], args)
    steps_per_second = trainer["steps_per_second"]
    realistic = cases[-1]["batches_per_second"]
    trainer["headroom"] = {
        "ours_cached": round(realistic["prepared_cached"] / steps_per_second, 2),
        "ours_first": round(realistic["prepared_first"] / steps_per_second, 2),
        "seeds": round(realistic["seeds"] / steps_per_second, 2),
    }
    figures = {
        "settings": {
            k: getattr(args, k)
            for k in ("image_size", "batch_size", "repeats", "source_sizes", "epochs", "runs")
        },
        "input_alone": cases,
        "trainer": trainer,
    }
    common.finish(NAME, figures, headline(cases, trainer, args.image_size), args)


if __name__ == "__main__":
    main()
