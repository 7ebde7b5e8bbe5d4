"""The `trials` table's duration column: seconds from a trial's timestamps, as people read them."""

from __future__ import annotations

import pytest

from pipelines.reports.durations import duration_seconds, format_duration


def test_a_trial_lasts_from_its_start_to_its_end_to_the_millisecond() -> None:
    trial = {"startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T00:01:30.250Z"}
    assert duration_seconds(trial) == pytest.approx(90.25, abs=1e-3)


@pytest.mark.parametrize(
    "trial",
    [{"startTime": "2026-01-01T00:00:00Z"}, {"endTime": "2026-01-01T00:00:09Z"}, {}],
    ids=["running", "never-started", "empty"],
)
def test_a_trial_without_both_timestamps_has_no_duration_and_shows_a_dash(trial: dict) -> None:
    assert duration_seconds(trial) is None
    assert format_duration(duration_seconds(trial)) == "-"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.04, "0.0 s"),
        (8.25, "8.2 s"),
        (59.9, "59.9 s"),
        (60.0, "1 min 00 s"),
        (89.6, "1 min 30 s"),
        (125.0, "2 min 05 s"),
        (3599.0, "59 min 59 s"),
        (3600.0, "1 h 00 min"),
        (3725.0, "1 h 02 min"),
        (7199.4, "1 h 59 min"),
        (36_000.0, "10 h 00 min"),
    ],
)
def test_durations_read_in_seconds_then_minutes_then_hours(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown
