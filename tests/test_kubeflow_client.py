"""`submit` / `schedule …` with `--target kubeflow`: requests built offline and asserted field by
field, the same bodies `kfp.Client` POSTs (the HTTP call replaced, kfp.Client's code run), cron
conversion, and one-line errors before anything is sent."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pipelines.app import schedule_actions
from pipelines.app.cloud_commands import schedule_app, submit
from pipelines.settings import Settings, SettingsError
from pipelines.targets.kubeflow import client as kfp_client
from pipelines.targets.kubeflow.cli.preflight import check_kubeflow_run

# `schedule list/pause/resume/delete` register on `schedule_app` when schedule_actions is
# imported (as the CLI does): imported here, so this file does not rely on another's.
assert schedule_actions.schedule_app is schedule_app
app = typer.Typer()
app.command("submit")(submit)
app.add_typer(schedule_app, name="schedule")

HOST = "http://kfp.example.com:8080"
NAMESPACE = "team-a"
ROOT = "minio://mlpipeline/hpt"
IMAGES = {
    "trainer": "registry.example.com/hpt/trainer:v1",
    "components": "registry.example.com/hpt/components:v1",
}
FLAGS = [
    "--target=kubeflow",
    f"--host={HOST}",
    f"--namespace={NAMESPACE}",
    f"--pipeline-root={ROOT}",
    "--service-account=hpt-runner",
    "--display-name=hpt nightly",
    "--no-cache",
]
PARAMS = ["--param=epochs=7", '--param=search_space={"units": [8]}']
RECURRING_ID = "5f0c1e4e-8d6a-4b8e-9b1c-2a3d4e5f6a7b"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("HPT_", "KF_PIPELINES")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.config/kfp/context.json
    monkeypatch.setenv("HPT_TRAINER_IMAGE", IMAGES["trainer"])
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", IMAGES["components"])
    monkeypatch.setenv("HPT_DATA_PVC", "hpt-data")  # a data location the pods can read


def invoke(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def one_line_error(result: Any, message: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("hpt-pipeline: error: ")
    assert message in lines[0], lines[0]


# --------------------------------------------------------------------------- a KFP API server


class Response:
    """What kfp_server_api's ApiClient reads from its REST client."""

    def __init__(self, obj: Any, status: int = 200) -> None:
        self.status = status
        self.reason = "OK"
        self.data = json.dumps(obj).encode()

    def getheader(self, name: str, default: Any = None) -> Any:
        return "application/json" if name.lower() == "content-type" else default

    def getheaders(self) -> dict[str, str]:
        return {"content-type": "application/json"}


class Server:
    """Replaces `kfp_server_api.ApiClient.request`, the HTTP call: records every request."""

    def __init__(self, experiments: list[dict] | None = None, refuse: int = 0) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.experiments = experiments or []
        self.refuse = refuse
        self.recurring = [
            {
                "recurring_run_id": RECURRING_ID,
                "display_name": "hpt nightly",
                "status": "ENABLED",
                "max_concurrency": "2",
                "trigger": {"cron_schedule": {"cron": "0 0 3 * * 1"}},
            }
        ]

    def request(self, method: str, url: str, query_params=None, body=None, **_: Any) -> Response:
        import kfp_server_api

        assert url.startswith(HOST + "/apis/v2beta1/"), url
        path = url[len(HOST) :]
        self.requests.append((method, path, body))
        if self.refuse:
            err = kfp_server_api.ApiException(status=self.refuse, reason="Forbidden")
            err.body = json.dumps({"error": "denied", "message": "User cannot create runs"})
            err.body = err.body.encode()
            raise err
        routes = {
            ("GET", "/apis/v2beta1/experiments"): {"experiments": self.experiments},
            ("POST", "/apis/v2beta1/experiments"): {**(body or {}), "experiment_id": "exp-new"},
            ("POST", "/apis/v2beta1/runs"): {**(body or {}), "run_id": "run-1"},
            ("POST", "/apis/v2beta1/recurringruns"): {
                **(body or {}),
                "recurring_run_id": RECURRING_ID,
            },
            # The list's field is camelCase in KFP's API (kfp_server_api's attribute_map).
            ("GET", "/apis/v2beta1/recurringruns"): {"recurringRuns": self.recurring},
            ("GET", f"/apis/v2beta1/recurringruns/{RECURRING_ID}"): (self.recurring or [{}])[0],
        }
        return Response(routes.get((method, path), {}))

    def posted(self, path: str) -> Any:
        (body,) = [b for m, p, b in self.requests if m == "POST" and p == path]
        return body


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    import kfp_server_api

    fake = Server()
    monkeypatch.setattr(
        kfp_server_api.ApiClient, "request", lambda self, *a, **k: fake.request(*a, **k)
    )
    return fake


