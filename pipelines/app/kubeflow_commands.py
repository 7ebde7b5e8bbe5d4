"""`submit` and `schedule …` with `--target kubeflow`: Kubeflow Pipelines runs and recurring runs.

The commands themselves (flags, help) are in `pipelines.app.cloud_commands`,
which hands the Kubeflow target to these functions. Everything is checked
before anything is compiled or sent (`preflight.check_kubeflow_run`), requests
are built offline for `--dry-run`, and every error is one line.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from pipelines.app.compiled import compiled_template
from pipelines.app.errors import fail, first_line
from pipelines.app.preflight import check_kubeflow_run
from pipelines.settings import Settings, SettingsError, load_settings
from pipelines.targets.kubeflow import client as kfp_client
from pipelines.templates import parameter_values, read_template

VERTEX_ONLY = "a Vertex flag, not used with --target kubeflow"
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


# --target, --host, --namespace, --token, --cookie of `schedule pause|resume|delete`
ActionFlags = tuple[str, str | None, str | None, str | None, str | None]


def auth_flags(token: str | None, cookie: str | None) -> dict[str, str | None]:
    """The credential flags as Settings fields (`--token` → `kubeflow_token`, ...)."""
    return {"kubeflow_token": token, "kubeflow_cookie": cookie}


def refuse_flags(flags: Mapping[str, Any], why: str) -> None:
    """Refuse flags that do not apply to the target (set: anything but None/False/empty).

    Raises:
        SettingsError: Naming the first such flag.
    """
    for name, value in flags.items():
        if value not in (None, False, [], ()):
            flag = name.removeprefix("kubeflow_")  # kubeflow_token is the --token flag
            raise SettingsError(f"--{flag.replace('_', '-')}: {why}")


def run_settings(config: Path | None, vertex_flags: Mapping[str, Any], **flags: Any) -> Settings:
    """Settings of a run or recurring run, preflighted (`check_kubeflow_run`).

    Args:
        config: The `--config` file.
        vertex_flags: Vertex-only flags as given: any that is set is refused.
        **flags: Settings fields from the command's flags (None: unset).

    Raises:
        SettingsError: A Vertex flag, a bad value, or what the preflight refuses.
    """
    refuse_flags(vertex_flags, VERTEX_ONLY)
    settings = load_settings(config=config, overrides=flags)
    check_kubeflow_run(settings)
    return settings


def host_settings(
    config: Path | None,
    vertex_flags: Mapping[str, Any],
    host: str | None,
    namespace: str | None,
    **auth: str | None,
) -> Settings:
    """Settings to list or change recurring runs: a host (and a credential) is needed.

    Raises:
        SettingsError: A Vertex flag, a bad value, or no `kubeflow_host`.
    """
    refuse_flags(vertex_flags, VERTEX_ONLY)
    settings = load_settings(
        config=config, overrides={"kubeflow_host": host, "kubeflow_namespace": namespace, **auth}
    )
    if not settings.kubeflow_host:
        raise SettingsError(
            "kubeflow_host is not set: pass --host URL, put kubeflow_host in the config file, "
            "or set HPT_KUBEFLOW_HOST"
        )
    return settings


TARGETS = ("vertex", "kubeflow")


def is_kubeflow(target: str, **kubeflow_flags: Any) -> bool:
    """Whether `--target` is kubeflow; Kubeflow-only flags are refused with vertex.

    Raises:
        SettingsError: An unknown target, or a Kubeflow flag given for Vertex.
    """
    if target not in TARGETS:
        raise SettingsError(f"--target={target}: expected one of {', '.join(TARGETS)}")
    if target == "vertex":
        refuse_flags(kubeflow_flags, "only used with --target kubeflow")
    return target == "kubeflow"


@contextlib.contextmanager
def sender(
    settings: Settings,
    template: Path | None,
    dry_run: bool,
    output: Path | None,
    write: Callable[[dict[str, Any], Path | None], str],
) -> Iterator[Callable[..., None]]:
    """Yield `send(request, create, *args)`, the pipeline compiled (or the template given).

    `send` writes `request(settings, path, *args)`'s document with `write` for
    --dry-run, else prints the line `create(settings, path, *args)` returns (the
    commands refuse `--output` without `--dry-run` before calling it).
    """
    with api_errors(settings), compiled_template(template, settings, "kubeflow") as path:

        def send(request: Callable[..., Any], create: Callable[..., str], *args: Any) -> None:
            if not dry_run:
                typer.echo(create(settings, path, *args))
                return
            doc, what = request(settings, path, *args)
            where = write(doc, output)
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
        fail(f"Kubeflow Pipelines at {settings.kubeflow_host}: {text}")
    except urllib3.exceptions.HTTPError as err:
        reason = getattr(err, "reason", None) or err
        fail(
            f"kubeflow_host={settings.kubeflow_host}: cannot reach the Kubeflow Pipelines API "
            f"({first_line(reason) if isinstance(reason, BaseException) else reason})"
        )


def _values(path: Path, params: list[str] | None) -> dict[str, Any]:
    return parameter_values(read_template(path), params or [])


def experiment_name(settings: Settings) -> str:
    """The KFP experiment the runs go to: `--experiment`, else kfp.Client's `Default`."""
    return settings.experiment or kfp_client.DEFAULT_EXPERIMENT


def run_request(
    settings: Settings, path: Path, params: list[str] | None
) -> tuple[dict[str, Any], str]:
    """The dry-run document of a run, and what to say about it."""
    body = kfp_client.run_body(settings, path, _values(path, params))
    experiment = experiment_name(settings)
    doc = kfp_client.dry_run_request(settings, experiment, kfp_client.RUNS_PATH, body, kind="run")
    return doc, (
        f"run {settings.display_name!r} in experiment {experiment!r} "
        f"(namespace {settings.kubeflow_namespace}) at {settings.kubeflow_host}"
    )


def submit(settings: Settings, path: Path, params: list[str] | None) -> str:
    """Create the run; returns the line to print."""
    values = _values(path, params)
    client = kfp_client.connect(settings)
    run = kfp_client.submit_run(client, settings, path, values, experiment_name(settings))
    url = kfp_client.run_url(str(settings.kubeflow_host), run.run_id)
    return f"submitted run {run.run_id} ({settings.display_name}): {url}"


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
        f"{experiment!r} at {settings.kubeflow_host}"
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
    url = kfp_client.recurring_run_url(str(settings.kubeflow_host), created.recurring_run_id)
    return f"created recurring run {created.recurring_run_id} (KFP cron {spec.cron!r}): {url}"


def schedule_rows(settings: Settings) -> list[dict[str, str]]:
    """The rows `schedule list` shows."""
    client = kfp_client.connect(settings)
    found = kfp_client.list_recurring_runs(client, settings.kubeflow_namespace)
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

    if target != "kubeflow":
        fail(f"--target={target}: manifests are for kubeflow (Vertex takes no CRDs)")
    try:
        settings = load_settings(config=config, overrides={"kubeflow_namespace": namespace})
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
