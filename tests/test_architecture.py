"""The layering written in ARCHITECTURE.md, checked over every import in the project's code.

Imports inside functions count too: a late import is still a dependency.
"""

from __future__ import annotations

import ast
import re
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
    ("plan", ("pipelines.plan",)),
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
            "pipelines.settings_sections",
            "pipelines.settings_space",
            "pipelines.schedules",
            "pipelines.templates",
        ),
    ),
    ("tracking", ("pipelines.tracking",)),
    ("study", ("pipelines.study",)),
    ("jobs", ("pipelines.jobs",)),
    ("core", ("pipelines",)),
    ("dataprep", ("dataprep",)),
    ("trainer", ("trainer",)),
]


# A target is one package, `pipelines/targets/<name>/` (docs/targets.md), that spans rooms:
# its `cli/` is in the app's room, its `wiring` in the wiring's, its `steps/` (component
# shells) in the components'; the rest is its run-time side. Inside the package the same
# order holds: the run-time side never imports its steps, wiring or command line.
TARGET_PART_ROOMS = {"cli": "app", "wiring": "wiring", "steps": "components"}


def room_of(module: str) -> tuple[int, str]:
    """(rank from the top, name) of the room holding `module`."""
    part = module.split(".")[3:4]
    if module.startswith("pipelines.targets.") and part and part[0] in TARGET_PART_ROOMS:
        room = TARGET_PART_ROOMS[part[0]]
        return next((rank, room) for rank, (name, _) in enumerate(ROOMS) if name == room)
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
        (
            "pipelines.targets.vertex.hpt_job",
            "pipelines.targets.vertex.steps.tune",
        ),  # run-time → component
        (
            "pipelines.targets.local.steps.tune",
            "pipelines.targets.local.wiring",
        ),  # component → its wiring
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
    "pipelines.wiring.base": "pipelines.targets.<target>.wiring (no TensorFlow: checked above)",
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


# --------------------------------------------------------------------------- function size

LONG_FUNCTION = 60  # lines, decorators and docstring included
LONG_PARAMETERS = 8  # not counting self/cls; kfp components and Typer commands are exempt
_NOT_SPLIT = "not split yet (issue 45 debt: this list only shrinks)"
_POOL_FIELDS = "WorkerPoolSpec's fields, the job spec components pass by name (docstring)"
_COMPONENT = "a kfp component's body is compiled into the golden specs; " + _NOT_SPLIT
# Every product function over a limit, with why. A new long function fails the check below;
# one that got short fails it too, so its entry is removed and the list stays true.
OVER_LIMIT = {
    "pipelines/targets/local/local_study.py:run_study": "the Vertex payload fields (docstring)",
    "pipelines/targets/vertex/hpt_job.py:hpt_job_payload": "GCPC's op inputs (its docstring)",
    "dataprep/prepare.py:prepare_dataset": "its documented keyword options (its docstring)",
    "pipelines/targets/kubeflow/trainjob.py:build_trainjob": "9: two runtime options + labels",
    "pipelines/targets/kubeflow/cluster_checks.py:check_pods_can_run": "9: one input per check",
    "pipelines/jobs/local_job.py:LocalCustomJob.__init__": "flat keyword run options (docstring)",
    "pipelines/jobs/worker_pools.py:training_worker_pool_specs": _POOL_FIELDS,
    "pipelines/jobs/worker_pools.py:_pool": _POOL_FIELDS,
    "pipelines/study/trials.py:make_trial": "the Trial JSON's optional fields (its docstring)",
    "components/features.py:features_job_spec": _COMPONENT,
    "pipelines/targets/kubeflow/steps/tune.py:tune_on_katib": _COMPONENT,
    # + halving, budgets, tracking
    "pipelines/targets/local/steps/tune.py:tune_locally": _COMPONENT,
    "components/evaluate.py:evaluate_model": _COMPONENT,
}


