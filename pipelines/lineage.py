"""Lineage of a pipeline run: one graph, built from a local run folder or Vertex ML Metadata.

The graph is ML Metadata's: executions (tasks) and artifacts, with edges
execution → output artifact and artifact → consuming execution. Trials are
artifacts too (one node per trial, from the trials artifact), and the task that
chose the best trial gets an edge from that trial. So the registered model leads
back through its task's inputs to the dataset (source, metadata sha256) and,
through the best-trial selection, to the trial it was trained from.

* Local run: nodes from each task's `executor_output.json`, edges from the
  compiled spec the run saved (`pipeline.yaml`: `taskOutputArtifact` /
  `taskOutputParameter` inputs, through `dsl.If` sub-DAGs).
* Vertex run: the pipeline run's context in Vertex ML Metadata
  (`query_context_lineage_subgraph`). Vertex does not record HPT trials there;
  `record_trials` does, from the fetch-trials step.

Rendered as a Rich tree, Mermaid text, or a standalone HTML page.
"""

from __future__ import annotations

import dataclasses
import datetime
import html
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines import trials as trials_lib

if TYPE_CHECKING:
    from rich.tree import Tree

TRIALS_OUTPUT = "trials"
BEST_TRIAL_KEYS = ("best_trial_id", "output:best_trial_id")  # local / Vertex execution metadata
TRIAL_SCHEMA = "system.Artifact"
RECORD_SCHEMA = "system.ContainerExecution"
# kfp.local names a run folder <pipeline name>-%Y-%m-%d-%H-%M-%S-%f.
_RUN_STAMP = re.compile(r"(\d{4}(?:-\d{2}){5}-\d{6})$")
_PIPELINE_JOB = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/pipelineJobs/(?P<id>[^/]+)$"
)
_HPT_JOB = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/"
    r"hyperparameterTuningJobs/(?P<id>[^/]+)$"
)
# Node details shown in the tree, Mermaid and HTML (all details stay in the graph).
HEADLINE_KEYS = (
    "state",
    "metrics",
    "parameters",
    "source",
    "metadata_sha256",
    "counts",
    "trial_count",
    "states",
    "best_trial_id",
    "best_metric",
    "best_parameters",
    "strategy",
    "replicas",
    "accuracy",
    "loss",
    "passed_threshold",
    "name",
    "version",
)


class LineageError(ValueError):
    """A run folder or resource name lineage cannot be read from; one line."""


@dataclasses.dataclass
class Node:
    """An execution, an artifact or a trial."""

    id: str
    kind: str  # "execution" | "artifact" | "trial"
    name: str
    type: str = ""  # schema title (artifacts) or component (executions)
    uri: str = ""
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Edge:
    """`source` fed or produced `target`; `label` names the input or output."""

    source: str
    target: str
    label: str = ""


@dataclasses.dataclass
class LineageGraph:
    """Nodes by id, and edges in insertion order."""

    title: str
    nodes: dict[str, Node] = dataclasses.field(default_factory=dict)
    edges: list[Edge] = dataclasses.field(default_factory=list)

    def add(self, node: Node) -> Node:
        """Add (or replace) a node."""
        self.nodes[node.id] = node
        return node

    def link(self, source: str, target: str, label: str = "") -> None:
        """Add an edge; a second edge between the same nodes extends the first one's label."""
        for edge in self.edges:
            if edge.source == source and edge.target == target:
                if label and label not in edge.label.split(", "):
                    edge.label = f"{edge.label}, {label}" if edge.label else label
                return
        self.edges.append(Edge(source, target, label))

    def parents(self, node_id: str) -> list[str]:
        """Ids of the nodes with an edge into `node_id`."""
        return [e.source for e in self.edges if e.target == node_id]

    def children(self, node_id: str) -> list[str]:
        """Ids of the nodes `node_id` has an edge to."""
        return [e.target for e in self.edges if e.source == node_id]

    def upstream(self, node_id: str) -> set[str]:
        """Every node `node_id` was derived from (transitively), itself excluded."""
        seen: set[str] = set()
        stack = self.parents(node_id)
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(self.parents(current))
        return seen

    def find(self, kind: str | None = None, **details: Any) -> list[Node]:
        """Nodes of `kind` whose details hold every given key/value."""
        return [
            n
            for n in self.nodes.values()
            if (kind is None or n.kind == kind)
            and all(n.details.get(k) == v for k, v in details.items())
        ]

    def trial(self, trial_id: str) -> Node | None:
        """The trial node of `trial_id`, if any."""
        found = self.find("trial", trial_id=str(trial_id))
        return found[0] if found else None


