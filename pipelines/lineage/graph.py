"""The lineage graph of a pipeline run: executions, artifacts and trials, and their edges.

The graph is ML Metadata's: executions (tasks) and artifacts, with edges
execution → output artifact and artifact → consuming execution. Trials are
artifacts too (one node per trial, from the trials artifact), and the task that
chose the best trial gets an edge from that trial. So the registered model leads
back through its task's inputs to the dataset (source, metadata sha256) and,
through the best-trial selection, to the trial it was trained from.

Readers: `pipelines.lineage.local` (a local run folder) and
`pipelines.targets.vertex.metadata` (Vertex ML Metadata); `pipelines.lineage.render`
draws the graph.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from pipelines.study import trials as trials_lib

TRIALS_OUTPUT = "trials"
BEST_TRIAL_KEYS = ("best_trial_id", "output:best_trial_id")  # local / Vertex execution metadata
# The study-metric step's output (local / Vertex execution metadata): the objectives, primary first.
SPEC_METRICS_KEYS = ("study_spec_metrics", "output:study_spec_metrics")
TRIAL_SCHEMA = "system.Artifact"
RECORD_SCHEMA = "system.ContainerExecution"


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
    from pipelines.jobs.replica_env import output_dirs

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


def objectives_first(graph: LineageGraph) -> None:
    """Each trial's metrics with the study's objectives first, as every view then shows them.

    The objectives are the study-metric step's output; a graph without it keeps the order
    the trials reported.
    """
    found: Any = next(
        (n.details[k] for n in graph.nodes.values() for k in SPEC_METRICS_KEYS if n.details.get(k)),
        [],
    )
    if isinstance(found, str):  # Vertex keeps a list output as JSON text
        found = json.loads(found)
    ids = [m.get("metric_id") or m.get("metricId") for m in found if isinstance(m, Mapping)]
    for node in graph.nodes.values():
        metrics = node.details.get("metrics")
        if node.kind == "trial" and isinstance(metrics, Mapping):
            first = {k: metrics[k] for k in ids if k in metrics}
            node.details["metrics"] = {**first, **metrics}
