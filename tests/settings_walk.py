"""Follow a run's settings from `run_local`: where they stay, in which rooms, how often they climb.

    python -m tests.settings_walk        # prints `stays=N rooms=N climbs=N`, then each climb

Every project function that is called with the `Settings` object (or one made from it with
`Settings.replace`, or a plan that holds it) in its arguments is a *stay* (counted once); its
module is a *room* (counted once). Taken in the order they are called, a call that receives
the settings in a higher room of `tests/test_architecture.py:ROOMS` than the call before it
is a *climb* back up (imports only run down, so the settings climb when a function returns
them to its caller, which hands them down again). Issue 57 asks for ≤ 25 stays and ≤ 3
climbs; `tests/test_settings_walk.py` holds the figures.

`run_local` is given what `hpt-pipeline run` gives it: the run's plan, resolved from the
settings before (`pipelines.plan.resolve`; before issue 57 item 3, the settings themselves).
The kfp.local execution and the fork server are left out (`_run` makes an empty run folder):
their steps run in processes of their own, which receive pipeline parameters, never the
settings; everything the settings meet in this process runs as in a real run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from pipelines.settings import LOCAL_RUN_DEFAULTS, Settings, load_settings
from tests.test_architecture import room_of

PROJECT = ("pipelines", "components", "trainer", "dataprep")


@dataclasses.dataclass
class Walk:
    """What the settings met: stays (`module:function`), rooms and climbs (`from → to`)."""

    stays: list[str] = dataclasses.field(default_factory=list)
    calls: list[str] = dataclasses.field(default_factory=list)  # every one, in order

    @property
    def climbs(self) -> list[str]:
        ranks = [room_of(call.split(":")[0])[0] for call in self.calls]
        return [
            f"{self.calls[i - 1]} → {self.calls[i]}"
            for i in range(1, len(self.calls))
            if ranks[i] < ranks[i - 1]
        ]

    @property
    def rooms(self) -> list[str]:
        return sorted({stay.split(":")[0] for stay in self.stays})

    def line(self) -> str:
        return (
            f"stays={len(self.stays)} rooms={len(self.rooms)} climbs={len(self.climbs)} "
            f"calls={len(self.calls)}"
        )


def _module(frame: FrameType | None) -> str:
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _ours(module: str) -> bool:
    return module.split(".")[0] in PROJECT


def _is_settings(value: Any) -> bool:
    """The settings, or an object that holds them (the run's plan)."""
    return isinstance(value, Settings) or isinstance(getattr(value, "settings", None), Settings)


def _holds_settings(frame: FrameType) -> bool:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    names = code.co_varnames[:count]
    if names[:1] == ("self",) and _is_settings(frame.f_locals.get("self")):
        return False  # the settings' (or the plan's) own methods: no stay elsewhere
    for name in names:
        value = frame.f_locals.get(name)
        values = value.values() if isinstance(value, dict) else value
        if _is_settings(value):
            return True
        if isinstance(values, tuple | list | type({}.values())) and any(
            isinstance(v, Settings) for v in values
        ):
            return True
    return False


@contextlib.contextmanager
def followed() -> Iterator[Walk]:
    """Record, while the block runs, every project function that receives the settings."""
    walk = Walk()
    seen: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = _module(frame)
        if not _ours(module) or not _holds_settings(frame):
            return
        stay = f"{module}:{frame.f_code.co_qualname}"
        walk.calls.append(stay)
        if stay not in seen:
            seen.add(stay)
            walk.stays.append(stay)

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield walk
    finally:
        sys.setprofile(before)


def walk_run_local(root: Path) -> Walk:
    """The settings' walk through `run_local` on the sample, into an output under `root`."""
    from unittest import mock

    from pipelines.plan import resolve
    from pipelines.targets.local.cli import run as local_run

    settings = load_settings(
        defaults=LOCAL_RUN_DEFAULTS,
        overrides={"output": str(root / "run"), "registry": str(root / "registry")},
        environ={},
    )
    plan = resolve(settings, importable=True, runs_here=True)  # as `run` hands it over

    def no_execution(pipeline: Any, artifacts: Path, *args: Any, **kwargs: Any) -> None:
        (artifacts / "run-0").mkdir()  # what kfp.local leaves: a run folder

    with (
        mock.patch.object(local_run, "_run", no_execution),
        mock.patch.object(
            local_run.fork_client, "shared_for_children", lambda **_: contextlib.nullcontext()
        ),
        followed() as walk,
    ):
        local_run.run_local(plan, echo=lambda line: None)
    return walk


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="settings-walk-") as root:
        walk = walk_run_local(Path(root))
    print(walk.line())
    for stay in walk.stays:
        print(f"  stay  {stay}")
    for climb in walk.climbs:
        print(f"  climb {climb}")


if __name__ == "__main__":
    main()
