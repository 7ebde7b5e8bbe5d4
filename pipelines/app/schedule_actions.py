"""`schedule list|pause|resume|delete`: the schedules `schedule create` made, on Vertex or Kubeflow.

Registered on `cloud_commands.schedule_app`, beside `schedule create`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.app import kubeflow_commands as kubeflow
from pipelines.app.cloud_commands import (
    LOCATION,
    ConfigOption,
    HostOption,
    NamespaceOption,
    ProjectOption,
    RegionOption,
    TargetOption,
    _one_line_errors,
    _settings,
    schedule_app,
)
from pipelines.targets.vertex import client as vertex_client


@schedule_app.command("list")
def schedule_list(
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

    with _one_line_errors():
        auth = kubeflow.auth_flags(token, cookie)
        if kubeflow.is_kubeflow(target, host=host, namespace=namespace, **auth):
            vertex = dict(filter=filter, project=project, region=region)
            settings = kubeflow.host_settings(config, vertex, host, namespace, **auth)
            where = f"namespace {settings.kubeflow_namespace} at {settings.kubeflow_host}"
            with kubeflow.api_errors(settings):
                rows = kubeflow.schedule_rows(settings)
            title = f"Recurring runs in {where}"
        else:
            settings = _settings(config, None, LOCATION, project=project, region=region)
            found = vertex_client.list_schedules(
                settings, vertex_client.credentials(offline=False), filter=filter
            )
            rows = [vertex_client.schedule_row(schedule) for schedule in found]
            where = vertex_client.location_path(settings)
            title = f"Pipeline schedules in {where}"
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
    action: str,
    schedule: str,
    project: str | None,
    region: str | None,
    config: Path | None,
    kubeflow_flags: kubeflow.ActionFlags = ("vertex", None, None, None, None),
    *,
    confirm: bool = False,
) -> None:
    """Fetch a schedule and pause, resume or delete it (asking first when `confirm`)."""
    with _one_line_errors():
        target, host, namespace, token, cookie = kubeflow_flags
        auth = kubeflow.auth_flags(token, cookie)
        if kubeflow.is_kubeflow(target, host=host, namespace=namespace, **auth):
            vertex = dict(project=project, region=region)
            settings = kubeflow.host_settings(config, vertex, host, namespace, **auth)
            with kubeflow.api_errors(settings):
                line = kubeflow.schedule_action(action, settings, schedule, confirm=confirm)
            typer.echo(line)
            return
        settings = _settings(config, None, LOCATION, project=project, region=region)
        name = vertex_client.schedule_name(settings, schedule)
        found = vertex_client.get_schedule(settings, vertex_client.credentials(offline=False), name)
        if confirm:
            typer.confirm(
                f"{action.capitalize()} schedule {name} ({found.display_name})?", abort=True
            )
        getattr(found, action)()
    typer.echo(f"{action}d {name}")


@schedule_app.command("pause")
def schedule_pause(
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
    flags = (target, host, namespace, token, cookie)
    _schedule_action("pause", schedule, project, region, config, flags)


@schedule_app.command("resume")
def schedule_resume(
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
    flags = (target, host, namespace, token, cookie)
    _schedule_action("resume", schedule, project, region, config, flags)


@schedule_app.command("delete")
def schedule_delete(
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
    flags = (target, host, namespace, token, cookie)
    _schedule_action("delete", schedule, project, region, config, flags, confirm=not yes)
