"""`submit` and `schedule …` with `--target kubeflow`: Kubeflow Pipelines runs and recurring runs.

The commands themselves (flags, help) are in `pipelines.app.cloud_commands` and
`schedule_actions`; they reach this module through the target registry
(`pipelines.wiring.TARGETS`, `pipelines.app.dispatch.Client`). Everything is checked
before anything is compiled or sent (`preflight.check_kubeflow_run`), requests
are built offline for `--dry-run`, and every error is one line.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from pipelines.app.compiled import compiled_template, write_request
from pipelines.app.dispatch import ScheduleFlags, Sending
from pipelines.app.errors import fail, first_line
from pipelines.settings import Settings, SettingsError, load_settings
from pipelines.targets.kubeflow import client as kfp_client
from pipelines.templates import parameter_values, read_template

TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        help="Bearer token for Kubeflow Pipelines (kubeflow; prefer HPT_KUBEFLOW_TOKEN).",
        show_default=False,
    ),
]
CookieOption = Annotated[
    str | None,
    typer.Option(
        "--cookie",
        help="Auth proxy session cookie, NAME=VALUE as a logged-in browser has it "
        "(oauth2_proxy_kubeflow on Kubeflow 1.9+; kubeflow; prefer HPT_KUBEFLOW_COOKIE).",
        show_default=False,
    ),
]


# The flags a run or schedule takes, by the Settings field each sets.
RUN_FIELDS = {
    "kubeflow_host": "host",
    "kubeflow_namespace": "namespace",
    "kubeflow_service_account": "service_account",
    "kubeflow_token": "token",
    "kubeflow_cookie": "cookie",
    "experiment": "experiment",
    "pipeline_root": "pipeline_root",
    "enable_caching": "enable_caching",
    "display_name": "display_name",
    "continue_from": "continue_from",
}
SCHEDULE_FIELDS = ("kubeflow_host", "kubeflow_namespace", "kubeflow_token", "kubeflow_cookie")


def _overrides(flags: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    return {field: flags.get(RUN_FIELDS[field]) for field in fields}


def run_settings(config: Path | None, flags: Mapping[str, Any]) -> Settings:
    """Settings of a run or recurring run (`dispatch` preflights them: `check_kubeflow_run`).

    Args:
        config: The `--config` file.
        flags: The command's flags by parameter name (None: unset).

    Raises:
        SettingsError: A bad value.
    """
    return load_settings(config=config, overrides=_overrides(flags, RUN_FIELDS))


def schedule_settings(config: Path | None, flags: Mapping[str, Any]) -> Settings:
    """Settings to list or change recurring runs: a host (and a credential) is needed.

    Raises:
        SettingsError: A bad value, or no `kubeflow_host`.
    """
    settings = load_settings(config=config, overrides=_overrides(flags, SCHEDULE_FIELDS))
    if not settings.kubeflow.kubeflow_host:
        raise SettingsError(
            "kubeflow_host is not set: pass --host URL, put kubeflow_host in the config file, "
            "or set HPT_KUBEFLOW_HOST"
        )
    return settings


def send_run(settings: Settings, sending: Sending, flags: Mapping[str, Any]) -> None:
    """Create the run in the experiment, or write the dry-run request."""
    with sender(settings, sending) as send:
        send(run_request, submit, sending.params)


def send_schedule(settings: Settings, sending: Sending, when: ScheduleFlags) -> None:
    """Create the recurring run (KFP's 6-field cron), or write the dry-run request."""
    kfp_spec = kfp_client.schedule_spec(
        when.cron,
        settings.cloud.display_name,
        start_time=when.start_time,
        end_time=when.end_time,
        max_concurrency=when.max_concurrent_runs,
    )
    with sender(settings, sending) as send:
        send(recurring_run_request, schedule_create, kfp_spec, sending.params)


def schedule_table(
    settings: Settings, flags: Mapping[str, Any]
) -> tuple[list[dict[str, str]], str, str]:
    """The namespace's recurring runs, where they are, and the table's title."""
    where = f"namespace {settings.kubeflow.kubeflow_namespace} at {settings.kubeflow.kubeflow_host}"
    with api_errors(settings):
        rows = schedule_rows(settings)
    return rows, where, f"Recurring runs in {where}"


def change_schedule(action: str, settings: Settings, schedule: str, *, confirm: bool) -> str:
    """Pause (disable), resume (enable) or delete a recurring run; returns the line to print."""
    with api_errors(settings):
        return schedule_action(action, settings, schedule, confirm=confirm)


@contextlib.contextmanager
def sender(settings: Settings, sending: Sending) -> Iterator[Callable[..., None]]:
    """Yield `send(request, create, *args)`, the pipeline compiled (or the template given).

    `send` writes `request(settings, path, *args)`'s document for --dry-run, else
    prints the line `create(settings, path, *args)` returns (the commands refuse
    `--output` without `--dry-run` before calling it).
    """
    from pipelines.targets.kubeflow.wiring import notes

    template, output = sending.template, sending.output
    for note in notes(settings):
        typer.echo(f"note: {note}", err=True)
    with api_errors(settings), compiled_template(template, settings, "kubeflow") as path:

        def send(request: Callable[..., Any], create: Callable[..., str], *args: Any) -> None:
            if not sending.dry_run:
                typer.echo(create(settings, path, *args))
                return
            doc, what = request(settings, path, *args)
            where = write_request(doc, output)
            typer.echo(f"dry run: {what} written to {where}; nothing was sent", err=output is None)

        yield send


@contextlib.contextmanager
def api_errors(settings: Settings) -> Iterator[None]:
    """Turn KFP API and connection errors into the CLI's one-line error (exit 2)."""
    import kfp_server_api
    import urllib3

    try:
        yield
    except kfp_server_api.ApiException as err:
        message = ""
        try:
            body = json.loads(err.body or "{}")
            message = body.get("message") or body.get("error") or ""
        except (TypeError, ValueError):
            message = str(err.body or "")
        text = " ".join(f"{err.status} {err.reason}: {first_line(Exception(message))}".split())
        fail(f"Kubeflow Pipelines at {settings.kubeflow.kubeflow_host}: {text}")
    except urllib3.exceptions.HTTPError as err:
        reason = getattr(err, "reason", None) or err
        fail(
            f"kubeflow_host={settings.kubeflow.kubeflow_host}: cannot reach the Kubeflow "
            "Pipelines API "
            f"({first_line(reason) if isinstance(reason, BaseException) else reason})"
        )


def _values(path: Path, params: list[str] | None) -> dict[str, Any]:
    return parameter_values(read_template(path), params or [])


def experiment_name(settings: Settings) -> str:
    """The KFP experiment the runs go to: `--experiment`, else kfp.Client's `Default`."""
    return settings.cloud.experiment or kfp_client.DEFAULT_EXPERIMENT


def run_request(
    settings: Settings, path: Path, params: list[str] | None
) -> tuple[dict[str, Any], str]:
    """The dry-run document of a run, and what to say about it."""
    body = kfp_client.run_body(settings, path, _values(path, params))
    experiment = experiment_name(settings)
    doc = kfp_client.dry_run_request(settings, experiment, kfp_client.RUNS_PATH, body, kind="run")
    return doc, (
        f"run {settings.cloud.display_name!r} in experiment {experiment!r} "
        f"(namespace {settings.kubeflow.kubeflow_namespace}) at {settings.kubeflow.kubeflow_host}"
    )


def submit(settings: Settings, path: Path, params: list[str] | None) -> str:
    """Create the run; returns the line to print."""
    values = _values(path, params)
    client = kfp_client.connect(settings)
    run = kfp_client.submit_run(client, settings, path, values, experiment_name(settings))
    url = kfp_client.run_url(str(settings.kubeflow.kubeflow_host), run.run_id)
    return f"submitted run {run.run_id} ({settings.cloud.display_name}): {url}"


def recurring_run_request(
    settings: Settings, path: Path, spec: kfp_client.KfpSchedule, params: list[str] | None
) -> tuple[dict[str, Any], str]:
    """The dry-run document of a recurring run, and what to say about it."""
    body = kfp_client.recurring_run_body(settings, path, spec, _values(path, params))
    experiment = experiment_name(settings)
    doc = kfp_client.dry_run_request(
        settings, experiment, kfp_client.RECURRING_RUNS_PATH, body, kind="recurring_run"
    )
    return doc, (
        f"recurring run {spec.display_name!r} (KFP cron {spec.cron!r}) in experiment "
        f"{experiment!r} at {settings.kubeflow.kubeflow_host}"
    )


def schedule_create(
    settings: Settings, path: Path, spec: kfp_client.KfpSchedule, params: list[str] | None
) -> str:
    """Create the recurring run; returns the line to print."""
    values = _values(path, params)
    client = kfp_client.connect(settings)
    created = kfp_client.create_recurring_run(
        client, settings, path, spec, values, experiment_name(settings)
    )
    url = kfp_client.recurring_run_url(
        str(settings.kubeflow.kubeflow_host), created.recurring_run_id
    )
    return f"created recurring run {created.recurring_run_id} (KFP cron {spec.cron!r}): {url}"


def schedule_rows(settings: Settings) -> list[dict[str, str]]:
    """The rows `schedule list` shows."""
    client = kfp_client.connect(settings)
    found = kfp_client.list_recurring_runs(client, settings.kubeflow.kubeflow_namespace)
    return [kfp_client.recurring_run_row(run) for run in found]


ACTIONS = {
    "pause": "disable_recurring_run",
    "resume": "enable_recurring_run",
    "delete": "delete_recurring_run",
}


def schedule_action(
    action: str, settings: Settings, recurring_run: str, *, confirm: bool = False
) -> str:
    """Pause (disable), resume (enable) or delete a recurring run; returns the line to print.

    Raises:
        SettingsError: The id is not a UUID (checked before any call).
    """
    run_id = kfp_client.recurring_run_id(recurring_run)
    client = kfp_client.connect(settings)
    if confirm:
        found = client.get_recurring_run(run_id)
        typer.confirm(
            f"{action.capitalize()} recurring run {run_id} ({found.display_name})?", abort=True
        )
    getattr(client, ACTIONS[action])(run_id)
    return f"{action}d recurring run {run_id}"


def manifests_command(
    output: Path = typer.Option(..., "--output", help="Folder to write the YAML files into."),
    target: str = typer.Option("kubeflow", "--target", help="kubeflow (the only one with CRDs)."),
    namespace: str = typer.Option(None, "--namespace", help="Where the objects are created."),
    config: Path = typer.Option(None, "--config", help="YAML settings file."),
) -> None:
    """Write the Katib Experiment, an example final job (TFJob / TrainJob + runtime), the RBAC.

    Check them against the cluster with `kubectl apply --dry-run=server -f DIR`.
    """
    from pipelines.study.search_space import SearchSpaceError
    from pipelines.targets.kubeflow import manifests
    from pipelines.targets.kubeflow.wiring import check_settings

    # Kubeflow's own command (only it takes CRDs): the name reads better here than a registry
    # field every other target would leave empty.
    if target != "kubeflow":
        fail(f"--target={target}: manifests are for kubeflow (Vertex takes no CRDs)")
    try:
        settings = load_settings(config=config, overrides={"kubeflow_namespace": namespace})
        check_settings(settings)  # the namespace and job kind, as compile and submit check
        written = manifests.write(settings, output)
    except (SettingsError, SearchSpaceError, ValueError) as err:
        fail(first_line(err))
    for path in written:
        typer.echo(f"wrote {path}")
        if path == Path(output) / manifests.RUNTIME_FILE:
            typer.echo(f"install once (cluster admin): kubectl apply -f {path}")
    for note in manifests.notes(settings):
        typer.echo(note)
    label = ", ".join(f"{k}={v}" for k, v in manifests.NAMESPACE_LABEL.items())
    typer.echo(
        f"check: kubectl apply --dry-run=server -f {output} (use a Kubeflow profile "
        f"namespace: Katib collects metrics only from profiles, which carry {label})"
    )
