"""The layering written in ARCHITECTURE.md, checked over every import in the project's code.

Imports inside functions count too: a late import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipelines.images import project_packages
from tests.conftest import ROOT

PACKAGES = tuple(project_packages())  # the one list of what ships


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
    }


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules `path` imports (`from a import b` counts a.b when b is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name in modules:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    graph = {name: imports_of(path, modules) for name, path in modules.items()}
    for name in graph:  # a package's __init__ is not a dependency of its own modules
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    return graph


def external_imports(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


# (importer prefix, imported prefix, why it is forbidden) — ARCHITECTURE.md "Rooms".
FORBIDDEN = [
    ("trainer", "pipelines", "the trainer never depends on the pipeline"),
    ("trainer", "components", "the trainer never depends on the pipeline"),
    ("trainer", "dataprep", "preparation builds on the trainer's formats, not the reverse"),
    ("dataprep", "pipelines", "preparation is a library the pipeline calls"),
    ("dataprep", "components", "preparation is a library the pipeline calls"),
    ("components", "pipelines.pipeline", "components are below the DAG"),
    ("components", "pipelines.compiler", "components are below the DAG"),
    ("components", "pipelines.app", "components are below the CLI"),
    ("components", "pipelines.targets.local.binding", "components are below the bindings"),
    ("components", "pipelines.targets.vertex.binding", "components are below the bindings"),
    ("components", "pipelines.targets.kubeflow.binding", "components are below the bindings"),
    ("pipelines.study", "pipelines.targets", "the study is target-neutral"),
    ("pipelines.study", "pipelines.app", "the study is below the CLI"),
    ("pipelines.study", "components", "the study is below the components"),
    ("pipelines.jobs", "pipelines.targets", "jobs are target-neutral"),
    ("pipelines.jobs", "components", "jobs are below the components"),
    ("pipelines.jobs", "pipelines.app", "jobs are below the CLI"),
    ("pipelines.lineage", "pipelines.targets", "lineage reads runs, it does not run them"),
    ("pipelines.lineage", "components", "lineage is below the components"),
    ("pipelines.reports", "components", "reports are below the components"),
    ("pipelines.reports", "pipelines.app", "reports are below the CLI"),
    ("pipelines.targets", "pipelines.app", "targets are below the CLI"),
]


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_no_import_cycles_among_the_projects_modules():
    assert cycles(import_graph()) == []


def test_imports_follow_the_layering_of_architecture_md():
    broken = [
        f"{importer} imports {imported}: {why}"
        for importer, deps in import_graph().items()
        for imported in deps
        for low, high, why in FORBIDDEN
        if _under(importer, low) and _under(imported, high)
    ]
    assert broken == []


def test_pipelines_code_never_imports_tensorflow_itself():
    """Compiling never imports TensorFlow; only dataprep and trainer code may."""
    offenders = [
        name
        for name, path in project_modules().items()
        if _under(name, "pipelines") and external_imports(path) & {"tensorflow", "keras"}
    ]
    assert offenders == []


def test_the_trainer_contract_imports_nothing_heavy():
    path = ROOT / "trainer" / "contract.py"
    assert external_imports(path) <= {"__future__", "dataclasses", "math", "collections", "typing"}


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_the_cycle_finder_finds_cycles(graph, expected):
    assert cycles(graph) == expected


def test_the_layering_check_sees_late_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from pipelines.app import cli\n")
    assert imports_of(module, project_modules()) == {"pipelines.app", "pipelines.app.cli"}


def test_no_module_is_much_over_500_lines():
    long = {
        name: n
        for name, path in project_modules().items()
        if (n := len(path.read_text().splitlines())) > 560  # "about 500"
    }
    assert long == {}
