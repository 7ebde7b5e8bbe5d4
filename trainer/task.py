"""`python -m trainer.task`: flags → train → hypertune report → chief-only export.

The entry point only: the flags are `trainer/flags.py`, the reporting to the HPT service
`trainer/hypertune_report.py`, the model card `trainer/model_card.py`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from trainer.config import ConfigError, HParams, RunConfig
from trainer.contract import EXIT_SETUP_ERROR, ContractError
from trainer.flags import PROG, parse_args
from trainer.hypertune_report import (
    MetricReporter,
    check_metric_file,
    hypertune_requested,
    metric_file_path,
    worst_value,
)
from trainer.model_card import model_card
from trainer.models import model_spec

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
    from trainer import devices, records, train

    try:  # the first line: what this replica trains on
        print(devices.announce(run.expected_gpus), file=sys.stderr, flush=True)
    except devices.DeviceError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1

    reporter = MetricReporter(run.metric_tag) if tuning else None

    try:
        result = train.train(hparams, run, on_epoch=reporter.report_epoch if reporter else None)
    except (records.DatasetError, ConfigError) as err:  # bad data, weights that cannot be had
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_SETUP_ERROR
    except train.Diverged as err:
        if not os.environ.get("CLOUD_ML_TRIAL_ID"):  # the final job must produce a model
            print(f"{PROG}: error: {err}; lower --learning_rate", file=sys.stderr)
            return 1
        worst = worst_value(run.metric_tag)
        if reporter:  # a poor trial, not a failed one: failures eat the study's budget
            reporter.report_diverged(err.epoch)
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
        if reporter:  # measured once: reported with the last step (`trainer/cost_metrics.py`)
            reporter.report(int(result.history[-1]["epoch"]), costs)
    return 0


def export_and_measure(hparams: HParams, run: RunConfig, result: Any) -> dict[str, float]:
    """Measure the serving model's cost (`trainer.cost_metrics`), then export it if asked.

    A trial that trained on a feature cache saves only its trained part and the way to
    rebuild the whole model (`trainer.trial_export`), and takes its cost from the frozen
    part's, measured once in the features step, plus its own part's
    (`trainer.part_cost`): it builds no backbone. Otherwise the whole model is built once,
    its serving function traced once for both. The costs go into model.json too.
    """
    from trainer import export, trial_export

    trained_part_only = trial_export.applies(result.frozen_depth, os.environ)
    started = time.perf_counter()
    costs = _costs_from_parts(hparams, result) if trained_part_only else None
    module = None
    if costs is None:
        module, costs = _whole_model_costs(hparams, result)
    took = time.perf_counter() - started  # the serving function's one trace included
    print(
        f"{PROG}: cost: "
        + " ".join(f"{k}={v:.4g}" for k, v in costs.items())
        + f" (measured in {took:.2f}s{'' if module else '; the frozen part: features step'})",
        file=sys.stderr,
    )
    if not run.model_dir:
        return costs
    card = {**model_card(hparams, run, result), "cost": costs}
    if trained_part_only:
        section = trial_export.card_section(result.frozen_depth, result.cache_keys, run.model_dir)
        trained = result.trained_part()
        trial_export.save(trained, model_dir=run.model_dir, card={**card, "export": section})
        print(
            f"{PROG}: saved the trained part ({len(trained)} arrays) to {run.model_dir}: a "
            f"trial on the feature cache; the whole model: {section['whole_model']}",
            file=sys.stderr,
        )
        return costs
    assert module is not None  # only a trial saving its trained part skips the build
    export.save_module(module, model_dir=run.model_dir, card=card)
    print(f"{PROG}: exported model to {run.model_dir}", file=sys.stderr)
    return costs


def _whole_model_costs(hparams: HParams, result: Any) -> tuple[Any, dict[str, float]]:
    """The whole model's serving module and its cost (a team's `hpt_metrics` included)."""
    from trainer import cost_metrics, export
    from trainer.models import builder_of

    shape = result.metadata["image_shape"]
    model = result.whole_model()
    module = export.ServingModule(model, shape, result.metadata["class_names"])
    builder = builder_of(model_spec(hparams.model))
    costs = cost_metrics.measure(module.serve, module.model_variables, shape, builder, model)
    return module, costs


def _costs_from_parts(hparams: HParams, result: Any) -> dict[str, float] | None:
    """The cost from the stored frozen part and the trained part, or None (one line why)."""
    from trainer import cost_metrics, part_cost
    from trainer.models import builder_of

    if hasattr(builder_of(model_spec(hparams.model)), cost_metrics.BUILDER_METRICS_ATTRIBUTE):
        return None  # a team's hpt_metrics hook takes the whole model
    cost, why = part_cost.stored(
        result.frozen_part_cost, hparams.model, result.metadata["image_shape"], result.frozen_depth
    )
    if cost is None:
        print(f"{PROG}: cost: measured on the whole model ({why})", file=sys.stderr)
        return None
    return part_cost.measure(cost, result.trained_model, result.metadata["class_names"])


if __name__ == "__main__":
    from trainer.quick_exit import exit_without_teardown

    exit_without_teardown(main())
