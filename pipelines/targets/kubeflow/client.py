"""Kubeflow Pipelines requests: runs and recurring runs, built offline or sent with `kfp.Client`.

`run_body` / `recurring_run_body` build, as `kfp_server_api` models, the exact bodies
`kfp.Client.run_pipeline` / `create_recurring_run` POST, so `--dry-run` writes what would be
sent; `submit_run` / `create_recurring_run` send them through those very methods. The
experiment is resolved to its id (or created) at send time. KFP's cron has a seconds field
first, so `kfp_cron` prepends `0` to the usual five and refuses what its parser lacks
(docs/kubeflow.md, "The cluster and KFP's API"). Credentials (`client_credentials`): a bearer
token, the auth proxy's session cookie or an in-cluster service-account token file, as
`kfp.Client` supports them (docs/kubeflow.md, "Kubeflow", Logging in).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.schedules import CRON_FIELDS, split_time_zone, time_window, validate_cron
from pipelines.settings import Settings, SettingsError

if TYPE_CHECKING:
    import kfp
    import kfp_server_api

RUNS_PATH = "/apis/v2beta1/runs"
RECURRING_RUNS_PATH = "/apis/v2beta1/recurringruns"
EXPERIMENTS_PATH = "/apis/v2beta1/experiments"
DEFAULT_EXPERIMENT = "Default"  # kfp.Client's experiment when none is named
MAX_CONCURRENCY = 10  # api_converter.go: "at least 1 and at most 10"
# robfig/cron v1.2.0 (spec.go, parser.go): numbers or names, `* ? , - /`; no L, W or #.
_CRON_PART = re.compile(r"^(?:\*|\?|(\w+)(?:-(\w+))?)(?:/\d+)?$")
_CRON_NAMES = {
    3: {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"},
    4: {"sun", "mon", "tue", "wed", "thu", "fri", "sat"},
}
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# --------------------------------------------------------------------------- schedules


@dataclasses.dataclass(frozen=True)
class KfpSchedule:
    """When a recurring run starts runs; build it with `schedule_spec` (which validates)."""

    cron: str  # 6 fields, seconds first, as KFP parses it
    display_name: str
    start_time: str | None = None  # RFC 3339, UTC
    end_time: str | None = None
    max_concurrency: int = 1
    no_catchup: bool = True  # after a pause, run once rather than every missed time
    enabled: bool = True


def kfp_cron(cron: str) -> str:
    """KFP's 6-field cron (seconds first) for a 5-field expression: second 0 is prepended.

    Raises:
        SettingsError: A bad 5-field expression, or a `TZ=` prefix (KFP has none).
    """
    zone, fields = split_time_zone(validate_cron(cron))
    if zone:
        raise SettingsError(
            f"cron={cron!r}: Kubeflow Pipelines takes no time zone in the cron (its scheduler "
            "uses CRON_SCHEDULE_TIMEZONE, the cluster's); drop the TZ= prefix"
        )
    for index, (name, field) in enumerate(zip(CRON_FIELDS, fields.split(" "), strict=True)):
        for part in field.split(","):
            match = _CRON_PART.match(part)
            words = [w for w in match.groups() if w] if match else []
            known = all(w.isdigit() or w.lower() in _CRON_NAMES.get(index, ()) for w in words)
            if index == 4:  # robfig's day-of-week is 0-6 (no 7 for Sunday)
                known = known and all(int(w) <= 6 for w in words if w.isdigit())
            if not (match and known):
                raise SettingsError(
                    f"cron={cron!r}: {name} field {field!r} is not in Kubeflow Pipelines' cron "
                    "syntax (robfig/cron v1: numbers, names, * ? , - /; day-of-week 0-6)"
                )
    return f"0 {fields}"


def schedule_spec(
    cron: str,
    display_name: str,
    *,
    start_time: str | None = None,
    end_time: str | None = None,
    max_concurrency: int = 1,
    no_catchup: bool = True,
) -> KfpSchedule:
    """A validated `KfpSchedule`; every error is one line naming the value.

    Raises:
        SettingsError: Bad cron, times that are not ISO-8601 or not in order, or a
            concurrency outside 1..10.
    """
    six = kfp_cron(cron)
    start, end = time_window(start_time, end_time)
    if not 1 <= max_concurrency <= MAX_CONCURRENCY:
        raise SettingsError(
            f"max_concurrency={max_concurrency}: expected an integer in [1, {MAX_CONCURRENCY}] "
            "(Kubeflow Pipelines' limit)"
        )
    return KfpSchedule(
        cron=six,
        display_name=display_name,
        start_time=start,
        end_time=end,
        max_concurrency=max_concurrency,
        no_catchup=no_catchup,
    )


# --------------------------------------------------------------------------- bodies


def pipeline_spec(template_path: str | Path, enable_caching: bool | None) -> dict[str, Any]:
    """The `pipeline_spec` field as `kfp.Client` fills it from a compiled file.

    The PipelineSpec as JSON, or `{"pipeline_spec", "platform_spec"}` when the file
    has a platform spec (kfp-kubernetes volumes); caching overridden per task when
    `enable_caching` is set (kfp.Client's `_override_caching_options`).

    Raises:
        SettingsError: The file is not a compiled pipeline.
    """
    from kfp.client import client as kfp_client

    try:
        doc = kfp_client._extract_pipeline_yaml(str(template_path))
    except Exception as err:  # yaml or protobuf parse errors
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise SettingsError(
            f"--template={template_path}: not a compiled pipeline ({first})"
        ) from None
    if enable_caching is not None:
        kfp_client._override_caching_options(doc.pipeline_spec, enable_caching)
    return doc.to_dict()


def _runtime_config(settings: Settings, values: Mapping[str, Any] | None) -> Any:
    import kfp_server_api

    return kfp_server_api.V2beta1RuntimeConfig(
        pipeline_root=settings.cloud.pipeline_root, parameters=dict(values or {})
    )


def run_body(
    settings: Settings,
    template_path: str | Path,
    values: Mapping[str, Any] | None = None,
    *,
    experiment_id: str | None = None,
) -> kfp_server_api.V2beta1Run:
    """The `V2beta1Run` `kfp.Client.run_pipeline` POSTs (experiment_id None: resolved at send)."""
    import kfp_server_api

    return kfp_server_api.V2beta1Run(
        experiment_id=experiment_id,
        display_name=settings.cloud.display_name,
        pipeline_spec=pipeline_spec(template_path, settings.cloud.enable_caching),
        pipeline_version_reference=None,
        runtime_config=_runtime_config(settings, values),
        service_account=settings.kubeflow.kubeflow_service_account,
    )


def recurring_run_body(
    settings: Settings,
    template_path: str | Path,
    schedule: KfpSchedule,
    values: Mapping[str, Any] | None = None,
    *,
    experiment_id: str | None = None,
) -> kfp_server_api.V2beta1RecurringRun:
    """The `V2beta1RecurringRun` `kfp.Client.create_recurring_run` POSTs."""
    import kfp_server_api

    trigger = kfp_server_api.V2beta1Trigger(
        cron_schedule=kfp_server_api.V2beta1CronSchedule(
            start_time=schedule.start_time, end_time=schedule.end_time, cron=schedule.cron
        )
    )
    mode = kfp_server_api.RecurringRunMode.ENABLE
    if not schedule.enabled:
        mode = kfp_server_api.RecurringRunMode.DISABLE
    return kfp_server_api.V2beta1RecurringRun(
        experiment_id=experiment_id,
        mode=mode,
        pipeline_spec=pipeline_spec(template_path, settings.cloud.enable_caching),
        pipeline_version_reference=None,
        runtime_config=_runtime_config(settings, values),
        display_name=schedule.display_name,
        description=None,
        no_catchup=schedule.no_catchup,
        trigger=trigger,
        max_concurrency=schedule.max_concurrency,
        service_account=settings.kubeflow.kubeflow_service_account,
    )


def to_json(model: Any) -> Any:
    """A `kfp_server_api` model as the JSON its ApiClient sends (no nulls)."""
    import kfp_server_api

    return kfp_server_api.ApiClient().sanitize_for_serialization(model)


def dry_run_request(
    settings: Settings, experiment: str, path: str, body: Any, *, kind: str
) -> dict[str, Any]:
    """What `--dry-run` writes: where it would go, the experiment step, and the body."""
    namespace = settings.kubeflow.kubeflow_namespace
    return {
        "host": settings.kubeflow.kubeflow_host,
        "namespace": namespace,
        "experiment": {
            "display_name": experiment,
            "resolved_by": f"GET {EXPERIMENTS_PATH} (display_name = {experiment!r}, "
            f"namespace {namespace!r}); if none, POST {EXPERIMENTS_PATH}",
            "create_body": to_json(experiment_body(experiment, namespace)),
        },
        kind: {"method": "POST", "path": path, "body": to_json(body), "fills": ["experiment_id"]},
    }


def experiment_body(name: str, namespace: str | None) -> kfp_server_api.V2beta1Experiment:
    """The experiment `kfp.Client.create_experiment` POSTs when none has that name."""
    import kfp_server_api

    return kfp_server_api.V2beta1Experiment(
        display_name=name, description=None, namespace=namespace
    )


# --------------------------------------------------------------------------- sending


def connect(settings: Settings) -> kfp.Client:
    """A `kfp.Client` for the settings' host and namespace (no request is made).

    Raises:
        SettingsError: `kubeflow_host` is not set.
    """
    import kfp

    if not settings.kubeflow.kubeflow_host:
        raise SettingsError(
            "kubeflow_host is not set: pass --host, put kubeflow_host in the config file, "
            "or set HPT_KUBEFLOW_HOST"
        )
    with warnings.catch_warnings():  # "only works with KFP 2.0.0-beta.2 and later": we know
        warnings.simplefilter("ignore", FutureWarning)
        return kfp.Client(
            host=settings.kubeflow.kubeflow_host,
            namespace=settings.kubeflow.kubeflow_namespace,
            **client_credentials(settings),
        )


def client_credentials(settings: Settings) -> dict[str, Any]:
    """`kfp.Client` keyword arguments for the settings' credential (see the module docstring).

    Multi-user Kubeflow Pipelines accepts a request with an identity: the auth proxy's
    `kubeflow-userid` header (set by the gateway after Dex/oauth2-proxy, from its session
    cookie) or a bearer token (`apiserver/auth/auth.go`). In order:

    * `kubeflow_token`: `Authorization: Bearer <token>` (`existing_token`), e.g. from
      `kubectl create token default-editor -n NS --audience=pipelines.kubeflow.org`;
    * `kubeflow_cookie`: the session cookie sent as `Cookie` (`cookies`), e.g.
      `oauth2_proxy_kubeflow=…` (Kubeflow 1.9+), copied from a logged-in browser;
    * `kubeflow_token_file`, else kfp's in-cluster token file when it exists
      (`$KF_PIPELINES_SA_TOKEN_PATH`, default `/var/run/secrets/kubeflow/pipelines/token`):
      kfp's `ServiceAccountTokenVolumeCredentials`, re-read before every request.

    Raises:
        SettingsError: `kubeflow_token_file` names no readable file.
    """
    if settings.kubeflow.kubeflow_token:
        return {"existing_token": settings.kubeflow.kubeflow_token}
    if settings.kubeflow.kubeflow_cookie:
        return {"cookies": settings.kubeflow.kubeflow_cookie}
    from kfp import client as kfp_client
    from kfp.client.set_volume_credentials import ServiceAccountTokenVolumeCredentials

    path = settings.kubeflow.kubeflow_token_file
    if path:
        if not Path(path).is_file():
            raise SettingsError(f"kubeflow_token_file={path}: no such file (a bearer token file)")
    else:
        path = os.environ.get(kfp_client.KF_PIPELINES_SA_TOKEN_ENV) or ""
        path = path or kfp_client.KF_PIPELINES_SA_TOKEN_PATH
        if not Path(path).is_file():
            return {}
    return {"credentials": ServiceAccountTokenVolumeCredentials(path)}


def experiment_id(client: kfp.Client, name: str, namespace: str | None) -> str:
    """The id of experiment `name` in `namespace`, created when there is none."""
    with contextlib.redirect_stdout(io.StringIO()):  # kfp.Client prints its own link
        return client.create_experiment(name=name, namespace=namespace).experiment_id


def submit_run(
    client: kfp.Client,
    settings: Settings,
    template_path: str | Path,
    values: Mapping[str, Any] | None,
    experiment: str,
) -> kfp_server_api.V2beta1Run:
    """Create the run through `kfp.Client.run_pipeline` (the body `run_body` builds)."""
    found = experiment_id(client, experiment, settings.kubeflow.kubeflow_namespace)
    with contextlib.redirect_stdout(io.StringIO()):  # kfp.Client prints its own link
        return client.run_pipeline(
            experiment_id=found,
            job_name=settings.cloud.display_name,
            pipeline_package_path=str(template_path),
            params=dict(values or {}),
            pipeline_root=settings.cloud.pipeline_root,
            enable_caching=settings.cloud.enable_caching,
            service_account=settings.kubeflow.kubeflow_service_account,
        )


def create_recurring_run(
    client: kfp.Client,
    settings: Settings,
    template_path: str | Path,
    schedule: KfpSchedule,
    values: Mapping[str, Any] | None,
    experiment: str,
) -> kfp_server_api.V2beta1RecurringRun:
    """Create the recurring run through `kfp.Client.create_recurring_run`."""
    return client.create_recurring_run(
        experiment_id=experiment_id(client, experiment, settings.kubeflow.kubeflow_namespace),
        job_name=schedule.display_name,
        start_time=schedule.start_time,
        end_time=schedule.end_time,
        cron_expression=schedule.cron,
        max_concurrency=schedule.max_concurrency,
        no_catchup=schedule.no_catchup,
        params=dict(values or {}),
        pipeline_package_path=str(template_path),
        enabled=schedule.enabled,
        pipeline_root=settings.cloud.pipeline_root,
        enable_caching=settings.cloud.enable_caching,
        service_account=settings.kubeflow.kubeflow_service_account,
    )


def recurring_run_id(value: str) -> str:
    """A recurring run id as KFP makes them (a UUID).

    Raises:
        SettingsError: Not a UUID.
    """
    if not _UUID.match(value.lower()):
        raise SettingsError(f"recurring run {value!r}: expected its id, a UUID (see schedule list)")
    return value.lower()


def list_recurring_runs(client: kfp.Client, namespace: str | None) -> list[Any]:
    """Every recurring run in the namespace, newest first (all pages)."""
    found: list[Any] = []
    token = ""
    while True:
        page = client.list_recurring_runs(
            page_token=token, page_size=100, sort_by="created_at desc", namespace=namespace
        )
        found.extend(page.recurring_runs or [])
        token = page.next_page_token or ""
        if not token:
            return found


def recurring_run_row(run: Any) -> dict[str, str]:
    """What `schedule list` shows of one recurring run."""
    cron = getattr(run.trigger, "cron_schedule", None) if run.trigger else None
    return {
        "id": run.recurring_run_id or "",
        "display_name": run.display_name or "",
        "state": str(run.status or run.mode or ""),
        "cron": (cron.cron if cron else "") or "",
        "start": str(cron.start_time or "") if cron else "",
        "end": str(cron.end_time or "") if cron else "",
        "concurrency": str(run.max_concurrency or 1),
    }


def run_url(host: str, run_id: str) -> str:
    """The KFP UI page of a run (`kfp.Client` prints the same link)."""
    return f"{host.rstrip('/')}/#/runs/details/{run_id}"


def recurring_run_url(host: str, recurring_run_id: str) -> str:
    """The KFP UI page of a recurring run."""
    return f"{host.rstrip('/')}/#/recurringrun/details/{recurring_run_id}"
