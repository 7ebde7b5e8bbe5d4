"""Behaviour tests that kill mutmut's mutants of pipelines/targets/vertex/hpt_job.py.

What Vertex gets: the request GCPC's launcher builds (the real `aiplatform_v1` type), the
payload parsed strictly, and what the launcher is asked to do for a new or a retried task.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from google.cloud.aiplatform_v1.types import HyperparameterTuningJob
from google.protobuf import json_format

from pipelines.payloads import refuse_camel_case
from pipelines.targets.vertex import hpt_job
from tests.test_vertex_hpt_job import payload

# mutmut forks each mutant's run from a process that imported the test files: what the code
# under test imports lazily is imported here, or a child importing it on a loaded machine
# outlasts its time limit (a false timeout, not a kill).
PRELOADED = [
    importlib.import_module("pipelines.targets.vertex.steps.tune"),
    importlib.import_module("google.cloud.aiplatform_v1.types"),
    importlib.import_module(
        "google_cloud_pipeline_components.container.v1.gcp_launcher.job_remote_runner"
    ),
    importlib.import_module(
        "google_cloud_pipeline_components.container.v1.gcp_launcher.utils.gcp_labels_util"
    ),
    importlib.import_module(
        "google_cloud_pipeline_components.container.v1.gcp_launcher.utils.json_util"
    ),
    importlib.import_module(
        "google_cloud_pipeline_components.container.v1.hyperparameter_tuning_job.remote_runner"
    ),
]


KMS = "projects/p/locations/europe-west4/keyRings/r/cryptoKeys/k"
NETWORK = "projects/123/global/networks/vpc"
SA = "trials@p.iam.gserviceaccount.com"


def test_every_study_and_job_setting_reaches_the_request_vertex_gets(monkeypatch):
    monkeypatch.delenv("VERTEX_AI_PIPELINES_RUN_LABELS", raising=False)
    values = payload(
        display_name="nightly study",
        study_spec_measurement_selection_type="LAST_MEASUREMENT",
        max_failed_trial_count=2.0,
        service_account=SA,
        network=NETWORK,
        encryption_spec_key_name=KMS,
        labels={"team": "vision", "run": 3},
    )
    refuse_camel_case(values, "hpt job")
    # the payload itself, parsed strictly (unknown fields refused) into the API's message
    json_format.ParseDict(values, HyperparameterTuningJob.pb(HyperparameterTuningJob()))
    request = hpt_job.launcher_request(values)
    assert request.display_name == "nightly study"
    assert request.study_spec.measurement_selection_type.name == "LAST_MEASUREMENT"
    assert (request.max_trial_count, request.parallel_trial_count) == (12, 3)
    assert request.max_failed_trial_count == 2
    assert request.trial_job_spec.service_account == SA
    assert request.trial_job_spec.network == NETWORK
    assert request.encryption_spec.kms_key_name == KMS
    assert dict(request.labels) == {"team": "vision", "run": "3"}  # label values are strings


def test_doubles_become_integers_only_where_integral_inside_lists_tuples_and_dicts():
    converted = hpt_job.integral_floats_to_int(
        {"counts": (1.0, 2.5), "nested": [{"replica_count": 4.0, "lr": 0.01}], "flag": True}
    )
    assert converted == {
        "counts": [1, 2.5],
        "nested": [{"replica_count": 4, "lr": 0.01}],
        "flag": True,
    }
    assert type(converted["counts"][0]) is int and type(converted["counts"][1]) is float
    assert type(converted["nested"][0]["replica_count"]) is int
    assert type(converted["nested"][0]["lr"]) is float
    # In the request: a fractional bound stays fractional, an integral count is an integer.
    request = hpt_job.launcher_request(payload())
    assert request.study_spec.parameters[0].double_value_spec.min_value == pytest.approx(0.004)


def test_only_the_stopping_spec_is_put_back_after_the_launchers_stripping():
    with_stopping = payload(early_stopping=True)
    assert hpt_job.restore_stopping(with_stopping, {}) == {
        "study_spec": {"median_automated_stopping_spec": {"use_elapsed_duration": False}}
    }
    stripped = {"study_spec": {"algorithm": "RANDOM_SEARCH"}}
    restored = hpt_job.restore_stopping(with_stopping, stripped)
    assert restored is stripped and set(restored["study_spec"]) == {
        "algorithm",
        "median_automated_stopping_spec",
    }  # metrics, parameters, ... are not the launcher's to lose
    assert hpt_job.restore_stopping(payload(), {}) == {}
    assert hpt_job.restore_stopping({}, {"display_name": "x"}) == {"display_name": "x"}


class FakeRunner:
    """GCPC's `JobRemoteRunner` at its boundary: what the launcher was asked to do."""

    existing: str | None = None
    made: list[Any] = []

    def __init__(self, job_type: str, project: str, location: str, gcp_resources: str) -> None:
        self.made.append(("init", job_type, project, location, gcp_resources))

    def check_if_job_exists(self) -> str | None:
        return self.existing

    def create_job(self, create_fn: Any, payload: str) -> str:
        self.made.append(("create", json.loads(payload)))
        return "projects/p/locations/l/hyperparameterTuningJobs/new"

    def poll_job(self, get_fn: Any, name: str) -> None:
        self.made.append(("poll", get_fn.__name__, name))


