"""Device benchmark (issue 8, item 6): trainer images/s on the GPU vs the CPU, precision, XLA.

Finds the accelerators TensorFlow sees (in a separate process) and trains, one
process per configuration, with `bench_trainer.run_worker` on the same data:

* with a GPU: ours on the GPU with float32 and mixed precision (``mixed_float16``),
  each with XLA auto-clustering off and on; the seeds' trainer on the GPU (Keras
  `fit` picks XLA itself on GPUs: ``jit_compile`` is recorded) and with mixed
  precision; ours and the seeds' on the CPU (``CUDA_VISIBLE_DEVICES=-1``);
* without one it says so and records CPU figures only: ours with XLA off and on,
  and the seeds'. No GPU figure is ever estimated.

One device, no strategy. Figures: images/s and epoch time (medians over epochs
after each run's first), validation accuracy after the same epochs, the device
and the ratios. Usage: ``python -m benchmarks.bench_gpu [--quick]``.
Writes ``benchmarks/results/gpu.json``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "gpu"
_DETECT = """
import json
import tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
names = [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus]
print("DEVICES " + json.dumps({"gpus": names, "built_with_cuda": tf.test.is_built_with_cuda()}))
"""
CPU_ONLY = {"CUDA_VISIBLE_DEVICES": "-1"}


def detect_devices() -> dict[str, Any]:
    """The GPUs TensorFlow sees, asked in a separate process (this one stays off the GPU)."""
    _, process = common.run_command([sys.executable, "-c", _DETECT], env=common.bench_env())
    line = next(x for x in process.stdout.splitlines() if x.startswith("DEVICES "))
    return json.loads(line.removeprefix("DEVICES "))


def configurations(gpu: bool) -> dict[str, dict[str, Any]]:
    """Name → `run_worker` options of each configuration to run."""
    cpu = {
        "ours CPU": {"trainer": "ours", "env": CPU_ONLY},
        "ours CPU XLA": {"trainer": "ours", "env": CPU_ONLY, "xla": True},
        "seeds CPU": {"trainer": "seeds", "env": CPU_ONLY},
    }
    if not gpu:
        return cpu
    return {
        "ours GPU": {"trainer": "ours"},
        "ours GPU XLA": {"trainer": "ours", "xla": True},
        "ours GPU mixed": {"trainer": "ours", "mixed_precision": True},
        "ours GPU mixed XLA": {"trainer": "ours", "mixed_precision": True, "xla": True},
        "seeds GPU": {"trainer": "seeds"},
        "seeds GPU mixed": {"trainer": "seeds", "mixed_precision": True},
        **cpu,
    }


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """Speed-ups between configurations (images/s), where both ran."""
    pairs = {
        "ours_gpu_over_cpu": ("ours GPU", "ours CPU"),
        "ours_over_seeds_gpu": ("ours GPU", "seeds GPU"),
        "ours_over_seeds_cpu": ("ours CPU", "seeds CPU"),
        "mixed_over_float32_gpu": ("ours GPU mixed", "ours GPU"),
        "xla_over_none_gpu": ("ours GPU XLA", "ours GPU"),
        "mixed_xla_over_float32_gpu": ("ours GPU mixed XLA", "ours GPU"),
        "best_ours_gpu_over_seeds_gpu": ("ours GPU mixed XLA", "seeds GPU"),
        "xla_over_none_cpu": ("ours CPU XLA", "ours CPU"),
    }
    out = {}
    for name, (a, b) in pairs.items():
        if a in results and b in results:
            value = common.ratio(results[a]["images_per_second"], results[b]["images_per_second"])
            out[name] = round(value, 2) if value else None
    return out


def headline(figures: dict[str, Any]) -> list[list[str]]:
    """README rows: the device, images/s of each configuration, the key ratios."""
    devices = figures["devices"]
    where = ", ".join(devices["gpus"]) if devices["gpus"] else "no GPU found: CPU figures only"
    rows = [["device benchmark: accelerator", where]]
    for name, result in figures["results"].items():
        rows.append(
            [
                f"device: {name} images/s (val acc)",
                f"{result['images_per_second']:.0f} ({result['final_val_accuracy']:.3f})",
            ]
        )
    for name, value in figures["ratios"].items():
        rows.append([f"device: {name.replace('_', ' ')}", common.fmt(value, ".2f", "×")])
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--image-size", type=int, default=150)
    parser.add_argument("--source-size", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64, help="per replica (codelab: 64)")
    args = parser.parse_args(argv)
    if args.quick:
        args.image_size, args.source_size, args.epochs = 48, 96, 2
    devices = detect_devices()
    gpu = bool(devices["gpus"])
    print(
        f"GPU: {', '.join(devices['gpus'])}"
        if gpu
        else "no GPU found: recording CPU figures only (no GPU numbers)",
        flush=True,
    )
    os.environ.update(CPU_ONLY)  # this process only prepares the data: keep it off the GPU
    from benchmarks import bench_trainer

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        data = bench_trainer.prepare_data(Path(tmp), args.image_size, args.source_size or None)
        for name, options in configurations(gpu).items():
            print(f"{name}", flush=True)
            run = bench_trainer.run_worker(
                options["trainer"],
                "none",
                data,
                epochs=args.epochs,
                batch_size=args.batch_size,
                env=options.get("env"),
                mixed_precision=options.get("mixed_precision", False),
                xla=options.get("xla", False),
            )
            summary = bench_trainer.summarize([run])
            summary["device"] = run["device"]
            summary["jit_compile"] = run.get("jit_compile")
            results[name] = summary
    figures = {
        "settings": {
            k: getattr(args, k) for k in ("image_size", "source_size", "epochs", "batch_size")
        },
        "devices": devices,
        "gpu_found": gpu,
        "results": results,
        "ratios": ratios(results),
    }
    common.finish(NAME, figures, headline(figures), args)


if __name__ == "__main__":
    main()
