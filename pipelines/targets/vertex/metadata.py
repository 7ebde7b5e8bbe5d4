"""Lineage on Vertex: read a run's graph from Vertex ML Metadata, and record HPT trials there.

Vertex does not record HPT trials in ML Metadata; `record_trials` does, from
the fetch-trials step, so the run's lineage reaches the trial the model came from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.lineage.graph import (
    RECORD_SCHEMA,
    TRIAL_SCHEMA,
    LineageError,
    LineageGraph,
    Node,
    link_best_trials,
    objectives_first,
    trial_record,
    trial_uri,
)

_PIPELINE_JOB = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/pipelineJobs/(?P<id>[^/]+)$"
)
_HPT_JOB = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/"
    r"hyperparameterTuningJobs/(?P<id>[^/]+)$"
)


def _match(pattern: re.Pattern[str], name: str, expected: str) -> re.Match[str]:
    match = pattern.match(name)
    if not match:
        raise LineageError(f"{name}: expected {expected}")
    return match


def pipeline_job_name(run: str, project: str | None = None, region: str | None = None) -> str:
    """A pipeline job's resource name from itself or from its id with `project` and `region`.

    Raises:
        LineageError: Neither.
    """
    if _PIPELINE_JOB.match(run):
        return run
    if project and region and re.fullmatch(r"[a-z0-9][a-z0-9-]*", run):
        return f"projects/{project}/locations/{region}/pipelineJobs/{run}"
    raise LineageError(
        f"{run}: not a local run folder nor projects/P/locations/L/pipelineJobs/ID "
        "(or a job id with --project and --region)"
    )


def run_context(pipeline_job: str, credentials: Any = None) -> Any:
    """The `system.PipelineRun` context of a Vertex pipeline job (an `aiplatform.Context`).

    Raises:
        LineageError: The job has no run context yet.
    """
    from google.cloud import aiplatform

    match = _match(_PIPELINE_JOB, pipeline_job, "projects/P/locations/L/pipelineJobs/ID")
    where = {"project": match["project"], "location": match["location"]}
    job = aiplatform.PipelineJob.get(pipeline_job, credentials=credentials, **where)
    context = job.gca_resource.job_detail.pipeline_run_context
    if not context.name:
        raise LineageError(f"{pipeline_job}: no run context in Vertex ML Metadata yet")
    return aiplatform.Context(resource=context, credentials=credentials, **where)


def vertex_lineage(pipeline_job: str, credentials: Any = None) -> LineageGraph:
    """The lineage graph of a Vertex pipeline run, from Vertex ML Metadata."""
    subgraph = run_context(pipeline_job, credentials).query_lineage_subgraph()
    return graph_from_subgraph(subgraph, title=f"Vertex run {pipeline_job.rsplit('/', 1)[-1]}")


def _message_dict(message: Any) -> dict[str, Any]:
    return type(message).to_dict(message)


def graph_from_subgraph(subgraph: Any, title: str) -> LineageGraph:
    """A `LineageGraph` from an ML Metadata `LineageSubgraph` (artifacts, executions, events)."""
    graph = LineageGraph(title=title)
    for execution in subgraph.executions:
        graph.add(
            Node(
                execution.name,
                "execution",
                execution.display_name or execution.name.rsplit("/", 1)[-1],
                type=execution.schema_title,
                details=_message_dict(execution).get("metadata") or {},
            )
        )
    for artifact in subgraph.artifacts:
        details = _message_dict(artifact).get("metadata") or {}
        graph.add(
            Node(
                artifact.name,
                "trial" if "trial_id" in details else "artifact",
                artifact.display_name or artifact.name.rsplit("/", 1)[-1],
                type=artifact.schema_title,
                uri=artifact.uri,
                details=details,
            )
        )
    for event in subgraph.events:
        if event.artifact not in graph.nodes or event.execution not in graph.nodes:
            continue
        if event.type_.name == "INPUT":
            graph.link(event.artifact, event.execution, "input")
        elif event.type_.name == "OUTPUT":
            graph.link(event.execution, event.artifact, "output")
    link_best_trials(graph)
    objectives_first(graph)
    return graph


def _resource_id(*parts: str) -> str:
    """An ML Metadata resource id (`[a-z0-9-]`, starting with a letter, ≤ 128 characters)."""
    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower())[:128]


def _create_or_get(kind: Any, resource_id: str, **fields: Any) -> Any:
    """`kind.create(resource_id=…)`, or the existing resource when a retry already made it."""
    from google.api_core.exceptions import AlreadyExists

    where = {k: fields[k] for k in ("project", "location", "credentials")}
    try:
        return kind.create(resource_id=resource_id, **fields)
    except AlreadyExists:
        return kind(resource_id, **where)


def _trial_artifact(
    trial: Mapping[str, Any],
    job_id: str,
    job_name: str,
    base_output_directory: str,
    where: dict[str, Any],
) -> Any:
    """The trial's `system.Artifact` (`trial-<id>`), created unless a retried task did."""
    from google.cloud import aiplatform

    record = trial_record(trial)
    return _create_or_get(
        aiplatform.Artifact,
        _resource_id("hpt", job_id, "trial", record["trial_id"]),
        schema_title=TRIAL_SCHEMA,
        display_name=f"trial-{record['trial_id']}",
        uri=trial_uri(base_output_directory, record["trial_id"]),
        metadata={**record, "hyperparameter_tuning_job": job_name},
        **where,
    )


