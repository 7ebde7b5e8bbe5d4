"""Reporting to the HPT service: whether to, where cloudml-hypertune writes, and what is reported.

A study has several objectives, so every metric of `METRIC_GOALS` an epoch has is reported,
the primary (`--metric_tag`) first; a cost measured once is reported with the last step; a
diverged trial reports the worst value of each metric (a poor trial, not a failed one).
"""

from __future__ import annotations

import os
from typing import Any

from trainer.contract import (
    DEFAULT_METRIC_FILE,
    DIVERGED_METRIC_VALUE,
    METRIC_FILE_ENV,
    METRIC_GOALS,
)


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


class MetricReporter:
    """Reports a run's metrics through one `hypertune.HyperTune()`, made on first use.

    One per process: cloudml-hypertune rewrites the whole file from its own queue.
    """

    def __init__(self, metric_tag: str):
        self.metric_tag = metric_tag
        self._hypertune: Any = None

    def report(self, step: int, values: dict[str, float]) -> None:
        """Report each `tag: value` at `step`."""
        if self._hypertune is None:
            import hypertune

            self._hypertune = hypertune.HyperTune()
        for tag, value in values.items():
            self._hypertune.report_hyperparameter_tuning_metric(
                hyperparameter_metric_tag=tag, metric_value=value, global_step=step
            )

    def report_epoch(self, epoch: int, metrics: dict[str, float]) -> None:
        """Every metric of the table the epoch has (a cost one: at the end), the primary first."""
        tags = sorted(set(METRIC_GOALS) & set(metrics), key=lambda t: t != self.metric_tag)
        self.report(epoch, {tag: metrics[tag] for tag in tags})  # the tag is the history's key

    def report_diverged(self, epoch: int) -> None:
        """The worst value of the primary metric and of every other (costs included)."""
        worst_of_each = {t: DIVERGED_METRIC_VALUE[g] for t, g in METRIC_GOALS.items()}
        self.report(epoch, {self.metric_tag: worst_value(self.metric_tag), **worst_of_each})


def worst_value(metric_tag: str) -> float:
    """What a diverged run reports for `metric_tag`: the worst value for its goal."""
    return DIVERGED_METRIC_VALUE[METRIC_GOALS[metric_tag]]
