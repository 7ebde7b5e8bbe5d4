"""Behaviour tests that kill mutmut's mutants of pipelines/targets/vertex/trials.py.

The trials table as read back from Vertex (real `aiplatform_v1` protos behind aiplatform's
client, replaced at the call that would reach the network), and the one-line refusals.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from pipelines.study import trials
from pipelines.targets.vertex import trials as vertex_trials

# mutmut forks each mutant's run from a process that imported the test files: what the code
# under test imports lazily is imported here, or a child importing it on a loaded machine
# outlasts its time limit (a false timeout, not a kill).
PRELOADED = [
    importlib.import_module("google.cloud.aiplatform"),
    importlib.import_module("google.cloud.aiplatform_v1.types"),
]


HPT = "projects/p/locations/europe-west4/hyperparameterTuningJobs/42"
PIPELINE = "projects/p/locations/europe-west4/pipelineJobs/run-1"
URI = "https://europe-west4-aiplatform.googleapis.com/v1/" + HPT


def resources(*items: dict[str, str]) -> str:
    return json.dumps({"resources": list(items)})


def test_the_hpt_job_is_found_among_gcpcs_resources_whatever_comes_before_it():
    custom = {"resourceType": "CustomJob", "resourceUri": "https://x/v1/projects/p/customJobs/1"}
    hpt = {"resourceType": "HyperparameterTuningJob", "resourceUri": URI}
    assert vertex_trials.job_name_from_gcp_resources(resources(custom, hpt)) == HPT


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "gcp_resources is not GCPC's resources JSON: Expecting value"),
        ('{"jobs": []}', "gcp_resources is not GCPC's resources JSON: 'resources'"),
        ("[1]", "gcp_resources is not GCPC's resources JSON: list indices"),
        (
            resources({"resourceType": "HyperparameterTuningJob", "resourceUri": "https://x/v1/"
                       "projects/p/locations/l/customJobs/1"}),
            "resourceUri=https://x/v1/projects/p/locations/l/customJobs/1: "
            "not a hyperparameterTuningJobs resource",
        ),
        (
            resources({"resourceType": "HyperparameterTuningJob", "resourceUri": URI + "/x"}),
            f"resourceUri={URI}/x: not a hyperparameterTuningJobs resource",
        ),
        (resources({"resourceType": "CustomJob", "resourceUri": URI}),
         "gcp_resources names no HyperparameterTuningJob"),
    ],
)  # fmt: skip
def test_gcp_resources_without_an_hpt_job_is_refused_in_one_line(text, message):
    with pytest.raises(ValueError) as err:
        vertex_trials.job_name_from_gcp_resources(text)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def _job(name: str = HPT, goals: tuple[Any, ...] = ()) -> Any:
    from google.cloud.aiplatform.compat.types import hyperparameter_tuning_job as gca_job
    from google.cloud.aiplatform.compat.types import study as gca_study

    metrics = [
        gca_study.StudySpec.MetricSpec(metric_id=metric, goal=goal) for metric, goal in goals
    ]
    return gca_job.HyperparameterTuningJob(
        name=name,
        study_spec=gca_study.StudySpec(metrics=metrics),
        trials=[
            gca_study.Trial(
                id="1",
                state=gca_study.Trial.State.SUCCEEDED,
                parameters=[gca_study.Trial.Parameter(parameter_id="num_units", value=64)],
                final_measurement=gca_study.Measurement(
                    step_count=3,
                    metrics=[gca_study.Measurement.Metric(metric_id="val_loss", value=0.25)],
                ),
                measurements=[
                    gca_study.Measurement(
                        step_count=4,
                        metrics=[gca_study.Measurement.Metric(metric_id="latency_ms", value=2.0)],
                    )
                ],
            )
        ],
    )


@pytest.fixture
def vertex(monkeypatch):
    """aiplatform's HyperparameterTuningJob.get with the service call replaced: the names asked."""
    from google.cloud import aiplatform

    asked: list[dict[str, Any]] = []
    job = {"proto": _job()}

    def get(self, resource_name, **kwargs):
        asked.append({"name": resource_name, "project": self.project, "location": self.location})
        return job["proto"]

    monkeypatch.setattr(aiplatform.HyperparameterTuningJob, "_get_gca_resource", get)
    return asked, job