# --------------------------------------------------------------------------- cron and schedules


@pytest.mark.parametrize(
    ("cron", "kfp"),
    [
        ("0 3 * * 1", "0 0 3 * * 1"),
        ("  */15   * * * * ", "0 */15 * * * *"),
        ("0 9 1 */2 *", "0 0 9 1 */2 *"),
        ("30 6 ? jan,Jul MON-FRI", "0 30 6 ? jan,Jul MON-FRI"),
        ("0 0 1-15/2 * 0,6", "0 0 0 1-15/2 * 0,6"),
    ],
)
def test_five_field_cron_becomes_kfps_six_fields_seconds_first(cron: str, kfp: str) -> None:
    assert kfp_client.kfp_cron(cron) == kfp


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("TZ=Europe/Paris 0 3 * * 1", "takes no time zone"),
        ("0 0 3 * * 1", "expected 5 fields"),
        ("61 3 * * 1", "bad minute field '61'"),
        ("0 3 31 2 *", "never fires"),
        ("0 3 * * 7", "day-of-week field '7' is not in Kubeflow Pipelines' cron syntax"),
        ("0 3 L * *", "day-of-month field 'L'"),
        ("0 3 * * 1#2", "day-of-week field '1#2'"),
    ],
)
def test_bad_or_zoned_cron_is_one_line(cron: str, message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)) as err:
        kfp_client.kfp_cron(cron)
    assert "\n" not in str(err.value) and repr(cron) in str(err.value)


def test_schedule_spec_times_and_concurrency() -> None:
    spec = kfp_client.schedule_spec(
        "0 3 * * 1",
        "nightly",
        start_time="2030-01-31T10:00:00+01:00",
        end_time="2030-06-01",
        max_concurrency=10,
    )
    assert spec == kfp_client.KfpSchedule(
        cron="0 0 3 * * 1",
        display_name="nightly",
        start_time="2030-01-31T09:00:00Z",
        end_time="2030-06-01T00:00:00Z",
        max_concurrency=10,
    )
    for bad in (0, 11):
        with pytest.raises(SettingsError, match=rf"max_concurrency={bad}: .*\[1, 10\]"):
            kfp_client.schedule_spec("0 3 * * 1", "n", max_concurrency=bad)
    with pytest.raises(SettingsError, match="must be after start_time"):
        kfp_client.schedule_spec("0 3 * * 1", "n", start_time="2030-02-01", end_time="2030-01-01")


# --------------------------------------------------------------------------- submit --dry-run


def test_submit_dry_run_writes_the_run_request_field_by_field(
    template: Path, tmp_path: Path
) -> None:
    out = tmp_path / "requests" / "run.json"
    result = invoke(
        "submit",
        *FLAGS,
        *PARAMS,
        "--experiment=nightly",
        f"--template={template}",
        "--dry-run",
        f"--output={out}",
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["host"] == HOST and doc["namespace"] == NAMESPACE
    assert doc["experiment"]["display_name"] == "nightly"
    assert doc["experiment"]["create_body"] == {"display_name": "nightly", "namespace": NAMESPACE}
    request = doc["run"]
    assert (request["method"], request["path"]) == ("POST", "/apis/v2beta1/runs")
    assert request["fills"] == ["experiment_id"]
    body = request["body"]
    assert set(body) == {"display_name", "pipeline_spec", "runtime_config", "service_account"}
    assert body["display_name"] == "hpt nightly"
    assert body["service_account"] == "hpt-runner"
    assert body["runtime_config"] == {
        "pipeline_root": ROOT,
        "parameters": {"epochs": 7, "search_space": {"units": [8]}},
    }
    spec = body["pipeline_spec"]
    assert spec["pipelineInfo"]["name"] == "tiny-hpt"
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"scale", "report"}
    assert all(not t.get("cachingOptions", {}).get("enableCache") for t in tasks.values())
    assert result.stdout.startswith("dry run: run 'hpt nightly' in experiment 'nightly'")
    assert "nothing was sent" in result.stdout


