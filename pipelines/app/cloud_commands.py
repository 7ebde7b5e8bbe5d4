"""`hpt-pipeline submit` and `hpt-pipeline schedule …`: runs and schedules on Vertex or Kubeflow.

Vertex AI Pipelines is the default target; `--target kubeflow` sends to Kubeflow
Pipelines through `kfp.Client` (`pipelines.app.kubeflow_commands`).

Settings come from flags > `--config` YAML > `HPT_*` environment; every bad or
missing value is a one-line error before anything is compiled or sent.
`--dry-run` builds the exact request offline (anonymous credentials) and
writes it as JSON. Heavy modules (aiplatform, the compiler) are imported
inside the commands so that `--help` stays fast.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pipelines.app import kubeflow_commands as kubeflow
from pipelines.app.compiled import check_output, compiled_template
from pipelines.app.continuing import CONTINUE_HELP
from pipelines.app.errors import cloud_errors, fail
from pipelines.app.parameter_checks import check_parameters
from pipelines.app.preflight import check_cloud_run
from pipelines.settings import Settings, SettingsError, load_settings, parse_labels, require_cloud
from pipelines.targets.vertex import client as vertex_client
from pipelines.targets.vertex import serving

if TYPE_CHECKING:
    from google.cloud import aiplatform

CLOUD = ("project", "region", "pipeline_root")
LOCATION = ("project", "region")

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", dir_okay=False, help="YAML settings file (flags override it)."),
]
ProjectOption = Annotated[str | None, typer.Option("--project", help="Google Cloud project id.")]
RegionOption = Annotated[str | None, typer.Option("--region", help="Vertex AI region.")]
PipelineRootOption = Annotated[
    str | None, typer.Option("--pipeline-root", help="gs:// folder for the runs' artifacts.")
]
ServiceAccountOption = Annotated[
    str | None, typer.Option("--service-account", help="Service account the runs act as.")
]
NetworkOption = Annotated[
    str | None,
    typer.Option(
        "--network", help="VPC network to peer with, by its full name (projects/NUMBER/...)."
    ),
]
KmsKeyOption = Annotated[
    str | None,
    typer.Option(
        "--kms-key", help="Cloud KMS key (CMEK) encrypting the runs, by its full resource name."
    ),
]
LabelOption = Annotated[
    list[str] | None,
    typer.Option("--label", help="key=value, repeatable (replaces the config's labels)."),
]
# No --cache: caching every task is always refused (preflight.check_cloud_run), as the
# registry lookup and the trial fetch read state outside the run. By default each task
# caches as compiled; --no-cache turns caching off for the whole run.
NoCacheOption = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Run every task afresh (default: the tasks that may be cached reuse results).",
    ),
]
DisplayNameOption = Annotated[
    str | None, typer.Option("--display-name", help="Display name in the console.")
]
TemplateOption = Annotated[
    Path | None,
    typer.Option(
        "--template", dir_okay=False, help="A compiled pipeline; default: compile the --target one."
    ),
]
ParamOption = Annotated[
    list[str] | None,
    typer.Option("--param", help="name=value pipeline parameter (JSON for lists/dicts)."),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Build the request offline and write it; send nothing.")
]
OutputOption = Annotated[
    Path | None,
    typer.Option("--output", dir_okay=False, help="Where --dry-run writes the JSON (stdout)."),
]
TargetOption = Annotated[
    str,
    typer.Option("--target", help="vertex (Vertex AI Pipelines) or kubeflow (Kubeflow Pipelines)."),
]
HostOption = Annotated[
    str | None,
    typer.Option(
        "--host", help="Kubeflow Pipelines API URL, e.g. http://localhost:8080 (kubeflow)."
    ),
]
NamespaceOption = Annotated[
    str | None, typer.Option("--namespace", help="Kubernetes namespace of the runs (kubeflow).")
]


@contextlib.contextmanager
def _one_line_errors() -> Iterator[None]:
    """Turn settings, auth and API errors into the CLI's one-line error (exit 2)."""
    try:
        with cloud_errors("run `gcloud auth application-default login`, or use --dry-run"):
            yield
    except SettingsError as err:
        fail(str(err))


def _settings(
    config: Path | None, labels: list[str] | None, required: tuple[str, ...], **flags: Any
) -> Settings:
    """Settings from flags > config > environment, with the cloud fields `required`."""
    settings = load_settings(
        config=config, overrides={**flags, "labels": parse_labels(labels) if labels else None}
    )
    require_cloud(settings, *required)
    if required == CLOUD:  # a run or a schedule: refuse what would only fail on Vertex
        check_cloud_run(settings)
    return settings