def test_a_study_is_read_with_its_goals_and_its_trials(vertex, anonymous):
    asked, job = vertex
    job["proto"] = _job(goals=(("val_loss", 2), ("latency_ms", 2), ("val_accuracy", 1)))
    got, objectives = vertex_trials.fetch_study(HPT, credentials=anonymous)
    assert objectives == [("val_loss", "minimize"), ("latency_ms", "minimize"),
                          ("val_accuracy", "maximize")]  # fmt: skip
    assert asked == [{"name": HPT, "project": "p", "location": "europe-west4"}]
    (trial,) = got
    trials.validate_trial(trial)
    assert trials.trial_parameters(trial) == {"num_units": 64}
    # the cost measured once, at another step, joins the final measurement
    assert trials.measurement_metrics(trial["finalMeasurement"]) == {
        "val_loss": 0.25,
        "latency_ms": 2.0,
    }


def test_a_goal_vertex_leaves_unspecified_is_named_not_guessed(vertex, anonymous):
    _, job = vertex
    job["proto"] = _job(goals=(("val_loss", 0),))
    assert vertex_trials.fetch_study(HPT, credentials=anonymous)[1] == [
        ("val_loss", "0")  # GOAL_TYPE_UNSPECIFIED, as Vertex numbers it
    ]


def test_fetched_trials_keep_the_cost_measured_at_another_step(vertex, anonymous):
    asked, _ = vertex
    (trial,) = vertex_trials.fetch_trials(HPT, credentials=anonymous)
    assert asked == [{"name": HPT, "project": "p", "location": "europe-west4"}]
    assert trials.final_metric(trial, "latency_ms") == 2.0


@pytest.mark.parametrize(
    "name",
    [
        "projects/p/locations/l/customJobs/1",
        "projects/p/locations/l/hyperparameterTuningJobs/1/trials/2",
        "hyperparameterTuningJobs/1",
    ],
)
@pytest.mark.parametrize("fetch", [vertex_trials.fetch_trials, vertex_trials.fetch_study])
def test_a_name_that_is_no_hpt_job_is_refused_before_any_call(fetch, name, vertex):
    asked, _ = vertex
    with pytest.raises(ValueError) as err:
        fetch(name)
    assert str(err.value) == f"{name}: expected projects/P/locations/L/hyperparameterTuningJobs/ID"
    assert not asked


def _pipeline_job(*outputs: dict[str, Any]) -> Any:
    from google.cloud.aiplatform_v1.types import (
        Execution,
        PipelineJob,
        PipelineJobDetail,
        PipelineTaskDetail,
    )

    return PipelineJob(
        name=PIPELINE,
        job_detail=PipelineJobDetail(
            task_details=[
                PipelineTaskDetail(task_name=f"t{i}", execution=Execution(metadata=metadata))
                for i, metadata in enumerate(outputs)
            ]
        ),
    )


@pytest.fixture
def pipeline(monkeypatch):
    from google.cloud import aiplatform

    asked: list[dict[str, Any]] = []
    job = {"proto": _pipeline_job()}

    def get(self, resource_name, **kwargs):
        asked.append({"name": resource_name, "project": self.project, "location": self.location})
        return job["proto"]

    monkeypatch.setattr(aiplatform.PipelineJob, "_get_gca_resource", get)
    return asked, job


def test_the_hpt_job_of_a_pipeline_run_is_its_tune_steps(pipeline, anonymous):
    asked, job = pipeline
    custom = resources({"resourceType": "CustomJob", "resourceUri": "https://x/v1/c"})
    job["proto"] = _pipeline_job(
        {"output:model": "gs://m"},
        {"output:gcp_resources": custom},
        {"output:gcp_resources": resources({"resourceType": "HyperparameterTuningJob",
                                            "resourceUri": URI})},
    )  # fmt: skip
    assert vertex_trials.hpt_job_of_pipeline(PIPELINE, credentials=anonymous) == HPT
    assert asked == [{"name": PIPELINE, "project": "p", "location": "europe-west4"}]


def test_a_run_without_an_hpt_job_or_a_bad_name_is_refused_in_one_line(pipeline, anonymous):
    asked, job = pipeline
    job["proto"] = _pipeline_job({"output:gcp_resources": "{}"})
    with pytest.raises(ValueError) as err:
        vertex_trials.hpt_job_of_pipeline(PIPELINE, credentials=anonymous)
    assert str(err.value) == f"{PIPELINE}: no task of this run ran a HyperparameterTuningJob"
    with pytest.raises(ValueError) as err:
        vertex_trials.hpt_job_of_pipeline(HPT)
    assert str(err.value) == f"{HPT}: expected projects/P/locations/L/pipelineJobs/ID"
    assert len(asked) == 1


@pytest.fixture
def anonymous():
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()
