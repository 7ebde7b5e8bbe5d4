"""Whether the serving container a run uploads models with is still available on Vertex."""

from __future__ import annotations

import datetime

from pipelines import images
from pipelines.settings import Settings, SettingsError


def check_availability(
    settings: Settings,
    *,
    until: str | None,
    force: bool = False,
    today: datetime.date | None = None,
) -> str | None:
    """Refuse a schedule past its serving container's end of availability; warn before it.

    Args:
        settings: `serving_image` is looked up in `pipelines.images.SERVING_CONTAINERS`
            (another image has no known date: nothing to say).
        until: The schedule's end time (RFC 3339), None for open-ended.
        force: Create it anyway past the date (models then cannot be deployed).
        today: The date the schedule is created (default: today, UTC).

    Returns:
        A one-line warning when the schedule may run past the date, else None.

    Raises:
        SettingsError: The date has passed and `force` is not set.
    """
    container = images.serving_container_for(settings.images.serving_image)
    if container is None:
        return None
    date = container.end_of_availability
    today = today or datetime.datetime.now(datetime.UTC).date()
    what = f"serving_image={settings.images.serving_image}: {container.name}"
    if today > date:
        if not force:
            raise SettingsError(
                f"{what} reached its end of availability on {date} ({container.source}): "
                "models uploaded with it cannot be deployed; set serving_image to a newer "
                "container, or pass --force"
            )
        return (
            f"warning: {what} reached its end of availability on {date}; created anyway (--force)"
        )
    end = datetime.date.fromisoformat(until[:10]) if until else None
    if end is None or end > date:
        runs = f"until {end}" if end else "with no --end-time"
        return (
            f"warning: {what} reaches its end of availability on {date} ({container.source}), "
            f"and this schedule runs {runs}: runs after that date upload models that cannot "
            "be deployed; update serving_image before then"
        )
    return None
