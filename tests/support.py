"""Helpers several test files share and the product does not need (moved out of it).

`normalize_spec` (golden specs), `project_pins` (images against pyproject's pins) and
`ancestors` (lineage: everything a node derives from; once `LineageGraph.upstream`) were
product functions that only tests called.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
