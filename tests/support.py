"""Helpers several test files share and the product does not need (moved out of it).

`normalize_spec` (golden specs), `project_pins` (images against pyproject's pins) and
`ancestors` (lineage: everything a node derives from; once `LineageGraph.upstream`),
`tfjob_from_manifest` and `tfjob_replica_counts` (once `tfjob.from_manifest`/`replica_counts`)
were product functions that only tests called.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.images import PYPROJECT, requirement_name
from pipelines.lineage.graph import LineageGraph

_SDK_VERSION = re.compile(r"^sdkVersion: .*$", re.MULTILINE)


def normalize_spec(text: str) -> str:
    """A compiled spec without run-to-run noise, for golden tests.

    Drops the SDK version and kfp's leading comment block (it prints parameter
    defaults with an unstable dict order); the YAML body itself is sorted.
    """
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return _SDK_VERSION.sub("sdkVersion: <normalized>", "".join(lines))


def project_pins(pyproject: Path | str = PYPROJECT) -> dict[str, str]:
    """Every exact `==` pin in the project: dependencies and all extras, by normalized name."""
    project = tomllib.loads(Path(pyproject).read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs.extend(extra)
    pins = {}
    for req in reqs:
        if "==" in req:
            pins[requirement_name(req)] = req.split("==", 1)[1].split(";")[0].strip()
    return pins


def ancestors(graph: LineageGraph, node_id: str) -> set[str]:
    """Every node `node_id` was derived from (transitively), itself excluded."""
    seen: set[str] = set()
    stack = graph.parents(node_id)
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(graph.parents(current))
    return seen


class _Response:
    """What `ApiClient.deserialize` reads: an object with the JSON text as `data`."""

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.data = json.dumps(obj)


def tfjob_from_manifest(obj: Mapping[str, Any]) -> Any:
    """A TFJob object (as the API returns it) back into `KubeflowOrgV1TFJob`.

    The kubeflow-training ApiClient resolves its own models and the `kubernetes`
    ones, as its `TrainingClient` does when it reads jobs.
    """
    from kubeflow.training import ApiClient

    return ApiClient().deserialize(_Response(obj), "KubeflowOrgV1TFJob")


def tfjob_replica_counts(manifest: Mapping[str, Any]) -> dict[str, int]:
    """Replica type -> replicas, as the operator reads `spec.tfReplicaSpecs`."""
    specs = (manifest.get("spec") or {}).get("tfReplicaSpecs") or {}
    return {rtype: int(spec.get("replicas", 1)) for rtype, spec in specs.items()}


def with_pods(options: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(`ReplicaPods` from the pod fields of `options`, the other options): builder arguments."""
    from pipelines.targets.kubeflow.kube import ReplicaPods

    fields = {f.name for f in dataclasses.fields(ReplicaPods)}
    pods = ReplicaPods(**{k: v for k, v in options.items() if k in fields})
    return pods, {k: v for k, v in options.items() if k not in fields}
