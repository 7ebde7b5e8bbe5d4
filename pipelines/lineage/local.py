"""Lineage of a local run: nodes from each task's executor output, edges from the saved spec.

Nodes come from each task's `executor_output.json`, edges from the compiled
spec the run saved (`pipeline.yaml`: `taskOutputArtifact` / `taskOutputParameter`
inputs, through `dsl.If` sub-DAGs).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pipelines.lineage.graph import (
    TRIAL_SCHEMA,
    TRIALS_OUTPUT,
    LineageError,
    LineageGraph,
    Node,
    link_best_trials,
    objectives_first,
    trial_record,
    trial_uri,
)
from pipelines.study import continuation
from pipelines.study import trials as trials_lib

SPEC_FILE = "pipeline.yaml"  # the compiled spec a local run saves beside its task folders
STUDY_DIR = "study"  # an output's current study (a link to its own folder: study_identity)
# kfp.local names a run folder <pipeline name>-%Y-%m-%d-%H-%M-%S-%f.
_RUN_STAMP = re.compile(r"(\d{4}(?:-\d{2}){5}-\d{6})$")


def task_outputs(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each task's executor output (parameter values and artifacts), by task folder name."""
    outputs = {}
    for path in sorted(run_dir.glob("*/executor_output.json")):
        outputs[path.parent.name] = json.loads(path.read_text())
    return outputs


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
            _link_earlier_runs(graph, node)
    link_best_trials(graph)
    objectives_first(graph)
    return graph


def _link_earlier_runs(graph: LineageGraph, trials: Node) -> None:
    """The runs a continued study started from, each linked to the trials artifact."""
    for source in trials.details.get("continued_from") or []:
        run = graph.add(
            Node(f"run:{source}", "artifact", f"continued from {source}", TRIAL_SCHEMA, source)
        )
        graph.link(run.id, trials.id, "continued_from")


def _add_trials(
    graph: LineageGraph, parent: Node, trials: Iterable[Mapping[str, Any]], base: str
) -> None:
    for trial in trials:
        record = trial_record(trial)
        earlier = (trial.get(trials_lib.LOCAL_KEY) or {}).get(continuation.CONTINUED_KEY)
        if earlier:  # a trial of the run this study continued: its model is not under `base`
            record["continued_from"] = earlier
        node = graph.add(
            Node(
                f"trial:{record['trial_id']}",
                "trial",
                f"trial {record['trial_id']}",
                type=TRIAL_SCHEMA,
                uri="" if earlier else trial_uri(base, record["trial_id"]),
                details=record,
            )
        )
        graph.link(parent.id, node.id, "trial")
