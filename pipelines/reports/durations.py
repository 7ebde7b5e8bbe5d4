"""How long a trial ran, from its Trial JSON timestamps, and that duration as people read it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _seconds(timestamp: str) -> float:
    from google.protobuf import timestamp_pb2

    parsed = timestamp_pb2.Timestamp()
    parsed.FromJsonString(timestamp)
    return parsed.ToNanoseconds() / 1e9


def duration_seconds(trial: Mapping[str, Any]) -> float | None:
    """Seconds from the trial's `startTime` to its `endTime` (None while either is missing)."""
    start, end = trial.get("startTime"), trial.get("endTime")
    return _seconds(end) - _seconds(start) if start and end else None


def format_duration(seconds: float | None) -> str:
    """`8.3 s`, `2 min 05 s`, `1 h 02 min`; `-` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"
