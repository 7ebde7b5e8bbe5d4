"""`python -m trainer.task`: Vertex-style flags → train → hypertune report → chief-only export.

Flags take both `--name=value` (what Vertex HPT appends) and `--name value`.
Output directories default to the `AIP_*` variables Vertex sets when a job has
a `base_output_directory`.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from trainer.config import ConfigError, HParams, RunConfig, env_default
from trainer.contract import (
    DEFAULT_METRIC_FILE,
    DEFAULT_METRIC_TAG,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    DEFAULT_SEED,
    DISTRIBUTIONS,
    DIVERGED_METRIC_VALUE,
    EXIT_SETUP_ERROR,
    METRIC_FILE_ENV,
    METRIC_GOALS,
    METRIC_TAGS,
    OPTIMIZER_ONLY,
    PRECISIONS,
    TRAINER,
    TRAINER_HYPERPARAMETERS,
    ContractError,
)
from trainer.feature_keys import FEATURES_FLAG
from trainer.models import MODELS, ModelSpec, check_weights, model_spec

PROG = TRAINER


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump) and exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print `trainer: error: <message>` and exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(spec: ModelSpec | None = None) -> argparse.ArgumentParser:
    """The trainer's command-line flags, with the hyperparameters of the model `spec`."""
    p = OneLineParser(prog=PROG, description=__doc__, allow_abbrev=False)
    spec = spec or model_spec()
    for h in spec.all_hyperparameters().values():  # checked in parse_args: `128.0` is fine
        p.add_argument(f"--{h.name}", help=f"{h.help}: {h.expected} ({h.default})")
    p.add_argument("--data", required=True, help="prepared dataset directory (local or gs://)")
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"one of {', '.join(MODELS)}, or package.module:function (a team's own builder)",
    )
    p.add_argument(
        "--weights",
        default=None,
        help="imagenet, none, or a Keras weights file, local or gs:// (pretrained models; "
        "default: the model's own)",
    )
    p.add_argument("--model_dir", default=env_default("AIP_MODEL_DIR"))
    p.add_argument("--checkpoint_dir", default=env_default("AIP_CHECKPOINT_DIR"))
    p.add_argument("--tensorboard_dir", default=env_default("AIP_TENSORBOARD_LOG_DIR"))
    p.add_argument(
        "--metric_tag", default=DEFAULT_METRIC_TAG, help=f"one of {', '.join(METRIC_TAGS)}"
    )
    p.add_argument("--distribution", default="auto", help=f"one of {', '.join(DISTRIBUTIONS)}")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="shuffling and initialisation")
    p.add_argument(
        "--precision",
        default=DEFAULT_PRECISION,
        help=f"one of {', '.join(PRECISIONS)} (auto: bf16 where the hardware has it natively)",
    )
    p.add_argument(
        "--expected_gpus", type=int, default=0, help="GPUs this replica was given (0: any)"
    )
    p.add_argument(
        f"--{FEATURES_FLAG}",
        default="",
        help="a feature cache folder (python -m trainer.features): train on a matching "
        "entry's frozen-backbone outputs ('': from images)",
    )
    return p


def requested_model(argv: Sequence[str] | None) -> str:
    """The `--model` among the flags, else the default (its hyperparameters are the flags')."""
    first = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    first.add_argument("--model", default=DEFAULT_MODEL)
    return first.parse_known_args(argv)[0].model


def parse_args(argv: Sequence[str] | None = None) -> tuple[HParams, RunConfig]:
    """Parse and validate flags; raise ConfigError naming the first bad value."""
    spec = model_spec(requested_model(argv))
    args = build_parser(spec).parse_args(argv)
    values: dict[str, Any] = {
        h.name: h.default if getattr(args, h.name) is None else h.parse(getattr(args, h.name))
        for h in spec.all_hyperparameters().values()
    }
    trainer_own = {name: values.pop(name) for name in TRAINER_HYPERPARAMETERS}
    for name, only_under in OPTIMIZER_ONLY.items():
        if getattr(args, name) is not None and trainer_own["optimizer"] != only_under:
            print(
                f"{PROG}: --{name} ignored: it means something under --optimizer={only_under} "
                f"only (this run: {trainer_own['optimizer']})",
                file=sys.stderr,
            )
    hparams = HParams(
        **trainer_own,
        model=args.model,
        weights=check_weights(spec, args.weights),
        model_params=values,
    )
    run = RunConfig(
        data=args.data,
        model_dir=args.model_dir,
        checkpoint_dir=args.checkpoint_dir,
        tensorboard_dir=args.tensorboard_dir,
        metric_tag=args.metric_tag,
        distribution=args.distribution,
        seed=args.seed,
        precision=args.precision,
        expected_gpus=args.expected_gpus,
        features=getattr(args, FEATURES_FLAG),
    )
    if "://" not in run.data and not os.path.isfile(os.path.join(run.data, "metadata.json")):
        raise ConfigError(
            f"--data={run.data}: expected a prepared dataset directory with metadata.json"
        )
    return hparams, run