# --------------------------------------------------------------------------- trials as artifacts


def trial_record(trial: Mapping[str, Any]) -> dict[str, Any]:
    """What a trial artifact says of a trial: id, state, parameters, final metrics, times."""
    record: dict[str, Any] = {
        "trial_id": str(trial.get("id", "")),
        "state": trials_lib.trial_state(trial).name,
        "parameters": trials_lib.trial_parameters(trial),
        "metrics": trials_lib.measurement_metrics(trial.get("finalMeasurement")),
    }
    for key, name in (
        ("startTime", "start_time"),
        ("endTime", "end_time"),
        ("infeasibleReason", "infeasible_reason"),
    ):
        if trial.get(key):
            record[name] = trial[key]
    return record


def trial_uri(base_output_directory: str, trial_id: str) -> str:
    """The trial's model folder (Vertex: `<base>/<trial_id>/model/`)."""
    from pipelines.vertex_env import output_dirs

    return (
        output_dirs(base_output_directory, trial_id)["AIP_MODEL_DIR"]
        if base_output_directory
        else ""
    )


def link_best_trials(graph: LineageGraph) -> None:
    """Edge from the chosen trial to each execution that output a `best_trial_id`."""
    for node in list(graph.nodes.values()):
        if node.kind != "execution":
            continue
        best = next((node.details[k] for k in BEST_TRIAL_KEYS if node.details.get(k)), None)
        trial = graph.trial(str(best)) if best is not None else None
        if trial is not None:
            trial.details["best"] = True
            graph.link(trial.id, node.id, "best trial")


# --------------------------------------------------------------------------- local runs


def _run_key(folder: Path) -> str:
    """Sort key of a run folder: kfp.local's timestamp suffix, else its mtime in that format."""
    match = _RUN_STAMP.search(folder.name)
    if match:
        return match[1]
    return datetime.datetime.fromtimestamp(folder.stat().st_mtime).strftime("%Y-%m-%d-%H-%M-%S-%f")


def is_run_dir(path: Path) -> bool:
    """Whether `path` is a kfp.local run folder (task folders with executor outputs)."""
    return path.is_dir() and any(path.glob("*/executor_output.json"))


def run_dirs(output: Path) -> list[Path]:
    """The run folders under a `hpt-pipeline run --output` folder, oldest first."""
    root = output / "artifacts"
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if is_run_dir(p)), key=_run_key)


def resolve_run_dir(path: str | Path) -> Path:
    """A run folder: `path` itself, or the newest run under an `--output` folder.

    Raises:
        LineageError: `path` is neither.
    """
    folder = Path(path)
    if is_run_dir(folder):
        return folder
    runs = run_dirs(folder)
    if not runs:
        raise LineageError(
            f"{path}: not a local run (expected a `hpt-pipeline run --output` folder "
            "or one of its artifacts/<run> folders)"
        )
    return runs[-1]


