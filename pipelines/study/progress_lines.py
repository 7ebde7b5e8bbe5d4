"""The local study's progress in words: the running summary and one line per finished trial."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.study import failure_rules
from pipelines.study import trials as trials_lib
from pipelines.study.halving import pruned_at
from pipelines.study.trials import TrialState
from trainer.contract import format_value

BAR_WIDTH = 10  # the bar, its count and the running summary fit an 80-column terminal


@dataclasses.dataclass(frozen=True)
class StudyProgress:
    """Where a study stands; given to `on_progress` after every change."""

    total: int
    done: int
    succeeded: int
    failed: int
    early_stopped: int
    running: int
    best: dict[str, Any] | None
    last: dict[str, Any] | None
    interrupted: int = 0  # stopped by our side, to rerun (`trials.trial_outcome`)
    diverged: int = 0  # ran, its loss not finite or exploded: never picked


def counts(trials: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """A study's trials by outcome, in `trials.trial_outcome`'s words (+ early-stopped, total)."""
    local = [t.get(trials_lib.LOCAL_KEY) or {} for t in trials]
    words = [trials_lib.trial_outcome(t) for t in trials]
    return {
        "total": len(trials),
        "succeeded": words.count(trials_lib.SUCCEEDED),
        "failed": sum(failure_rules.counts_as_failed(t) for t in trials),
        "earlyStopped": sum(bool(x.get("earlyStopped")) for x in local),
        "running": words.count(trials_lib.RUNNING),
        "interrupted": words.count(trials_lib.INTERRUPTED),
        "diverged": words.count(trials_lib.DIVERGED),
    }


def describe(snap: Any, metric: str) -> str:
    """`1 running · 0 failed · best val_accuracy=0.91 (trial 2)`, of a snapshot.

    The bar beside it shows the trials done (`3/8`); bar, count and this fit 80 columns.
    """
    best = (
        f"best {metric}={trials_lib.final_metric(snap.best, metric):.4g} (trial {snap.best['id']})"
        if snap.best
        else "best: none yet"
    )
    interrupted = f" · {snap.interrupted} interrupted" if snap.interrupted else ""
    return f"{snap.running} running · {snap.failed} failed{interrupted} · {best}"


def trial_line(trial: Mapping[str, Any]) -> str:
    """One finished trial: its state, final metrics and step, and its parameters."""
    params = " ".join(
        f"{k}={format_value(v)}" for k, v in trials_lib.trial_parameters(trial).items()
    )
    local = trial.get(trials_lib.LOCAL_KEY) or {}
    if trials_lib.trial_state(trial) == TrialState.SUCCEEDED:
        final = trial.get("finalMeasurement", {})
        metrics = " ".join(f"{k}={v:.4g}" for k, v in trials_lib.measurement_metrics(final).items())
        status = "early-stopped" if local.get("earlyStopped") else "succeeded"
        if (rung := pruned_at(trial)) is not None:
            status = f"stopped at rung {rung}"
        return f"trial {trial['id']} {status}: {metrics} (step {final.get('stepCount')}) {params}"
    if trials_lib.trial_outcome(trial) == trials_lib.DIVERGED:
        why = str(trial.get("infeasibleReason", "")).removeprefix(f"{trials_lib.DIVERGED}: ")
        return f"trial {trial['id']} diverged: {why} {params}"
    if trials_lib.trial_outcome(trial) == trials_lib.INTERRUPTED:
        why = local.get("interrupted") or "the study stopped it"
        return f"trial {trial['id']} interrupted ({why}): rerun on resume {params}"
    return f"trial {trial['id']} failed: {trial.get('infeasibleReason', '')} {params}"


def summary(snap: Any, why: str) -> str:
    """The study's closing line: counts, why it ended, and its best trial."""
    line = (
        f"study done ({why}): {snap.done} trials, {snap.succeeded} succeeded "
        f"({snap.early_stopped} early-stopped), {snap.failed} failed"
        + (f", {snap.diverged} diverged" if snap.diverged else "")
        + (f", {snap.interrupted} interrupted" if snap.interrupted else "")
    )
    if snap.best:
        line += f"; best: {trial_line(snap.best)}"
    return line


class ProgressView:
    """A live Rich bar (trials done / total) on stderr, with one line per finished trial."""

    def __init__(self, *, enabled: bool, metric: str):
        self.enabled = enabled
        self.metric = metric
        self.console: Any = None
        self.progress: Any = None
        self.task: Any = None

    def start(self, snap: Any) -> None:
        """Show the bar (when enabled)."""
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.console = Console(stderr=True, soft_wrap=True)
        self.progress = Progress(
            TextColumn("[bold]HPT[/]"),
            BarColumn(bar_width=BAR_WIDTH),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            console=self.console,
        )
        self.task = self.progress.add_task(
            describe(snap, self.metric), total=snap.total, completed=snap.done
        )
        self.progress.start()

    def update(self, snap: Any, trial: Mapping[str, Any] | None) -> None:
        """Print the finished `trial` (if any) above the bar and move the bar."""
        if self.progress is None:
            return
        if trial is not None:
            self.progress.console.print(trial_line(trial), markup=False, highlight=False)
        self.progress.update(
            self.task, description=describe(snap, self.metric), completed=snap.done
        )

    def print(self, line: str) -> None:
        """A plain line (no markup) on the view's console."""
        if self.console is not None:
            self.console.print(line, markup=False, highlight=False)

    def stop(self) -> None:
        """Remove the bar."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
