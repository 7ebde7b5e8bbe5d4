"""What a trial reported: hypertune metric files read as measurements, and the final one chosen."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.study import trials as trials_lib
from pipelines.study.search_space import Metric
from pipelines.study.selection import rank_key
from pipelines.study.trials import TrialState


@dataclasses.dataclass(frozen=True)
class Measurement:
    """The metrics a trial reported at one step, and when."""

    step: int
    metrics: dict[str, float]
    timestamp: float


def read_measurements(path: str, metric_ids: Sequence[str]) -> list[Measurement]:
    """Measurements in a hypertune metric file, by step (a later report of a step wins).

    Lines that are not complete JSON (the file is rewritten on every report) are skipped.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    by_step: dict[int, Measurement] = {}
    for line in lines:
        try:
            record = json.loads(line)
            step = int(float(record.get("global_step", 0)))
            found = {m: float(record[m]) for m in metric_ids if m in record}
        except (ValueError, TypeError, AttributeError):
            continue
        if found:
            previous = by_step.get(step)
            merged = {**(previous.metrics if previous else {}), **found}
            by_step[step] = Measurement(step, merged, float(record.get("timestamp", 0.0)))
    return [by_step[s] for s in sorted(by_step)]


def with_measured_once(
    final: Measurement | None, measurements: Sequence[Measurement]
) -> Measurement | None:
    """`final` with the metrics measured once (`trials.measured_once`) that it lacks."""
    if final is None:
        return None
    once = trials_lib.measured_once([m.metrics for m in measurements])
    return dataclasses.replace(final, metrics={**once, **final.metrics})


def reported_tags(path: str) -> list[str]:
    """Metric tags present in a hypertune file (whatever the study asked for)."""
    bookkeeping = {"timestamp", "trial", "global_step", "checkpoint_path"}
    tags: set[str] = set()
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    tags.update(k for k in json.loads(line) if k not in bookkeeping)
                except (ValueError, TypeError):
                    continue
    except OSError:
        pass
    return sorted(tags)


def select_measurement(
    measurements: Sequence[Measurement], metrics: Sequence[Metric], selection: str
) -> Measurement | None:
    """The final measurement: the best (by the first metric) or the last one that has it."""
    primary = metrics[0]
    candidates = [m for m in measurements if primary.metric_id in m.metrics]
    if not candidates:
        return None
    if selection == "LAST_MEASUREMENT":
        return candidates[-1]
    sign = 1.0 if primary.goal == "maximize" else -1.0
    return max(candidates, key=lambda m: (sign * m.metrics[primary.metric_id], -m.step))


def best_trial(trials: Sequence[Mapping[str, Any]], metric: Metric) -> dict[str, Any] | None:
    """The succeeded trial with the best final `metric`, ties as selection breaks them.

    None when there is none.
    """
    scored = [
        (value, t)
        for t in trials
        if trials_lib.trial_state(t) == TrialState.SUCCEEDED
        and (value := trials_lib.final_metric(t, metric.metric_id)) is not None
    ]
    if not scored:
        return None
    _, best = min(
        scored,
        key=lambda vt: rank_key(
            vt[1]["id"], vt[0], trials_lib.trial_parameters(vt[1]), goal=metric.goal
        ),
    )
    return dict(best)