def record_trials(
    trials: Sequence[Mapping[str, Any]],
    *,
    job_name: str,
    base_output_directory: str = "",
    trials_artifact: str = "",
    pipeline_job: str = "",
    credentials: Any = None,
) -> list[str]:
    """Record a Vertex HPT job's trials in Vertex ML Metadata, which Vertex itself never does.

    Creates one `system.Artifact` per trial (`trial-<id>`; metadata from
    `trial_record`, uri the trial's model folder) and one `system.ContainerExecution`
    that outputs them and takes the pipeline's trials artifact as input. With
    `pipeline_job`, both are added to the run's context, so `vertex_lineage` sees
    them. Resource ids derive from the job and trial ids: a retried task reuses them.

    Args:
        trials: The job's trials (`Trial.to_json` schema).
        job_name: `projects/P/locations/L/hyperparameterTuningJobs/ID`.
        base_output_directory: The study's base output directory (for the trial URIs).
        trials_artifact: ML Metadata resource name of the trials artifact (on Vertex, a
            KFP artifact's `name`); anything else (a local run's plain name) is ignored.
        pipeline_job: Resource name of the pipeline job
            (`dsl.PIPELINE_JOB_RESOURCE_NAME_PLACEHOLDER`), or empty.
        credentials: google-auth credentials; None uses the environment's.

    Returns:
        The trial artifacts' resource names, in the order of `trials`.
    """
    from google.cloud import aiplatform
    from google.cloud.aiplatform_v1.types import Execution

    from pipelines.study.trials_artifact import summary

    match = _match(_HPT_JOB, job_name, "projects/P/locations/L/hyperparameterTuningJobs/ID")
    where = {"project": match["project"], "location": match["location"], "credentials": credentials}
    recorded = [
        _trial_artifact(trial, match["id"], job_name, base_output_directory, where)
        for trial in trials
    ]
    execution = _create_or_get(
        aiplatform.Execution,
        _resource_id("hpt", match["id"], "trials"),
        schema_title=RECORD_SCHEMA,
        display_name=f"trials-of-hpt-job-{match['id']}",
        state=Execution.State.COMPLETE,
        metadata={"hyperparameter_tuning_job": job_name, **summary(trials)},
        **where,
    )
    if "/metadataStores/" in trials_artifact:
        execution.assign_input_artifacts([aiplatform.Artifact(trials_artifact, **where)])
    execution.assign_output_artifacts(recorded)
    if pipeline_job:
        run_context(pipeline_job, credentials).add_artifacts_and_executions(
            artifact_resource_names=[a.resource_name for a in recorded],
            execution_resource_names=[execution.resource_name],
        )
    return [a.resource_name for a in recorded]
