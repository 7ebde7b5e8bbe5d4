"""Vertex AI Pipelines requests, built offline and checked field by field.

Nothing here reaches Google Cloud: dry-run requests are built with anonymous
credentials, and the live paths are followed up to the method that would make
the network call, which is replaced by a recorder.
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.settings import Settings, SettingsError
from pipelines.targets.vertex import client as vertex_client

ROOT = Path(__file__).resolve().parents[1]

PROJECT = "hpt-demo-project"
REGION = "europe-west4"
ROOT_URI = "gs://hpt-demo-bucket/pipeline-root"
SERVICE_ACCOUNT = "pipelines-runner@hpt-demo-project.iam.gserviceaccount.com"
NETWORK = "projects/123456789012/global/networks/hpt-vpc"
KMS_KEY = "projects/hpt-demo-project/locations/europe-west4/keyRings/hpt/cryptoKeys/pipelines"
LABELS = {"team": "vision", "stage": "dev"}

# Things that must never appear in a request: key files, OAuth tokens, API keys.
SECRET_MARKERS = (
    "private_key",
    "private_key_id",
    "BEGIN PRIVATE KEY",
    "access_token",
    "refresh_token",
    "client_secret",
    "ya29.",
    "AIza",
    "authorization",
    "bearer",
)


def find_secrets(text: str) -> list[str]:
    """The secret markers present in `text` (case-insensitive)."""
    return [marker for marker in SECRET_MARKERS if marker.lower() in text.lower()]


def cloud_settings(**changes: Any) -> Settings:
    """Settings with every cloud field set."""
    values: dict[str, Any] = dict(
        project=PROJECT,
        region=REGION,
        pipeline_root=ROOT_URI,
        service_account=SERVICE_ACCOUNT,
        network=NETWORK,
        kms_key=KMS_KEY,
        labels=LABELS,
        display_name="hpt nightly",
        enable_caching=False,
    )
    values.update(changes)
    return Settings(**values)


def offline_job(template: Path, settings: Settings | None = None, **values: Any) -> Any:
    return vertex_client.build_job(
        settings or cloud_settings(),
        template,
        values,
        credentials=vertex_client.credentials(offline=True),
    )


def all_tasks(spec: dict[str, Any]) -> list[dict[str, Any]]:
    components = [spec["root"], *spec["components"].values()]
    return [task for c in components for task in c.get("dag", {}).get("tasks", {}).values()]


def check_pipeline_job(pipeline_job: dict[str, Any], template: Path) -> None:
    """The fields of a `PipelineJob` built from `cloud_settings()` and `template`."""
    compiled = yaml.safe_load(template.read_text())
    assert pipeline_job["displayName"] == "hpt nightly"
    spec = pipeline_job["pipelineSpec"]
    assert spec["pipelineInfo"] == compiled["pipelineInfo"]
    assert spec["root"]["inputDefinitions"] == compiled["root"]["inputDefinitions"]
    assert spec["deploymentSpec"] == compiled["deploymentSpec"]
    assert len(all_tasks(spec)) == 2
    assert all(task["cachingOptions"] == {"enableCache": False} for task in all_tasks(spec))
    runtime = pipeline_job["runtimeConfig"]
    assert runtime["gcsOutputDirectory"] == ROOT_URI
    assert runtime["parameterValues"] == {
        "epochs": 7,
        "search_space": {"units": [8]},
        # From the settings, because the template declares these parameters.
        "location": REGION,
        "service_account": SERVICE_ACCOUNT,
        "labels": LABELS,
    }
    assert pipeline_job["labels"] == LABELS
    assert pipeline_job["encryptionSpec"] == {"kmsKeyName": KMS_KEY}
    assert pipeline_job["serviceAccount"] == SERVICE_ACCOUNT
    assert pipeline_job["network"] == NETWORK


# --------------------------------------------------------------------------- templates


def test_read_template_accepts_a_compiled_pipeline_and_rejects_other_files(
    template: Path, tmp_path: Path
) -> None:
    assert vertex_client.read_template(template)["pipelineInfo"]["name"] == "tiny-hpt"
    with pytest.raises(SettingsError, match="file not found"):
        vertex_client.read_template(tmp_path / "missing.yaml")
    other = tmp_path / "settings.yaml"
    other.write_text("project: p\n")
    with pytest.raises(SettingsError, match="not a compiled pipeline"):
        vertex_client.read_template(other)


def test_settings_fill_the_cloud_parameters_the_template_declares(template: Path) -> None:
    spec = vertex_client.read_template(template)
    assert vertex_client.settings_parameters(spec, cloud_settings()) == {
        "location": REGION,
        "service_account": SERVICE_ACCOUNT,
        "labels": LABELS,
    }  # project, network and encryption_spec_key_name are not declared by this template
    bare = Settings(project=PROJECT)
    assert vertex_client.settings_parameters(spec, bare) == {"location": "us-central1"}


def test_param_flags_override_the_settings_parameters(template: Path) -> None:
    other = "other-runner@hpt-demo-project.iam.gserviceaccount.com"
    job = offline_job(template, service_account=other)
    pipeline_job = vertex_client.job_request(job)["pipelineJob"]
    assert pipeline_job["runtimeConfig"]["parameterValues"]["service_account"] == other
    assert pipeline_job["serviceAccount"] == SERVICE_ACCOUNT


def test_parameter_values_are_typed_from_the_pipeline_spec(template: Path) -> None:
    spec = vertex_client.read_template(template)
    values = vertex_client.parameter_values(
        spec,
        [
            "epochs=5",
            "learning_rate=0.5",
            "source=gs://b/images=1",
            "use_gpu=true",
            'search_space={"units": [4]}',
            "tags=[1, 2]",
        ],
    )
    assert values == {
        "epochs": 5,
        "learning_rate": 0.5,
        "source": "gs://b/images=1",
        "use_gpu": True,
        "search_space": {"units": [4]},
        "tags": [1, 2],
    }
    assert isinstance(values["epochs"], int)


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("epochs", "expected name=value"),
        ("epoch=3", "not a parameter of pipeline 'tiny-hpt'.*epochs"),
        ("epochs=3.5", "--param epochs='3.5': expected an integer"),
        ("use_gpu=maybe", "expected true or false"),
        ("search_space=[1]", "expected a JSON object"),
        ("tags={", "expected a JSON list"),
    ],
)
def test_bad_parameter_values_are_one_line_errors(
    template: Path, assignment: str, message: str
) -> None:
    with pytest.raises(SettingsError, match=message) as err:
        vertex_client.parameter_values(vertex_client.read_template(template), [assignment])
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- pipeline jobs


def test_job_request_is_built_offline_field_by_field(template: Path) -> None:
    job = offline_job(template, epochs=7, search_space={"units": [8]})
    request = vertex_client.job_request(job)

    assert set(request) == {"parent", "pipelineJob", "pipelineJobId"}
    assert request["parent"] == f"projects/{PROJECT}/locations/{REGION}"
    assert request["pipelineJobId"].startswith("tiny-hpt-")
    check_pipeline_job(request["pipelineJob"], template)
    assert not find_secrets(json.dumps(request))


def test_unset_optional_fields_stay_out_of_the_request(template: Path) -> None:
    settings = Settings(project=PROJECT, region=REGION, pipeline_root=ROOT_URI)
    pipeline_job = vertex_client.job_request(offline_job(template, settings))["pipelineJob"]
    for absent in ("serviceAccount", "network", "encryptionSpec", "labels"):
        assert absent not in pipeline_job
    assert pipeline_job["runtimeConfig"]["parameterValues"] == {"location": REGION}
    assert pipeline_job["displayName"] == "hpt-pipeline"
    assert all(
        t["cachingOptions"] == {"enableCache": True}
        for t in all_tasks(pipeline_job["pipelineSpec"])
    )


def test_a_display_name_aiplatform_rejects_is_a_settings_error(template: Path) -> None:
    settings = cloud_settings()
    object.__setattr__(settings.cloud, "display_name", "x" * 200)  # past the settings' own check
    with pytest.raises(SettingsError, match="Display name needs to be less than 128"):
        offline_job(template, settings)


def test_a_display_name_too_long_for_its_suffix_is_refused_by_the_settings() -> None:
    cloud_settings(display_name="x" * 122)  # + "-study" = 128
    with pytest.raises(SettingsError, match=r"^display_name='x{123}': expected at most 128"):
        cloud_settings(display_name="x" * 123)


@pytest.fixture
def recorded_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Replace the GAPIC calls that reach Vertex (and the bucket check) by recorders."""
    from google.cloud import aiplatform_v1
    from google.cloud.aiplatform import pipeline_jobs

    calls: dict[str, Any] = {}

    def create_pipeline_job(self, *, parent, pipeline_job, pipeline_job_id, timeout=None):
        calls["create_pipeline_job"] = dict(
            parent=parent, pipeline_job=pipeline_job, pipeline_job_id=pipeline_job_id
        )
        created = aiplatform_v1.PipelineJob(pipeline_job)
        created.name = f"{parent}/pipelineJobs/{pipeline_job_id}"
        return created

    def create_schedule(self, *, parent, schedule, timeout=None):
        calls["create_schedule"] = dict(parent=parent, schedule=schedule)
        created = aiplatform_v1.Schedule(schedule)
        created.name = f"{parent}/schedules/4242"
        return created

    def create_bucket(**kwargs: Any) -> None:
        calls["bucket"] = kwargs

    monkeypatch.setattr(
        aiplatform_v1.PipelineServiceClient, "create_pipeline_job", create_pipeline_job
    )
    monkeypatch.setattr(aiplatform_v1.ScheduleServiceClient, "create_schedule", create_schedule)
    monkeypatch.setattr(
        pipeline_jobs.gcs_utils,
        "create_gcs_bucket_for_pipeline_artifacts_if_it_does_not_exist",
        create_bucket,
    )
    return calls


