"""Katib's side of one trial, as its sources behave, so tests check a trial without a cluster.

* `render_run_spec`: what Katib's controller makes of the trial template for one Trial.
* `collect_observation`: what the File collector (JSON format) reports for a metrics file,
  folded into a Trial's `status.observation.metrics` as the trial controller does.

The Katib source each reproduces: docs/kubeflow.md, "Katib, as its source behaves".
(Moved here from `pipelines/targets/kubeflow/katib_trials.py`: only tests use them.)
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.targets.kubeflow.katib_rules import META_INDEXED, META_REFERENCE
from pipelines.targets.kubeflow.katib_trials import UNAVAILABLE, KatibTrialError

ZERO_TIME = (-62135596800, 0)  # Go's time.Time{}: 0001-01-01T00:00:00Z


def render_run_spec(
    experiment: Mapping[str, Any],
    assignments: Mapping[str, str],
    *,
    trial_name: str,
    namespace: str,
) -> dict[str, Any]:
    """The trial's run spec (the Job) as Katib's controller renders it for one Trial.

    Args:
        experiment: The Experiment (camelCase dict).
        assignments: Parameter name → value, as strings (Katib's `parameterAssignments`).
        trial_name: The Trial's name (`${trialSpec.Name}`).
        namespace: The Trial's namespace.

    Raises:
        KatibTrialError: An assignment is missing or left over, as Katib refuses it.
    """
    template = experiment["spec"]["trialTemplate"]
    text = json.dumps(template["trialSpec"], separators=(",", ":"))
    values: dict[str, str] = {}
    used = 0
    for parameter in template["trialParameters"]:
        ref = parameter["reference"]
        meta = META_REFERENCE.search(ref)
        if not meta:
            if ref not in assignments:
                raise KatibTrialError(
                    f"parameter {ref!r}: no assignment (Katib: {dict(assignments)})"
                )
            values[parameter["name"]] = str(assignments[ref])
            used += 1
            continue
        metadata = {"Name": trial_name, "Namespace": namespace}
        values[parameter["name"]] = _meta_value(template["trialSpec"], ref, meta.group(1), metadata)
    if used != len(assignments):  # generator.go l.185-189
        raise KatibTrialError(
            f"parameter assignments {sorted(assignments)} are not all trial parameters"
        )
    for name, value in values.items():
        text = text.replace("${trialParameters." + name + "}", value)
    run_spec: dict[str, Any] = json.loads(text)
    run_spec.setdefault("metadata", {}).update({"name": trial_name, "namespace": namespace})
    return run_spec


def _meta_value(spec: Mapping[str, Any], ref: str, key: str, metadata: Mapping[str, str]) -> str:
    """The value of a `${trialSpec.<key>}` reference.

    The Trial's name or namespace (in `metadata`), the run spec's kind or apiVersion, or one
    of its labels or annotations.

    Raises:
        KatibTrialError: Any other reference, or a label/annotation the run spec lacks.
    """
    indexed = META_INDEXED.search(key)
    found: str | None = None
    if key in metadata:
        found = metadata[key]
    elif key == "Kind":
        found = spec.get("kind", "")
    elif key == "APIVersion":
        found = spec.get("apiVersion", "")
    elif indexed and indexed.group(1) in ("Labels", "Annotations"):
        field = indexed.group(1).lower()
        found = ((spec.get("metadata") or {}).get(field) or {}).get(indexed.group(2))
    if found is not None:
        return found
    raise KatibTrialError(f"illegal reference of trial metadata: {ref}")


def _katib_time(value: Any) -> tuple[int, int]:
    """A metric line's `timestamp` as Katib reads it: (seconds, nanoseconds).

    file-metricscollector.go l.199-239: an RFC 3339 string as is; a float is printed
    shortest (`FormatFloat(f, 'f', -1, 64)`) and its fraction digits read as a whole number
    of nanoseconds (`1700000000.5` → 5 ns); anything else → the zero time.
    """
    if isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return ZERO_TIME
        return int(moment.timestamp()), moment.microsecond * 1000
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = repr(float(value))
        if "e" in text or "inf" in text or "nan" in text:
            return ZERO_TIME
        seconds, _, fraction = text.partition(".")
        nanos = int(fraction) if fraction and fraction != "0" else 0
        return int(seconds) + nanos // 10**9, nanos % 10**9
    return ZERO_TIME


def collect_metric_logs(path: str, metric_names: Sequence[str]) -> list[tuple[str, str, Any]]:
    """The metric logs Katib's File collector (JSON format) reports for a metrics file.

    file-metricscollector.go l.128-197: each non-empty line must be a JSON object; a metric
    is taken only where its value is a string; when the objective (first name) is in no
    line, the one log is the objective with the value `unavailable`.

    Returns:
        (metric name, value string, timestamp as `_katib_time` gives it), in file order.

    Raises:
        KatibTrialError: A line is not a JSON object (Katib: "failed to parse the json object").
    """
    logs: list[tuple[str, str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f.read().split("\n"), start=1):
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise KatibTrialError(
                    f"{path}:{number}: failed to parse the json object ({err.msg})"
                ) from None
            if not isinstance(record, dict):
                raise KatibTrialError(f"{path}:{number}: failed to parse the json object")
            when = _katib_time(record.get("timestamp"))
            logs += [(m, record[m], when) for m in metric_names if isinstance(record.get(m), str)]
    if not any(name == metric_names[0] for name, _, _ in logs):
        return [(metric_names[0], UNAVAILABLE, ZERO_TIME)]
    return logs


def fold_observation(
    logs: Sequence[tuple[str, str, Any]], metric_names: Sequence[str]
) -> list[dict[str, str]]:
    """`status.observation.metrics` from metric logs, as Katib's trial controller folds them.

    trial_controller_util.go l.192-244 (`getMetrics`): one entry per metric strategy,
    `unavailable` until a value parses as a number; `min`/`max` over the numbers; `latest`
    the value with the latest timestamp (a tie goes to the later log).
    """
    metrics = {
        n: {"name": n, "min": UNAVAILABLE, "max": UNAVAILABLE, "latest": UNAVAILABLE}
        for n in metric_names
    }
    latest: dict[str, Any] = {}
    for name, value, when in logs:
        metric = metrics.get(name)
        if metric is None:
            continue
        try:
            number = float(value)
        except ValueError:
            number = None
        if number is not None:
            if metric["min"] == UNAVAILABLE:
                metric["min"] = metric["max"] = value
            elif number < float(metric["min"]):
                metric["min"] = value
            elif number > float(metric["max"]):
                metric["max"] = value
        if name not in latest or not latest[name] > when:
            latest[name] = when
            metric["latest"] = value
    return list(metrics.values())


def collect_observation(path: str, metric_names: Sequence[str]) -> list[dict[str, str]]:
    """What a Trial's `status.observation.metrics` becomes for this metrics file."""
    return fold_observation(collect_metric_logs(path, metric_names), metric_names)
