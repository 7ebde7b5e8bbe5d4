"""The trials artifact: Vertex's `Trial` JSON (as `Trial.to_json` writes it) plus local extras.

Every target (local, vertex, kubeflow) produces a JSON list of trials in this one schema::

    {"id": "3", "state": 4,
     "parameters": [{"parameterId": "learning_rate", "value": 0.01}, ...],
     "finalMeasurement": {"stepCount": "5",
                          "metrics": [{"metricId": "val_accuracy", "value": 0.9}]},
     "measurements": [{"stepCount": "1", "elapsedDuration": "2.1s", "metrics": [...]}, ...],
     "startTime": "2026-01-01T10:00:00.000000Z", "endTime": "...",
     "infeasibleReason": "",
     "local": {...}}

`state` follows `aiplatform_v1.Trial.State` (int, as `to_json` writes it; readers
also accept the name). Vertex v1 has no FAILED trial state: a failed trial is
INFEASIBLE with `infeasibleReason`, and a trial stopped early is SUCCEEDED with
the measurement selected from what it reported. A diverged trial (its loss not
finite or exploded: the trainer reports the worst value of every metric and exits 0,
so a service records it SUCCEEDED) is INFEASIBLE too ("should not be attempted
again"), its measurements kept, its `infeasibleReason` starting `diverged`
(`mark_diverged`; `is_diverged` reads the measurements, so it holds on any target).
`local` (`LOCAL_KEY`) holds what only the local executor knows (log path, exit code,
log tail, early stop) and is dropped before the strict parse.
"""

from __future__ import annotations

import datetime
import enum
import json
import os
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trainer.contract import DIVERGED_FIX, diverged_report

LOCAL_KEY = "local"
TRIALS_FILE = "trials.json"


class TrialState(enum.IntEnum):
    """Mirror of `google.cloud.aiplatform_v1.types.Trial.State` (checked in tests)."""

    STATE_UNSPECIFIED = 0
    REQUESTED = 1
    ACTIVE = 2
    STOPPING = 3
    SUCCEEDED = 4
    INFEASIBLE = 5


class TrialsError(ValueError):
    """A trials file or trial that does not follow the schema; one line."""