def test_dry_run_request_equals_what_submit_sends(
    template: Path, recorded_calls: dict[str, Any]
) -> None:
    from google.protobuf import json_format

    settings = cloud_settings()
    dry = vertex_client.job_request(offline_job(template, settings, epochs=7))
    job = offline_job(template, settings, epochs=7)
    job.job_id = dry["pipelineJobId"]  # the id embeds the submission time
    # A fresh job, submitted through aiplatform's own code up to the GAPIC call.
    name = vertex_client.submit_job(job, settings)

    sent = recorded_calls["create_pipeline_job"]
    assert sent["parent"] == dry["parent"]
    assert sent["pipeline_job_id"] == dry["pipelineJobId"]
    assert (
        json_format.MessageToDict(type(sent["pipeline_job"]).pb(sent["pipeline_job"]))
        == dry["pipelineJob"]
    )
    assert name == f"{dry['parent']}/pipelineJobs/{dry['pipelineJobId']}"


def test_submit_job_passes_run_as_and_experiment(
    template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.cloud import aiplatform

    received: dict[str, Any] = {}

    def submit(self, **kwargs: Any) -> None:
        received.update(kwargs)
        self._gca_resource.name = f"projects/{PROJECT}/locations/{REGION}/pipelineJobs/run-1"

    monkeypatch.setattr(aiplatform.PipelineJob, "submit", submit)
    monkeypatch.setattr(aiplatform.PipelineJob, "wait", lambda self: received.update(waited=True))
    settings = cloud_settings(experiment="hpt-experiment")
    name = vertex_client.submit_job(offline_job(template, settings), settings, wait=True)

    assert received == {
        "service_account": SERVICE_ACCOUNT,
        "network": NETWORK,
        "experiment": "hpt-experiment",
        "waited": True,
    }
    assert name == f"projects/{PROJECT}/locations/{REGION}/pipelineJobs/run-1"


def test_credentials_come_from_application_default_unless_offline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    assert isinstance(vertex_client.credentials(offline=True), AnonymousCredentials)
    sentinel = object()
    seen: list[Any] = []

    def default(scopes: Any = None, **_: Any) -> tuple[object, str]:
        seen.append(scopes)
        return sentinel, "other-project"

    monkeypatch.setattr(google.auth, "default", default)
    assert vertex_client.credentials(offline=False) is sentinel
    assert seen == [[vertex_client.CLOUD_PLATFORM_SCOPE]]


# --------------------------------------------------------------------------- schedules


@pytest.mark.parametrize(
    "cron",
    [
        "0 3 * * 1",
        "*/15 8-18 * * MON-FRI",
        "TZ=Europe/Paris 0 3 * * 1",
        "CRON_TZ=America/New_York  30 6 1,15 * *",
    ],
)
def test_valid_cron_expressions(cron: str) -> None:
    assert vertex_client.validate_cron(cron) == " ".join(cron.split())


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 3 * *", "expected 5 fields .*got 4"),
        ("0 0 3 * * 1", "expected 5 fields .*got 6"),
        ("@daily", "expected 5 fields"),
        ("", "expected 5 fields .*got 0"),
        ("61 * * * *", "bad minute field '61'"),
        ("0 25 * * *", "bad hour field '25'"),
        ("0 3 * 13 *", "bad month field '13'"),
        ("0 3 * * 8", "bad day-of-week field '8'"),
        ("0 3 30 2 *", "never fires"),
        ("TZ=Mars/Olympus_Mons 0 3 * * 1", "unknown time zone 'Mars/Olympus_Mons'"),
        ("CRON_TZ=../etc/passwd 0 3 * * 1", "unknown time zone"),
        ("TZ=Europe/Paris", "expected 'TZ=Area/City' followed by 5 fields"),
        ("TZ=Europe/Paris 0 3 * *", "expected 5 fields .*got 4"),
    ],
)
def test_bad_cron_expressions_are_one_line_errors(cron: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message) as err:
        vertex_client.validate_cron(cron)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith(f"cron={cron!r}")