def test_submit_dry_run_on_stdout_defaults_and_compiled_caching(template: Path) -> None:
    flags = [f for f in FLAGS if f not in ("--no-cache", "--service-account=hpt-runner")]
    result = invoke("submit", *flags, f"--template={template}", "--dry-run")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["experiment"]["display_name"] == "Default"  # kfp.Client's default
    body = doc["run"]["body"]
    assert "service_account" not in body
    assert body["runtime_config"] == {"pipeline_root": ROOT, "parameters": {}}
    tasks = body["pipeline_spec"]["root"]["dag"]["tasks"]
    assert all(t["cachingOptions"]["enableCache"] for t in tasks.values())  # as compiled
    assert "written to stdout" in result.stderr


def test_a_platform_spec_from_kfp_kubernetes_is_sent_beside_the_pipeline_spec(
    tmp_path: Path,
) -> None:
    from kfp import compiler, dsl, kubernetes

    @dsl.component(base_image="python:3.11", install_kfp_package=False)
    def touch():  # no annotations: they would be strings here (__future__)
        print("x")

    @dsl.pipeline(name="with-pvc")
    def with_pvc():
        task = touch()
        kubernetes.mount_pvc(task, pvc_name="hpt-data", mount_path="/mnt/hpt")

    path = tmp_path / "with-pvc.yaml"
    compiler.Compiler().compile(with_pvc, str(path))
    result = invoke("submit", *FLAGS, f"--template={path}", "--dry-run")
    assert result.exit_code == 0, result.output
    spec = json.loads(result.stdout)["run"]["body"]["pipeline_spec"]
    assert spec["pipeline_spec"]["pipelineInfo"]["name"] == "with-pvc"
    (executor,) = spec["platform_spec"]["platforms"]["kubernetes"]["deploymentSpec"][
        "executors"
    ].values()
    assert executor["pvcMount"][0]["mountPath"] == "/mnt/hpt"