def output_artifacts(outputs: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """`(output name, artifact)` pairs of one task's executor output."""
    for name, entry in outputs.get("artifacts", {}).items():
        for artifact in entry.get("artifacts", []):
            yield name, artifact


def find_output(run_dir: Path, name: str) -> dict[str, Any] | None:
    """The first output artifact called `name` in a run (e.g. `trials`), or None."""
    from pipelines.local_run import task_outputs

    for outputs in task_outputs(run_dir).values():
        for output, artifact in output_artifacts(outputs):
            if output == name:
                return artifact
    return None


@dataclasses.dataclass(frozen=True)
class SpecTask:
    """A task of the compiled spec: its display name, output types and resolved inputs."""

    name: str
    display_name: str
    output_types: dict[str, str]
    # input name → (producer task, producer's output key, True for an artifact)
    inputs: dict[str, tuple[str, str, bool]]


def spec_tasks(spec: Mapping[str, Any]) -> dict[str, SpecTask]:
    """The executable tasks of a compiled pipeline spec, sub-DAGs (`dsl.If`) flattened.

    Inputs of tasks inside a sub-DAG are resolved through the sub-DAG task's own
    inputs to the task that produced them.
    """
    components = spec.get("components", {})
    found: dict[str, SpecTask] = {}

    def walk(dag: Mapping[str, Any], bound: Mapping[str, tuple[str, str, bool]]) -> None:
        for task_name, task in dag.get("tasks", {}).items():
            resolved: dict[str, tuple[str, str, bool]] = {}
            for kind, produced, passed in (
                ("artifacts", "taskOutputArtifact", "componentInputArtifact"),
                ("parameters", "taskOutputParameter", "componentInputParameter"),
            ):
                for name, binding in task.get("inputs", {}).get(kind, {}).items():
                    if produced in binding:
                        ref = binding[produced]
                        key = ref.get("outputArtifactKey") or ref.get("outputParameterKey", "")
                        resolved[name] = (ref["producerTask"], key, kind == "artifacts")
                    elif binding.get(passed) in bound:
                        resolved[name] = bound[binding[passed]]
            component = components.get(task.get("componentRef", {}).get("name", ""), {})
            if "dag" in component:
                walk(component["dag"], resolved)
                continue
            types = component.get("outputDefinitions", {}).get("artifacts", {})
            found[task_name] = SpecTask(
                name=task_name,
                display_name=task.get("taskInfo", {}).get("name", task_name),
                output_types={
                    k: v.get("artifactType", {}).get("schemaTitle", "") for k, v in types.items()
                },
                inputs=resolved,
            )

    walk(spec.get("root", {}).get("dag", {}), {})
    return found


def local_lineage(path: str | Path) -> LineageGraph:
    """The lineage graph of a local run (an `--output` folder: its newest run).

    Raises:
        LineageError: Not a run, or a run without its compiled spec.
    """
    import yaml

    from pipelines.local_run import SPEC_FILE, task_outputs

    run_dir = resolve_run_dir(path)
    spec_path = run_dir / SPEC_FILE
    if not spec_path.is_file():
        raise LineageError(f"{run_dir}: no {SPEC_FILE} (the run's DAG); rerun the pipeline")
    tasks = spec_tasks(yaml.safe_load(spec_path.read_text()))
    outputs = task_outputs(run_dir)
    graph = LineageGraph(title=f"local run {run_dir.name}")
    for task, produced in outputs.items():
        info = tasks.get(task)
        graph.add(
            Node(
                f"task:{task}",
                "execution",
                info.display_name if info else task,
                type=task,
                details=dict(produced.get("parameterValues", {})),
            )
        )
        for name, artifact in output_artifacts(produced):
            node = graph.add(
                Node(
                    f"artifact:{task}/{name}",
                    "artifact",
                    name,
                    type=info.output_types.get(name, "") if info else "",
                    uri=artifact.get("uri", ""),
                    details=dict(artifact.get("metadata", {})),
                )
            )
            graph.link(f"task:{task}", node.id, name)
    for consumer, info in tasks.items():
        if consumer not in outputs:
            continue  # a task that did not run (a gate was closed, or the run failed)
        for input_name, (producer, key, is_artifact) in info.inputs.items():
            source = f"artifact:{producer}/{key}" if is_artifact else f"task:{producer}"
            if source in graph.nodes:
                graph.link(source, f"task:{consumer}", input_name)
    for node in [n for n in graph.nodes.values() if n.kind == "artifact"]:
        if node.name == TRIALS_OUTPUT and Path(node.uri).is_file():
            _add_trials(
                graph, node, trials_lib.read_trials(node.uri), node.details.get("study", "")
            )
    link_best_trials(graph)
    return graph


def _add_trials(
    graph: LineageGraph, parent: Node, trials: Iterable[Mapping[str, Any]], base: str
) -> None:
    for trial in trials:
        record = trial_record(trial)
        node = graph.add(
            Node(
                f"trial:{record['trial_id']}",
                "trial",
                f"trial {record['trial_id']}",
                type=TRIAL_SCHEMA,
                uri=trial_uri(base, record["trial_id"]),
                details=record,
            )
        )
        graph.link(parent.id, node.id, "trial")


# --------------------------------------------------------------------------- Vertex runs


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

    from pipelines.trials_artifact import summary

    match = _match(_HPT_JOB, job_name, "projects/P/locations/L/hyperparameterTuningJobs/ID")
    where = {"project": match["project"], "location": match["location"], "credentials": credentials}
    recorded = []
    for trial in trials:
        record = trial_record(trial)
        recorded.append(
            _create_or_get(
                aiplatform.Artifact,
                _resource_id("hpt", match["id"], "trial", record["trial_id"]),
                schema_title=TRIAL_SCHEMA,
                display_name=f"trial-{record['trial_id']}",
                uri=trial_uri(base_output_directory, record["trial_id"]),
                metadata={**record, "hyperparameter_tuning_job": job_name},
                **where,
            )
        )
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


# --------------------------------------------------------------------------- rendering


def _short(value: Any, width: int = 80) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, Mapping):
        text = " ".join(f"{k}={_short(v, 16)}" for k, v in value.items())
    elif isinstance(value, list | tuple):
        text = ",".join(_short(v, 16) for v in value)
    else:
        text = str(value)
    if re.fullmatch(r"[0-9a-f]{64}", text):  # a sha256: its first 12 digits say enough
        text = text[:12] + "…"
    return text if len(text) <= width else text[: width - 1] + "…"


