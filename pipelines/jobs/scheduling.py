"""Capacity a job runs on: standard, spot or queued (flex-start), as Vertex's `Scheduling` says it.

The settings `trial_scheduling` and `final_scheduling` take one of `STRATEGIES`, and
`max_wait_hours` bounds how long a `flex_start` job queues for its machines. Vertex reads
them as `aiplatform_v1.Scheduling`: `strategy` (the enum's names `STANDARD`, `SPOT`,
`FLEX_START`) and `max_wait_duration`, which Vertex takes only with `FLEX_START` (0: wait
without end; Vertex's default is 24 hours). The HPT job carries it in
`trial_job_spec.scheduling`, GCPC's `CustomTrainingJobOp` as its `strategy` and
`max_wait_duration` inputs (docs/vertex.md, "Spot and flex-start capacity").
"""

from __future__ import annotations

from typing import Any

# Setting value → Vertex's `Scheduling.Strategy` name.
STRATEGIES = {"standard": "STANDARD", "spot": "SPOT", "flex_start": "FLEX_START"}
DEFAULT_MAX_WAIT_HOURS = 24.0  # Vertex's own default for max_wait_duration


class SchedulingError(ValueError):
    """A strategy or wait that Vertex's `Scheduling` cannot carry (one line)."""


def check_strategy(name: str, value: str) -> None:
    """Refuse a strategy that is not one of `STRATEGIES`, naming the setting `name`.

    Raises:
        SchedulingError: The value and the strategies there are.
    """
    if value not in STRATEGIES:
        raise SchedulingError(f"{name}={value!r}: expected one of {', '.join(STRATEGIES)}")


def check_wait(max_wait_hours: float, strategies: dict[str, str]) -> None:
    """Refuse a wait below 0, or one set away from its default with no `flex_start` job.

    `strategies`: each scheduling setting by name (`trial_scheduling: spot`). Vertex drops
    `max_wait_duration` from a job that does not queue (GCPC's launcher deletes it), so a
    wait set for no such job would be a setting silently dropped.

    Raises:
        SchedulingError: The bad value and what is expected.
    """
    if max_wait_hours < 0:
        raise SchedulingError(
            f"max_wait_hours={max_wait_hours:g}: expected a number of hours >= 0 (0: no limit)"
        )
    queued = "flex_start" in strategies.values()
    if max_wait_hours != DEFAULT_MAX_WAIT_HOURS and not queued:
        given = ", ".join(f"{k}={v}" for k, v in strategies.items())
        raise SchedulingError(
            f"max_wait_hours={max_wait_hours:g}: applies to flex_start jobs only ({given}); "
            "set trial_scheduling or final_scheduling to flex_start, or leave it unset"
        )


def vertex_scheduling(strategy: str, max_wait_hours: float) -> dict[str, Any]:
    """A job's `aiplatform_v1.Scheduling` fields: the strategy, and the wait for flex-start.

    Raises:
        SchedulingError: A strategy not in `STRATEGIES` (a run-time `--param` too).
    """
    check_strategy("scheduling", strategy)
    scheduling: dict[str, Any] = {"strategy": STRATEGIES[strategy]}
    if strategy == "flex_start":
        scheduling["max_wait_duration"] = f"{round(float(max_wait_hours) * 3600)}s"
    return scheduling
