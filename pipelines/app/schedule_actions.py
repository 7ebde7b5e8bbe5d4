"""`schedule list|pause|resume|delete`: the schedules `schedule create` made, on Vertex or Kubeflow.

Registered on `cloud_commands.schedule_app`, beside `schedule create`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from pipelines.app import dispatch
from pipelines.app.cloud_commands import (
    ConfigOption,
    HostOption,
    NamespaceOption,
    ProjectOption,
    RegionOption,
    TargetOption,
    one_line_errors,
    schedule_app,
)
from pipelines.targets.kubeflow.cli import commands as kubeflow


@schedule_app.command("list")
def schedule_list(
    ctx: typer.Context,
    filter: Annotated[
        str | None, typer.Option("--filter", help="Vertex list filter, e.g. state=ACTIVE.")
    ] = None,
    project: ProjectOption = None,
    region: RegionOption = None,
    config: ConfigOption = None,
    target: TargetOption = "vertex",
    host: HostOption = None,
    namespace: NamespaceOption = None,
    token: kubeflow.TokenOption = None,
    cookie: kubeflow.CookieOption = None,
) -> None:
    """List the pipeline schedules of the project and region (kubeflow: of the namespace)."""
    from rich.console import Console
    from rich.table import Table

    with one_line_errors():
        chosen, settings = dispatch.schedule_settings(target, config, ctx.params)
        rows, where, title = dispatch.client(chosen).schedule_table(settings, ctx.params)
    if not rows:
        typer.echo(f"no pipeline schedules in {where}")
        return
    table = Table(title=title)
    for column in rows[0]:
        table.add_column(column.replace("_", " "), overflow="fold")
    for row in rows:
        table.add_row(*row.values())
    Console().print(table)


ScheduleArgument = Annotated[
    str,
    typer.Argument(
        help="Schedule id or projects/P/locations/L/schedules/ID (kubeflow: recurring run id)."
    ),
]


def _schedule_action(
    action: str, config: Path | None, flags: dict[str, Any], *, confirm: bool = False
) -> None:
    """Fetch a schedule and pause, resume or delete it (asking first when `confirm`)."""
    with one_line_errors():
        chosen, settings = dispatch.schedule_settings(flags["target"], config, flags)
        line = dispatch.client(chosen).change_schedule(
            action, settings, flags["schedule"], confirm=confirm
        )
    typer.echo(line)


@schedule_app.command("pause")
def schedule_pause(
    ctx: typer.Context,
    schedule: ScheduleArgument,
    project: ProjectOption = None,
    region: RegionOption = None,
    config: ConfigOption = None,
    target: TargetOption = "vertex",
    host: HostOption = None,
    namespace: NamespaceOption = None,
    token: kubeflow.TokenOption = None,
    cookie: kubeflow.CookieOption = None,
) -> None:
    """Pause a schedule: no new runs until it is resumed."""
    _schedule_action("pause", config, ctx.params)


@schedule_app.command("resume")
def schedule_resume(
    ctx: typer.Context,
    schedule: ScheduleArgument,
    project: ProjectOption = None,
    region: RegionOption = None,
    config: ConfigOption = None,
    target: TargetOption = "vertex",
    host: HostOption = None,
    namespace: NamespaceOption = None,
    token: kubeflow.TokenOption = None,
    cookie: kubeflow.CookieOption = None,
) -> None:
    """Resume a paused schedule (missed runs are not started)."""
    _schedule_action("resume", config, ctx.params)


@schedule_app.command("delete")
def schedule_delete(
    ctx: typer.Context,
    schedule: ScheduleArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    project: ProjectOption = None,
    region: RegionOption = None,
    config: ConfigOption = None,
    target: TargetOption = "vertex",
    host: HostOption = None,
    namespace: NamespaceOption = None,
    token: kubeflow.TokenOption = None,
    cookie: kubeflow.CookieOption = None,
) -> None:
    """Delete a schedule (its past runs stay)."""
    _schedule_action("delete", config, ctx.params, confirm=not yes)
