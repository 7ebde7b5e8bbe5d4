"""Behaviour tests that kill mutmut's mutants of pipelines/targets/vertex/client.py."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.settings import SettingsError
from pipelines.targets.vertex import client as vertex_client
from tests.test_vertex_client import (
    KMS_KEY,
    LABELS,
    NETWORK,
    PROJECT,
    REGION,
    SERVICE_ACCOUNT,
    cloud_settings,
    offline_job,
)

# mutmut forks each mutant's run from a process that imported the test files: what the code
# under test imports lazily is imported here, or a child importing it on a loaded machine
# outlasts its time limit (a false timeout, not a kill).
PRELOADED = [
    importlib.import_module("google.auth"),
    importlib.import_module("google.cloud.aiplatform"),
    importlib.import_module("google.cloud.aiplatform_v1"),
    importlib.import_module("google.protobuf.json_format"),
]


@pytest.fixture(scope="module")
def every_setting_template(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny pipeline, also declaring the cloud parameters it leaves out."""
    spec = yaml.safe_load(template.read_text())
    declared = spec["root"]["inputDefinitions"]["parameters"]
    for name in ("project", "network", "encryption_spec_key_name"):
        declared[name] = {"defaultValue": "", "isOptional": True, "parameterType": "STRING"}
    path = tmp_path_factory.mktemp("every") / "every.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_every_cloud_setting_a_pipeline_declares_is_repeated_in_its_parameters(
    every_setting_template: Path,
) -> None:
    request = vertex_client.job_request(offline_job(every_setting_template))
    assert request["pipelineJob"]["runtimeConfig"]["parameterValues"] == {
        "project": PROJECT,
        "location": REGION,
        "service_account": SERVICE_ACCOUNT,
        "network": NETWORK,
        "encryption_spec_key_name": KMS_KEY,
        "labels": LABELS,
    }


def test_a_schedule_of_one_run_that_queues_and_has_no_window_is_sent_as_such(
    template: Path,
) -> None:
    settings = cloud_settings()
    job = offline_job(template, settings)
    spec = vertex_client.schedule_spec(
        "0 3 * * 1", "once", max_run_count=1, max_concurrent_run_count=1, allow_queueing=True
    )
    schedule = vertex_client.schedule_request(vertex_client.build_schedule(job, spec, settings))
    body = schedule["schedule"]
    assert body["maxRunCount"] == "1" and body["maxConcurrentRunCount"] == "1"
    assert body["allowQueueing"] is True
    assert "startTime" not in body and "endTime" not in body
    unbounded = vertex_client.schedule_request(
        vertex_client.build_schedule(job, vertex_client.schedule_spec("0 3 * * 1", "u"), settings)
    )["schedule"]
    assert "maxRunCount" not in unbounded and unbounded["maxConcurrentRunCount"] == "1"
    assert "allowQueueing" not in unbounded


def test_what_create_schedule_sends_is_the_dry_runs_schedule(
    template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.cloud import aiplatform_v1
    from google.protobuf import json_format

    sent: list[Any] = []

    def create_schedule(self: Any, *, parent: str, schedule: Any, timeout: Any = None) -> Any:
        sent.append(schedule)
        return aiplatform_v1.Schedule(schedule, name=f"{parent}/schedules/1")

    monkeypatch.setattr(aiplatform_v1.ScheduleServiceClient, "create_schedule", create_schedule)
    settings = cloud_settings()
    spec = vertex_client.schedule_spec("0 3 * * 1", "queued", allow_queueing=True)
    dry = vertex_client.schedule_request(
        vertex_client.build_schedule(offline_job(template, settings), spec, settings)
    )
    vertex_client.create_schedule(offline_job(template, settings), spec, settings)
    (schedule,) = sent
    assert json_format.MessageToDict(type(schedule).pb(schedule)) == dry["schedule"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "projects/p/locations/l/pipelineJobs/1",
            "schedule 'projects/p/locations/l/pipelineJobs/1': "
            "expected projects/P/locations/L/schedules/ID or an id",
        ),
        (
            "projects/p/schedules/1",
            "schedule 'projects/p/schedules/1': expected projects/P/locations/L/schedules/ID "
            "or an id",
        ),
        ("12a", "schedule '12a': expected a numeric id or a resource name"),
        ("weekly", "schedule 'weekly': expected a numeric id or a resource name"),
    ],
)
def test_a_schedule_that_is_neither_a_name_nor_an_id_is_refused_whole(
    name: str, message: str
) -> None:
    with pytest.raises(SettingsError) as err:
        vertex_client.schedule_name(cloud_settings(), name)
    assert str(err.value) == message


def test_a_schedule_never_run_shows_no_next_run_and_another_resource_gets_a_search_url() -> None:
    from types import SimpleNamespace

    from google.cloud import aiplatform_v1

    resource = aiplatform_v1.Schedule(name="projects/p/locations/l/schedules/5", cron="0 3 * * 1")
    row = vertex_client.schedule_row(SimpleNamespace(gca_resource=resource))
    assert (row["id"], row["runs"], row["next_run"]) == ("5", "0/∞", "")
    other = "projects/p/locations/l/customJobs/9"
    assert vertex_client.console_url(other) == (
        f"https://console.cloud.google.com/vertex-ai/pipelines?resource={other}"
    )


def test_a_refusal_from_aiplatform_is_one_line(template: Path) -> None:
    with pytest.raises(SettingsError) as err:
        offline_job(template, cloud_settings(), epoch=3)  # no such parameter in the template
    assert "\n" not in str(err.value) and str(err.value)


def test_submit_returns_at_once_unless_asked_to_wait(
    template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.cloud import aiplatform

    done: list[str] = []

    def submit(self: Any, **kwargs: Any) -> None:
        done.append("submitted")
        self._gca_resource.name = f"projects/{PROJECT}/locations/{REGION}/pipelineJobs/r"

    monkeypatch.setattr(aiplatform.PipelineJob, "submit", submit)
    monkeypatch.setattr(aiplatform.PipelineJob, "wait", lambda self: done.append("waited"))
    settings = cloud_settings()
    vertex_client.submit_job(offline_job(template, settings), settings)
    assert done == ["submitted"]
