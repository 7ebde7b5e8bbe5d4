"""Successive halving over running trials: rungs, brackets and the promote-or-stop rule.

The local study's `asha` and `hyperband` schedulers (the `scheduler` setting). Rungs are the
epochs `min_epochs * reduction_factor**k` below `epochs`; `epochs` is the top rung. When a
trial reports the metric of a rung's epoch it keeps running only if its value is among the
best `max(1, n // reduction_factor)` of the `n` values recorded at that rung so far, itself
included (ASHA, Li et al. 2020, as Optuna's `SuccessiveHalvingPruner` ranks); else it stops
there. A promoted trial never trains an epoch twice: it keeps running. `hyperband` runs
brackets side by side, bracket `s` starting its rungs at `min_epochs * reduction_factor**s`
(the last bracket has none: full budget), trials dealt to brackets in turn by id
(asynchronous Hyperband, Li et al. 2020 §3). Decisions rank the primary objective only.
Rung values are read back from the trials' measurements, so a resumed study knows them.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from pipelines.study import trials as trials_lib

SCHEDULERS = ("none", "median", "asha", "hyperband")
HALVING = ("asha", "hyperband")  # the schedulers this module runs


@dataclasses.dataclass(frozen=True)
class Halving:
    """One successive-halving schedule.

    Attributes:
        kind: `asha` (one bracket) or `hyperband` (a bracket per first rung).
        min_epochs: The first rung.
        reduction_factor: η: one trial in η is promoted at each rung.
        epochs: The top rung: what every promoted trial trains.
        metric_id: The primary objective, the one the rule ranks.
        goal: `maximize` or `minimize`.
    """

    kind: str
    min_epochs: int
    reduction_factor: int
    epochs: int
    metric_id: str
    goal: str = "maximize"

    def brackets(self) -> int:
        """How many brackets (asha: 1; hyperband: one per possible first rung, and full budget)."""
        if self.kind == "asha":
            return 1
        return len(self.rungs(0)) + 1

    def rungs(self, bracket: int) -> list[int]:
        """The rungs (epochs below the top where trials are judged) of `bracket`."""
        out, epoch = [], self.min_epochs * self.reduction_factor**bracket
        while epoch < self.epochs:
            out.append(epoch)
            epoch *= self.reduction_factor
        return out

    def bracket_of(self, trial_id: str) -> int:
        """The bracket trial `trial_id` runs in (dealt in turn by id)."""
        return (int(trial_id) - 1) % self.brackets()

    def promoted(self, value: float, recorded: Iterable[float]) -> bool:
        """Whether `value` is among the best `max(1, n // η)` of `recorded` (which holds it)."""
        ranked = sorted(recorded, reverse=self.goal == "maximize")
        keep = max(1, len(ranked) // self.reduction_factor)
        cutoff = ranked[keep - 1]
        return value >= cutoff if self.goal == "maximize" else value <= cutoff


class Rungs:
    """What each rung recorded so far, and the decision for a trial that reaches one."""

    def __init__(self, halving: Halving, trials: Iterable[Mapping[str, Any]] = ()):
        self.halving = halving
        self.lock = threading.Lock()
        self.values: dict[tuple[int, int], dict[str, float]] = {}
        self.decided: dict[tuple[str, int], bool] = {}  # a decision is never taken back
        for trial in trials:
            steps = {
                int(m.get("stepCount", 0)): trials_lib.measurement_metrics(m)
                for m in trial.get("measurements", [])
            }
            for rung in halving.rungs(halving.bracket_of(trial["id"])):
                value = steps.get(rung, {}).get(halving.metric_id)
                if value is not None:
                    self.record(trial["id"], rung, value)

    def record(self, trial_id: str, rung: int, value: float) -> bool:
        """Record `trial_id`'s value at `rung`; whether it goes on (promoted) or stops here.

        The first decision for a trial at a rung stands, whatever the rung records later.
        """
        key = (self.halving.bracket_of(trial_id), rung)
        with self.lock:
            if (trial_id, rung) not in self.decided:
                here = self.values.setdefault(key, {})
                here[trial_id] = value
                self.decided[trial_id, rung] = self.halving.promoted(value, here.values())
            return self.decided[trial_id, rung]

    def judge(self, trial_id: str, reported: Mapping[int, float]) -> int | None:
        """The rung where `trial_id` stops, given its primary values by epoch; None: it goes on.

        Each rung it has reached is judged once, in order; the first it fails stops it.
        """
        for rung in self.halving.rungs(self.halving.bracket_of(trial_id)):
            if rung not in reported:
                return None
            if not self.record(trial_id, rung, reported[rung]):
                return rung
        return None


def pruned_at(trial: Mapping[str, Any]) -> int | None:
    """The rung (epoch) successive halving stopped `trial` at; None when it did not."""
    local = trial.get(trials_lib.LOCAL_KEY) or {}
    return int(local["rung"]) if local.get("earlyStopped") and "rung" in local else None


def trial_epochs(trials: Iterable[Mapping[str, Any]]) -> int:
    """Epochs the trials trained, counted from their measurements (one per step reported)."""
    return sum(len({int(m.get("stepCount", 0)) for m in t.get("measurements", [])}) for t in trials)


def halving_line(halving: Halving, objectives: int) -> str:
    """The study's first line under successive halving: its rungs, and what it ranks."""
    brackets = [halving.rungs(b) for b in range(halving.brackets())]
    shown = " | ".join(",".join(map(str, r)) or "none" for r in brackets)
    line = (
        f"scheduler={halving.kind}: trials judged at epochs {shown} (top rung {halving.epochs}), "
        f"one in {halving.reduction_factor} promoted"
    )
    if objectives > 1:
        line += (
            f"; {objectives} objectives: successive halving ranks the primary, {halving.metric_id}"
        )
    return line


def saving_line(halving: Halving, finished: Iterable[Mapping[str, Any]]) -> str:
    """What the scheduler saved, counted from the finished trials' measurements."""
    finished = list(finished)
    trained, full = trial_epochs(finished), len(finished) * halving.epochs
    return (
        f"{halving.kind} trained {trained} of {full} trial-epochs (saved {full - trained}); "
        f"only trials measured at the top rung (epoch {halving.epochs}) may be picked"
    )