def timestamp(when: float | None = None) -> str:
    """An RFC 3339 UTC timestamp as proto JSON writes it (`...Z`)."""
    moment = datetime.datetime.fromtimestamp(time.time() if when is None else when, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(value: str) -> float:
    """Seconds since the epoch of an RFC 3339 timestamp (`timestamp`'s inverse)."""
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def measurement(
    step: int, metrics: Mapping[str, float], elapsed_seconds: float | None = None
) -> dict[str, Any]:
    """A `Measurement`: the metrics reported at one step (epoch)."""
    out: dict[str, Any] = {"stepCount": str(int(step))}
    if elapsed_seconds is not None:
        out["elapsedDuration"] = f"{max(elapsed_seconds, 0.0):.3f}s"
    out["metrics"] = [{"metricId": k, "value": float(v)} for k, v in metrics.items()]
    return out


def make_trial(
    trial_id: str,
    parameters: Mapping[str, Any],
    *,
    state: TrialState,
    final_measurement: Mapping[str, Any] | None = None,
    measurements: Sequence[Mapping[str, Any]] = (),
    start_time: str | None = None,
    end_time: str | None = None,
    infeasible_reason: str = "",
    local: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One trial in the artifact's schema (see the module docstring).

    One keyword per optional field of Vertex's Trial JSON (`infeasible_reason` →
    `infeasibleReason`, …), so the list is as long as the schema.
    """
    trial: dict[str, Any] = {
        "id": str(trial_id),
        "state": int(state),
        "parameters": [{"parameterId": k, "value": v} for k, v in parameters.items()],
    }
    if final_measurement is not None:
        trial["finalMeasurement"] = dict(final_measurement)
    trial["measurements"] = [dict(m) for m in measurements]
    if start_time:
        trial["startTime"] = start_time
    if end_time:
        trial["endTime"] = end_time
    if infeasible_reason:
        trial["infeasibleReason"] = infeasible_reason
    if local:
        trial[LOCAL_KEY] = dict(local)
    return trial


def trial_state(trial: Mapping[str, Any]) -> TrialState:
    """The trial's state, whether written as an int (`to_json`) or a name."""
    raw = trial.get("state", 0)
    try:
        return TrialState[raw] if isinstance(raw, str) else TrialState(int(raw))
    except (KeyError, ValueError):
        raise TrialsError(
            f"trial {trial.get('id')!r}: unknown state {raw!r}, expected one of "
            f"{', '.join(s.name for s in TrialState)}"
        ) from None


# What became of a trial, in the same words on every screen and page (`trial_outcome`).
SUCCEEDED, FAILED, INTERRUPTED, RUNNING = "succeeded", "failed", "interrupted", "running"
DIVERGED = "diverged"
DIVERGED_REASON = (
    f"{DIVERGED}: its loss was not finite or exploded (the trainer reported the worst value "
    f"of every metric); {DIVERGED_FIX}"
)


def diverged_reason(said: str = "") -> str:
    """`DIVERGED_REASON`, or the trainer's own line (`training diverged at epoch …`) and the fix."""
    return f"{DIVERGED}: {said}; {DIVERGED_FIX}" if said else DIVERGED_REASON


def is_diverged(trial: Mapping[str, Any]) -> bool:
    """Whether a finished trial diverged, whatever the state a service gave it.

    Its final or its last measurement is the trainer's worst-values report
    (`diverged_report`): the trainer reports it last, and a service selecting the best
    measurement may have made an earlier epoch's the final one.
    """
    if trial_state(trial) not in (TrialState.SUCCEEDED, TrialState.INFEASIBLE):
        return False
    reports = [trial.get("finalMeasurement"), *trial.get("measurements", [])[-1:]]
    return any(m and diverged_report(measurement_metrics(m)) for m in reports)


def mark_diverged(trial: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `trial`, INFEASIBLE with `DIVERGED_REASON` when it diverged (else unchanged).

    Every target's trials artifact goes through it (`trials_artifact.write`): a service
    records a diverged trial as SUCCEEDED with the worst values, which must never be picked.
    """
    out = dict(trial)
    if is_diverged(trial):
        out["state"] = int(TrialState.INFEASIBLE)
        reason = str(trial.get("infeasibleReason") or "")
        out["infeasibleReason"] = reason if reason.startswith(DIVERGED) else DIVERGED_REASON
    return out


def trial_outcome(trial: Mapping[str, Any]) -> str:
    """One word for a trial: the failure taxonomy every line, table and report uses.

    `succeeded` (early-stopped ones too); `diverged`: it ran to its end but its loss was
    not finite or exploded, a poor trial that no failure budget counts and no selection
    picks (`is_diverged`); `failed`: the trainer's own fault (it exited non-zero, timed
    out, reported no metric); `interrupted`: ours (a signal, the study stopping it, a full
    disk), rerun on resume; `running`.
    """
    state = trial_state(trial)
    local = trial.get(LOCAL_KEY) or {}
    if is_diverged(trial):
        return DIVERGED
    if state == TrialState.SUCCEEDED:
        return SUCCEEDED
    if state == TrialState.ACTIVE:
        return INTERRUPTED if local.get("interrupted") else RUNNING
    return INTERRUPTED if local.get("cancelled") else FAILED


def trial_parameters(trial: Mapping[str, Any]) -> dict[str, Any]:
    """`{parameter_id: value}` of a trial."""
    return {p["parameterId"]: p.get("value") for p in trial.get("parameters", [])}


def measurement_metrics(m: Mapping[str, Any] | None) -> dict[str, float]:
    """`{metric_id: value}` of a measurement (empty when None)."""
    return {x["metricId"]: float(x.get("value", 0.0)) for x in (m or {}).get("metrics", [])}


def final_metric(trial: Mapping[str, Any], metric_id: str) -> float | None:
    """The trial's final value of `metric_id`, or None when it has none."""
    return measurement_metrics(trial.get("finalMeasurement")).get(metric_id)


def measured_once(steps: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The metrics reported at one step only, with their value: measured once (a cost).

    The trainer measures its cost (`trainer.contract.COST_METRICS`, a builder's own
    metrics) once, after training, and reports it with its last step; a final measurement
    selected at another step (`BEST_MEASUREMENT`) carries them too (`with_measured_once`).
    """
    seen: dict[str, list[float]] = {}
    for metrics in steps:
        for metric_id, value in metrics.items():
            seen.setdefault(metric_id, []).append(value)
    return {k: values[0] for k, values in seen.items() if len(values) == 1}


def with_measured_once(trial: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `trial` whose final measurement also holds its `measured_once` metrics."""
    out = dict(trial)
    final = trial.get("finalMeasurement")
    if not final:
        return out
    once = measured_once([measurement_metrics(m) for m in trial.get("measurements", [])])
    missing = {k: v for k, v in once.items() if k not in measurement_metrics(final)}
    if missing:
        extra = [{"metricId": k, "value": v} for k, v in missing.items()]
        out["finalMeasurement"] = {**final, "metrics": [*final.get("metrics", []), *extra]}
    return out


def normalize_trial(trial: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with `state` as the enum int and `id` as a string (both spellings accepted)."""
    out = dict(trial)
    out["id"] = str(trial.get("id", ""))
    out["state"] = int(trial_state(trial))
    return out


def validate_trial(trial: Mapping[str, Any]) -> Any:
    """Strictly parse a trial (local extras removed) into `aiplatform_v1.types.Trial`.

    Raises:
        TrialsError: naming the trial and the offending field.
    """
    from google.cloud.aiplatform_v1.types import Trial

    payload = {k: v for k, v in trial.items() if k != LOCAL_KEY}
    try:
        return Trial.from_json(json.dumps(payload), ignore_unknown_fields=False)
    except Exception as err:  # json_format.ParseError
        raise TrialsError(f"trial {trial.get('id')!r}: {' '.join(str(err).split())}") from None


def read_trials(path: str) -> list[dict[str, Any]]:
    """Trials from a JSON file: a list of trials, or an object with a `trials` list.

    States come back as ints whatever the file used.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as err:
        raise TrialsError(f"{path}: cannot read trials ({err.strerror})") from err
    except json.JSONDecodeError as err:
        raise TrialsError(f"{path}: not JSON ({err})") from err
    if isinstance(data, Mapping):
        data = data.get("trials", [])
    if not isinstance(data, list):
        raise TrialsError(f"{path}: expected a list of trials")
    return [normalize_trial(t) for t in data]


def write_trials(path: str, trials: Iterable[Mapping[str, Any]]) -> str:
    """Write trials as a JSON list, atomically (a reader never sees half a file)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".trials-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump([dict(t) for t in trials], f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
