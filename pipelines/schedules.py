"""Schedules shared by every target: the 5-field cron users give, and start/end times.

One validation for all targets, each error one line naming the value. A target
converts the validated expression to its service's dialect (Vertex takes it as
is; Kubeflow Pipelines wants 6 fields, seconds first: see
`pipelines.targets.kubeflow.client.kfp_cron`).
"""

from __future__ import annotations

import datetime
import re
import zoneinfo

from pipelines.settings import SettingsError

CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
TZ_PREFIX = re.compile(r"^(?P<key>CRON_TZ|TZ)=(?P<zone>\S+)\s+(?P<cron>.*)$")


def validate_cron(cron: str) -> str:
    """A 5-field cron expression, optionally prefixed `TZ=Area/City ` or `CRON_TZ=…`.

    Returns:
        The expression with its whitespace normalised.

    Raises:
        SettingsError: Wrong field count, a field out of range, an expression that
            never fires, or an unknown time zone.
    """
    from croniter import croniter

    text = " ".join(cron.split())
    body = text
    if match := TZ_PREFIX.match(text):
        zone, body = match["zone"], match["cron"]
        try:
            zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise SettingsError(
                f"cron={cron!r}: unknown time zone {zone!r} (expected an IANA name such as "
                "Europe/Paris)"
            ) from None
    elif text.split(" ", 1)[0].startswith(("TZ=", "CRON_TZ=")):
        raise SettingsError(f"cron={cron!r}: expected 'TZ=Area/City' followed by 5 fields")
    fields = body.split(" ") if body else []
    if len(fields) != len(CRON_FIELDS):
        raise SettingsError(
            f"cron={cron!r}: expected 5 fields ({' '.join(CRON_FIELDS)}), got {len(fields)}"
        )
    for index, (name, value) in enumerate(zip(CRON_FIELDS, fields, strict=True)):
        alone = ["*"] * len(CRON_FIELDS)
        alone[index] = value
        if not croniter.is_valid(" ".join(alone)):
            raise SettingsError(f"cron={cron!r}: bad {name} field {value!r}")
    if not croniter.is_valid(body, strict=True):
        raise SettingsError(f"cron={cron!r}: never fires (that day-of-month is not in that month)")
    return text


def split_time_zone(cron: str) -> tuple[str | None, str]:
    """(`Area/City` or None, the 5 fields) of an expression from `validate_cron`."""
    match = TZ_PREFIX.match(cron)
    return (match["zone"], match["cron"]) if match else (None, cron)


def parse_time(value: str, name: str) -> datetime.datetime:
    """An ISO-8601 date or date-time as an aware UTC datetime (no offset means UTC).

    Raises:
        SettingsError: Not an ISO-8601 date or date-time.
    """
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise SettingsError(
            f"{name}={value!r}: expected an ISO-8601 time such as 2030-01-31T09:00:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.astimezone(datetime.UTC)


def rfc3339(when: datetime.datetime | None) -> str | None:
    """`2030-01-31T09:00:00Z` for an aware UTC datetime (None stays None)."""
    return when.isoformat().replace("+00:00", "Z") if when else None


def time_window(start_time: str | None, end_time: str | None) -> tuple[str | None, str | None]:
    """Validated start and end times as RFC 3339 UTC strings (either may be None).

    Raises:
        SettingsError: A time that is not ISO-8601, or an end not after the start.
    """
    start = parse_time(start_time, "start_time") if start_time else None
    end = parse_time(end_time, "end_time") if end_time else None
    if start and end and end <= start:
        raise SettingsError(f"end_time={end_time!r}: must be after start_time={start_time!r}")
    return rfc3339(start), rfc3339(end)
