"""What measuring a trial's cost adds to its export, and how noisy `latency_ms` is (issue 40).

A trial ends by exporting its model. With the cost metrics it builds the serving module,
measures it (`trainer.cost_metrics.measure`: size from the variables, 3 warm-up and 15
timed calls of the serving function on one image) and saves that same module. Both sides
do the product's own steps on the same trained weights (a freshly built model), in one
process, alternated `--runs` times per model, into fresh folders:

* `export`: `trainer.export.export_model` (build, save), what a trial did before;
* `export+cost`: `serving_model`, `cost_metrics.measure`, `save_module`, what it does now.

Figures, medians: each side's seconds and the difference (what the cost adds to a trial);
`latency_ms` over every run (min, median, max: its spread on this machine, whose cores
may be shared).

Usage: ``python -m benchmarks.bench_cost [--quick] [--runs 5] [--models cnn,mobilenet_v3_small]``.
Writes ``benchmarks/results/cost.json``.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "cost"
QUICK = {"runs": 1, "models": "cnn"}


def _sides(model: str, image_size: int) -> tuple[Any, Any]:
    """The two sides for `model`, each a function of a fresh model folder."""
    from trainer import cost_metrics, export
    from trainer.config import HParams
    from trainer.models import build_model, model_spec

    shape = (image_size, image_size, 3)
    classes = ("a", "b", "c")
    hparams = HParams(model=model, weights="none")
    weights = build_model(model_spec(model), {}, "none", shape, len(classes)).get_weights()

    def plain(folder: Path) -> dict[str, float]:
        export.export_model(
            weights,
            model_dir=str(folder),
            image_shape=shape,
            class_names=classes,
            hparams=hparams,
            card={},
        )
        return {}

    def with_cost(folder: Path) -> dict[str, float]:
        built, module = export.serving_model(
            weights, image_shape=shape, class_names=classes, hparams=hparams
        )
        costs = cost_metrics.measure(module.serve, module.model_variables, shape, None, built)
        export.save_module(module, model_dir=str(folder), card={"cost": costs})
        return costs

    return plain, with_cost


def benchmark(args: Any) -> dict[str, Any]:
    """Run both sides per model, alternated; their seconds and the latencies measured."""
    figures: dict[str, Any] = {"runs": args.runs, "image_size": args.image_size, "models": {}}
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as tmp:
        for model in args.models.split(","):
            plain, with_cost = _sides(model, args.image_size)
            seconds: dict[str, list[float]] = {"export": [], "export+cost": []}
            latencies, sizes = [], []
            for run in range(args.runs + 1):  # run 0 warms both up (imports, first traces)
                folder = Path(tmp) / f"{model}-{run}"
                took, _ = common.timed(functools.partial(plain, folder / "plain"))
                took_cost, costs = common.timed(functools.partial(with_cost, folder / "cost"))
                if run:
                    seconds["export"].append(took)
                    seconds["export+cost"].append(took_cost)
                    latencies.append(costs["latency_ms"])
                    sizes.append(costs["model_size_mb"])
            figures["models"][model] = {
                "seconds": seconds,
                "export_s": common.median(seconds["export"]),
                "export_cost_s": common.median(seconds["export+cost"]),
                "latency_ms": latencies,
                "model_size_mb": sizes,
            }
    return figures


def headline(figures: dict[str, Any]) -> list[list[str]]:
    """The table rows: per model, both sides' seconds and the latency spread."""
    rows = []
    for model, f in figures["models"].items():
        added = f["export_cost_s"] - f["export_s"]
        rows.append(
            [
                f"{model}: trial export s, export / export+cost (added)",
                f"{f['export_s']:.2f} / {f['export_cost_s']:.2f} ({added:+.2f})",
            ]
        )
        lat = f["latency_ms"]
        rows.append(
            [
                f"{model}: latency_ms min / median / max of {len(lat)} runs",
                f"{min(lat):.2f} / {common.median(lat):.2f} / {max(lat):.2f}",
            ]
        )
        rows.append([f"{model}: model_size_mb", f"{f['model_size_mb'][0]:.3f}"])
    return rows


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    parser = common.base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=5, help="alternated runs per model (5)")
    parser.add_argument(
        "--models", default="cnn,mobilenet_v3_small", help="comma-separated (cnn,mobilenet…)"
    )
    parser.add_argument("--image-size", type=int, default=32, help="image side, px (32)")
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    figures = benchmark(args)
    common.finish(NAME, figures, headline(figures), args)


if __name__ == "__main__":
    main()
