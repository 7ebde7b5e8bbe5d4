"""Behaviour tests that kill mutmut's mutants of pipelines/targets/vertex/serving.py.

`schedule create` checks the serving container's end of availability before anything is
sent: the whole one-line warning or refusal, on and around the date.
"""

from __future__ import annotations

import datetime
import types

import pytest

from pipelines import images
from pipelines.settings import Settings, SettingsError
from pipelines.targets.vertex import serving

EOA = images.SERVING_CONTAINERS[0].end_of_availability
DAY = datetime.timedelta(days=1)
SOURCE = images.SERVING_CONTAINERS[0].source
WHAT = f"serving_image={Settings().images.serving_image}: tf2-cpu.2-15"


def check(today: datetime.date, until: str | None = None, force: bool = False) -> str | None:
    return serving.check_availability(Settings(), until=until, force=force, today=today)


def test_on_the_date_itself_the_schedule_is_still_created_with_the_warning():
    assert check(EOA) == (
        f"warning: {WHAT} reaches its end of availability on {EOA} ({SOURCE}), and this "
        "schedule runs with no --end-time: runs after that date upload models that cannot "
        "be deployed; update serving_image before then"
    )


def test_a_schedule_ending_after_the_date_is_warned_with_its_end():
    assert check(EOA - 30 * DAY, until=f"{EOA + DAY}T05:00:00Z") == (
        f"warning: {WHAT} reaches its end of availability on {EOA} ({SOURCE}), and this "
        f"schedule runs until {EOA + DAY}: runs after that date upload models that cannot "
        "be deployed; update serving_image before then"
    )
    assert check(EOA - 30 * DAY, until=f"{EOA}T23:59:59Z") is None


def test_the_day_after_it_is_refused_in_one_line_unless_forced():
    with pytest.raises(SettingsError) as err:
        check(EOA + DAY, until=f"{EOA - DAY}T00:00:00Z")
    assert str(err.value) == (
        f"{WHAT} reached its end of availability on {EOA} ({SOURCE}): models uploaded with it "
        "cannot be deployed; set serving_image to a newer container, or pass --force"
    )
    assert check(EOA + DAY, force=True) == (
        f"warning: {WHAT} reached its end of availability on {EOA}; created anyway (--force)"
    )


def test_today_is_the_date_in_utc(monkeypatch):
    asked: list[object] = []

    class Clock(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            asked.append(tz)
            return datetime.datetime(EOA.year, EOA.month, EOA.day, 23, tzinfo=tz) + DAY

    monkeypatch.setattr(serving, "datetime", types.SimpleNamespace(
        datetime=Clock, date=datetime.date, UTC=datetime.UTC))  # fmt: skip
    with pytest.raises(SettingsError, match="reached its end of availability"):
        serving.check_availability(Settings(), until=None)
    assert asked == [datetime.UTC]