@pytest.fixture
def runner(monkeypatch):
    from google_cloud_pipeline_components.container.v1.gcp_launcher import job_remote_runner

    monkeypatch.setattr(job_remote_runner, "JobRemoteRunner", FakeRunner)
    monkeypatch.setenv("VERTEX_AI_PIPELINES_RUN_LABELS", json.dumps({"billing": "8127"}))
    FakeRunner.made = []
    FakeRunner.existing = None
    return FakeRunner


def test_a_new_task_creates_the_job_with_the_runs_and_system_labels_then_polls_it(runner):
    values = payload(labels={"team": "vision"}, early_stopping=True)
    hpt_job.run_hpt_job(values, project="p", location="l", gcp_resources="/out/gcp_resources")
    (init, create, poll) = runner.made
    assert init == ("init", "HyperparameterTuningJob", "p", "l", "/out/gcp_resources")
    assert create[1]["labels"] == {"billing": "8127", "team": "vision"}
    assert create[1]["study_spec"]["median_automated_stopping_spec"] == {
        "use_elapsed_duration": False
    }
    assert poll == (
        "poll",
        "get_hyperparameter_tuning_job_with_client",
        "projects/p/locations/l/hyperparameterTuningJobs/new",
    )


def test_a_retried_task_polls_the_job_it_made_and_creates_none(runner):
    runner.existing = "projects/p/locations/l/hyperparameterTuningJobs/7"
    hpt_job.run_hpt_job(payload(), project="p", location="l", gcp_resources="/out/r")
    assert [m[0] for m in runner.made] == ["init", "poll"]
    assert runner.made[-1][-1] == "projects/p/locations/l/hyperparameterTuningJobs/7"


def test_the_create_function_sends_the_stopping_spec_the_launcher_stripped(monkeypatch):
    from google_cloud_pipeline_components.container.v1.hyperparameter_tuning_job import (
        remote_runner,
    )

    sent: list[Any] = []
    monkeypatch.setattr(
        remote_runner,
        "create_hyperparameter_tuning_job_with_client",
        lambda client, parent, spec: sent.append((client, parent, spec)) or "job",
    )
    create = hpt_job.create_job_with_stopping(payload(early_stopping=True))
    assert create("client", "projects/p/locations/l", {"display_name": "s"}) == "job"
    assert sent == [
        (
            "client",
            "projects/p/locations/l",
            {
                "display_name": "s",
                "study_spec": {"median_automated_stopping_spec": {"use_elapsed_duration": False}},
            },
        )
    ]


def test_a_study_without_run_as_network_key_labels_or_stopping_sends_none(monkeypatch):
    from tests.test_vertex_hpt_job import as_vertex_renders

    monkeypatch.delenv("VERTEX_AI_PIPELINES_RUN_LABELS", raising=False)
    full = payload()
    bare = hpt_job.hpt_job_payload(  # only what the tune step must give
        display_name="s",
        study_spec_metrics=full["study_spec"]["metrics"],
        study_spec_parameters=full["study_spec"]["parameters"],
        study_spec_algorithm="RANDOM_SEARCH",
        study_spec_measurement_selection_type="BEST_MEASUREMENT",
        max_trial_count=4,
        parallel_trial_count=1,
        max_failed_trial_count=0,
        worker_pool_specs=as_vertex_renders(full["trial_job_spec"]["worker_pool_specs"]),
        base_output_directory="gs://b/s",
    )
    request = hpt_job.launcher_request(bare)
    pb = HyperparameterTuningJob.pb(request)
    assert not pb.trial_job_spec.service_account and not pb.trial_job_spec.network
    assert not pb.HasField("encryption_spec") and not dict(request.labels)
    assert pb.study_spec.WhichOneof("automated_stopping_spec") is None
