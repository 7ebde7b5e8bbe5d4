"""`submit` and `schedule …` with `--target vertex`: Vertex AI Pipelines jobs and schedules.

The commands themselves (flags, help) are in `pipelines.app.cloud_commands` and
`schedule_actions`; they reach this module through the target registry
(`pipelines.wiring.TARGETS`, `pipelines.app.dispatch.Client`). Requests are built
offline (anonymous credentials) for `--dry-run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pipelines.app.compiled import compiled_template, write_request
from pipelines.app.dispatch import ScheduleFlags, Sending
from pipelines.app.errors import fail
from pipelines.app.parameter_checks import check_parameters
from pipelines.settings import Settings, load_settings, parse_labels, require_cloud
from pipelines.targets.vertex import client as vertex_client
from pipelines.targets.vertex import serving

if TYPE_CHECKING:
    from google.cloud import aiplatform

CLOUD = ("project", "region", "pipeline_root")
LOCATION = ("project", "region")
# The flags a run or schedule takes as Settings fields, under the same names.
RUN_FIELDS: tuple[str, ...] = (
    "service_account",
    "project",
    "region",
    "network",
    "kms_key",
    "pipeline_root",
    "enable_caching",
    "experiment",
    "display_name",
    "continue_from",
)


def _settings(
    config: Path | None,
    flags: Mapping[str, Any],
    fields: tuple[str, ...],
    required: tuple[str, ...],
) -> Settings:
    """Settings from flags > config > environment, with the cloud fields `required`."""
    overrides = {name: flags.get(name) for name in fields}
    label = flags.get("label")
    settings = load_settings(
        config=config, overrides={**overrides, "labels": parse_labels(label) if label else None}
    )
    require_cloud(settings, *required)
    return settings


def run_settings(config: Path | None, flags: Mapping[str, Any]) -> Settings:
    """Settings of a run or a schedule: project, region and pipeline root are needed."""
    return _settings(config, flags, RUN_FIELDS, CLOUD)


def schedule_settings(config: Path | None, flags: Mapping[str, Any]) -> Settings:
    """Settings to list or change schedules: a project and a region are needed."""
    return _settings(config, flags, LOCATION, LOCATION)


def _job(settings: Settings, sending: Sending) -> aiplatform.PipelineJob:
    """The pipeline job for the settings, template and `--param` values."""
    with compiled_template(sending.template, settings, "vertex") as path:
        spec = vertex_client.read_template(path)
        values = vertex_client.parameter_values(spec, sending.params or [])
        check_parameters(
            spec, {**vertex_client.settings_parameters(spec, settings), **values}, values
        )
        credentials = vertex_client.credentials(offline=sending.dry_run)
        return vertex_client.build_job(settings, path, values, credentials=credentials)


def send_run(settings: Settings, sending: Sending, flags: Mapping[str, Any]) -> None:
    """Submit the pipeline job (waiting for its end with `--wait`), or write the dry run."""
    wait = bool(flags.get("wait"))
    job = _job(settings, sending)
    if sending.dry_run:
        where = write_request(vertex_client.job_request(job), sending.output)
        typer.echo(
            f"dry run: pipeline job {job.job_id} in {vertex_client.location_path(settings)} "
            f"written to {where}; nothing was sent",
            err=sending.output is None,
        )
        return
    try:
        name = vertex_client.submit_job(job, settings, wait=wait)
    except RuntimeError as err:  # the run failed or was cancelled while waiting
        fail(f"{job.job_id}: {str(err).strip().splitlines()[0]}", code=1)
    state = f" ({job.gca_resource.state.name})" if wait else ""
    typer.echo(f"submitted {name}{state}: {vertex_client.console_url(name)}")


def send_schedule(settings: Settings, sending: Sending, when: ScheduleFlags) -> None:
    """Create the schedule (warning when the serving container ends first), or the dry run."""
    spec = vertex_client.schedule_spec(
        when.cron,
        settings.cloud.display_name,
        start_time=when.start_time,
        end_time=when.end_time,
        max_run_count=when.max_runs,
        max_concurrent_run_count=when.max_concurrent_runs,
        allow_queueing=when.allow_queueing,
    )
    warning = serving.check_availability(settings, until=spec.end_time, force=when.force)
    job = _job(settings, sending)
    if warning:
        typer.echo(warning, err=True)
    if sending.dry_run:
        schedule = vertex_client.build_schedule(job, spec, settings)
        where = write_request(vertex_client.schedule_request(schedule), sending.output)
        typer.echo(
            f"dry run: schedule {spec.display_name!r} ({spec.cron}) in "
            f"{vertex_client.location_path(settings)} written to {where}; nothing was sent",
            err=sending.output is None,
        )
        return
    schedule = vertex_client.create_schedule(job, spec, settings)
    name = schedule.resource_name
    typer.echo(f"created schedule {name} ({spec.cron}): {vertex_client.console_url(name)}")


def schedule_table(
    settings: Settings, flags: Mapping[str, Any]
) -> tuple[list[dict[str, str]], str, str]:
    """The project's schedules in the region (`--filter` applied), where, and the title."""
    found = vertex_client.list_schedules(
        settings, vertex_client.credentials(offline=False), filter=flags.get("filter")
    )
    where = vertex_client.location_path(settings)
    rows = [vertex_client.schedule_row(schedule) for schedule in found]
    return rows, where, f"Pipeline schedules in {where}"


def change_schedule(action: str, settings: Settings, schedule: str, *, confirm: bool) -> str:
    """Fetch a schedule and pause, resume or delete it (asking first when `confirm`)."""
    name = vertex_client.schedule_name(settings, schedule)
    found = vertex_client.get_schedule(settings, vertex_client.credentials(offline=False), name)
    if confirm:
        typer.confirm(f"{action.capitalize()} schedule {name} ({found.display_name})?", abort=True)
    getattr(found, action)()
    return f"{action}d {name}"
