"""What every target's preflight checks before anything is sent: images, caching, the study.

Each target's own preflight is in its package (`pipelines/targets/<name>/cli/preflight.py`)
and is named in its registry line (`pipelines/wiring/__init__.py:TARGETS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.settings import ENV_PREFIX, Settings, SettingsError
from pipelines.settings_space import study_space
from pipelines.study.search_space import SearchSpaceError

PLACEHOLDER = "/your-project/"


def check_image_uris(settings: Settings, hint: str) -> None:
    """Refuse image URIs that still point at the placeholder registry.

    Args:
        settings: The trainer and components images are checked.
        hint: How to fix it; `{name}` and `{env}` are filled with the setting's names.

    Raises:
        SettingsError: Naming the image setting and its value.
    """
    for name in ("trainer_image", "components_image"):
        uri = settings.value(name)
        if PLACEHOLDER in uri:
            fix = hint.format(name=name, env=f"{ENV_PREFIX}{name.upper()}")
            raise SettingsError(f"{name}={uri}: a placeholder; {fix}")


def check_caching_and_study(
    settings: Settings, check_space: Callable[[Any], None] = lambda space: None
) -> None:
    """Refuse `enable_caching=True`, and a search space the trainer or the algorithm refuses.

    `check_space`: the target's own check of the space (its binding's), called last.

    Raises:
        SettingsError: One line naming the setting.
    """
    if settings.cloud.enable_caching:
        raise SettingsError(
            "enable_caching=True: it would cache every task, the model lookup and the trial "
            "fetch included, which read state outside the run; leave it unset (each task's "
            "compiled caching applies) or pass --no-cache"
        )
    try:
        space = study_space(settings)
    except SearchSpaceError as err:
        raise SettingsError(str(err)) from None
    check_space(space)