def headline(node: Node) -> str:
    """The node's key facts on one line (`HEADLINE_KEYS` that it has)."""
    parts = []
    for key in HEADLINE_KEYS:
        value = node.details.get(key)
        if value in (None, "", {}, []):
            continue
        shown = _short(value)
        if key in ("state", "metrics", "parameters"):
            parts.append(shown)
        else:
            parts.append(f"{key}({shown})" if isinstance(value, Mapping) else f"{key}={shown}")
    if node.details.get("best"):
        parts.append("★ best")
    return "  ".join(parts)


@dataclasses.dataclass
class TreeItem:
    """A node placed under one parent; `also` names its other parents."""

    node: Node
    also: list[str]
    children: list[TreeItem]


def _topological(graph: LineageGraph) -> list[str]:
    indegree = {n: 0 for n in graph.nodes}
    for edge in graph.edges:
        indegree[edge.target] += 1
    ready = [n for n, d in indegree.items() if d == 0]
    order: list[str] = []
    while ready:
        current = ready.pop(0)
        order.append(current)
        for child in graph.children(current):
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    return order + [n for n in graph.nodes if n not in order]  # cycles: keep them, in order


def spanning_tree(graph: LineageGraph) -> list[TreeItem]:
    """The graph as a tree: each node under its deepest parent, so the tree reads as the story.

    Nodes with several parents appear once; `TreeItem.also` names the others.
    """
    order = _topological(graph)
    depth: dict[str, int] = {}
    placed_under: dict[str, str | None] = {}
    for node_id in order:
        parents = [p for p in graph.parents(node_id) if p in depth]
        deepest = max(parents, key=lambda p: depth[p], default=None)
        depth[node_id] = depth[deepest] + 1 if deepest else 0
        placed_under[node_id] = deepest
    items: dict[str, TreeItem] = {}
    for node_id, parent in placed_under.items():
        also = [graph.nodes[p].name for p in graph.parents(node_id) if p != parent]
        items[node_id] = TreeItem(graph.nodes[node_id], also, [])
    roots: list[TreeItem] = []
    for node_id in order:
        parent = placed_under[node_id]
        (items[parent].children if parent else roots).append(items[node_id])
    return roots


_ICONS = {"execution": "⚙", "artifact": "▣", "trial": "◆"}


def _item_text(item: TreeItem) -> tuple[str, str, str]:
    node = item.node
    name = f"{_ICONS.get(node.kind, '')} {node.name}"
    kind = node.type if node.kind != "execution" else ""
    also = f"(also from {', '.join(item.also)})" if item.also else ""
    return name, " ".join(t for t in (kind, headline(node)) if t), also