def test_without_template_the_kubeflow_target_is_compiled(
    template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import sys
    import types

    calls: list[Any] = []

    def compile_pipeline(target: str, plan: Any, output_path: str) -> str:
        calls.append((target, plan.settings))  # the run's resolved plan
        shutil.copy(template, output_path)
        return output_path

    fake = types.ModuleType("pipelines.compiler")
    fake.compile_pipeline = compile_pipeline  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pipelines.compiler", fake)
    result = invoke("submit", *FLAGS, "--dry-run")
    assert result.exit_code == 0, result.output
    ((target, settings),) = calls
    assert target == "kubeflow"
    assert (settings.kubeflow.kubeflow_host, settings.kubeflow.kubeflow_namespace) == (
        HOST,
        NAMESPACE,
    )


# --------------------------------------------------------------------------- what is sent


def dry_run(*args: str) -> dict[str, Any]:
    result = invoke(*args, "--dry-run")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_run_sent_through_kfp_client_is_the_dry_run_body(
    template: Path, server: Server
) -> None:
    args = ["submit", *FLAGS, *PARAMS, "--experiment=nightly", f"--template={template}"]
    expected = dry_run(*args)
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert [(m, p) for m, p, _ in server.requests] == [
        ("GET", "/apis/v2beta1/experiments"),  # by name, in the namespace
        ("POST", "/apis/v2beta1/experiments"),  # none: created
        ("POST", "/apis/v2beta1/runs"),
    ]
    assert server.posted("/apis/v2beta1/experiments") == expected["experiment"]["create_body"]
    sent = server.posted("/apis/v2beta1/runs")
    assert sent == {**expected["run"]["body"], "experiment_id": "exp-new"}
    assert f"submitted run run-1 (hpt nightly): {HOST}/#/runs/details/run-1" in result.stdout


def test_an_existing_experiment_is_reused(template: Path, server: Server) -> None:
    server.experiments = [{"experiment_id": "exp-old", "display_name": "Default"}]
    result = invoke("submit", *FLAGS, f"--template={template}")
    assert result.exit_code == 0, result.output
    assert [m for m, _, _ in server.requests] == ["GET", "POST"]
    assert server.posted("/apis/v2beta1/runs")["experiment_id"] == "exp-old"


def test_the_recurring_run_sent_through_kfp_client_is_the_dry_run_body(
    template: Path, server: Server
) -> None:
    args = [
        "schedule",
        "create",
        "--cron=0 3 * * 1",
        "--start-time=2030-01-31T09:00:00Z",
        "--end-time=2030-12-31",
        "--max-concurrent-runs=3",
        "--experiment=nightly",
        *FLAGS,
        *PARAMS,
        f"--template={template}",
    ]
    expected = dry_run(*args)
    request = expected["recurring_run"]
    assert (request["method"], request["path"]) == ("POST", "/apis/v2beta1/recurringruns")
    body = request["body"]
    assert body["trigger"] == {
        "cron_schedule": {
            "cron": "0 0 3 * * 1",
            "start_time": "2030-01-31T09:00:00Z",
            "end_time": "2030-12-31T00:00:00Z",
        }
    }
    assert (body["mode"], body["max_concurrency"], body["no_catchup"]) == ("ENABLE", 3, True)
    assert body["display_name"] == "hpt nightly" and body["service_account"] == "hpt-runner"
    assert body["runtime_config"]["parameters"] == {"epochs": 7, "search_space": {"units": [8]}}
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    sent = server.posted("/apis/v2beta1/recurringruns")
    assert sent == {**body, "experiment_id": "exp-new"}
    assert RECURRING_ID in result.stdout and "0 0 3 * * 1" in result.stdout


def test_list_pause_resume_and_delete(server: Server) -> None:
    host = ["--target=kubeflow", f"--host={HOST}", f"--namespace={NAMESPACE}"]
    listed = invoke("schedule", "list", *host)
    assert listed.exit_code == 0, listed.output
    assert RECURRING_ID[:8] in listed.stdout and "0 0 3 * * 1" in listed.stdout
    method, path, _ = server.requests[-1]
    assert (method, path) == ("GET", "/apis/v2beta1/recurringruns")
    for action, suffix in (("pause", ":disable"), ("resume", ":enable")):
        result = invoke("schedule", action, RECURRING_ID, *host)
        assert result.exit_code == 0, result.output
        assert server.requests[-1][:2] == (
            "POST",
            f"/apis/v2beta1/recurringruns/{RECURRING_ID}{suffix}",
        )
        assert result.stdout.strip() == f"{action}d recurring run {RECURRING_ID}"
    refused = invoke("schedule", "delete", RECURRING_ID, *host, input="n\n")
    assert refused.exit_code == 1
    assert server.requests[-1][:2] == ("GET", f"/apis/v2beta1/recurringruns/{RECURRING_ID}")
    deleted = invoke("schedule", "delete", RECURRING_ID, *host, "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert server.requests[-1][:2] == ("DELETE", f"/apis/v2beta1/recurringruns/{RECURRING_ID}")


def test_an_empty_list_says_so(server: Server) -> None:
    server.recurring = []
    result = invoke("schedule", "list", "--target=kubeflow", f"--host={HOST}")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"no pipeline schedules in namespace kubeflow at {HOST}"


# --------------------------------------------------------------------------- one-line errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--host=localhost:8080"],
            "kubeflow_host='localhost:8080': expected an http:// or https://",
        ),
        (["--namespace=Team_A"], "kubeflow_namespace='Team_A'"),
        (["--pipeline-root=/tmp/root"], "pipeline_root='/tmp/root'"),
        (["--project=my-project"], "--project: a Vertex flag, not used with --target kubeflow"),
        (["--wait"], "--wait: a Vertex flag"),
        (["--target=aws"], "--target=aws: expected one of vertex, kubeflow"),
        (["--param=epochs=many"], "--param epochs='many': expected an integer"),
    ],
)
def test_bad_submit_values_fail_before_anything_is_sent(
    template: Path, server: Server, args: list[str], message: str
) -> None:
    result = invoke("submit", *FLAGS, *args, f"--template={template}")
    one_line_error(result, message)
    assert server.requests == []


