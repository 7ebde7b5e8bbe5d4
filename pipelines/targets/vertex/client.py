"""Vertex AI Pipelines requests: pipeline jobs and their schedules, built offline or sent.

Plain functions over `aiplatform.PipelineJob` / `aiplatform.PipelineJobSchedule`.
Everything a request contains is decided before any network call: the cron
expression, times and counts are validated here, and `job_request` /
`schedule_request` return the exact request `submit_job` / `create_schedule`
would send (the fields `PipelineJob.submit` and `PipelineJobSchedule.create`
set on the resource just before the call are set here the same way), built
with anonymous credentials for dry runs. Cloud settings also fill the pipeline
parameters that repeat them (`SETTING_PARAMETERS`), so inner jobs match the run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.pipeline_parameters import SETTING_OF
from pipelines.schedules import time_window
from pipelines.schedules import validate_cron as validate_cron
from pipelines.settings import Settings, SettingsError
from pipelines.templates import declared_parameters, read_template
from pipelines.templates import parameter_values as parameter_values

if TYPE_CHECKING:
    from google.auth.credentials import Credentials
    from google.cloud import aiplatform

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_RESOURCE = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/"
    r"(?P<kind>pipelineJobs|schedules)/(?P<id>[^/]+)$"
)
_CONSOLE = "https://console.cloud.google.com/vertex-ai/locations/{location}/pipelines/{page}/{id}"
_CONSOLE_PAGES = {"pipelineJobs": "runs", "schedules": "schedules"}
# Pipeline parameters that repeat a cloud setting (parameter → Settings field): when a
# template declares them, the jobs the pipeline starts run where and as the run does.
SETTING_PARAMETERS = {
    parameter: SETTING_OF.get(parameter, parameter)  # location → region, … (one table)
    for parameter in (
        "project",
        "location",
        "service_account",
        "network",
        "encryption_spec_key_name",
        "labels",
    )
}


# --------------------------------------------------------------------------- templates


def settings_parameters(spec: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    """Values for the `SETTING_PARAMETERS` the pipeline declares, from the settings that are set."""
    declared = declared_parameters(spec)
    values: dict[str, Any] = {}
    for parameter, field in SETTING_PARAMETERS.items():
        value = settings.value(field)
        if parameter in declared and value:
            values[parameter] = dict(value) if isinstance(value, Mapping) else value
    return values


# --------------------------------------------------------------------------- pipeline jobs


def credentials(*, offline: bool) -> Credentials:
    """Anonymous credentials to build requests offline, else application-default ones.

    Raises:
        google.auth.exceptions.DefaultCredentialsError: Not offline and none are set up.
    """
    if offline:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    import google.auth

    found, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
    return found


def location_path(settings: Settings) -> str:
    """`projects/P/locations/R`, the parent of jobs and schedules."""
    return f"projects/{settings.cloud.project}/locations/{settings.cloud.region}"


def build_job(
    settings: Settings,
    template_path: str | Path,
    values: Mapping[str, Any] | None = None,
    *,
    credentials: Credentials,
) -> aiplatform.PipelineJob:
    """A `PipelineJob` from the settings and a compiled template; no network call.

    Args:
        settings: Project, region, pipeline root, display name, caching, CMEK key, labels.
        template_path: A compiled pipeline (YAML or JSON).
        values: Pipeline parameter values overriding the template's defaults and
            the `settings_parameters` (which override the defaults too).
        credentials: From `credentials()`; anonymous ones build the job offline.

    Raises:
        SettingsError: aiplatform rejects the display name, labels or parameter values.
    """
    from google.cloud import aiplatform

    from_settings = settings_parameters(read_template(template_path), settings)
    try:
        job = aiplatform.PipelineJob(
            display_name=settings.cloud.display_name,
            template_path=str(template_path),
            pipeline_root=settings.cloud.pipeline_root,
            parameter_values={**from_settings, **(values or {})},
            enable_caching=settings.cloud.enable_caching,
            encryption_spec_key_name=settings.cloud.kms_key,
            labels=dict(settings.cloud.labels) or None,
            credentials=credentials,
            project=settings.cloud.project,
            location=settings.cloud.region,
        )
    except ValueError as err:
        raise SettingsError(str(err).splitlines()[0]) from None
    _set_run_as(job._gca_resource, settings)
    return job


def _set_run_as(pipeline_job: Any, settings: Settings) -> None:
    """Set the run-as service account and peered network as `submit`/`create` do."""
    if settings.cloud.service_account:
        pipeline_job.service_account = settings.cloud.service_account
    if settings.cloud.network:
        pipeline_job.network = settings.cloud.network


def _to_json_dict(message: Any) -> dict[str, Any]:
    """A proto-plus message as the JSON the REST API exchanges (camelCase, no defaults)."""
    from google.protobuf import json_format

    return json_format.MessageToDict(type(message).pb(message))


def job_request(job: aiplatform.PipelineJob) -> dict[str, Any]:
    """The `CreatePipelineJobRequest` that `submit_job(job, …)` sends, as JSON."""
    from google.cloud.aiplatform_v1 import CreatePipelineJobRequest

    request = CreatePipelineJobRequest(
        parent=job._parent,  # aiplatform keeps the request parts private
        pipeline_job=job._gca_resource,
        pipeline_job_id=job.job_id,
    )
    return _to_json_dict(request)


def submit_job(job: aiplatform.PipelineJob, settings: Settings, *, wait: bool = False) -> str:
    """Submit the job to Vertex AI Pipelines (and wait for it); returns its resource name.

    Raises:
        RuntimeError: With `wait`, the run did not succeed.
        google.api_core.exceptions.GoogleAPIError: The service refused the request.
    """
    job.submit(
        service_account=settings.cloud.service_account,
        network=settings.cloud.network,
        experiment=settings.cloud.experiment,
    )
    if wait:
        job.wait()
    return job.resource_name


# --------------------------------------------------------------------------- schedules


@dataclasses.dataclass(frozen=True)
class ScheduleSpec:
    """When a schedule starts runs; build it with `schedule_spec` (which validates)."""

    cron: str
    display_name: str
    start_time: str | None = None  # RFC 3339, UTC
    end_time: str | None = None
    max_run_count: int | None = None
    max_concurrent_run_count: int = 1
    allow_queueing: bool = False


def schedule_spec(
    cron: str,
    display_name: str,
    *,
    start_time: str | None = None,
    end_time: str | None = None,
    max_run_count: int | None = None,
    max_concurrent_run_count: int = 1,
    allow_queueing: bool = False,
) -> ScheduleSpec:
    """A validated `ScheduleSpec`; every error is one line naming the value.

    Raises:
        SettingsError: Bad cron, times that are not ISO-8601 or not in order, or counts < 1.
    """
    cron = validate_cron(cron)
    start, end = time_window(start_time, end_time)
    if max_run_count is not None and max_run_count < 1:
        raise SettingsError(f"max_run_count={max_run_count}: expected an integer >= 1")
    if max_concurrent_run_count < 1:
        raise SettingsError(
            f"max_concurrent_run_count={max_concurrent_run_count}: expected an integer >= 1"
        )
    return ScheduleSpec(
        cron=cron,
        display_name=display_name,
        start_time=start,
        end_time=end,
        max_run_count=max_run_count,
        max_concurrent_run_count=max_concurrent_run_count,
        allow_queueing=allow_queueing,
    )


def build_schedule(
    job: aiplatform.PipelineJob, spec: ScheduleSpec, settings: Settings
) -> aiplatform.PipelineJobSchedule:
    """The schedule `create_schedule` would create, filled in offline (never sent)."""
    from google.cloud import aiplatform

    schedule = aiplatform.PipelineJobSchedule(
        pipeline_job=job,
        display_name=spec.display_name,
        credentials=job.credentials,
        project=job.project,
        location=job.location,
    )
    resource = schedule._gca_resource  # filled the way PipelineJobSchedule.create does
    resource.cron = spec.cron
    if spec.start_time:
        resource.start_time = spec.start_time
    if spec.end_time:
        resource.end_time = spec.end_time
    if spec.allow_queueing:
        resource.allow_queueing = True
    if spec.max_run_count:
        resource.max_run_count = spec.max_run_count
    resource.max_concurrent_run_count = spec.max_concurrent_run_count
    _set_run_as(resource.create_pipeline_job_request.pipeline_job, settings)
    return schedule


def schedule_request(schedule: aiplatform.PipelineJobSchedule) -> dict[str, Any]:
    """The `CreateScheduleRequest` for a schedule from `build_schedule`, as JSON."""
    from google.cloud.aiplatform_v1 import CreateScheduleRequest

    request = CreateScheduleRequest(
        parent=schedule._parent,
        schedule=schedule._gca_resource,
    )
    return _to_json_dict(request)


def create_schedule(
    job: aiplatform.PipelineJob, spec: ScheduleSpec, settings: Settings
) -> aiplatform.PipelineJobSchedule:
    """Create the schedule on Vertex AI (`PipelineJob.create_schedule`).

    Raises:
        google.api_core.exceptions.GoogleAPIError: The service refused the request.
    """
    return job.create_schedule(
        cron=spec.cron,
        display_name=spec.display_name,
        start_time=spec.start_time,
        end_time=spec.end_time,
        allow_queueing=spec.allow_queueing,
        max_run_count=spec.max_run_count,
        max_concurrent_run_count=spec.max_concurrent_run_count,
        service_account=settings.cloud.service_account,
        network=settings.cloud.network,
    )


def schedule_name(settings: Settings, name_or_id: str) -> str:
    """A schedule's full resource name from its name or its numeric id.

    Raises:
        SettingsError: Neither `projects/P/locations/L/schedules/ID` nor an id.
    """
    if name_or_id.startswith("projects/"):
        match = _RESOURCE.match(name_or_id)
        if not match or match["kind"] != "schedules":
            raise SettingsError(
                f"schedule {name_or_id!r}: expected projects/P/locations/L/schedules/ID or an id"
            )
        return name_or_id
    if not re.fullmatch(r"[0-9]+", name_or_id):
        raise SettingsError(f"schedule {name_or_id!r}: expected a numeric id or a resource name")
    return f"{location_path(settings)}/schedules/{name_or_id}"


def list_schedules(
    settings: Settings, credentials: Credentials, *, filter: str | None = None
) -> list[aiplatform.PipelineJobSchedule]:
    """The project's pipeline schedules in the settings' region, newest first."""
    from google.cloud import aiplatform

    return aiplatform.PipelineJobSchedule.list(
        filter=filter,
        order_by="create_time desc",
        project=settings.cloud.project,
        location=settings.cloud.region,
        credentials=credentials,
    )


def get_schedule(
    settings: Settings, credentials: Credentials, name_or_id: str
) -> aiplatform.PipelineJobSchedule:
    """Fetch one schedule by resource name or id."""
    from google.cloud import aiplatform

    return aiplatform.PipelineJobSchedule.get(
        schedule_name(settings, name_or_id),
        project=settings.cloud.project,
        location=settings.cloud.region,
        credentials=credentials,
    )


def schedule_row(schedule: aiplatform.PipelineJobSchedule) -> dict[str, str]:
    """What `schedule list` shows of one schedule."""
    resource = schedule.gca_resource
    next_run = resource.next_run_time
    return {
        "id": resource.name.rsplit("/", 1)[-1],
        "display_name": resource.display_name,
        "state": resource.state.name,
        "cron": resource.cron,
        "runs": f"{resource.started_run_count}/{resource.max_run_count or '∞'}",
        "next_run": next_run.isoformat() if next_run else "",
    }


def console_url(resource_name: str) -> str:
    """The Cloud console page of a pipeline job or schedule resource name."""
    match = _RESOURCE.match(resource_name)
    if not match:
        return f"https://console.cloud.google.com/vertex-ai/pipelines?resource={resource_name}"
    page = _CONSOLE_PAGES[match["kind"]]
    url = _CONSOLE.format(location=match["location"], page=page, id=match["id"])
    return f"{url}?project={match['project']}"
