"""Issue 39: a transfer study with the frozen backbone's feature cache (auto) vs without (off).

Each study is 6 trials of one model (`resnet50`, `mobilenet_v3_small`, `--weights none`):
*mixed* (trainable_blocks 0, 0, 2, 2, all, all; Adam at two learning rates each) and
*frozen* (trainable_blocks 0 at six learning rates). Each side of a round is one fresh
process, timed from after its imports (TensorFlow loaded, as the local study's forked
trials have it) to its last export:

* `auto`: `python -m trainer.features` (`features.main`) for the cacheable values (and
  the frozen part's cost, once per entry), then each trial `train.train(..., features=...)`
  and what a trial does after training (`task.export_and_measure` with `CLOUD_ML_TRIAL_ID`
  set: a cached trial takes its cost from the stored frozen part plus its own part,
  `trainer/part_cost.py`, and saves its trained part, `trainer/trial_export.py`; an
  uncached one measures the whole serving model and exports the whole SavedModel);
* `off`: each trial from images, then the same (the whole SavedModel every trial);
* `seeds`: each trial the seeds' way (`benchmarks/seed001_trainer.py`'s `create_dataset`:
  encoded PNGs decoded and resized every epoch, `model.fit`, `model.save`), the backbone's
  blocks frozen as the trial says.

Sides alternate within each round (the order rotates), so drift and the other helpers'
load hit all of them; ratios are of medians over rounds. It then measures
ResNet50's training step (whole network) in float32 and mixed_bfloat16 against this
CPU's peak (see `peak_flops`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "feature_cache"
MODELS = ("mobilenet_v3_small", "resnet50")
SIDES = ("auto", "off", "seeds")
LEARNING_RATES = (1e-3, 3e-3)


def trials(model: str, study: str) -> list[tuple[int, float]]:
    """(trainable_blocks, learning_rate) of the study's 6 trials."""
    from trainer.models import MODELS as SPECS

    blocks = SPECS[model].blocks
    if study == "frozen":
        return [(0, lr) for lr in (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)]
    return [(tb, lr) for tb in (0, 2, blocks) for lr in LEARNING_RATES]


def prepare(work: Path, size: int, counts: tuple[int, int, int]) -> tuple[str, str]:
    """A prepared dataset and the same images as a PNG folder (train/, test/ = validation)."""
    from PIL import Image

    from tests.synthetic import write_dataset
    from trainer import records

    data = work / "data"
    if not (data / "metadata.json").exists():
        write_dataset(str(data), size=size, counts=counts, shards=(4, 2, 2))
    folder = work / "png"
    if not folder.exists():
        metadata = records.read_metadata(str(data))
        for split, target in (("train", "train"), ("validation", "test")):
            for n, (image, label, _) in enumerate(
                records.read_examples(str(data), metadata, split)
            ):
                out = folder / target / metadata["class_names"][label]
                out.mkdir(parents=True, exist_ok=True)
                Image.fromarray(image).save(out / f"{n}.png")
    return str(data), str(folder)


def run_unit(args: Any) -> dict[str, Any]:
    """One side of one study, in this process: wall seconds after imports, val accuracies."""
    import keras

    from trainer import features, task, train
    from trainer.config import HParams, RunConfig

    os.environ["CLOUD_ML_TRIAL_ID"] = "1"  # each trial exports as an HPT trial does

    data, folder = args.data, args.folder
    out = Path(args.out)
    study = trials(args.model, args.study)
    common_h = {"optimizer": "adam", "batch_size": args.batch, "epochs": args.epochs}
    started = time.perf_counter()
    cache_seconds, cache = 0.0, ""
    if args.side == "auto":
        values = ",".join(str(tb) for tb, _ in study)
        cache = str(out / "features")
        argv = [f"--data={data}", f"--output={cache}", f"--model={args.model}", "--weights=none"]
        assert features.main([*argv, f"--trainable_blocks={values}"]) == 0
        cache_seconds = time.perf_counter() - started
    accuracies, per_trial = [], []
    split = {"train": 0.0, "export": 0.0, "epochs": 0.0}  # summed over trials
    for index, (tb, lr) in enumerate(study):
        model_dir = str(out / f"trial{index}")
        if args.side == "seeds":
            accuracies.append(seeds_trial(args, folder, tb, lr, model_dir))
            continue
        hparams = HParams(
            learning_rate=lr,
            model=args.model,
            weights="none",
            model_params={"trainable_blocks": tb},
            **common_h,
        )
        features_dir = cache if args.side == "auto" else ""
        run = RunConfig(data=data, features=features_dir, model_dir=model_dir)
        trial_started = time.perf_counter()
        result = train.train(hparams, run)
        exported = time.perf_counter()
        task.export_and_measure(hparams, run, result)
        accuracies.append(result.history[-1]["val_accuracy"])
        trial = {
            "trainable_blocks": tb,
            "train": exported - trial_started,
            "export": time.perf_counter() - exported,
            "epochs": sum(h.get("seconds", 0.0) for h in result.history),
        }
        per_trial.append(trial)
        for part in split:
            split[part] += trial[part]
        keras.backend.clear_session()
    return {
        "seconds": time.perf_counter() - started,
        "features_seconds": cache_seconds,
        "val_accuracies": accuracies,
        "best_val_accuracy": max(accuracies),
        "breakdown_seconds": split,
        "per_trial_seconds": per_trial,
    }