# Imported by TensorFlow/Keras at start-up but never used by the trainer, each guarded by
# `except ImportError` where it is imported: Keras' sklearn wrappers (scikit-learn, and
# scipy through it), its plot_image_gallery (matplotlib), TF's legacy Keras utilities
# (scipy). Measured here: 0.4-0.8 s of a 1.7-3.4 s TensorFlow import. The trainer image
# has none of them; locally they are installed for the sample data and the reports.
UNUSED_IMPORTS = ("sklearn", "scipy", "matplotlib", "pandas")


def skip_unused_imports() -> None:
    """Make the modules in `UNUSED_IMPORTS` unimportable in this process (if not yet imported)."""
    for name in UNUSED_IMPORTS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: import fails


def preload() -> None:
    """Import what a run needs, TensorFlow's runtime left unstarted (also the fork server's)."""
    from trainer.gc_pause import collector_paused

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    skip_unused_imports()
    with collector_paused():
        import hypertune  # noqa: F401

        from trainer import export, records, train  # noqa: F401


def hypertune_requested() -> bool:
    """Whether this process runs under HPT (Vertex sets the trial id; a metric file may be set)."""
    return bool(os.environ.get("CLOUD_ML_TRIAL_ID") or os.environ.get(METRIC_FILE_ENV))


def metric_file_path() -> str:
    """Where cloudml-hypertune writes the metrics (its default unless the env sets one)."""
    return os.environ.get(METRIC_FILE_ENV) or DEFAULT_METRIC_FILE


def check_metric_file(path: str) -> None:
    """Make sure the hypertune metric file can be written, before any training time is spent.

    Raises:
        OSError: One line naming the file and why (the trial would otherwise end without
            a metric after its whole training, and count as failed).
    """
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as err:
        raise OSError(
            f"cannot write the hypertune metric file {path} ({err.strerror or err}); "
            f"set {METRIC_FILE_ENV} to a writable path"
        ) from None


