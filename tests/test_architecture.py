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


# The rooms of ARCHITECTURE.md, top to bottom: a module may import its own room and the rooms
# below it, never one above. A module belongs to the room with the longest matching prefix.
ROOMS: list[tuple[str, tuple[str, ...]]] = [
    ("app", ("pipelines.app",)),
    ("compiler", ("pipelines.compiler",)),
    ("pipeline", ("pipelines.pipeline",)),
    ("wiring", ("pipelines.wiring",)),
    ("components", ("components",)),
    ("reports", ("pipelines.reports",)),
    ("targets (run-time side)", ("pipelines.targets",)),
    ("lineage", ("pipelines.lineage",)),
    (
        "config",
        (
            "pipelines.settings",
            "pipelines.settings_cloud",
            "pipelines.settings_space",
            "pipelines.schedules",
            "pipelines.templates",
        ),
    ),
    ("study", ("pipelines.study",)),
    ("jobs", ("pipelines.jobs",)),
    ("core", ("pipelines",)),
    ("dataprep", ("dataprep",)),
    ("trainer", ("trainer",)),
]


def room_of(module: str) -> tuple[int, str]:
    """(rank from the top, name) of the room holding `module`."""
    matches = [
        (len(prefix), rank, name)
        for rank, (name, prefixes) in enumerate(ROOMS)
        for prefix in prefixes
        if _under(module, prefix)
    ]
    if not matches:
        raise AssertionError(f"{module} is in no room of ARCHITECTURE.md")
    _, rank, name = max(matches)
    return rank, name


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a room to a room above it, as readable lines."""
    broken = []
    for importer, deps in sorted(graph.items()):
        low, low_name = room_of(importer)
        for imported in sorted(deps):
            high, high_name = room_of(imported)
            if high < low:
                broken.append(f"{importer} ({low_name}) imports {imported} ({high_name}, above)")
    return broken


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_no_import_cycles_among_the_projects_modules():
    assert cycles(import_graph()) == []


def test_imports_run_down_the_rooms_of_architecture_md():
    assert upward_imports(import_graph()) == []


def test_every_room_is_in_architecture_md():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    for _, prefixes in ROOMS:
        for prefix in prefixes:
            last = prefix.split(".")[-1]
            assert f"{last}/" in text or f"{last}.py" in text, prefix


@pytest.mark.parametrize(
    "importer, imported",
    [
        ("pipelines.targets.vertex.hpt_job", "components.tune_vertex"),  # run-time → component
        ("components.tune_local", "pipelines.wiring.local"),  # component → its wiring
        ("pipelines.study.sampler", "pipelines.settings"),  # study → config
        ("trainer.task", "dataprep.prepare"),
    ],
)
def test_the_room_check_catches_an_upward_import(importer, imported):
    graph = import_graph()
    assert imported not in graph[importer]
    graph[importer] = graph[importer] | {imported}
    assert upward_imports(graph) == [
        f"{importer} ({room_of(importer)[1]}) imports {imported} ({room_of(imported)[1]}, above)"
    ]


def test_pipelines_code_never_imports_tensorflow_itself():
    """Compiling never imports TensorFlow; only dataprep and trainer code may."""
    offenders = [
        name
        for name, path in project_modules().items()
        if _under(name, "pipelines") and external_imports(path) & {"tensorflow", "keras"}
    ]
    assert offenders == []


# Modules under `pipelines/` that import a module named only at run time (importlib,
# `__import__`, runpy): the TensorFlow rule above reads import statements, so each one is
# named here with what it may import. Narrow on purpose: a new one fails until listed.
DYNAMIC_IMPORTERS = {
    # `python -m pipelines.jobs.fork_server ADDRESS MODULE...` preloads the modules it
    # serves (`trainer.task`, `dataprep.prepare`, `trainer.evaluate`: TensorFlow) in its own
    # process on the local target; nothing imports it to compile or submit a pipeline.
    "pipelines.jobs.fork_server": "the modules it is started to serve, in its own process",
    "pipelines.wiring.base": "pipelines.wiring.<target> (no TensorFlow: checked above)",
    # The registry's CLI parts (`Target.client`, `Target.preflight`): pipelines.app modules,
    # each checked above like every other (tests/test_target_registry.py resolves them).
    "pipelines.app.dispatch": "the client and preflight modules `wiring.TARGETS` names",
}
_DYNAMIC_CALLS = {("importlib", "import_module"), ("runpy", "run_module"), ("runpy", "run_path")}


def dynamic_imports(path: Path) -> int:
    """How many calls in `path` import a module by a name computed at run time."""
    count = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "__import__":
            count += 1
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id, func.attr) in _DYNAMIC_CALLS
        ):
            count += 1
    return count


def test_only_the_listed_modules_under_pipelines_import_by_a_run_time_name():
    importers = {
        name
        for name, path in project_modules().items()
        if _under(name, "pipelines") and dynamic_imports(path)
    }
    assert importers == set(DYNAMIC_IMPORTERS)


def test_the_dynamic_import_check_sees_each_form(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import importlib, runpy\n"
        "def f(n):\n"
        "    importlib.import_module(n)\n    __import__(n)\n    runpy.run_module(n)\n"
    )
    assert dynamic_imports(module) == 3


def test_the_fork_server_runs_outside_the_trainer_and_is_never_imported_to_compile():
    """It serves the local executors only: `fork_client` (which starts it) alone imports it."""
    graph = import_graph()
    importers = {name for name, deps in graph.items() if "pipelines.jobs.fork_server" in deps}
    assert importers == {"pipelines.jobs.fork_client"}
    assert not any(name.startswith("trainer.") and "fork" in name for name in graph)


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


def test_no_module_is_over_500_lines():
    long = {
        name: n
        for name, path in project_modules().items()
        if (n := len(path.read_text().splitlines())) > 500
    }
    assert long == {}