def test_schedule_spec_normalises_times_to_utc() -> None:
    spec = vertex_client.schedule_spec(
        "TZ=Europe/Paris 0 3 * * 1",
        "nightly",
        start_time="2030-01-01T09:00:00+01:00",
        end_time="2030-06-30",
        max_run_count=10,
        max_concurrent_run_count=2,
    )
    assert spec.start_time == "2030-01-01T08:00:00Z"
    assert spec.end_time == "2030-06-30T00:00:00Z"
    assert (spec.max_run_count, spec.max_concurrent_run_count) == (10, 2)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"start_time": "next monday"}, "start_time='next monday': expected an ISO-8601 time"),
        ({"end_time": "2030-13-01"}, "end_time='2030-13-01': expected an ISO-8601 time"),
        (
            {"start_time": "2030-01-02T00:00:00Z", "end_time": "2030-01-01T23:59:59.5Z"},
            "end_time='2030-01-01T23:59:59.5Z': must be after start_time",
        ),
        (
            {"start_time": "2030-01-01T10:00:00+02:00", "end_time": "2030-01-01T08:00:00Z"},
            "must be after start_time",
        ),
        ({"max_run_count": 0}, "max_run_count=0: expected an integer >= 1"),
        ({"max_concurrent_run_count": 0}, "max_concurrent_run_count=0: expected an integer >= 1"),
    ],
)
def test_bad_schedule_values_are_one_line_errors(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=message) as err:
        vertex_client.schedule_spec("0 3 * * 1", "nightly", **changes)
    assert "\n" not in str(err.value)


