"""Katib Trials as the trials artifact every target writes.

`to_vertex_trials`: Katib `Trial` objects → the Vertex Trial JSON of
`pipelines.study.trials` (states, final measurement by the Experiment's metric strategy,
or each metric's worst side when that is the trainer's diverged report, so the trial maps
to `diverged`; ids "1", "2"… in creation order; `name` keeps the Katib Trial). The state
mapping: docs/kubeflow.md, "Katib, as its source behaves"; what Katib's controller and
File collector do with one trial, for tests without a cluster: `tests/katib_controller.py`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.study.search_space import SearchSpace
from pipelines.study.trials import TrialState, make_trial
from pipelines.targets.kubeflow.waiting import last_true_condition
from trainer.contract import METRIC_GOALS, diverged_report

UNAVAILABLE = "unavailable"  # consts.UnavailableMetricValue
TRIAL_STATES = {
    "Succeeded": TrialState.SUCCEEDED,
    "EarlyStopped": TrialState.SUCCEEDED,
    "Failed": TrialState.INFEASIBLE,
    "MetricsUnavailable": TrialState.INFEASIBLE,
    "Killed": TrialState.INFEASIBLE,
}


class KatibTrialError(ValueError):
    """A Trial or metrics file Katib would not accept; one line."""


def metric_strategies(experiment: Mapping[str, Any]) -> dict[str, str]:
    """Metric name → `min`/`max`/`latest`, as the Experiment (defaulted by Katib) sets them."""
    objective = (experiment.get("spec") or {}).get("objective") or {}
    strategies = {s["name"]: s["value"] for s in objective.get("metricStrategies") or []}
    kind = "max" if objective.get("type") == "maximize" else "min"
    for name in [
        objective.get("objectiveMetricName"),
        *(objective.get("additionalMetricNames") or []),
    ]:
        if name:
            strategies.setdefault(name, kind)
    return strategies


def _reason(trial: Mapping[str, Any], cond: Mapping[str, Any] | None) -> str:
    if cond is None:
        return ""
    text = " ".join(f"{cond.get('reason', '')}: {cond.get('message', '')}".split()).strip(": ")
    return f"Katib trial {trial['metadata']['name']} {cond['type']}" + (
        f" ({text})" if text else ""
    )


def to_vertex_trial(
    trial: Mapping[str, Any], trial_id: str, space: SearchSpace, strategies: Mapping[str, str]
) -> dict[str, Any]:
    """One Katib Trial as a Vertex Trial (see the module docstring)."""
    cond = last_true_condition(trial)
    kind = cond.get("type") if cond else None
    state = TRIAL_STATES.get(str(kind), TrialState.ACTIVE)
    by_id = {p.parameter_id: p for p in space.all_parameters()}
    assigned = {
        a["name"]: a["value"] for a in (trial.get("spec") or {}).get("parameterAssignments") or []
    }
    parameters = {}
    for name, value in assigned.items():
        if name not in by_id:
            raise KatibTrialError(
                f"trial {trial['metadata']['name']}: parameter {name!r} is not in the search space"
            )
        parameters[name] = by_id[name].cast(value)
    status = trial.get("status") or {}
    metrics = []
    for metric in (status.get("observation") or {}).get("metrics") or []:
        strategy = strategies.get(metric.get("name"), "latest")
        value = metric.get(strategy)
        if value is None or value == UNAVAILABLE:
            continue
        try:
            metrics.append({"metricId": metric["name"], "value": float(value)})
        except ValueError:
            continue
    worst = _worst(status)
    if diverged_report(worst):  # the trainer's diverged report, whatever the strategy folds
        metrics = [{"metricId": k, "value": v} for k, v in worst.items()]
    reported = [m["metricId"] for m in metrics]
    missing = [x.metric_id for x in space.metrics if x.metric_id not in reported]
    reason = _reason(trial, cond)
    if kind == "Succeeded" and missing:  # Katib checks its objective only; we rank on every one
        state = TrialState.INFEASIBLE  # a failure, as a local trial missing one: never ranked
        reason += f": reported no {'/'.join(missing)} (seen: {', '.join(reported) or 'none'})"
    local = {"cancelled": True} if kind == "Killed" else None
    vertex = make_trial(
        trial_id,
        parameters,
        state=state,
        final_measurement={"metrics": metrics} if metrics else None,
        start_time=status.get("startTime"),
        end_time=status.get("completionTime"),
        infeasible_reason=reason if state == TrialState.INFEASIBLE else "",
        local=local,
    )
    meta = trial["metadata"]
    vertex["name"] = f"namespaces/{meta.get('namespace', '')}/trials/{meta['name']}"
    return vertex


def _worst(status: Mapping[str, Any]) -> dict[str, float]:
    """Each observed metric the trainer reports at its worst (`min` when maximized, else `max`).

    Not `latest`: Katib orders hypertune's float timestamps by their digits
    (`tests/katib_controller.py`), so within a second the last report need not be the latest.
    """
    worst = {}
    for metric in (status.get("observation") or {}).get("metrics") or []:
        name = str(metric.get("name"))
        if name in METRIC_GOALS:
            side = "min" if METRIC_GOALS[name] == "maximize" else "max"
            with contextlib.suppress(TypeError, ValueError):
                worst[name] = float(metric.get(side))
    return worst


def to_vertex_trials(
    trials: Sequence[Mapping[str, Any]], space: SearchSpace, strategies: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Katib Trials → Vertex Trials, numbered "1", "2"… in creation order (then name)."""
    ordered = sorted(
        trials,
        key=lambda t: (str(t["metadata"].get("creationTimestamp", "")), t["metadata"]["name"]),
    )
    return [to_vertex_trial(t, str(i), space, strategies) for i, t in enumerate(ordered, start=1)]
