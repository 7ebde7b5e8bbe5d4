"""Lineage: the graph of a local run (fixture run folder), Vertex ML Metadata offline, the CLI."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from pipelines.app import report_commands as report_cli
from pipelines.lineage import graph as lineage_graph
from pipelines.lineage import local as local_lineage_lib
from pipelines.lineage import render as lineage_render
from pipelines.study import trials as trials_lib
from pipelines.targets.local.cli.run import SPEC_FILE
from pipelines.targets.vertex import metadata as vertex_metadata
from tests.support import ancestors

SHA = "ab" * 32
RUN = "hpt-pipeline-2026-01-02-03-04-05-000006"
OLDER_RUN = "hpt-pipeline-2025-12-31-23-59-59-000000"
PIPELINE_JOB = "projects/proj/locations/us-central1/pipelineJobs/hpt-pipeline-20260102"
HPT_JOB = "projects/proj/locations/us-central1/hyperparameterTuningJobs/42"
STORE = "projects/proj/locations/us-central1/metadataStores/default"


# --------------------------------------------------------------------------- a local run folder


def _artifacts(**outputs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        name: {"artifacts": [{"name": name, "uri": uri, "metadata": metadata}]}
        for name, (uri, metadata) in outputs.items()
    }


def _task(
    run: Path, task: str, params: dict[str, Any] | None = None, **outputs: dict[str, Any]
) -> None:
    folder = run / task
    folder.mkdir(parents=True)
    artifacts = _artifacts(**{k: (str(folder / k), v) for k, v in outputs.items()})
    payload = {"parameterValues": params or {}, "artifacts": artifacts}
    (folder / "executor_output.json").write_text(json.dumps(payload))


def _artifact_in(producer: str, key: str) -> dict[str, Any]:
    return {"taskOutputArtifact": {"producerTask": producer, "outputArtifactKey": key}}


def _parameter_in(producer: str, key: str) -> dict[str, Any]:
    return {"taskOutputParameter": {"producerTask": producer, "outputParameterKey": key}}


def _component(**outputs: str) -> dict[str, Any]:
    types = {
        k: {"artifactType": {"schemaTitle": v, "schemaVersion": "0.0.1"}}
        for k, v in outputs.items()
    }
    return {"outputDefinitions": {"artifacts": types}, "executorLabel": "exec"}


def _spec() -> dict[str, Any]:
    """The shape kfp compiles the local pipeline to (registration inside a `dsl.If`)."""

    def task(name: str, display: str, artifacts=None, parameters=None) -> dict[str, Any]:
        return {
            "componentRef": {"name": f"comp-{name}"},
            "taskInfo": {"name": display},
            "inputs": {"artifacts": artifacts or {}, "parameters": parameters or {}},
        }

    data = _artifact_in("prepare-dataset", "dataset")
    condition = {
        "componentRef": {"name": "comp-condition-1"},
        "taskInfo": {"name": "model-passes-threshold"},
        "inputs": {
            "artifacts": {
                "pipelinechannel--prepare-dataset-dataset": data,
                "pipelinechannel--train-locally-model": _artifact_in("train-locally", "model"),
                "pipelinechannel--tune-locally-trials": _artifact_in("tune-locally", "trials"),
                "pipelinechannel--evaluate-model-metrics": _artifact_in(
                    "evaluate-model", "metrics"
                ),
            },
            "parameters": {
                "pipelinechannel--select-best-trial-best_trial_id": _parameter_in(
                    "select-best-trial", "best_trial_id"
                ),
                "pipelinechannel--registry_dir": {"componentInputParameter": "registry_dir"},
            },
        },
    }
    register = task(
        "register-locally",
        "Register model (local registry)",
        {
            "dataset": {"componentInputArtifact": "pipelinechannel--prepare-dataset-dataset"},
            "model": {"componentInputArtifact": "pipelinechannel--train-locally-model"},
            "trials": {"componentInputArtifact": "pipelinechannel--tune-locally-trials"},
            "evaluation": {"componentInputArtifact": "pipelinechannel--evaluate-model-metrics"},
        },
        {
            "best_trial_id": {
                "componentInputParameter": "pipelinechannel--select-best-trial-best_trial_id"
            },
            "registry_dir": {"componentInputParameter": "pipelinechannel--registry_dir"},
        },
    )
    specs = _parameter_in("trial-job-spec", "worker_pool_specs")
    final_specs = _parameter_in("final-job-spec", "worker_pool_specs")
    return {
        "components": {
            "comp-prepare-dataset": _component(dataset="system.Dataset"),
            "comp-trial-job-spec": _component(study="system.Artifact"),
            "comp-tune-locally": _component(trials="system.Artifact"),
            "comp-select-best-trial": _component(summary="system.Metrics"),
            "comp-final-job-spec": _component(job_dir="system.Artifact"),
            "comp-train-locally": _component(model="system.Model"),
            "comp-evaluate-model": _component(metrics="system.Metrics"),
            "comp-register-locally": _component(registered="system.Artifact"),
            "comp-condition-1": {"dag": {"tasks": {"register-locally": register}}},
        },
        "root": {
            "dag": {
                "tasks": {
                    "prepare-dataset": task("prepare-dataset", "Prepare dataset"),
                    "trial-job-spec": task(
                        "trial-job-spec", "Build trial job spec", {"dataset": data}
                    ),
                    "tune-locally": task(
                        "tune-locally",
                        "Tune (local study)",
                        {"dataset": data},
                        {"worker_pool_specs": specs},
                    ),
                    "select-best-trial": task(
                        "select-best-trial",
                        "Select best trial",
                        {"trials": _artifact_in("tune-locally", "trials")},
                    ),
                    "final-job-spec": task(
                        "final-job-spec",
                        "Build final job spec",
                        {"dataset": data},
                        {"best_parameters": _parameter_in("select-best-trial", "best_parameters")},
                    ),
                    "train-locally": task(
                        "train-locally",
                        "Train final model",
                        parameters={"worker_pool_specs": final_specs},
                    ),
                    "evaluate-model": task(
                        "evaluate-model",
                        "Evaluate",
                        {"dataset": data, "model": _artifact_in("train-locally", "model")},
                    ),
                    "condition-1": condition,
                }
            }
        },
    }


def _trials() -> list[dict[str, Any]]:
    def trial(trial_id: str, val_accuracy: float | None, lr: float) -> dict[str, Any]:
        final = (
            trials_lib.measurement(2, {"val_accuracy": val_accuracy})
            if val_accuracy is not None
            else None
        )
        return trials_lib.make_trial(
            trial_id,
            {"learning_rate": lr, "num_units": 64},
            state=trials_lib.TrialState.SUCCEEDED if final else trials_lib.TrialState.INFEASIBLE,
            final_measurement=final,
            infeasible_reason="" if final else "exit code 1",
        )

    return [trial("1", 0.5, 0.1), trial("2", 0.9, 0.01), trial("3", None, 0.5)]


def write_run(output: Path, *, registered: bool = True) -> Path:
    """A `hpt-pipeline run --output` folder holding an older run and a full one; the full one."""
    _task(output / "artifacts" / OLDER_RUN, "prepare-dataset", dataset={"source": "old"})
    run = output / "artifacts" / RUN
    study = output / "study"
    _task(run, "prepare-dataset", dataset={"source": "sample", "metadata_sha256": SHA})
    _task(
        run,
        "trial-job-spec",
        {"worker_pool_specs": [], "base_output_directory": str(study)},
        study={},
    )
    _task(run, "tune-locally", trials={"source": "local", "study": str(study), "trial_count": 3})
    trials_lib.write_trials(str(run / "tune-locally" / "trials"), _trials())
    best = {"best_trial_id": "2", "best_parameters": {"learning_rate": 0.01}, "best_metric": 0.9}
    _task(run, "select-best-trial", best, summary={"best_val_accuracy": 0.9})
    _task(run, "final-job-spec", {"worker_pool_specs": []}, job_dir={"replicas": 2})
    _task(run, "train-locally", model={"dataset_metadata_sha256": SHA, "strategy": "MWMS"})
    _task(run, "evaluate-model", {"Output": registered}, metrics={"test_accuracy": 0.88})
    if registered:
        _task(
            run,
            "register-locally",
            registered={"name": "hpt-cnn", "version": 3, "best_trial_id": "2"},
        )
    (run / SPEC_FILE).write_text(yaml.safe_dump(_spec()))
    return run


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "out")


def _node(graph: lineage_graph.LineageGraph, node_id: str) -> lineage_graph.Node:
    assert node_id in graph.nodes, sorted(graph.nodes)
    return graph.nodes[node_id]


# --------------------------------------------------------------------------- local lineage


def test_registered_model_leads_back_to_the_dataset_checksum_and_the_best_trial(run_dir):
    graph = local_lineage_lib.local_lineage(
        run_dir.parent.parent
    )  # the --output folder: its newest run
    assert graph.title == f"local run {RUN}"
    registered = _node(graph, "artifact:register-locally/registered")
    upstream = ancestors(graph, registered.id)

    datasets = [graph.nodes[n] for n in upstream if graph.nodes[n].type == "system.Dataset"]
    assert [d.details["metadata_sha256"] for d in datasets] == [SHA]
    assert datasets[0].details["source"] == "sample"

    trials_upstream = sorted(n for n in upstream if graph.nodes[n].kind == "trial")
    assert trials_upstream == ["trial:2"]  # the best trial only, through the selection
    best = graph.trial("2")
    assert best is not None and best.details["best"] is True
    assert best.details["metrics"] == {"val_accuracy": 0.9}
    assert "task:select-best-trial" in graph.children(best.id)
    assert "best" not in graph.trial("1").details

    # The path the issue names: dataset → trials → best trial → job → model → evaluation → version.
    for node_id in (
        "artifact:tune-locally/trials",
        "task:select-best-trial",
        "task:final-job-spec",
        "task:train-locally",
        "artifact:train-locally/model",
        "artifact:evaluate-model/metrics",
    ):
        assert node_id in upstream
    # The job spec reaches the training task as parameters (worker pools), not as an artifact.
    into_training = {e.source: e.label for e in graph.edges if e.target == "task:train-locally"}
    assert into_training == {"task:final-job-spec": "worker_pool_specs"}


def test_inputs_inside_the_condition_resolve_to_their_producers(run_dir):
    graph = local_lineage_lib.local_lineage(run_dir)
    into_register = {e.source: e.label for e in graph.edges if e.target == "task:register-locally"}
    assert into_register == {
        "artifact:prepare-dataset/dataset": "dataset",
        "artifact:train-locally/model": "model",
        "artifact:tune-locally/trials": "trials",
        "artifact:evaluate-model/metrics": "evaluation",
        "task:select-best-trial": "best_trial_id",
    }
    assert _node(graph, "task:register-locally").name == "Register model (local registry)"
    assert _node(graph, "artifact:train-locally/model").type == "system.Model"


def test_every_trial_is_a_node_with_its_state(run_dir):
    graph = local_lineage_lib.local_lineage(run_dir)
    trials = {n.details["trial_id"]: n for n in graph.nodes.values() if n.kind == "trial"}
    assert sorted(trials) == ["1", "2", "3"]
    assert trials["3"].details["state"] == "INFEASIBLE"
    assert trials["3"].details["infeasible_reason"] == "exit code 1"
    assert trials["3"].details["metrics"] == {}
    for node in trials.values():
        assert graph.parents(node.id)[0] == "artifact:tune-locally/trials"
        assert node.uri == f"{run_dir.parent.parent}/study/{node.details['trial_id']}/model/"


def test_a_closed_gate_leaves_no_registration(tmp_path):
    run = write_run(tmp_path / "out", registered=False)
    graph = local_lineage_lib.local_lineage(run)
    assert not [n for n in graph.nodes if "register" in n]
    assert all(e.target in graph.nodes and e.source in graph.nodes for e in graph.edges)


def test_newest_run_and_missing_spec(run_dir):
    output = run_dir.parent.parent
    assert local_lineage_lib.resolve_run_dir(output) == run_dir
    assert local_lineage_lib.resolve_run_dir(output / "artifacts" / OLDER_RUN).name == OLDER_RUN
    with pytest.raises(lineage_graph.LineageError, match="no pipeline.yaml"):
        local_lineage_lib.local_lineage(output / "artifacts" / OLDER_RUN)
    with pytest.raises(lineage_graph.LineageError, match="not a local run"):
        local_lineage_lib.resolve_run_dir(output / "study")


def test_spec_tasks_of_the_compiled_local_pipeline(tmp_path):
    from pipelines.compiler import compile_pipeline
    from pipelines.settings import LOCAL_RUN_DEFAULTS, load_settings

    settings = load_settings(config=None, overrides={}, defaults=LOCAL_RUN_DEFAULTS)
    path = compile_pipeline("local", settings, tmp_path / "pipeline.yaml")
    tasks = local_lineage_lib.spec_tasks(yaml.safe_load(Path(path).read_text()))
    register = tasks["register-locally"].inputs
    assert register["dataset"] == ("prepare-dataset", "dataset", True)
    assert register["model"] == ("train-locally", "model", True)
    assert register["best_trial_id"] == ("select-best-trial", "best_trial_id", False)
    assert tasks["select-best-trial"].inputs["trials"] == ("tune-locally", "trials", True)
    assert tasks["prepare-dataset"].output_types == {"dataset": "system.Dataset"}


# --------------------------------------------------------------------------- rendering

SVG_NS = "http://www.w3.org/2000/svg"


def test_mermaid_html_and_tree_show_the_same_graph(run_dir):
    graph = local_lineage_lib.local_lineage(run_dir)
    text = lineage_render.mermaid(graph)
    assert text.startswith("flowchart TD\n")
    assert len(re.findall(r"^  n\d+ -->", text, re.M)) == len(graph.edges)
    assert len(re.findall(r'^  n\d+[\[({]+"', text, re.M)) == len(graph.nodes)
    assert "★ best" in text and SHA[:12] in text

    page = lineage_render.html_page(graph)
    # drawn with no network: an inline SVG with a box per node and a path per edge, no script
    assert "<script" not in page and "http://" not in page.replace(SVG_NS, "")
    assert "https://" not in page
    drawing = page.split('<div id="graph">', 1)[1].split("</div>", 1)[0]
    assert drawing.startswith("<svg ") and drawing.endswith("</svg>")
    assert drawing.count("<rect ") == len(graph.nodes)
    assert drawing.count("marker-end=") == len(graph.edges)
    assert drawing.count('stroke="#c62828"') == 1  # the best trial
    for node in graph.nodes.values():
        assert f"<title>{html.escape(node.name)}" in drawing
    assert page.index("</svg>") < page.index("<h2>Lineage (from the inputs down)</h2>")
    folded = page.split("<details>", 1)[1].split("</details>", 1)[0]  # Mermaid, for docs
    assert '<pre class="mermaid">' in folded and "flowchart TD" in folded
    fallback = page.split("<h2>Lineage (from the inputs down)</h2>", 1)[1]
    for node in graph.nodes.values():
        assert node.name.replace("(", "").split()[0] in fallback
    assert SHA[:12] in fallback

    items = lineage_render.spanning_tree(graph)
    seen: list[str] = []

    def walk(item: lineage_render.TreeItem) -> None:
        seen.append(item.node.id)
        for child in item.children:
            walk(child)

    for item in items:
        walk(item)
    assert sorted(seen) == sorted(graph.nodes)  # every node exactly once
    assert [i.node.id for i in items] == ["task:prepare-dataset"]


# --------------------------------------------------------------------------- the CLI


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("trials")(report_cli.trials)
    app.command("lineage")(report_cli.lineage)
    return app


def test_cli_tree_mermaid_and_html(run_dir):
    runner = CliRunner()
    output = str(run_dir.parent.parent)
    tree = runner.invoke(_app(), ["lineage", output], env={"COLUMNS": "200"})
    assert tree.exit_code == 0, tree.output
    assert "★ best" in tree.stdout and tree.stdout.count("◆ trial") == 3

    mermaid = runner.invoke(_app(), ["lineage", output, "--format", "mermaid"])
    assert mermaid.exit_code == 0 and mermaid.stdout.startswith("flowchart TD")

    page = runner.invoke(_app(), ["lineage", output, "--format", "html"])
    assert page.exit_code == 0, page.output
    assert (run_dir / "lineage.html").read_text().startswith("<!doctype html>")


@pytest.mark.parametrize(
    "args",
    [
        ["lineage", "no/such/run"],
        ["lineage", "projects/p/locations/l/hyperparameterTuningJobs/1"],
        ["lineage", ".", "--format", "png"],
    ],
)
def test_cli_bad_run_is_a_one_line_error(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("hpt-pipeline: error:")
    assert result.stdout == ""


# --------------------------------------------------------------------------- Vertex, offline


class Calls:
    """Stand-ins for the gapic methods that would reach Vertex; each request is kept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.monkeypatch = monkeypatch
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def stub(self, client: type, method: str, reply: Any) -> None:
        def call(_self: Any, request: Any = None, **fields: Any) -> Any:
            fields.pop("retry", None)
            fields.pop("metadata", None)
            self.requests.append((method, fields))
            return reply(**fields) if callable(reply) else reply

        self.monkeypatch.setattr(client, method, call)

    def of(self, method: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.requests if name == method]