def rich_tree(graph: LineageGraph) -> Tree:
    """The spanning tree as a Rich `Tree`."""
    from rich.markup import escape
    from rich.tree import Tree

    root = Tree(f"[bold]{escape(graph.title)}[/]")

    def add(parent: Tree, item: TreeItem) -> None:
        name, facts, also = _item_text(item)
        style = {"execution": "cyan", "trial": "magenta"}.get(item.node.kind, "green")
        label = f"[bold {style}]{escape(name)}[/] {escape(facts)}"
        if also:
            label += f" [dim]{escape(also)}[/]"
        branch = parent.add(label)
        for child in item.children:
            add(branch, child)

    for item in spanning_tree(graph):
        add(root, item)
    return root


def _mermaid_text(text: str) -> str:
    """Text safe inside a quoted Mermaid label (Mermaid's own `#…;` codes for # and ")."""
    return html.escape(text.replace("#", "#35;").replace('"', "#quot;"), quote=False)


def mermaid(graph: LineageGraph) -> str:
    """The graph as a Mermaid flowchart (executions rounded, artifacts boxes, trials hexagons)."""
    ids = {node_id: f"n{i}" for i, node_id in enumerate(graph.nodes)}
    shapes = {"execution": ("([", "])"), "artifact": ("[", "]"), "trial": ("{{", "}}")}
    lines = ["flowchart TD"]
    for node_id, node in graph.nodes.items():
        start, end = shapes.get(node.kind, ("[", "]"))
        facts = headline(node)
        text = _mermaid_text(node.name) + (
            f"<br/><small>{_mermaid_text(facts)}</small>" if facts else ""
        )
        lines.append(f'  {ids[node_id]}{start}"{text}"{end}')
    for edge in graph.edges:
        label = f"|{_mermaid_text(edge.label)}|" if edge.label else ""
        lines.append(f"  {ids[edge.source]} -->{label} {ids[edge.target]}")
    for kind, color in (("execution", "#e3f2fd"), ("artifact", "#e8f5e9"), ("trial", "#f3e5f5")):
        members = [ids[n] for n, node in graph.nodes.items() if node.kind == kind]
        if members:
            lines.append(f"  classDef {kind} fill:{color}")
            lines.append(f"  class {','.join(members)} {kind}")
    best = [ids[n] for n, node in graph.nodes.items() if node.details.get("best")]
    if best:
        lines.append("  classDef best stroke:#c62828,stroke-width:3px")
        lines.append(f"  class {','.join(best)} best")
    return "\n".join(lines) + "\n"


def _html_list(items: Sequence[TreeItem]) -> str:
    rows = []
    for item in items:
        name, facts, also = _item_text(item)
        uri = f" <code>{html.escape(item.node.uri)}</code>" if item.node.uri else ""
        rows.append(
            f"<li><b>{html.escape(name)}</b> {html.escape(facts)}"
            f"{f' <i>{html.escape(also)}</i>' if also else ''}{uri}"
            f"{_html_list(item.children) if item.children else ''}</li>"
        )
    return f"<ul>{''.join(rows)}</ul>"


MERMAID_SCRIPT = "https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.esm.min.mjs"


def html_page(graph: LineageGraph) -> str:
    """A standalone page: the Mermaid chart and the same lineage as a nested list.

    The chart is drawn when the browser can load Mermaid; the list needs no network.
    """
    title = html.escape(f"Lineage of {graph.title}")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em}}li{{margin:2px 0}}code{{color:#555}}
pre.mermaid{{background:#fafafa;padding:1em}}</style></head><body>
<h1>{title}</h1>
<h2>Graph</h2>
<pre class="mermaid">
{html.escape(mermaid(graph))}</pre>
<h2>Lineage (from the inputs down)</h2>
{_html_list(spanning_tree(graph))}
<script type="module">import mermaid from "{MERMAID_SCRIPT}";
mermaid.initialize({{startOnLoad: true}});</script>
</body></html>
"""