def schedule_fixture(template: Path) -> tuple[Settings, Any, Any]:
    settings = cloud_settings()
    job = offline_job(template, settings, epochs=7, search_space={"units": [8]})
    spec = vertex_client.schedule_spec(
        "TZ=Europe/Paris 0 3 * * 1",
        "hpt weekly",
        start_time="2030-01-01T00:00:00Z",
        end_time="2030-12-31T00:00:00Z",
        max_run_count=12,
        max_concurrent_run_count=2,
    )
    return settings, job, spec


def test_schedule_request_is_built_offline_field_by_field(template: Path) -> None:
    settings, job, spec = schedule_fixture(template)
    request = vertex_client.schedule_request(vertex_client.build_schedule(job, spec, settings))

    assert request["parent"] == f"projects/{PROJECT}/locations/{REGION}"
    schedule = request["schedule"]
    assert schedule["displayName"] == "hpt weekly"
    assert schedule["cron"] == "TZ=Europe/Paris 0 3 * * 1"
    assert schedule["startTime"] == "2030-01-01T00:00:00Z"
    assert schedule["endTime"] == "2030-12-31T00:00:00Z"
    assert schedule["maxRunCount"] == "12"  # int64 is a string in proto JSON
    assert schedule["maxConcurrentRunCount"] == "2"
    assert "allowQueueing" not in schedule
    create = schedule["createPipelineJobRequest"]
    assert create["parent"] == request["parent"]
    pipeline_job = create["pipelineJob"]
    # A schedule's runs are named by Vertex: aiplatform does not copy the display name.
    check_pipeline_job({**pipeline_job, "displayName": "hpt nightly"}, template)
    assert not find_secrets(json.dumps(request))