def _is_interface(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A kfp component or a Typer command: its parameters are its interface."""
    for d in node.decorator_list:
        name = ast.unparse(d.func if isinstance(d, ast.Call) else d)
        if name.split(".")[-1] == "component":
            return True
    a = node.args
    defaults = [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
    annotations = [ast.unparse(p.annotation) for p in a.args + a.kwonlyargs if p.annotation]
    return any(  # typer.Option(...) defaults, or Annotated options (`ProjectOption`)
        isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] in ("Option", "Argument")
        for d in defaults
    ) or any(re.search(r"typer\.|(Option|Argument)\b", t) for t in annotations)


def function_sizes(path: Path) -> dict[str, tuple[int, int, bool]]:
    """`qualified name` → (lines, parameters without self/cls, is a component or command)."""
    sizes: dict[str, tuple[int, int, bool]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                a = child.args
                count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                count += bool(a.vararg) + bool(a.kwarg)
                if a.args and a.args[0].arg in ("self", "cls"):
                    count -= 1
                assert child.end_lineno is not None
                lines = child.end_lineno - child.lineno + 1
                sizes[prefix + child.name] = (lines, count, _is_interface(child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(path.read_text()), "")
    return sizes


def over_limit(paths: list[Path], root: Path = ROOT) -> set[str]:
    """`path:name` of every function over `LONG_FUNCTION` lines or `LONG_PARAMETERS`."""
    found = set()
    for path in paths:
        for name, (lines, count, interface) in function_sizes(path).items():
            if lines > LONG_FUNCTION or (count > LONG_PARAMETERS and not interface):
                found.add(f"{path.relative_to(root).as_posix()}:{name}")
    return found


def test_every_long_function_or_parameter_list_has_a_written_reason():
    paths = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    found = over_limit(paths)
    assert sorted(found - set(OVER_LIMIT)) == [], "split it, or give the reason in OVER_LIMIT"
    assert sorted(set(OVER_LIMIT) - found) == [], "no longer over a limit: drop its entry"


def test_the_size_check_sees_long_bodies_long_lists_and_exempts_interfaces(tmp_path):
    module = tmp_path / "m.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(LONG_FUNCTION))
    module.write_text(
        f"def long():\n{body}\n\n"
        "def wide(a, b, c, d, e, f, g, h, i):\n    pass\n\n"
        "class C:\n    def m(self, a, b, c, d, e, f, g, h):\n        pass\n\n"
        "@dsl.component\ndef step(a, b, c, d, e, f, g, h, i):\n    pass\n\n"
        "def command(a=typer.Option(1), b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9):\n    pass\n\n"
        "def annotated(a: ProjectOption, b, c, d, e, f, g, h, i):\n    pass\n"
    )
    names = {n.split(":")[-1] for n in over_limit([module], tmp_path)}
    assert names == {"long", "wide"}


def product_never_calls(prefix: str) -> list[str]:
    """Top-level functions and classes under `prefix` that no product code refers to.

    A reference is a name, an attribute, an imported name or a `module:function` string in
    any project module (its own included); a decorated definition is registered by its
    decorator. What is left is there for tests only: it belongs under `tests/`.
    """
    used: set[str] = set()
    trees = {name: ast.parse(path.read_text()) for name, path in project_modules().items()}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.alias):
                used.add(node.name.split(".")[-1])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                used.add(node.value.rsplit(":", 1)[-1])
    return [
        f"{name}.{node.name}"
        for name, tree in trees.items()
        if _under(name, prefix)
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
        and not node.decorator_list
        and node.name not in used
    ]


def test_the_targets_run_time_code_holds_nothing_only_tests_call():
    """Simulators of a service (Katib's controller, the Training Operator) live in `tests/`."""
    assert product_never_calls("pipelines.targets") == []
    assert not any(
        "tests" in external_imports(path) for path in project_modules().values()
    )  # and product code never imports them