def seeds_trial(args: Any, folder: str, trainable_blocks: int, lr: float, model_dir: str) -> float:
    """One trial the seeds' way: decode + resize every epoch, `model.fit`, `model.save`."""
    import keras
    import tensorflow as tf

    from benchmarks import seed001_trainer
    from trainer.models import MODELS, backbones

    keras.utils.set_random_seed(42)
    train_data, validation_data, classes = seed001_trainer.create_dataset(
        folder, args.batch, args.size
    )
    factory = (
        keras.applications.ResNet50
        if args.model == "resnet50"
        else keras.applications.MobileNetV3Small
    )
    block_of = MODELS[args.model].backbone.block_of
    base = factory(weights=None, include_top=False, input_shape=(args.size, args.size, 3))
    backbones.set_trainable_blocks(base, trainable_blocks, block_of)
    x = keras.layers.GlobalAveragePooling2D()(base.output)
    x = keras.layers.Dense(seed001_trainer.NUM_UNITS, activation="relu")(x)
    model = keras.Model(base.input, keras.layers.Dense(classes, activation="softmax")(x))
    model.compile(
        loss="sparse_categorical_crossentropy",
        optimizer=keras.optimizers.Adam(lr),
        metrics=["accuracy"],
    )
    history = model.fit(train_data, epochs=args.epochs, validation_data=validation_data, verbose=0)
    tf.io.gfile.makedirs(model_dir)
    model.save(os.path.join(model_dir, "model.keras"))
    keras.backend.clear_session()
    return float(history.history["val_accuracy"][-1])


def forward_flops(model: Any) -> float:
    """Multiply-adds × 2 of a Keras model's convolutions and dense layers, per image."""
    import keras

    total = 0.0
    for layer in _leaf_layers(model):
        if isinstance(layer, keras.layers.DepthwiseConv2D):
            out = layer.output.shape
            kh, kw = layer.kernel_size
            total += 2 * out[1] * out[2] * out[3] * kh * kw
        elif isinstance(layer, keras.layers.Conv2D):
            out = layer.output.shape
            kh, kw = layer.kernel_size
            total += 2 * out[1] * out[2] * out[3] * kh * kw * layer.input.shape[-1]
        elif isinstance(layer, keras.layers.Dense):
            total += 2 * layer.input.shape[-1] * layer.units
    return float(total)


def _leaf_layers(model: Any) -> list[Any]:
    import keras

    found = []
    for layer in model.layers:
        found += _leaf_layers(layer) if isinstance(layer, keras.Model) else [layer]
    return found


def peak_flops() -> dict[str, Any]:
    """This CPU's peak FLOP/s, estimated: vCPUs × clock × FLOPs per cycle per core.

    AVX-512 with two 256-bit FMA pipes (AMD Zen 4 executes 512-bit FMAs as two halves):
    float32 2 pipes × 8 lanes × 2 = 32 FLOPs/cycle; AVX512-BF16 `vdpbf16ps` doubles the
    lanes: 64 FLOPs/cycle. A vCPU may be one SMT thread (then the core's peak is shared):
    the fraction is an upper estimate of the peak, so a lower bound of the efficiency.
    """
    mhz = []
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            mhz.append(float(line.split(":")[1]))
    cpus = os.cpu_count() or 1
    clock = (max(mhz) if mhz else 2000.0) * 1e6
    return {
        "vcpus": cpus,
        "clock_hz": clock,
        "float32": cpus * clock * 32,
        "mixed_bfloat16": cpus * clock * 64,
    }


