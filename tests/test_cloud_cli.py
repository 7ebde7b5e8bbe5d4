"""`submit` and `schedule …` commands, offline: dry runs, one-line errors, and the live
calls followed up to the aiplatform method that would reach Google Cloud."""

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pipelines.app import schedule_actions
from pipelines.app.cloud_commands import schedule_app, submit
from tests.test_vertex_client import (
    KMS_KEY,
    LABELS,
    NETWORK,
    PROJECT,
    REGION,
    ROOT_URI,
    SERVICE_ACCOUNT,
    check_pipeline_job,
    find_secrets,
)

# `schedule list/pause/resume/delete` register on `schedule_app` when schedule_actions is
# imported (as the CLI does): imported here, so this file does not rely on another's.
assert schedule_actions.schedule_app is schedule_app
app = typer.Typer()
app.command("submit")(submit)
app.add_typer(schedule_app, name="schedule")

CLOUD_FLAGS = [
    f"--project={PROJECT}",
    f"--region={REGION}",
    f"--pipeline-root={ROOT_URI}",
    f"--service-account={SERVICE_ACCOUNT}",
    f"--network={NETWORK}",
    f"--kms-key={KMS_KEY}",
    *(f"--label={key}={value}" for key, value in LABELS.items()),
    "--no-cache",
    "--display-name=hpt nightly",
]
PARAMS = ["--param=epochs=7", '--param=search_space={"units": [8]}']
SCHEDULE = "TZ=Europe/Paris 0 3 * * 1"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No HPT_* settings or Google credentials leak in from the machine."""
    import os

    for name in list(os.environ):
        if name.startswith("HPT_") or name.startswith("GOOGLE_"):
            monkeypatch.delenv(name)
    # Built images (the placeholder registry is refused before anything is sent).
    monkeypatch.setenv("HPT_TRAINER_IMAGE", IMAGES["trainer"])
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", IMAGES["components"])


IMAGES = {
    "trainer": "europe-docker.pkg.dev/my-project/hpt/trainer:v1",
    "components": "europe-docker.pkg.dev/my-project/hpt/components:v1",
}


@pytest.fixture
def google_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    """Application-default credentials that exist but can send nothing."""
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    monkeypatch.setattr(google.auth, "default", lambda **_: (AnonymousCredentials(), None))


def job_json(pipeline_job: Any) -> dict[str, Any]:
    """A `PipelineJob` proto as request JSON."""
    from google.protobuf import json_format

    return json_format.MessageToDict(type(pipeline_job).pb(pipeline_job))


def invoke(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def one_line_error(result: Any, message: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("hpt-pipeline: error: ")
    assert message in lines[0]


# --------------------------------------------------------------------------- submit --dry-run


def test_submit_dry_run_writes_the_request_field_by_field(template: Path, tmp_path: Path) -> None:
    out = tmp_path / "requests" / "job.json"
    result = invoke(
        "submit", *CLOUD_FLAGS, *PARAMS, f"--template={template}", "--dry-run", f"--output={out}"
    )
    assert result.exit_code == 0, result.output

    request = json.loads(out.read_text())
    assert request["parent"] == f"projects/{PROJECT}/locations/{REGION}"
    assert request["pipelineJobId"].startswith("tiny-hpt-")
    check_pipeline_job(request["pipelineJob"], template)
    assert result.stdout.startswith(f"dry run: pipeline job {request['pipelineJobId']}")
    assert str(out) in result.stdout and "nothing was sent" in result.stdout
    assert not find_secrets(out.read_text() + result.output)


def test_submit_dry_run_without_output_prints_json_on_stdout(template: Path) -> None:
    result = invoke("submit", *CLOUD_FLAGS, f"--template={template}", "--dry-run")
    assert result.exit_code == 0, result.output
    request = json.loads(result.stdout)
    assert request["pipelineJob"]["runtimeConfig"]["gcsOutputDirectory"] == ROOT_URI
    assert "written to stdout" in result.stderr


def test_without_template_the_vertex_target_is_compiled_to_a_temporary_file(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import sys
    import types

    calls: list[Any] = []

    def compile_pipeline(target: str, plan: Any, output_path: str) -> str:
        calls.append((target, plan.settings, Path(output_path)))  # the run's resolved plan
        shutil.copy(template, output_path)
        return output_path

    fake = types.ModuleType("pipelines.compiler")
    fake.compile_pipeline = compile_pipeline  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pipelines.compiler", fake)
    out = tmp_path / "job.json"
    result = invoke("submit", *CLOUD_FLAGS, *PARAMS, "--dry-run", f"--output={out}")
    assert result.exit_code == 0, result.output

    [(target, settings, compiled)] = calls
    assert target == "vertex"
    assert (settings.cloud.project, settings.cloud.kms_key, settings.cloud.enable_caching) == (
        PROJECT,
        KMS_KEY,
        False,
    )
    assert not compiled.exists() and not compiled.parent.exists()  # temporary, cleaned up
    check_pipeline_job(json.loads(out.read_text())["pipelineJob"], template)


def test_flags_override_config_which_overrides_environment(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "cloud.yaml"
    config.write_text(
        "project: config-project\n"
        "pipeline_root: gs://config-bucket/root\n"
        "labels: {source: config}\n"
        "enable_caching: false\n"
    )
    monkeypatch.setenv("HPT_PROJECT", "env-project")
    monkeypatch.setenv("HPT_PIPELINE_ROOT", "gs://env-bucket/root")
    monkeypatch.setenv("HPT_SERVICE_ACCOUNT", SERVICE_ACCOUNT)
    monkeypatch.setenv("HPT_REGION", "asia-east1")
    out = tmp_path / "job.json"
    result = invoke(
        "submit",
        "--project=flag-project",
        f"--config={config}",
        f"--template={template}",
        "--dry-run",
        f"--output={out}",
    )
    assert result.exit_code == 0, result.output

    request = json.loads(out.read_text())
    job = request["pipelineJob"]
    assert request["parent"] == "projects/flag-project/locations/asia-east1"  # flag, env
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://config-bucket/root"  # config
    assert job["labels"] == {"source": "config"}
    assert job["serviceAccount"] == SERVICE_ACCOUNT  # env
    assert "network" not in job and "encryptionSpec" not in job


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        (
            [f"--region={REGION}", f"--pipeline-root={ROOT_URI}"],
            "project is not set: pass --project",
        ),
        ([f"--project={PROJECT}"], "pipeline_root is not set: pass --pipeline-root"),
        ([f"--project={PROJECT}", f"--pipeline-root={ROOT_URI}", "--region="], "region=''"),
        ([f"--project={PROJECT}", "--pipeline-root=/local/dir"], "pipeline_root='/local/dir'"),
    ],
)
@pytest.mark.parametrize("command", [["submit"], ["schedule", "create", f"--cron={SCHEDULE}"]])
def test_missing_cloud_settings_fail_before_anything_else(
    command: list[str], missing: list[str], message: str, tmp_path: Path
) -> None:
    # No --template: had the command gone further it would have tried to compile.
    out = tmp_path / "request.json"
    result = invoke(*command, *missing, "--dry-run", f"--output={out}")
    one_line_error(result, message)
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--param=epochs=many"], "--param epochs='many': expected an integer"),
        (["--param=epoch=3"], "--param epoch: not a parameter of pipeline 'tiny-hpt'"),
        (["--label=Bad Key=x"], "labels=Bad Key=x"),
        (["--kms-key=my-key"], "kms_key='my-key'"),
    ],
)
def test_bad_submit_values_are_one_line_errors(
    template: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "job.json"
    result = invoke(
        "submit", *CLOUD_FLAGS, f"--template={template}", *args, "--dry-run", f"--output={out}"
    )
    one_line_error(result, message)
    assert not out.exists()


def test_output_without_dry_run_is_refused(template: Path, tmp_path: Path) -> None:
    out = tmp_path / "job.json"
    result = invoke("submit", *CLOUD_FLAGS, f"--template={template}", f"--output={out}")
    one_line_error(result, "only used with --dry-run")
    assert not out.exists()


# --------------------------------------------------------------------------- submit, live


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch, google_auth: None) -> dict[str, Any]:
    """`PipelineJob.submit` / `wait` replaced by recorders (they would call Vertex)."""
    from google.cloud import aiplatform, aiplatform_v1

    calls: dict[str, Any] = {}

    def submit_(self: Any, **kwargs: Any) -> None:
        calls["submit"] = kwargs
        calls["job"] = self._gca_resource
        self._gca_resource.name = (
            f"projects/{PROJECT}/locations/{REGION}/pipelineJobs/{self.job_id}"
        )

    def wait(self: Any) -> None:
        calls["wait"] = True
        self._gca_resource.state = aiplatform_v1.PipelineState.PIPELINE_STATE_SUCCEEDED

    monkeypatch.setattr(aiplatform.PipelineJob, "submit", submit_)
    monkeypatch.setattr(aiplatform.PipelineJob, "wait", wait)
    return calls


def test_submit_sends_the_job_with_run_as_and_experiment(
    template: Path, submitted: dict[str, Any]
) -> None:
    result = invoke(
        "submit", *CLOUD_FLAGS, *PARAMS, f"--template={template}", "--experiment=hpt-exp"
    )
    assert result.exit_code == 0, result.output

    assert submitted["submit"] == {
        "service_account": SERVICE_ACCOUNT,
        "network": NETWORK,
        "experiment": "hpt-exp",
    }
    assert "wait" not in submitted
    job = submitted["job"]
    check_pipeline_job({k: v for k, v in job_json(job).items() if k != "name"}, template)
    name = job.name
    assert result.stdout.strip() == (
        f"submitted {name}: https://console.cloud.google.com/vertex-ai/locations/{REGION}"
        f"/pipelines/runs/{name.rsplit('/', 1)[-1]}?project={PROJECT}"
    )


def test_submit_wait_reports_the_final_state(template: Path, submitted: dict[str, Any]) -> None:
    result = invoke("submit", *CLOUD_FLAGS, f"--template={template}", "--wait")
    assert result.exit_code == 0, result.output
    assert submitted["wait"] is True
    assert "(PIPELINE_STATE_SUCCEEDED)" in result.stdout


def test_a_failed_run_while_waiting_exits_1(
    template: Path, submitted: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.cloud import aiplatform

    def wait(self: Any) -> None:
        raise RuntimeError("Job failed with:\ncode: 9\nmessage: trial budget exhausted")

    monkeypatch.setattr(aiplatform.PipelineJob, "wait", wait)
    result = invoke("submit", *CLOUD_FLAGS, f"--template={template}", "--wait")
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("Job failed with:")
    assert len(result.stderr.strip().splitlines()) == 1


def test_submit_without_credentials_is_a_one_line_error(
    template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def default(**_: Any) -> None:
        raise DefaultCredentialsError("Your default credentials were not found.\nSee docs.")

    monkeypatch.setattr(google.auth, "default", default)
    result = invoke("submit", *CLOUD_FLAGS, f"--template={template}")
    one_line_error(result, "credentials were not found")
    assert "--dry-run" in result.stderr


# --------------------------------------------------------------------------- schedule create


def test_schedule_create_dry_run_writes_the_request_field_by_field(
    template: Path, tmp_path: Path
) -> None:
    out = tmp_path / "schedule.json"
    result = invoke(
        "schedule",
        "create",
        f"--cron={SCHEDULE}",
        "--start-time=2030-01-01T01:00:00+01:00",
        "--end-time=2030-12-31",
        "--max-runs=12",
        "--max-concurrent-runs=2",
        "--allow-queueing",
        *CLOUD_FLAGS,
        *PARAMS,
        f"--template={template}",
        "--dry-run",
        f"--output={out}",
    )
    assert result.exit_code == 0, result.output

    request = json.loads(out.read_text())
    assert request["parent"] == f"projects/{PROJECT}/locations/{REGION}"
    schedule = request["schedule"]
    assert schedule["displayName"] == "hpt nightly"
    assert schedule["cron"] == SCHEDULE
    assert schedule["startTime"] == "2030-01-01T00:00:00Z"
    assert schedule["endTime"] == "2030-12-31T00:00:00Z"
    assert schedule["maxRunCount"] == "12"
    assert schedule["maxConcurrentRunCount"] == "2"
    assert schedule["allowQueueing"] is True
    pipeline_job = schedule["createPipelineJobRequest"]["pipelineJob"]
    check_pipeline_job({**pipeline_job, "displayName": "hpt nightly"}, template)
    assert f"({SCHEDULE})" in result.stdout and "nothing was sent" in result.stdout
    assert not find_secrets(out.read_text() + result.output)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron=0 3 * *"], "cron='0 3 * *': expected 5 fields"),
        (["--cron=0 3 * * 1 2030"], "got 6"),
        (["--cron=0 24 * * *"], "bad hour field '24'"),
        (["--cron=0 3 * * SUNDAY"], "bad day-of-week field 'SUNDAY'"),
        (["--cron=TZ=Europe/Pariss 0 3 * * 1"], "unknown time zone 'Europe/Pariss'"),
        ([f"--cron={SCHEDULE}", "--start-time=tomorrow"], "start_time='tomorrow'"),
        (
            [f"--cron={SCHEDULE}", "--start-time=2030-02-01", "--end-time=2030-01-01"],
            "end_time='2030-01-01': must be after start_time='2030-02-01'",
        ),
        ([f"--cron={SCHEDULE}", "--max-runs=0"], "max_run_count=0"),
        ([f"--cron={SCHEDULE}", "--max-concurrent-runs=0"], "max_concurrent_run_count=0"),
    ],
)
def test_bad_schedules_fail_before_any_job_is_built(
    template: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    from pipelines.targets.vertex import client as vertex_client

    def never(*_: Any, **__: Any) -> None:
        raise AssertionError("a job was built before the schedule was validated")

    monkeypatch.setattr(vertex_client, "build_job", never)
    out = tmp_path / "schedule.json"
    result = invoke(
        "schedule",
        "create",
        *args,
        *CLOUD_FLAGS,
        f"--template={template}",
        "--dry-run",
        f"--output={out}",
    )
    one_line_error(result, message)
    assert not out.exists()


def test_schedule_create_calls_create_schedule(
    template: Path, monkeypatch: pytest.MonkeyPatch, google_auth: None
) -> None:
    from google.cloud import aiplatform

    received: dict[str, Any] = {}
    name = f"projects/{PROJECT}/locations/{REGION}/schedules/31"

    def create_schedule(self: Any, **kwargs: Any) -> Any:
        received.update(kwargs, job=self._gca_resource)
        return SimpleNamespace(resource_name=name)

    monkeypatch.setattr(aiplatform.PipelineJob, "create_schedule", create_schedule)
    flags = [f"--cron={SCHEDULE}", "--max-runs=4", *CLOUD_FLAGS, *PARAMS]
    result = invoke("schedule", "create", *flags, f"--template={template}")
    assert result.exit_code == 0, result.output

    job = received.pop("job")
    check_pipeline_job({**job_json(job), "displayName": "hpt nightly"}, template)
    assert received == dict(
        cron=SCHEDULE,
        display_name="hpt nightly",
        start_time=None,
        end_time=None,
        allow_queueing=False,
        max_run_count=4,
        max_concurrent_run_count=1,
        service_account=SERVICE_ACCOUNT,
        network=NETWORK,
    )
    assert result.stdout.strip() == (
        f"created schedule {name} ({SCHEDULE}): https://console.cloud.google.com/vertex-ai/"
        f"locations/{REGION}/pipelines/schedules/31?project={PROJECT}"
    )


# --------------------------------------------------------------------------- list, pause, …


def test_schedule_list_shows_a_table(monkeypatch: pytest.MonkeyPatch, google_auth: None) -> None:
    from google.cloud import aiplatform, aiplatform_v1

    received: dict[str, Any] = {}
    resource = aiplatform_v1.Schedule(
        name=f"projects/{PROJECT}/locations/{REGION}/schedules/99",
        display_name="hpt weekly",
        state=aiplatform_v1.Schedule.State.ACTIVE,
        cron=SCHEDULE,
        started_run_count=3,
        max_run_count=12,
    )

    def list_(cls: Any, **kwargs: Any) -> list[Any]:
        received.update(kwargs)
        return [SimpleNamespace(gca_resource=resource)]

    monkeypatch.setattr(aiplatform.PipelineJobSchedule, "list", classmethod(list_))
    monkeypatch.setenv("COLUMNS", "200")
    result = invoke(
        "schedule", "list", f"--project={PROJECT}", f"--region={REGION}", "--filter=state=ACTIVE"
    )
    assert result.exit_code == 0, result.output

    assert (received["project"], received["location"], received["filter"]) == (
        PROJECT,
        REGION,
        "state=ACTIVE",
    )
    row = next(line for line in result.stdout.splitlines() if "hpt weekly" in line)
    for cell in ("99", "ACTIVE", SCHEDULE, "3/12"):
        assert cell in row


def test_schedule_list_says_when_there_are_none(
    monkeypatch: pytest.MonkeyPatch, google_auth: None
) -> None:
    from google.cloud import aiplatform

    monkeypatch.setattr(aiplatform.PipelineJobSchedule, "list", classmethod(lambda cls, **_: []))
    result = invoke("schedule", "list", f"--project={PROJECT}", f"--region={REGION}")
    assert (
        result.stdout.strip() == f"no pipeline schedules in projects/{PROJECT}/locations/{REGION}"
    )


def test_schedule_list_needs_a_project_and_reports_api_errors(
    monkeypatch: pytest.MonkeyPatch, google_auth: None
) -> None:
    from google.api_core.exceptions import PermissionDenied
    from google.cloud import aiplatform

    one_line_error(invoke("schedule", "list"), "project is not set")

    def denied(cls: Any, **_: Any) -> None:
        raise PermissionDenied("aiplatform.schedules.list denied\non resource")

    monkeypatch.setattr(aiplatform.PipelineJobSchedule, "list", classmethod(denied))
    one_line_error(
        invoke("schedule", "list", f"--project={PROJECT}"), "403 aiplatform.schedules.list denied"
    )


@pytest.fixture
def fetched(monkeypatch: pytest.MonkeyPatch, google_auth: None) -> list[Any]:
    """`PipelineJobSchedule.get` replaced by a recorder returning a schedule that records."""
    from google.cloud import aiplatform

    calls: list[Any] = []

    def get(cls: Any, schedule_id: str, **kwargs: Any) -> Any:
        calls.append(("get", schedule_id, kwargs["project"], kwargs["location"]))
        record = lambda action: lambda: calls.append((action,))  # noqa: E731
        return SimpleNamespace(
            display_name="hpt weekly",
            pause=record("pause"),
            resume=record("resume"),
            delete=record("delete"),
        )

    monkeypatch.setattr(aiplatform.PipelineJobSchedule, "get", classmethod(get))
    return calls


FULL_NAME = f"projects/{PROJECT}/locations/{REGION}/schedules/55"


@pytest.mark.parametrize("action", ["pause", "resume"])
@pytest.mark.parametrize("schedule", ["55", FULL_NAME])
def test_pause_and_resume_by_id_or_name(fetched: list[Any], action: str, schedule: str) -> None:
    result = invoke("schedule", action, schedule, f"--project={PROJECT}", f"--region={REGION}")
    assert result.exit_code == 0, result.output
    assert fetched == [("get", FULL_NAME, PROJECT, REGION), (action,)]
    assert result.stdout.strip() == f"{action}d {FULL_NAME}"


def test_delete_asks_first_unless_yes(fetched: list[Any]) -> None:
    flags = ["55", f"--project={PROJECT}", f"--region={REGION}"]
    refused = invoke("schedule", "delete", *flags, input="n\n")
    assert refused.exit_code == 1
    assert ("delete",) not in fetched
    assert invoke("schedule", "delete", *flags, input="y\n").exit_code == 0
    assert fetched[-1] == ("delete",)
    fetched.clear()
    assert invoke("schedule", "delete", *flags, "--yes").exit_code == 0
    assert fetched == [("get", FULL_NAME, PROJECT, REGION), ("delete",)]


def test_a_bad_schedule_name_fails_before_any_call(fetched: list[Any]) -> None:
    result = invoke("schedule", "pause", "weekly", f"--project={PROJECT}")
    one_line_error(result, "schedule 'weekly': expected a numeric id or a resource name")
    assert fetched == []


PREFLIGHT = {
    "placeholder trainer image": (
        {"HPT_TRAINER_IMAGE": "us-docker.pkg.dev/your-project/hpt-pipeline/trainer:latest"},
        [],
        "trainer_image=us-docker.pkg.dev/your-project/hpt-pipeline/trainer:latest: a placeholder",
    ),
    "placeholder components image": (
        {"HPT_COMPONENTS_IMAGE": "us-docker.pkg.dev/your-project/hpt-pipeline/components:x"},
        [],
        "components_image=",
    ),
    "caching every task": (
        {"HPT_ENABLE_CACHING": "true"},
        [],
        "enable_caching=True: it would cache every task",
    ),
    "grid over a double": (
        {"HPT_ALGORITHM": "GRID_SEARCH"},
        [],
        "algorithm=GRID_SEARCH: parameter 'learning_rate' is a double",
    ),
}


@pytest.mark.parametrize("case", PREFLIGHT, ids=list(PREFLIGHT))
@pytest.mark.parametrize("command", ["submit", "schedule"])
def test_preflight_refuses_before_compiling_or_sending(
    case: str, command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env, flags, message = PREFLIGHT[case]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    compiled: list[str] = []
    monkeypatch.setattr(
        "pipelines.compiler.compile_pipeline", lambda *a, **k: compiled.append("compiled")
    )
    common = ["--project", "my-project", "--region", "us-central1"]
    common += ["--pipeline-root", "gs://b/root", "--dry-run", "--output", str(tmp_path / "r.json")]
    if command == "submit":
        result = CliRunner().invoke(_app(), ["submit", *common, *flags])
    else:
        result = CliRunner().invoke(
            _app(), ["schedule", "create", "--cron", "0 3 * * 1", *common, *flags]
        )
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert compiled == [] and not (tmp_path / "r.json").exists()


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("submit")(submit)
    app.add_typer(schedule_app, name="schedule")
    return app
