"""`hpt-pipeline submit` and `hpt-pipeline schedule …`: runs and schedules on Vertex or Kubeflow.

Vertex AI Pipelines is the default target; `--target kubeflow` sends to Kubeflow
Pipelines through `kfp.Client`. The commands hold the flags; each target's client
(`pipelines.targets.<name>.cli.commands`) does the work, reached through the target
registry (`pipelines.app.dispatch`).

Settings come from flags > `--config` YAML > `HPT_*` environment; every bad or
missing value is a one-line error before anything is compiled or sent.
`--dry-run` builds the exact request offline (anonymous credentials) and
writes it as JSON. Heavy modules (aiplatform, the compiler, the clients) are
imported when a command runs so that `--help` stays fast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from pipelines.app import dispatch
from pipelines.app.compiled import check_output
from pipelines.app.continuing import CONTINUE_HELP
from pipelines.app.errors import cloud_errors, fail
from pipelines.settings import SettingsError
from pipelines.targets.kubeflow.cli import commands as kubeflow

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
# No --cache: caching every task is always refused (`check_cloud_run`), as the
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


WaitOption = Annotated[
    bool, typer.Option("--wait/--no-wait", help="Wait for the run to end (vertex).")
]
ContinueFromOption = Annotated[str | None, typer.Option("--continue-from", help=CONTINUE_HELP)]
ExperimentOption = Annotated[
    str | None,
    typer.Option(
        "--experiment",
        help="Vertex AI experiment to log the run to; kubeflow: the KFP experiment (Default).",
    ),
]
CronOption = Annotated[
    str,
    typer.Option(
        "--cron",
        help="5-field cron, optionally prefixed: 'TZ=Europe/Paris 0 3 * * 1' (kubeflow: no "
        "TZ=; sent as KFP's 6 fields, seconds first: '0 0 3 * * 1').",
    ),
]
StartTimeOption = Annotated[
    str | None, typer.Option("--start-time", help="ISO-8601; no offset means UTC.")
]
EndTimeOption = Annotated[
    str | None, typer.Option("--end-time", help="ISO-8601; after --start-time.")
]
MaxRunsOption = Annotated[
    int | None, typer.Option("--max-runs", help="Stop after this many runs (vertex).")
]
MaxConcurrentRunsOption = Annotated[
    int,
    typer.Option("--max-concurrent-runs", help="Runs allowed at the same time (kubeflow: 1-10)."),
]
AllowQueueingOption = Annotated[
    bool,
    typer.Option("--allow-queueing", help="Queue runs beyond --max-concurrent-runs (vertex)."),
]
ScheduleExperimentOption = Annotated[
    str | None, typer.Option("--experiment", help="KFP experiment of the runs (kubeflow).")
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Past the serving container's end of availability.")
]
# In `schedule create`, --experiment is Kubeflow's only (a Vertex schedule takes none).
SCHEDULE_ONLY = {"experiment": "kubeflow"}


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn settings, auth and API errors into the CLI's one-line error (exit 2)."""
    try:
        with cloud_errors("run `gcloud auth application-default login`, or use --dry-run"):
            yield
    except SettingsError as err:
        fail(str(err))


def _flags(ctx: typer.Context) -> dict[str, Any]:
    """The command's flags by parameter name; `--no-cache` as the `enable_caching` setting."""
    flags = dict(ctx.params)
    flags["enable_caching"] = False if flags.pop("no_cache", False) else None
    return flags


def _sending(flags: dict[str, Any]) -> dispatch.Sending:
    """What the command sends; `--output` without `--dry-run` is refused.

    Raises:
        SettingsError: Naming the output.
    """
    check_output(flags["output"], flags["dry_run"])
    return dispatch.Sending(flags["template"], flags["param"], flags["dry_run"], flags["output"])


def submit(
    ctx: typer.Context,
    project: ProjectOption = None,
    region: RegionOption = None,
    pipeline_root: PipelineRootOption = None,
    service_account: ServiceAccountOption = None,
    network: NetworkOption = None,
    kms_key: KmsKeyOption = None,
    label: LabelOption = None,
    no_cache: NoCacheOption = False,
    experiment: ExperimentOption = None,
    display_name: DisplayNameOption = None,
    config: ConfigOption = None,
    template: TemplateOption = None,
    param: ParamOption = None,
    dry_run: DryRunOption = False,
    output: OutputOption = None,
    wait: WaitOption = False,
    target: TargetOption = "vertex",
    host: HostOption = None,
    namespace: NamespaceOption = None,
    token: kubeflow.TokenOption = None,
    cookie: kubeflow.CookieOption = None,
    continue_from: ContinueFromOption = None,
) -> None:
    """Submit the pipeline to Vertex AI Pipelines or Kubeflow Pipelines (or --dry-run)."""
    flags = _flags(ctx)
    with one_line_errors():
        sending = _sending(flags)
        chosen, settings = dispatch.run_settings(target, config, flags)
        dispatch.client(chosen).send_run(settings, sending, flags)


schedule_app = typer.Typer(
    help="Recurring runs: Vertex AI Pipelines schedules, or Kubeflow Pipelines recurring runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@schedule_app.command("create")
def schedule_create(
    ctx: typer.Context,
    cron: CronOption,
    start_time: StartTimeOption = None,
    end_time: EndTimeOption = None,
    max_runs: MaxRunsOption = None,
    max_concurrent_runs: MaxConcurrentRunsOption = 1,
    allow_queueing: AllowQueueingOption = False,
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
    experiment: ScheduleExperimentOption = None,
    force: ForceOption = False,
    token: kubeflow.TokenOption = None,
    cookie: kubeflow.CookieOption = None,
) -> None:
    """Create a schedule of pipeline runs (or --dry-run: write the request)."""
    flags = _flags(ctx)
    when = dispatch.ScheduleFlags(
        cron, start_time, end_time, max_runs, max_concurrent_runs, allow_queueing, force
    )
    with one_line_errors():
        sending = _sending(flags)
        chosen, settings = dispatch.run_settings(target, config, flags, also=SCHEDULE_ONLY)
        dispatch.client(chosen).send_schedule(settings, sending, when)