def run_flops(args: Any) -> dict[str, Any]:
    """ResNet50's whole-network training step: images/s, FLOP/s, fraction of peak."""
    import keras

    results: dict[str, Any] = {"peak": peak_flops()}
    for policy in ("float32", "mixed_bfloat16"):
        keras.mixed_precision.set_global_policy(policy)
        try:
            results[policy] = _step_rate(args, results["peak"][policy])
        finally:
            keras.mixed_precision.set_global_policy("float32")
            keras.backend.clear_session()
    return results


def _step_rate(args: Any, peak: float) -> dict[str, Any]:
    import keras
    import numpy as np
    import tensorflow as tf

    from trainer.models import MODELS as SPECS
    from trainer.models import build_model

    dtype = keras.mixed_precision.global_policy().compute_dtype
    model = build_model(SPECS["resnet50"], {}, "none", (args.size, args.size, 3), 2, dtype)
    flops = 3 * forward_flops(model)  # forward + the two backward products
    optimizer = keras.optimizers.Adam(1e-4)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    images = tf.cast(np.random.rand(args.batch, args.size, args.size, 3), dtype)
    labels = tf.constant(np.arange(args.batch) % 2)

    @tf.function(autograph=False)
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    step(images, labels)  # traced
    per_step = common.median(common.repeat(lambda: float(step(images, labels)), args.flop_steps))
    rate = flops * args.batch / per_step
    return {
        "flops_per_image": flops,
        "step_seconds": per_step,
        "images_per_second": args.batch / per_step,
        "flops_per_second": rate,
        "fraction_of_peak": rate / peak,
    }