def test_a_missing_host_is_one_line(template: Path, server: Server) -> None:
    flags = [f for f in FLAGS if not f.startswith("--host")]
    one_line_error(invoke("submit", *flags, f"--template={template}"), "kubeflow_host is not set")
    one_line_error(invoke("schedule", "list", "--target=kubeflow"), "kubeflow_host is not set")
    assert server.requests == []


def test_placeholder_images_are_refused(
    template: Path, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    placeholder = "us-docker.pkg.dev/your-project/hpt-pipeline/trainer:latest"
    monkeypatch.setenv("HPT_TRAINER_IMAGE", placeholder)
    result = invoke("submit", *FLAGS, f"--template={template}")
    one_line_error(result, f"trainer_image={placeholder}: a placeholder; push the images")
    assert "HPT_TRAINER_IMAGE" in result.stderr
    assert server.requests == []


def test_kubeflow_flags_are_refused_for_vertex(template: Path) -> None:
    result = invoke("submit", f"--host={HOST}", f"--template={template}", "--dry-run")
    one_line_error(result, "--host: only used with --target kubeflow")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron=TZ=Europe/Paris 0 3 * * 1"], "takes no time zone"),
        (["--cron=0 3 * *"], "expected 5 fields"),
        (["--cron=0 3 * * 1", "--max-concurrent-runs=11"], "max_concurrency=11"),
        (["--cron=0 3 * * 1", "--max-runs=5"], "--max-runs: a Vertex flag"),
        (["--cron=0 3 * * 1", "--start-time=soon"], "start_time='soon'"),
    ],
)
def test_bad_schedules_fail_before_anything_is_sent(
    template: Path, server: Server, args: list[str], message: str
) -> None:
    result = invoke("schedule", "create", *args, *FLAGS, f"--template={template}")
    one_line_error(result, message)
    assert server.requests == []


def test_a_bad_recurring_run_id_fails_before_any_call(server: Server) -> None:
    result = invoke("schedule", "pause", "nightly", "--target=kubeflow", f"--host={HOST}")
    one_line_error(result, "recurring run 'nightly': expected its id, a UUID")
    assert server.requests == []


def test_api_refusals_and_unreachable_hosts_are_one_line(
    template: Path, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.refuse = 403
    result = invoke("submit", *FLAGS, f"--template={template}")
    one_line_error(result, f"Kubeflow Pipelines at {HOST}: 403 Forbidden: User cannot create runs")

    import kfp_server_api
    import urllib3

    def unreachable(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise urllib3.exceptions.MaxRetryError(
            None, "/apis/v2beta1/experiments", reason=ConnectionRefusedError("Connection refused")
        )

    monkeypatch.setattr(kfp_server_api.ApiClient, "request", unreachable)
    result = invoke("submit", *FLAGS, f"--template={template}")
    one_line_error(
        result,
        f"kubeflow_host={HOST}: cannot reach the Kubeflow Pipelines API (Connection refused)",
    )


def test_preflight_for_kubeflow() -> None:
    ok = Settings(
        kubeflow_host=HOST,
        kubeflow_namespace="team-a",
        trainer_image=IMAGES["trainer"],
        components_image=IMAGES["components"],
        data_pvc="hpt-data",
    )
    check_kubeflow_run(ok)
    with pytest.raises(SettingsError) as err:  # the default namespace, refused before anything
        check_kubeflow_run(ok.replace(kubeflow_namespace="kubeflow"))
    assert str(err.value).startswith("kubeflow_namespace=kubeflow: Kubeflow's own namespace")
    assert "pass --namespace with your profile namespace" in str(err.value)
    with pytest.raises(SettingsError, match="kubeflow_host is not set: pass --host URL"):
        check_kubeflow_run(Settings(trainer_image=IMAGES["trainer"]))
    with pytest.raises(SettingsError, match="components_image=.*your-project.*a placeholder"):
        check_kubeflow_run(
            Settings(
                kubeflow_host=HOST,
                kubeflow_namespace="team-a",
                trainer_image=IMAGES["trainer"],
                data_pvc="hpt-data",
            )
        )