@pytest.fixture
def anonymous():
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


def _pipeline_job_stub(calls: Calls) -> str:
    from google.cloud.aiplatform_v1.services.pipeline_service import PipelineServiceClient
    from google.cloud.aiplatform_v1.types import Context, PipelineJob, PipelineJobDetail

    context = f"{STORE}/contexts/hpt-pipeline-20260102"
    job = PipelineJob(
        name=PIPELINE_JOB,
        job_detail=PipelineJobDetail(pipeline_run_context=Context(name=context)),
    )
    calls.stub(PipelineServiceClient, "get_pipeline_job", job)
    return context


def _vertex_subgraph() -> Any:
    from google.cloud.aiplatform_v1.types import Artifact, Event, Execution, LineageSubgraph

    def artifact(rid: str, schema: str, **metadata: Any) -> Artifact:
        return Artifact(
            name=f"{STORE}/artifacts/{rid}",
            display_name=rid,
            schema_title=schema,
            metadata=metadata,
        )

    def execution(rid: str, **metadata: Any) -> Execution:
        return Execution(
            name=f"{STORE}/executions/{rid}",
            display_name=rid,
            schema_title="system.ContainerExecution",
            metadata=metadata,
        )

    def event(a: str, e: str, kind: str) -> Event:
        return Event(
            artifact=f"{STORE}/artifacts/{a}", execution=f"{STORE}/executions/{e}", type_=kind
        )

    trial = lineage_graph.trial_record(_trials()[1])
    trial["trial_id"] = "7"
    other = lineage_graph.trial_record(_trials()[0])
    return LineageSubgraph(
        artifacts=[
            artifact("dataset", "system.Dataset", metadata_sha256=SHA, source="sample"),
            artifact("trials", "system.Artifact", trial_count=2),
            artifact("trial-7", "system.Artifact", **trial),
            artifact("trial-1", "system.Artifact", **other),
            artifact("model", "system.Model"),
            artifact("uploaded", "google.VertexModel", resourceName="projects/proj/models/9"),
        ],
        executions=[
            execution("prepare-dataset"),
            execution("fetch-trials"),
            execution("trials-of-hpt-job-42"),
            execution("select-best-trial", **{"output:best_trial_id": "7"}),
            execution("train"),
            execution("model-upload"),
        ],
        events=[
            event("dataset", "prepare-dataset", "OUTPUT"),
            event("dataset", "fetch-trials", "INPUT"),
            event("trials", "fetch-trials", "OUTPUT"),
            event("trials", "trials-of-hpt-job-42", "INPUT"),
            event("trial-7", "trials-of-hpt-job-42", "OUTPUT"),
            event("trial-1", "trials-of-hpt-job-42", "OUTPUT"),
            event("trials", "select-best-trial", "INPUT"),
            event("dataset", "train", "INPUT"),
            event("model", "train", "OUTPUT"),
            event("model", "model-upload", "INPUT"),
            event("uploaded", "model-upload", "OUTPUT"),
        ],
    )


