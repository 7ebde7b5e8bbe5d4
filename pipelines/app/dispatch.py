"""The CLI's way to a target: the one named by `--target`, its flags, preflight and client.

Every command that sends or schedules reads the target from `pipelines.wiring.TARGETS` and
calls its client through the `Client` interface below, so no command branches on a
target's name. Clients are imported when a command uses them (never at `--help`).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, cast

from pipelines.settings import Settings, SettingsError
from pipelines.wiring import TARGETS, Target


@dataclasses.dataclass(frozen=True)
class Sending:
    """What a command sends: the template (None: compile now), `--param`s, dry run or not."""

    template: Path | None
    params: list[str] | None
    dry_run: bool
    output: Path | None


@dataclasses.dataclass(frozen=True)
class ScheduleFlags:
    """When a schedule runs, as `schedule create` was given it (each client takes its part)."""

    cron: str
    start_time: str | None
    end_time: str | None
    max_runs: int | None
    max_concurrent_runs: int
    allow_queueing: bool
    force: bool


class Client(Protocol):
    """A target's submit and schedule client (a module: `Target.client`)."""

    def run_settings(self, config: Path | None, flags: Mapping[str, Any]) -> Settings:
        """Settings of a run or schedule from `--config` and the command's flags (by name)."""

    def send_run(self, settings: Settings, sending: Sending, flags: Mapping[str, Any]) -> None:
        """Submit the run (or write the dry-run request) and say so."""

    def send_schedule(self, settings: Settings, sending: Sending, when: ScheduleFlags) -> None:
        """Create the schedule (or write the dry-run request) and say so."""

    def schedule_settings(self, config: Path | None, flags: Mapping[str, Any]) -> Settings:
        """Settings to list or change schedules (where they are, how to reach them)."""

    def schedule_table(
        self, settings: Settings, flags: Mapping[str, Any]
    ) -> tuple[list[dict[str, str]], str, str]:
        """The schedules' rows, where they are, and the table's title."""

    def change_schedule(
        self, action: str, settings: Settings, schedule: str, *, confirm: bool
    ) -> str:
        """Pause, resume or delete a schedule; returns the line to print."""


def sending_target(name: str) -> Target:
    """The target `--target` names, among those that send runs (every one with a client).

    Raises:
        SettingsError: `--target=<name>: expected one of vertex, kubeflow`.
    """
    known = [target.name for target in TARGETS.values() if target.client]
    if name not in known:
        raise SettingsError(f"--target={name}: expected one of {', '.join(known)}")
    return TARGETS[name]


def refuse_other_flags(
    target: Target, flags: Mapping[str, Any], also: Mapping[str, str] | None = None
) -> None:
    """Refuse a flag set (not None, False or empty) that only another target takes.

    Args:
        target: The target the command works on.
        flags: The command's flags by parameter name.
        also: Flags that, in this command only, belong to the target named (flag → target).

    Raises:
        SettingsError: `--<flag>: <its target's flag_note>`, naming the first one.
    """
    for other in TARGETS.values():
        if other.name == target.name:
            continue
        owned = (
            *other.flags,
            *(flag for flag, owner in (also or {}).items() if owner == other.name),
        )
        for name in owned:
            if flags.get(name) not in (None, False, [], ()):
                why = other.flag_note.format(target=target.name)
                raise SettingsError(f"--{name.replace('_', '-')}: {why}")


def preflight(target: Target, settings: Settings) -> list[str] | None:
    """Run the target's preflight (`Target.preflight`) on `settings`; its notes, if any.

    Raises:
        SettingsError: What it refuses, in one line.
    """
    module, _, function = target.preflight.partition(":")
    return cast("list[str] | None", getattr(importlib.import_module(module), function)(settings))


def client(target: Target) -> Client:
    """The target's submit and schedule client, imported now."""
    if target.client is None:
        raise SettingsError(f"--target={target.name}: runs here only; nothing is sent")
    return cast(Client, importlib.import_module(target.client))


def run_settings(
    name: str, config: Path | None, flags: Mapping[str, Any], also: Mapping[str, str] | None = None
) -> tuple[Target, Settings]:
    """The target named and the settings of a run or schedule on it, preflighted.

    In this order: the target is known, no other target's flag is set, the settings load,
    the preflight passes.

    Raises:
        SettingsError: The first of those that fails, in one line.
    """
    target = sending_target(name)
    refuse_other_flags(target, flags, also)
    settings = client(target).run_settings(config, flags)
    preflight(target, settings)
    return target, settings


def schedule_settings(
    name: str, config: Path | None, flags: Mapping[str, Any]
) -> tuple[Target, Settings]:
    """The target named and the settings to list or change its schedules.

    Raises:
        SettingsError: An unknown target, another target's flag, or a bad setting.
    """
    target = sending_target(name)
    refuse_other_flags(target, flags)
    return target, client(target).schedule_settings(config, flags)