def _run_settings(
    target: str,
    config: Path | None,
    label: list[str] | None,
    *,
    host: str | None,
    namespace: str | None,
    vertex_only: dict[str, Any],
    kubeflow_only: dict[str, Any],
    project: str | None,
    region: str | None,
    network: str | None,
    kms_key: str | None,
    service_account: str | None,
    **shared: Any,
) -> Settings:
    """Settings of a run or a schedule on `target`, preflighted for it.

    `shared` are the Settings fields both cloud targets take (pipeline_root, enable_caching,
    display_name, ...); a flag of the other target that is set is refused in one line.
    """
    vertex = dict(project=project, region=region, network=network, kms_key=kms_key)
    if kubeflow.is_kubeflow(target, host=host, namespace=namespace, **kubeflow_only):
        return kubeflow.run_settings(
            config,
            {**vertex, "label": label, **vertex_only},
            kubeflow_host=host,
            kubeflow_namespace=namespace,
            kubeflow_service_account=service_account,
            **kubeflow_only,
            **shared,
        )
    return _settings(config, label, CLOUD, service_account=service_account, **vertex, **shared)


def _job(
    settings: Settings, template: Path | None, params: list[str] | None, *, offline: bool
) -> aiplatform.PipelineJob:
    """The pipeline job for the settings, template and `--param` values."""
    with compiled_template(template, settings, "vertex") as path:
        spec = vertex_client.read_template(path)
        values = vertex_client.parameter_values(spec, params or [])
        check_parameters(
            spec, {**vertex_client.settings_parameters(spec, settings), **values}, values
        )
        credentials = vertex_client.credentials(offline=offline)
        return vertex_client.build_job(settings, path, values, credentials=credentials)


def _write_request(request: dict[str, Any], output: Path | None) -> str:
    """Write a dry-run request as JSON to `output` (stdout when None); returns where."""
    text = json.dumps(request, indent=2, sort_keys=True) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return "stdout"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    return str(output)


def submit(
    project: ProjectOption = None,
    region: RegionOption = None,
    pipeline_root: PipelineRootOption = None,
    service_account: ServiceAccountOption = None,
    network: NetworkOption = None,
    kms_key: KmsKeyOption = None,
    label: LabelOption = None,
    no_cache: NoCacheOption = False,
    experiment: Annotated[
        str | None,
        typer.Option(
            "--experiment",
            help="Vertex AI experiment to log the run to; kubeflow: the KFP experiment (Default).",
        ),
    ] = None,
    display_name: DisplayNameOption = None,
    config: ConfigOption = None,
    template: TemplateOption = None,
    param: ParamOption = None,
    dry_run: DryRunOption = False,
    output: OutputOption = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait for the run to end (vertex).")
    ] = False,
    target: TargetOption = "vertex",
    host: HostOption = None,
    namespace: NamespaceOption = None,
    token: kubeflow.TokenOption = None,
    cookie: kubeflow.CookieOption = None,
    continue_from: Annotated[
        str | None, typer.Option("--continue-from", help=CONTINUE_HELP)
    ] = None,
) -> None:
    """Submit the pipeline to Vertex AI Pipelines or Kubeflow Pipelines (or --dry-run)."""
    with _one_line_errors():
        check_output(output, dry_run)
        settings = _run_settings(
            target,
            config,
            label,
            host=host,
            namespace=namespace,
            vertex_only={"wait": wait},
            kubeflow_only=kubeflow.auth_flags(token, cookie),
            project=project,
            region=region,
            network=network,
            kms_key=kms_key,
            service_account=service_account,
            pipeline_root=pipeline_root,
            enable_caching=False if no_cache else None,
            experiment=experiment,
            display_name=display_name,
            continue_from=continue_from,
        )
        if target == "kubeflow":
            with kubeflow.sender(settings, template, dry_run, output, _write_request) as send:
                send(kubeflow.run_request, kubeflow.submit, param)
            return
        job = _job(settings, template, param, offline=dry_run)
        if dry_run:
            where = _write_request(vertex_client.job_request(job), output)
            typer.echo(
                f"dry run: pipeline job {job.job_id} in {vertex_client.location_path(settings)} "
                f"written to {where}; nothing was sent",
                err=output is None,
            )
            return
        try:
            name = vertex_client.submit_job(job, settings, wait=wait)
        except RuntimeError as err:  # the run failed or was cancelled while waiting
            fail(f"{job.job_id}: {str(err).strip().splitlines()[0]}", code=1)
        state = f" ({job.gca_resource.state.name})" if wait else ""
        typer.echo(f"submitted {name}{state}: {vertex_client.console_url(name)}")


