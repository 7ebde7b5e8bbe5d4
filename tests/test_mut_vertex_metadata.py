"""Behaviour tests that kill mutmut's mutants of pipelines/targets/vertex/metadata.py.

Lineage read from Vertex ML Metadata (a `LineageSubgraph` of the real `aiplatform_v1`
types) as the graph `hpt-pipeline lineage` draws, the one-line refusals of run names, and
the ML Metadata requests `record_trials` sends (caught at the gapic methods).
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from pipelines.lineage.graph import LineageError
from pipelines.targets.vertex import metadata as vertex_metadata
from tests.test_lineage import (
    HPT_JOB,
    PIPELINE_JOB,
    STORE,
    Calls,
    _metadata_stubs,
    _pipeline_job_stub,
    _trials,
)

# mutmut forks each mutant's run from a process that imported the test files: what the code
# under test imports lazily is imported here, or a child importing it on a loaded machine
# outlasts its time limit (a false timeout, not a kill).
PRELOADED = [
    importlib.import_module("google.api_core.exceptions"),
    importlib.import_module("google.cloud.aiplatform"),
    importlib.import_module("google.cloud.aiplatform_v1.services.metadata_service"),
    importlib.import_module("google.cloud.aiplatform_v1.services.pipeline_service"),
]


@pytest.fixture
def anonymous():
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


def test_a_run_is_named_by_its_resource_name_or_its_id_with_project_and_region():
    assert vertex_metadata.pipeline_job_name(PIPELINE_JOB) == PIPELINE_JOB
    assert vertex_metadata.pipeline_job_name("run-20260102", "proj", "us-central1") == (
        "projects/proj/locations/us-central1/pipelineJobs/run-20260102"
    )


@pytest.mark.parametrize(
    ("run", "project", "region"),
    [
        ("run-1", "proj", None),
        ("run-1", None, "us-central1"),
        ("Run-1", "proj", "us-central1"),
        ("-run", "proj", "us-central1"),
        ("run_1", "proj", "us-central1"),
        (PIPELINE_JOB + "/x", None, None),
        ("x" + PIPELINE_JOB, None, None),
    ],
)
def test_anything_else_is_refused_in_one_line(run, project, region):
    with pytest.raises(LineageError) as err:
        vertex_metadata.pipeline_job_name(run, project, region)
    assert str(err.value) == (
        f"{run}: not a local run folder nor projects/P/locations/L/pipelineJobs/ID "
        "(or a job id with --project and --region)"
    )


def test_a_run_vertex_has_not_given_a_context_yet_is_said_in_one_line(monkeypatch, anonymous):
    from google.cloud.aiplatform_v1.services.pipeline_service import PipelineServiceClient
    from google.cloud.aiplatform_v1.types import PipelineJob

    calls = Calls(monkeypatch)
    calls.stub(PipelineServiceClient, "get_pipeline_job", PipelineJob(name=PIPELINE_JOB))
    with pytest.raises(LineageError) as err:
        vertex_metadata.run_context(PIPELINE_JOB, anonymous)
    assert str(err.value) == f"{PIPELINE_JOB}: no run context in Vertex ML Metadata yet"
    with pytest.raises(LineageError) as err:
        vertex_metadata.run_context(HPT_JOB, anonymous)
    assert str(err.value) == f"{HPT_JOB}: expected projects/P/locations/L/pipelineJobs/ID"
    assert len(calls.of("get_pipeline_job")) == 1


def test_the_run_context_is_read_where_the_run_is(monkeypatch, anonymous):
    calls = Calls(monkeypatch)
    context = _pipeline_job_stub(calls)
    found = vertex_metadata.run_context(PIPELINE_JOB, anonymous)
    assert found.resource_name == context
    assert (found.project, found.location) == ("proj", "us-central1")


def _subgraph() -> Any:
    from google.cloud.aiplatform_v1.types import Artifact, Event, Execution, LineageSubgraph

    return LineageSubgraph(
        artifacts=[
            Artifact(name=f"{STORE}/artifacts/data", schema_title="system.Dataset",
                     uri="gs://b/data", metadata={"source": "sample"}),
            Artifact(name=f"{STORE}/artifacts/t-3", display_name="trial-3",
                     metadata={"trial_id": "3", "state": "SUCCEEDED"}),
        ],
        executions=[
            Execution(name=f"{STORE}/executions/prep", schema_title="system.ContainerExecution",
                      metadata={"image": "i"}),
            Execution(name=f"{STORE}/executions/pick", display_name="select-best-trial",
                      metadata={"output:best_trial_id": "3"}),
        ],
        events=[  # an event naming a node outside the subgraph first: the others still count
            Event(artifact=f"{STORE}/artifacts/gone", execution=f"{STORE}/executions/pick",
                  type_="INPUT"),
            Event(artifact=f"{STORE}/artifacts/t-3", execution=f"{STORE}/executions/gone",
                  type_="OUTPUT"),
            Event(artifact=f"{STORE}/artifacts/data", execution=f"{STORE}/executions/prep",
                  type_="OUTPUT"),
            Event(artifact=f"{STORE}/artifacts/data", execution=f"{STORE}/executions/pick",
                  type_="INPUT"),
            Event(artifact=f"{STORE}/artifacts/t-3", execution=f"{STORE}/executions/prep",
                  type_="TYPE_UNSPECIFIED"),
        ],
    )  # fmt: skip


def test_the_subgraph_becomes_the_graph_lineage_draws():
    graph = vertex_metadata.graph_from_subgraph(_subgraph(), title="Vertex run r")
    assert graph.title == "Vertex run r"
    data = graph.nodes[f"{STORE}/artifacts/data"]
    assert (data.kind, data.name, data.type, data.uri) == (
        "artifact", "data", "system.Dataset", "gs://b/data"
    )  # fmt: skip
    assert data.details == {"source": "sample"}
    trial = graph.trial("3")
    assert (trial.kind, trial.name, trial.details["best"]) == ("trial", "trial-3", True)
    prep = graph.nodes[f"{STORE}/executions/prep"]
    assert (prep.kind, prep.name, prep.type, prep.details) == (
        "execution", "prep", "system.ContainerExecution", {"image": "i"}
    )  # fmt: skip
    assert graph.nodes[f"{STORE}/executions/pick"].name == "select-best-trial"
    # events naming nodes outside the subgraph, or of no direction, are no edges
    assert [(e.source, e.target, e.label) for e in graph.edges] == [
        (f"{STORE}/executions/prep", f"{STORE}/artifacts/data", "output"),
        (f"{STORE}/artifacts/data", f"{STORE}/executions/pick", "input"),
        (trial.id, f"{STORE}/executions/pick", "best trial"),
    ]


def test_the_run_is_titled_by_its_id(monkeypatch, anonymous):
    from google.cloud.aiplatform_v1.services.metadata_service import MetadataServiceClient

    calls = Calls(monkeypatch)
    _pipeline_job_stub(calls)
    calls.stub(MetadataServiceClient, "query_context_lineage_subgraph", _subgraph())
    graph = vertex_metadata.vertex_lineage(PIPELINE_JOB, anonymous)
    assert graph.title == "Vertex run hpt-pipeline-20260102"


def test_recorded_ids_are_metadata_ids_and_the_execution_says_what_it_recorded(
    monkeypatch, anonymous
):
    calls = Calls(monkeypatch)
    _metadata_stubs(calls)
    job = "projects/proj/locations/us-central1/hyperparameterTuningJobs/Study_" + "9" * 130
    names = vertex_metadata.record_trials(_trials()[:1], job_name=job, credentials=anonymous)
    (created,) = calls.of("create_artifact")
    rid = ("hpt-study-" + "9" * 130)[:128]
    assert created["artifact_id"] == rid and len(rid) == 128
    assert names == [f"{STORE}/artifacts/{rid}"]
    assert created["artifact"].uri == ""  # no base output directory: no model folder
    (execution,) = calls.of("create_execution")
    assert execution["execution_id"] == rid  # the same 128 first characters
    recorded = type(execution["execution"]).to_dict(execution["execution"])
    assert recorded["display_name"] == "trials-of-hpt-job-Study_" + "9" * 130
    assert recorded["metadata"]["hyperparameter_tuning_job"] == job
    assert recorded["metadata"]["trial_count"] == 1


def test_a_job_name_that_is_no_hpt_job_is_refused_whole_before_anything_is_recorded(
    monkeypatch, anonymous
):
    calls = Calls(monkeypatch)
    _metadata_stubs(calls)
    name = "projects/p/locations/l/customJobs/1"
    with pytest.raises(LineageError) as err:
        vertex_metadata.record_trials(_trials(), job_name=name, credentials=anonymous)
    assert str(err.value) == f"{name}: expected projects/P/locations/L/hyperparameterTuningJobs/ID"
    assert not calls.requests