def test_schedule_dry_run_equals_what_create_schedule_sends(
    template: Path, recorded_calls: dict[str, Any]
) -> None:
    from google.protobuf import json_format

    settings, job, spec = schedule_fixture(template)
    dry = vertex_client.schedule_request(vertex_client.build_schedule(job, spec, settings))
    created = vertex_client.create_schedule(job, spec, settings)

    sent = recorded_calls["create_schedule"]
    assert sent["parent"] == dry["parent"]
    assert json_format.MessageToDict(type(sent["schedule"]).pb(sent["schedule"])) == dry["schedule"]
    assert created.resource_name == f"{dry['parent']}/schedules/4242"


def test_schedule_names_and_console_urls() -> None:
    settings = cloud_settings()
    full = f"projects/{PROJECT}/locations/{REGION}/schedules/123"
    assert vertex_client.schedule_name(settings, "123") == full
    assert vertex_client.schedule_name(settings, full) == full
    for bad in ("weekly", "projects/p/locations/l/pipelineJobs/1", "123/4"):
        with pytest.raises(SettingsError, match="schedule"):
            vertex_client.schedule_name(settings, bad)
    assert vertex_client.console_url(full) == (
        f"https://console.cloud.google.com/vertex-ai/locations/{REGION}/pipelines/schedules/123"
        f"?project={PROJECT}"
    )
    run = f"projects/{PROJECT}/locations/{REGION}/pipelineJobs/tiny-hpt-1"
    assert vertex_client.console_url(run).endswith(f"/pipelines/runs/tiny-hpt-1?project={PROJECT}")


def test_list_and_get_schedules_pass_project_region_and_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google.cloud import aiplatform

    received: dict[str, Any] = {}

    def list_(cls: Any, **kwargs: Any) -> list[Any]:
        received["list"] = kwargs
        return []

    def get(cls: Any, schedule_id: str, **kwargs: Any) -> str:
        received["get"] = (schedule_id, kwargs)
        return "found"

    monkeypatch.setattr(aiplatform.PipelineJobSchedule, "list", classmethod(list_))
    monkeypatch.setattr(aiplatform.PipelineJobSchedule, "get", classmethod(get))
    settings = cloud_settings()
    creds = vertex_client.credentials(offline=True)

    assert vertex_client.list_schedules(settings, creds, filter="state=ACTIVE") == []
    assert received["list"] == dict(
        filter="state=ACTIVE",
        order_by="create_time desc",
        project=PROJECT,
        location=REGION,
        credentials=creds,
    )
    assert vertex_client.get_schedule(settings, creds, "77") == "found"
    assert received["get"] == (
        f"projects/{PROJECT}/locations/{REGION}/schedules/77",
        dict(project=PROJECT, location=REGION, credentials=creds),
    )


def test_schedule_row_reads_the_schedule_resource() -> None:
    import datetime
    from types import SimpleNamespace

    from google.cloud import aiplatform_v1

    resource = aiplatform_v1.Schedule(
        name=f"projects/{PROJECT}/locations/{REGION}/schedules/99",
        display_name="hpt weekly",
        state=aiplatform_v1.Schedule.State.PAUSED,
        cron="0 3 * * 1",
        started_run_count=3,
        max_run_count=12,
        next_run_time=datetime.datetime(2030, 1, 6, 3, tzinfo=datetime.UTC),
    )
    row = vertex_client.schedule_row(SimpleNamespace(gca_resource=resource))
    assert row == {
        "id": "99",
        "display_name": "hpt weekly",
        "state": "PAUSED",
        "cron": "0 3 * * 1",
        "runs": "3/12",
        "next_run": "2030-01-06T03:00:00+00:00",
    }
    resource.max_run_count = 0
    assert vertex_client.schedule_row(SimpleNamespace(gca_resource=resource))["runs"] == "3/∞"


def test_cloud_modules_import_neither_tensorflow_nor_aiplatform() -> None:
    code = (
        "import sys, pipelines.app.cloud_commands, pipelines.targets.vertex.client; "
        "heavy = ('tensorflow', 'keras', 'google.cloud.aiplatform'); "
        "found = [m for m in heavy if m in sys.modules]; "
        "print(found); sys.exit(1 if found else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