schedule_app = typer.Typer(
    help="Recurring runs: Vertex AI Pipelines schedules, or Kubeflow Pipelines recurring runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@schedule_app.command("create")
def schedule_create(
    cron: Annotated[
        str,
        typer.Option(
            "--cron",
            help="5-field cron, optionally prefixed: 'TZ=Europe/Paris 0 3 * * 1' (kubeflow: no "
            "TZ=; sent as KFP's 6 fields, seconds first: '0 0 3 * * 1').",
        ),
    ],
    start_time: Annotated[
        str | None, typer.Option("--start-time", help="ISO-8601; no offset means UTC.")
    ] = None,
    end_time: Annotated[
        str | None, typer.Option("--end-time", help="ISO-8601; after --start-time.")
    ] = None,
    max_runs: Annotated[
        int | None, typer.Option("--max-runs", help="Stop after this many runs (vertex).")
    ] = None,
    max_concurrent_runs: Annotated[
        int,
        typer.Option(
            "--max-concurrent-runs", help="Runs allowed at the same time (kubeflow: 1-10)."
        ),
    ] = 1,
    allow_queueing: Annotated[
        bool,
        typer.Option("--allow-queueing", help="Queue runs beyond --max-concurrent-runs (vertex)."),
    ] = False,
    project: ProjectOption = None,
    region: RegionOption = None,
    pipeline_root: PipelineRootOption = None,
    service_account: ServiceAccountOption = None,
    network: NetworkOption = None,
    kms_key: KmsKeyOption = None,
    label: LabelOption = None,
    no_cache: NoCacheOption = False,
    display_name: DisplayNameOption = None,
    config: ConfigOption = None,
    template: TemplateOption = None,
    param: ParamOption = None,
    dry_run: DryRunOption = False,
    output: OutputOption = None,
    target: TargetOption = "vertex",
    host: HostOption = None,
    namespace: NamespaceOption = None,
    experiment: Annotated[
        str | None, typer.Option("--experiment", help="KFP experiment of the runs (kubeflow).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Past the serving container's end of availability.")
    ] = False,
    token: kubeflow.TokenOption = None,
    cookie: kubeflow.CookieOption = None,
) -> None:
    """Create a schedule of pipeline runs (or --dry-run: write the request)."""
    with _one_line_errors():
        check_output(output, dry_run)
        settings = _run_settings(
            target,
            config,
            label,
            host=host,
            namespace=namespace,
            vertex_only={"max_runs": max_runs, "allow_queueing": allow_queueing},
            kubeflow_only=dict(experiment=experiment, **kubeflow.auth_flags(token, cookie)),
            project=project,
            region=region,
            network=network,
            kms_key=kms_key,
            service_account=service_account,
            pipeline_root=pipeline_root,
            enable_caching=False if no_cache else None,
            display_name=display_name,
        )
        if target == "kubeflow":
            kfp_spec = kubeflow.kfp_client.schedule_spec(
                cron,
                settings.display_name,
                start_time=start_time,
                end_time=end_time,
                max_concurrency=max_concurrent_runs,
            )
            with kubeflow.sender(settings, template, dry_run, output, _write_request) as send:
                send(kubeflow.recurring_run_request, kubeflow.schedule_create, kfp_spec, param)
            return
        spec = vertex_client.schedule_spec(
            cron,
            settings.display_name,
            start_time=start_time,
            end_time=end_time,
            max_run_count=max_runs,
            max_concurrent_run_count=max_concurrent_runs,
            allow_queueing=allow_queueing,
        )
        warning = serving.check_availability(settings, until=spec.end_time, force=force)
        job = _job(settings, template, param, offline=dry_run)
        if warning:
            typer.echo(warning, err=True)
        if dry_run:
            schedule = vertex_client.build_schedule(job, spec, settings)
            where = _write_request(vertex_client.schedule_request(schedule), output)
            typer.echo(
                f"dry run: schedule {spec.display_name!r} ({spec.cron}) in "
                f"{vertex_client.location_path(settings)} written to {where}; nothing was sent",
                err=output is None,
            )
            return
        schedule = vertex_client.create_schedule(job, spec, settings)
        name = schedule.resource_name
        typer.echo(f"created schedule {name} ({spec.cron}): {vertex_client.console_url(name)}")