def test_vertex_lineage_queries_the_run_context(monkeypatch, anonymous):
    from google.cloud.aiplatform_v1.services.metadata_service import MetadataServiceClient

    calls = Calls(monkeypatch)
    context = _pipeline_job_stub(calls)
    calls.stub(MetadataServiceClient, "query_context_lineage_subgraph", _vertex_subgraph())

    graph = vertex_metadata.vertex_lineage(PIPELINE_JOB, anonymous)

    assert calls.of("get_pipeline_job") == [{"name": PIPELINE_JOB}]
    assert calls.of("query_context_lineage_subgraph") == [{"context": context}]
    uploaded = _node(graph, f"{STORE}/artifacts/uploaded")
    assert uploaded.type == "google.VertexModel"
    upstream = ancestors(graph, uploaded.id)
    assert graph.nodes[f"{STORE}/artifacts/dataset"].details["metadata_sha256"] == SHA
    assert f"{STORE}/artifacts/dataset" in upstream
    assert graph.trial("7").kind == "trial" and graph.trial("7").details["best"] is True
    assert f"{STORE}/executions/select-best-trial" in graph.children(graph.trial("7").id)
    assert "best" not in graph.trial("1").details


def test_vertex_lineage_cli_with_a_job_id(monkeypatch, anonymous):
    from google.cloud.aiplatform_v1.services.metadata_service import MetadataServiceClient

    from pipelines.targets.vertex import client as vertex_client

    calls = Calls(monkeypatch)
    _pipeline_job_stub(calls)
    calls.stub(MetadataServiceClient, "query_context_lineage_subgraph", _vertex_subgraph())
    monkeypatch.setattr(vertex_client, "credentials", lambda offline: anonymous)
    args = ["lineage", "hpt-pipeline-20260102", "--project", "proj", "--region", "us-central1"]
    result = CliRunner().invoke(_app(), args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert calls.of("get_pipeline_job") == [{"name": PIPELINE_JOB}]
    assert "trial-7" in result.stdout and "★ best" in result.stdout


def _metadata_stubs(calls: Calls, existing: set[str] = frozenset()) -> None:
    from google.api_core.exceptions import AlreadyExists
    from google.cloud.aiplatform_v1.services.metadata_service import MetadataServiceClient
    from google.cloud.aiplatform_v1.types import (
        AddContextArtifactsAndExecutionsResponse,
        AddExecutionEventsResponse,
        Artifact,
        Execution,
        MetadataStore,
    )

    def create_artifact(parent: str, artifact: Artifact, artifact_id: str) -> Artifact:
        if artifact_id in existing:
            raise AlreadyExists(f"{artifact_id} exists")
        made = Artifact(artifact)
        made.name = f"{parent}/artifacts/{artifact_id}"
        return made

    def create_execution(parent: str, execution: Execution, execution_id: str) -> Execution:
        made = Execution(execution)
        made.name = f"{parent}/executions/{execution_id}"
        return made

    calls.stub(MetadataServiceClient, "get_metadata_store", lambda name: MetadataStore(name=name))
    calls.stub(MetadataServiceClient, "create_artifact", create_artifact)
    calls.stub(MetadataServiceClient, "get_artifact", lambda name: Artifact(name=name))
    calls.stub(MetadataServiceClient, "create_execution", create_execution)
    calls.stub(MetadataServiceClient, "add_execution_events", AddExecutionEventsResponse())
    calls.stub(
        MetadataServiceClient,
        "add_context_artifacts_and_executions",
        AddContextArtifactsAndExecutionsResponse(),
    )


def test_record_trials_creates_one_artifact_per_trial(monkeypatch, anonymous):
    calls = Calls(monkeypatch)
    _metadata_stubs(calls)
    context = _pipeline_job_stub(calls)
    trials_artifact = f"{STORE}/artifacts/1234"

    names = vertex_metadata.record_trials(
        _trials(),
        job_name=HPT_JOB,
        base_output_directory="gs://bucket/study",
        trials_artifact=trials_artifact,
        pipeline_job=PIPELINE_JOB,
        credentials=anonymous,
    )

    ids = ["hpt-42-trial-1", "hpt-42-trial-2", "hpt-42-trial-3"]
    assert names == [f"{STORE}/artifacts/{i}" for i in ids]
    created = calls.of("create_artifact")
    assert [c["artifact_id"] for c in created] == ids
    assert {c["parent"] for c in created} == {STORE}
    first = type(created[0]["artifact"]).to_dict(created[0]["artifact"])
    assert first["display_name"] == "trial-1"
    assert first["schema_title"] == "system.Artifact"
    assert first["uri"] == "gs://bucket/study/1/model/"
    assert first["metadata"]["state"] == "SUCCEEDED"
    assert first["metadata"]["parameters"] == {"learning_rate": 0.1, "num_units": 64}
    assert first["metadata"]["metrics"] == {"val_accuracy": 0.5}
    assert first["metadata"]["hyperparameter_tuning_job"] == HPT_JOB
    failed = type(created[2]["artifact"]).to_dict(created[2]["artifact"])
    assert failed["metadata"]["state"] == "INFEASIBLE"

    [execution] = calls.of("create_execution")
    assert execution["execution_id"] == "hpt-42-trials"
    assert execution["execution"].schema_title == "system.ContainerExecution"
    assert execution["execution"].state.name == "COMPLETE"
    events = [
        (e.type_.name, e.artifact)
        for call in calls.of("add_execution_events")
        for e in call["events"]
    ]
    assert events == [("INPUT", trials_artifact)] + [("OUTPUT", n) for n in names]
    [added] = calls.of("add_context_artifacts_and_executions")
    assert added == {
        "context": context,
        "artifacts": names,
        "executions": [f"{STORE}/executions/hpt-42-trials"],
    }


def test_record_trials_retry_reuses_existing_artifacts(monkeypatch, anonymous):
    calls = Calls(monkeypatch)
    _metadata_stubs(calls, existing={"hpt-42-trial-2"})
    names = vertex_metadata.record_trials(
        _trials()[:2], job_name=HPT_JOB, trials_artifact="trials", credentials=anonymous
    )
    assert names == [f"{STORE}/artifacts/hpt-42-trial-1", f"{STORE}/artifacts/hpt-42-trial-2"]
    assert calls.of("get_artifact") == [{"name": f"{STORE}/artifacts/hpt-42-trial-2"}]
    events = [e.type_.name for call in calls.of("add_execution_events") for e in call["events"]]
    assert events == ["OUTPUT", "OUTPUT"]  # a local artifact name is no ML Metadata input
    assert not calls.of("add_context_artifacts_and_executions")


def test_record_trials_refuses_a_bad_job_name():
    with pytest.raises(lineage_graph.LineageError, match="hyperparameterTuningJobs"):
        vertex_metadata.record_trials([], job_name="projects/p/locations/l/customJobs/1")


def _measured_run(tmp_path: Path) -> Path:
    """A run whose trials report every metric the trainer does, the objective last."""
    run = write_run(tmp_path / "out")
    metrics = {"model_size_mb": 0.3678, "latency_ms": 0.9992, "val_loss": 0.1254}
    trials = _trials()
    for trial, accuracy in zip(trials[:2], (0.5, 0.9), strict=True):
        trial["finalMeasurement"] = trials_lib.measurement(2, {**metrics, "val_accuracy": accuracy})
    trials_lib.write_trials(str(run / "tune-locally" / "trials"), trials)
    objective = [{"metric_id": "val_accuracy", "goal": 1.0}]
    _task(run, "study-metric", {"study_spec_metrics": objective, "goal": "maximize"})
    return run


def test_a_trials_box_on_the_lineage_page_shows_its_objective_first(tmp_path):
    """Issue 51, case 20: the box held `SUCCEEDED model_size_mb=… latency_ms=…` and cut
    `val_accuracy` off; the objective leads now, on the box's first line of facts."""
    graph = local_lineage_lib.local_lineage(_measured_run(tmp_path))
    drawing = lineage_render.html_page(graph).split('<div id="graph">', 1)[1]
    best = drawing.split("<title>trial 2\n", 1)[1].split("</g>", 1)[0]
    lines = re.findall(r"<text [^>]*>([^<]*)</text>", best)
    assert lines[0] == "trial 2" and lines[1].split()[0] == "val_accuracy=0.9"


def _tree_words(graph: lineage_graph.LineageGraph, width: int) -> list[str]:
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=width, no_color=True).print(lineage_render.rich_tree(graph))
    return [w for w in out.getvalue().split() if w.strip("│├└─")]


def test_the_80_column_tree_never_folds_a_word_onto_the_next_line(tmp_path):
    """Issue 51, case 20: `lineage RUN` in an 80-column terminal folded `learning_rate=0.0292`
    / `6` and `MultiWorkerMirrored` / `Strategy`; a word too wide is cut with `…` instead."""
    graph = local_lineage_lib.local_lineage(_measured_run(tmp_path))
    graph.nodes["artifact:train-locally/model"].details["strategy"] = "MultiWorkerMirroredStrategy"
    whole = set(_tree_words(graph, 1000))  # every word, on one line each
    assert "strategy=MultiWorkerMirroredStrategy" in whole
    narrow = _tree_words(graph, 64)  # a real run's tree is 4 levels deeper: 80 columns there
    folded = [
        w for w in narrow if w not in whole and not (w.endswith("…") and any(
            x.startswith(w[:-1]) for x in whole))
    ]  # fmt: skip
    assert not folded