def model_card(hparams: HParams, run: RunConfig, result: Any) -> dict[str, Any]:
    """Provenance written next to the SavedModel as model.json."""
    import tensorflow as tf

    from trainer import records

    meta = result.metadata
    return {
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "model": {"name": hparams.model, "weights": hparams.weights},
        "hyperparameters": hparams.hyperparameters(),
        "dataset": {
            "path": run.data,
            "metadata_sha256": records.file_digest(f"{run.data.rstrip('/')}/metadata.json")[
                "sha256"
            ],
            "source": meta.get("source"),
            "class_names": meta["class_names"],
            "image_shape": meta["image_shape"],
            "counts": {k: v["count"] for k, v in meta["splits"].items()},
        },
        "final_metrics": result.history[-1],
        "history": result.history,
        "metric_tag": run.metric_tag,
        "training": {
            "strategy": result.strategy,
            "replicas_in_sync": result.replicas,
            "replicas": result.num_workers,  # chief + workers (replicas_in_sync: devices)
            "resumed_after_epoch": result.start_epoch,
            "seed": run.seed,
            "precision": result.precision.policy,
            "precision_requested": result.precision.requested,
            "precision_reason": result.precision.reason,
            "first_step_seconds": result.first_step_seconds,
            "trained_on": result.source,  # images, or a feature cache entry
        },
        "serving": {"input": "image_bytes", "outputs": ["probabilities", "class_id", "label"]},
        "versions": {
            "tensorflow": tf.__version__,
            "keras": __import__("keras").__version__,
            "python": platform.python_version(),
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    try:
        hparams, run = parse_args(argv)
    except ConfigError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_SETUP_ERROR
    from trainer import cluster

    chief = cluster.resolve().is_chief
    tuning = chief and hypertune_requested()
    if tuning:
        try:
            check_metric_file(metric_file_path())
        except OSError as err:
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return EXIT_SETUP_ERROR
    preload()
    import hypertune

    from trainer import devices, records, train

    try:  # the first line: what this replica trains on
        print(devices.announce(run.expected_gpus), file=sys.stderr, flush=True)
    except devices.DeviceError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1

    reporter = None

    def report_tags(step: int, values: dict[str, float]) -> None:
        nonlocal reporter
        if reporter is None:
            reporter = hypertune.HyperTune()  # one per process: it rewrites the file from its queue
        for tag, value in values.items():
            reporter.report_hyperparameter_tuning_metric(
                hyperparameter_metric_tag=tag, metric_value=value, global_step=step
            )

    def report(epoch: int, metrics: dict[str, float]) -> None:
        # Every metric of the table the epoch has (a cost one: at the end), the primary first:
        # a study may have several objectives.
        tags = sorted(set(METRIC_GOALS) & set(metrics), key=lambda t: t != run.metric_tag)
        report_tags(epoch, {tag: metrics[tag] for tag in tags})  # the tag is the history's key

    try:
        result = train.train(hparams, run, on_epoch=report if tuning else None)
    except (records.DatasetError, ConfigError) as err:  # bad data, weights that cannot be had
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_SETUP_ERROR
    except train.Diverged as err:
        if not os.environ.get("CLOUD_ML_TRIAL_ID"):  # the final job must produce a model
            print(f"{PROG}: error: {err}; lower --learning_rate", file=sys.stderr)
            return 1
        worst = DIVERGED_METRIC_VALUE[METRIC_GOALS[run.metric_tag]]
        if tuning:  # a poor trial, not a failed one: failures eat the study's budget
            worst_of_each = {t: DIVERGED_METRIC_VALUE[g] for t, g in METRIC_GOALS.items()}
            report_tags(err.epoch, {run.metric_tag: worst, **worst_of_each})  # costs included
        print(
            f"{PROG}: {err}; reported {run.metric_tag}={worst} (the worst value), nothing exported",
            file=sys.stderr,
        )
        return 0
    if result.is_chief and (run.model_dir or tuning):
        try:
            costs = export_and_measure(hparams, run, result)
        except ContractError as err:  # a team's hpt_metrics hook that broke its contract
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return 1
        if tuning:  # measured once: reported with the last step (`trainer/cost_metrics.py`)
            report_tags(int(result.history[-1]["epoch"]), costs)
    return 0


def export_and_measure(hparams: HParams, run: RunConfig, result: Any) -> dict[str, float]:
    """Measure the serving model's cost (`trainer.cost_metrics`), then export it if asked.

    The whole model is built once, its serving function traced once for both; the costs go
    into model.json too. A trial that trained on a feature cache saves only its trained
    part and the way to rebuild the whole model (`trainer.trial_export`).
    """
    from trainer import cost_metrics, export, trial_export
    from trainer.models import builder_of

    shape = result.metadata["image_shape"]
    model = result.whole_model()
    module = export.ServingModule(model, shape, result.metadata["class_names"])
    builder = builder_of(model_spec(hparams.model))
    started = time.perf_counter()
    costs = cost_metrics.measure(module.serve, module.model_variables, shape, builder, model)
    took = time.perf_counter() - started  # the serving function's one trace included
    print(
        f"{PROG}: cost: "
        + " ".join(f"{k}={v:.4g}" for k, v in costs.items())
        + f" (measured in {took:.2f}s)",
        file=sys.stderr,
    )
    if not run.model_dir:
        return costs
    card = {**model_card(hparams, run, result), "cost": costs}
    if trial_export.applies(result.frozen_depth, os.environ):
        section = trial_export.card_section(result.frozen_depth, result.cache_keys, run.model_dir)
        trained = result.trained_part()
        trial_export.save(trained, model_dir=run.model_dir, card={**card, "export": section})
        print(
            f"{PROG}: saved the trained part ({len(trained)} arrays) to {run.model_dir}: a "
            f"trial on the feature cache; the whole model: {section['whole_model']}",
            file=sys.stderr,
        )
        return costs
    export.save_module(module, model_dir=run.model_dir, card=card)
    print(f"{PROG}: exported model to {run.model_dir}", file=sys.stderr)
    return costs


if __name__ == "__main__":
    from trainer.quick_exit import exit_without_teardown

    exit_without_teardown(main())