def spawn(args: Any, work: Path, *unit: str) -> dict[str, Any]:
    """Run one unit in a fresh process; its RESULT line."""
    command = [sys.executable, "-m", "benchmarks.bench_feature_cache", "--unit", *unit]
    command += [f"--work={work}", f"--size={args.size}", f"--batch={args.batch}"]
    command += [f"--epochs={args.epochs}", f"--flop-steps={args.flop_steps}"]
    load_before = os.getloadavg()
    proc = subprocess.run(
        command, cwd=common.ROOT, env=common.bench_env(), capture_output=True, text=True
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            result["load_average_before_after"] = [load_before[0], os.getloadavg()[0]]
            return result
    raise RuntimeError(f"{unit} failed: {proc.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> None:
    """Alternated rounds of every side of every study; results JSON and the headline."""
    parser = common.base_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--train", type=int, default=128)
    parser.add_argument("--val", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--flop-steps", type=int, default=8)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--studies", default="frozen,mixed", help="frozen, mixed or both")
    parser.add_argument("--sides", default=",".join(SIDES), help="of auto, off, seeds")
    parser.add_argument("--work", type=Path, default=common.ROOT / "runs" / "bench_feature_cache")
    parser.add_argument("--unit", nargs=3, default=None, help=argparse_unit_help())
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.size, args.train, args.val, args.epochs = 1, 32, 32, 32, 1
    work = args.work
    if args.unit:
        model, study, side = args.unit
        data, folder = str(work / "data"), str(work / "png")
        if model == "flops":
            print("RESULT " + json.dumps(run_flops(args)), flush=True)
            return
        unit_args = argparse_namespace(args, model, study, side, data, folder)
        print("RESULT " + json.dumps(run_unit(unit_args)), flush=True)
        return
    if args.train % args.batch:
        raise SystemExit(f"--train={args.train}: expected a multiple of --batch={args.batch}")
    work.mkdir(parents=True, exist_ok=True)
    prepare(work, args.size, (args.train, args.val, 32))
    runs: dict[str, list[dict[str, Any]]] = {}
    for round_index in range(args.rounds):
        for model in args.models.split(","):
            for study in args.studies.split(","):
                sides = tuple(args.sides.split(","))
                shift = round_index % len(sides)
                for side in sides[shift:] + sides[:shift]:  # each round starts one side later
                    key = f"{model}/{study}/{side}"
                    shutil.rmtree(work / "out", ignore_errors=True)  # every round computes afresh
                    result = spawn(args, work, model, study, side)
                    runs.setdefault(key, []).append(result)
                    partial = work / "partial.json"  # what finished, should the run be cut short
                    partial.write_text(json.dumps(runs, indent=1))
                    print(
                        f"round {round_index + 1} {key}: {result['seconds']:.1f} s, "
                        f"best val {result['best_val_accuracy']:.3f}",
                        flush=True,
                    )
    flops = spawn(args, work, "flops", "-", "-") if args.flop_steps else {}  # 0: not measured
    figures = {
        "settings": vars_of(args),
        "runs": runs,
        "flops": flops,
        "gpu": "none on this machine",
    }
    common.finish(NAME, figures, headline(runs, flops), args)


def argparse_unit_help() -> str:
    return "MODEL STUDY SIDE: run one side of one study in this process (internal)"


def argparse_namespace(args: Any, model: str, study: str, side: str, data: str, folder: str) -> Any:
    import argparse

    return argparse.Namespace(
        model=model,
        study=study,
        side=side,
        data=data,
        folder=folder,
        out=str(args.work / "out" / f"{model}-{study}-{side}"),
        size=args.size,
        batch=args.batch,
        epochs=args.epochs,
    )


def vars_of(args: Any) -> dict[str, Any]:
    return {k: str(v) for k, v in vars(args).items()}


def headline(runs: dict[str, list[dict[str, Any]]], flops: dict[str, Any]) -> list[list[str]]:
    """Rows: per model and study, median wall time of each side, ratios, best accuracies."""
    rows = []
    for key in sorted({k.rsplit("/", 1)[0] for k in runs}):
        here = [s for s in SIDES if f"{key}/{s}" in runs]
        med = {s: common.median(r["seconds"] for r in runs[f"{key}/{s}"]) for s in here}
        best = {s: common.median(r["best_val_accuracy"] for r in runs[f"{key}/{s}"]) for s in here}
        for side in SIDES:  # a run of some sides only (--sides): the others are nan
            med.setdefault(side, float("nan"))
            best.setdefault(side, float("nan"))
        rows.append(
            [
                f"{key}: study wall s (auto / off / seeds)",
                f"{med['auto']:.1f} / {med['off']:.1f} / {med['seeds']:.1f}",
            ]
        )
        rows.append(
            [
                f"{key}: speed-up cache auto vs off; ours (auto) vs seeds",
                f"{med['off'] / med['auto']:.2f}x; {med['seeds'] / med['auto']:.2f}x",
            ]
        )
        rows.append(
            [
                f"{key}: best val accuracy (auto / off / seeds)",
                f"{best['auto']:.3f} / {best['off']:.3f} / {best['seeds']:.3f}",
            ]
        )
        rows.extend(cache_ceilings(key, runs.get(f"{key}/auto", []), runs.get(f"{key}/off", [])))
    for policy in ("float32", "mixed_bfloat16") if flops else ():
        f = flops[policy]
        rows.append(
            [
                f"resnet50 training step, {policy}: GFLOP/s and fraction of peak",
                f"{f['flops_per_second'] / 1e9:.1f} GFLOP/s, {f['fraction_of_peak']:.1%}",
            ]
        )
    return rows


def cache_ceilings(
    key: str, auto_runs: list[dict[str, Any]], off_runs: list[dict[str, Any]]
) -> list[list[str]]:
    """What no cache can remove from a study that trains the whole network in some trials.

    Rounds are paired (the i-th run of each side). Two medians over rounds, or no rows when
    the runs hold no per-trial figures or no trial trains the whole network (frozen-only):
    the epochs' ratio (the arithmetic alone: what `off ÷ auto` tends to as the data grows),
    and `off ÷` what an `auto` side must still spend even if its features step, builds,
    traces and saves took no time: the whole-network trials (the deepest `trainable_blocks`,
    same work on both sides, timed on `off`) plus the cached trials' epochs.
    """
    epochs, ceilings = [], []
    for auto, off in zip(auto_runs, off_runs, strict=False):
        trials = off.get("per_trial_seconds") or []
        deepest = max((t["trainable_blocks"] for t in trials), default=0)
        cached = [t for t in auto.get("per_trial_seconds") or [] if t["trainable_blocks"] < deepest]
        if not deepest or not cached:
            continue
        whole = sum(t["train"] + t["export"] for t in trials if t["trainable_blocks"] == deepest)
        ceilings.append(off["seconds"] / (whole + sum(t["epochs"] for t in cached)))
        epochs.append(off["breakdown_seconds"]["epochs"] / auto["breakdown_seconds"]["epochs"])
    if not ceilings:
        return []
    return [
        [f"{key}: off ÷ auto in epochs alone", f"{common.median(epochs):.2f}x"],
        [
            f"{key}: most any cache can give (off ÷ off's whole-network trials + auto's other "
            "epochs)",
            f"{common.median(ceilings):.2f}x",
        ],
    ]


if __name__ == "__main__":
    main()
