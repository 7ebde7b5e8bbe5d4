"""The claims a reader acts on hold: named functions exist, quoted numbers match the code,
and the recipes' file lists are what the change takes.

* Names: a backticked `path.py:name` (or `path.py:Class.attr`) and a backticked dotted
  `module.name` whose first part is one of the project's modules (or classes) must resolve,
  read with `ast` (nothing is imported). Dotted names of other libraries are left alone.
* Numbers: `<!-- code: path.py:NAME -->` right after a number in a doc says the number is
  that constant's value (`NAME`, `NAME[key]` of a dict, `Class.field` default,
  `function(param)` default). README.md, which is capped in size, uses `README_NUMBERS`.
* Pointers: a `doc.md, "Section"` in the code names a heading (or a bold lead-in) of
  that doc, so moving a section cannot strand the comments that send readers to it.
* Recipes: ARCHITECTURE.md's (and docs/parameters.md's) recipes marked *dry-run* list the
  files to touch; each is performed in a copy of the code, which must change exactly those
  files and be accepted by `hpt-pipeline compile` there.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_docs import ROOT, pipelines_packages

DOCS = sorted(
    {"README.md", "ARCHITECTURE.md", "benchmarks/README.md"}
    | {str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")}
)
CODE_ROOTS = ("pipelines", "trainer", "components", "dataprep", "benchmarks", "tests")
BACKTICKED = re.compile(r"`([^`\n]+)`")
PATH_NAME = re.compile(r"^([\w./-]+\.py):([A-Za-z_][\w.]*)$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
# A dotted token ending so is a file name (`trials.json`), not an attribute.
FILE_SUFFIXES = set(
    "json yaml yml py log lock md txt h5 keras binpb csv html png gz metrics earlier toml".split()
)
# Dotted names that are not Python though their first part is one of our modules' names:
# JSON keys under a trial's `local`, Kubernetes API groups, a Go function.
NOT_OURS = {"local.continuedFrom", "local.earlyStopped", "kubeflow.org", "trainer.kubeflow.org",
            "common.GenGeneralName"}  # fmt: skip
MARKER = re.compile(r"<!--\s*code:\s*([^\s>]+)\s*-->")
NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?(?:e-?\d+)?)")

# (doc, a pattern whose first group is the number, the code it quotes)
RUN = "pipelines/settings.py:LOCAL_RUN_DEFAULTS"
README_NUMBERS = [
    ("README.md", r"at (\d+)×\d+, runs a", f"{RUN}[image_size]"),
    ("README.md", r"runs a (\d+)-trial study", f"{RUN}[max_trials]"),
    ("README.md", r"study of (\d+) epochs", f"{RUN}[epochs]"),
    ("README.md", r"\((\d+) trials at a time\)", f"{RUN}[parallel_trials]"),
    ("README.md", r"a chief\s+and (\d+) worker", f"{RUN}[workers]"),
    ("README.md", r"--trial-accelerators (\d+)` \(default\)", f"{RUN}[trial_accelerator_count]"),
]


# ---- reading the code with ast ----------------------------------------------------------


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _body_names(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """Names a module or class body defines (into `if`/`try` blocks), with their nodes."""
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, ast.If):
            names.update(_body_names(node.body) | _body_names(node.orelse))
        elif isinstance(node, ast.Try):
            names.update(_body_names(node.body))
            for handler in node.handlers:
                names.update(_body_names(handler.body))
    return names


def defines(path: Path, dotted: str) -> bool:
    """Whether the module at `path` defines `dotted` (`name` or `Class.attr`)."""
    first, *rest = dotted.split(".")
    node = _body_names(_tree(path).body).get(first)
    if node is None:
        return False
    if not rest:
        return True
    return isinstance(node, ast.ClassDef) and rest[0] in _body_names(node.body)


def resolve_file(written: str, root: Path = ROOT) -> Path | None:
    """The file a doc's path names, `pipelines/` packages also without the prefix."""
    candidates = [root / written]
    if written.split("/", 1)[0] in pipelines_packages():
        candidates.append(root / "pipelines" / written)
    return next((c for c in candidates if c.is_file()), None)


@functools.cache
def project_modules(root: Path = ROOT) -> dict[str, list[Path]]:
    """Every project module file by its name (`trials` → the files named trials.py).

    Packages are left out: `local.earlyStopped` is a JSON key, `kubeflow.org` an API
    group; a package's names are written from the root (`trainer.models.MODELS`).
    """
    found: dict[str, list[Path]] = {}
    for top in CODE_ROOTS:
        for path in (root / top).rglob("*.py"):
            if "__pycache__" not in path.parts and path.name != "__init__.py":
                found.setdefault(path.stem, []).append(path)
    return found


@functools.cache
def project_classes(root: Path = ROOT) -> dict[str, list[Path]]:
    """Every top-level class name of the project, with the files defining it."""
    found: dict[str, list[Path]] = {}
    for top in CODE_ROOTS:
        for path in (root / top).rglob("*.py"):
            if "__pycache__" not in path.parts:
                for node in _tree(path).body:
                    if isinstance(node, ast.ClassDef):
                        found.setdefault(node.name, []).append(path)
    return found


def _module_file(parts: list[str], root: Path) -> Path | None:
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def unresolved_names(text: str, root: Path = ROOT) -> list[str]:
    """The `path.py:name` and `module.name` references in `text` that the code lacks."""
    modules = project_modules(root)
    classes = project_classes(root)
    missing = []
    for token in BACKTICKED.findall(text):
        token = token.strip().rstrip("()")
        if match := PATH_NAME.match(token):
            if "/" in match[1]:
                paths = [p] if (p := resolve_file(match[1], root)) else []
            else:  # `task.py:main`: the module of that name, wherever it is
                paths = modules.get(match[1].removesuffix(".py"), [])
            if paths and not any(defines(p, match[2]) for p in paths):
                missing.append(token)
            continue
        if not DOTTED.match(token) or token.rsplit(".", 1)[1] in FILE_SUFFIXES:
            continue
        if token in NOT_OURS:
            continue
        parts = token.split(".")
        # A dotted module path from the root (`trainer.train.evaluation_step`).
        for i in range(len(parts), 0, -1):
            if parts[0] in CODE_ROOTS and (path := _module_file(parts[:i], root)):
                if i < len(parts) and not defines(path, ".".join(parts[i:])):
                    missing.append(token)
                break
        else:
            head, rest = parts[0], ".".join(parts[1:])
            if head in modules:  # `trials.with_measured_once`
                if not any(defines(p, rest) for p in modules[head]):
                    missing.append(token)
            elif head in classes:  # `ModelSpec.blocks`
                if not any(defines(p, f"{head}.{parts[1]}") for p in classes[head]):
                    missing.append(token)
    return missing


def code_value(reference: str, root: Path = ROOT) -> Any:
    """The literal value `path.py:NAME`, `NAME[key]`, `Class.field` or `func(param)` has.

    A value that is a module constant's name is followed to that constant's value.
    """
    path_text, expression = reference.split(":", 1)
    path = resolve_file(path_text, root)
    assert path is not None, f"{reference}: no file {path_text}"
    names = _body_names(_tree(path).body)

    def literal(node: ast.expr) -> Any:
        if isinstance(node, ast.Name) and isinstance(names.get(node.id), ast.Assign):
            return literal(names[node.id].value)  # type: ignore[union-attr]
        return ast.literal_eval(node)

    if match := re.fullmatch(r"(\w+)\((\w+)\)", expression):  # a parameter's default
        function = names[match[1]]
        assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)), reference
        args = function.args
        positional = args.posonlyargs + args.args
        defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults) :]],
                            args.defaults, strict=True))  # fmt: skip
        defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d}
        return literal(defaults[match[2]])
    match = re.fullmatch(r"(\w+)(?:\.(\w+)|\[(\w+)\])?", expression)
    assert match, f"{reference}: expected NAME, NAME[key], Class.field or function(param)"
    node = names[match[1]]
    if match[2]:  # a class field's default
        assert isinstance(node, ast.ClassDef), reference
        node = _body_names(node.body)[match[2]]
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    assert value is not None, f"{reference}: not an assignment"
    if isinstance(value, ast.Call) and not match[3]:  # dataclasses.field(default=…)
        value = next(k.value for k in value.keywords if k.arg == "default")
    if match[3]:
        if isinstance(value, ast.Call):  # dict(key=…)
            return literal(next(k.value for k in value.keywords if k.arg == match[3]))
        return literal(value)[match[3]]
    return literal(value)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def marked_numbers(text: str) -> list[tuple[str, str]]:
    """(number as written, code reference) for each marker: the last number before it."""
    found = []
    for match in MARKER.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if text.count("`", line_start, match.start()) % 2:  # inside inline code: an example
            continue
        before = MARKER.sub("", text[max(0, match.start() - 80) : match.start()])
        numbers = NUMBER.findall(before)
        found.append((numbers[-1] if numbers else "", match[1]))
    return found


def wrong_numbers(pairs: list[tuple[str, str]], root: Path = ROOT) -> list[str]:
    """The quoted numbers that differ from the code they quote, as readable lines."""
    wrong = []
    for written, reference in pairs:
        actual = code_value(reference, root)
        if not written or _number(written) != float(actual):
            wrong.append(f"{written or '(no number)'} quotes {reference} = {actual!r}")
    return wrong


# ---- the checks over the docs ------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS)
def test_every_named_function_exists(doc):
    assert unresolved_names((ROOT / doc).read_text()) == []


@pytest.mark.parametrize("doc", DOCS)
def test_every_marked_number_matches_the_code(doc):
    assert wrong_numbers(marked_numbers((ROOT / doc).read_text())) == []


def test_the_readme_numbers_match_the_code():
    pairs = []
    for doc, pattern, reference in README_NUMBERS:
        match = re.search(pattern, (ROOT / doc).read_text())
        pairs.append((match[1] if match else "", reference))
    assert wrong_numbers(pairs) == []


def test_the_checkers_catch_a_renamed_function_and_a_changed_number():
    good = "`pipelines/study/failure_rules.py:stop_reason`, `trials.trial_outcome`"
    assert unresolved_names(good) == []
    assert unresolved_names("`pipelines/study/failure_rules.py:stop_reasons`") == [
        "pipelines/study/failure_rules.py:stop_reasons"
    ]
    assert unresolved_names("`task.py:metric_value`, `trials.no_such`, `ModelSpec.nope`") == [
        "task.py:metric_value",
        "trials.no_such",
        "ModelSpec.nope",
    ]
    assert unresolved_names("`trainer/task.py:main`, `trainer.train.evaluation_step`") == []
    assert unresolved_names("`trials.json`, `tf.config.run`, `trainer.task`") == []
    floor = "pipelines/study/failure_rules.py:DEFAULT_FAILURE_FLOOR"
    assert wrong_numbers(marked_numbers(f"at least 3<!-- code: {floor} --> failures")) == []
    assert wrong_numbers(marked_numbers(f"at least 4 <!-- code: {floor} --> failures")) == [
        f"4 quotes {floor} = 3"
    ]
    assert marked_numbers("write `<!-- code: path.py:NAME -->` after it") == []  # an example
    defaults = "pipelines/settings.py:LOCAL_RUN_DEFAULTS[epochs]"
    assert wrong_numbers([("10", defaults), ("1,000", defaults)]) == [
        f"1,000 quotes {defaults} = 10"
    ]
    grace = "pipelines/settings_cloud.py:KubeflowSettings.kubeflow_pending_grace_s"
    assert code_value(grace) == 600
    assert code_value("trainer/cost_metrics.py:latency_ms(warmup)") == 3  # a constant, followed


POINTER = re.compile(
    r"`?((?:docs|benchmarks)/[\w/.-]+\.md|ARCHITECTURE\.md|README\.md)`?,\s+\"([^\"]+)\""
)
HEADING = re.compile(r"^#+ (.+)$|^\*\*(.+?)\*\*", re.MULTILINE)


def stranded_pointers(code: str, root: Path = ROOT) -> list[str]:
    """The `doc.md, "Section"` pointers in `code` whose doc has no such section."""
    stranded = []
    for match in POINTER.finditer(code):
        doc, title = match[1], " ".join(match[2].replace("#", " ").split())
        path = root / doc
        titles = [h or b for h, b in HEADING.findall(path.read_text())] if path.is_file() else []
        if not any(t.startswith(title) for t in titles):
            stranded.append(f"{doc}, {title!r}")
    return stranded


def test_every_pointer_from_the_code_names_a_section_that_exists():
    stranded = {
        str(path.relative_to(ROOT)): found
        for top in CODE_ROOTS
        for path in sorted((ROOT / top).rglob("*.py"))
        if path != Path(__file__) and (found := stranded_pointers(path.read_text()))
    }
    assert stranded == {}


def test_the_pointer_check_catches_a_moved_section():
    assert stranded_pointers('see docs/kubeflow.md, "Katib, as its\n    source behaves".') == []
    assert stranded_pointers('ARCHITECTURE.md, "Katib, as its source behaves"') == [
        "ARCHITECTURE.md, 'Katib, as its source behaves'"
    ]


# ---- the recipes, performed ----------------------------------------------------------------


def recipe_files(title: str, text: str | None = None) -> list[str]:
    """The numbered files of (by default) ARCHITECTURE.md's recipe `**<title>** (*dry-run*)`."""
    text = text if text is not None else (ROOT / "ARCHITECTURE.md").read_text()
    start = text.index(f"**{title}** (*dry-run*)")
    block = text[start:].split("\n\n", 2)
    items = re.findall(r"^\d+\. `([^`]+)`", block[1], re.MULTILINE)
    assert items, f"recipe {title!r}: no numbered list of files"
    return items


def _copy_code(destination: Path) -> None:
    for top in ("pipelines", "trainer", "components", "dataprep"):
        shutil.copytree(ROOT / top, destination / top, ignore=shutil.ignore_patterns("__pycache__"))


def changed_files(copy: Path) -> set[str]:
    """The files of `copy` that are new or differ from the repository's."""
    changed = set()
    for path in copy.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(copy)
            original = ROOT / relative
            if not original.is_file() or original.read_bytes() != path.read_bytes():
                changed.add(str(relative))
    return changed


# The dry run's probe: runs in the copy, compiles with `model`/`search_space` set, prints JSON.
PROBE = """
import json, sys
from typer.testing import CliRunner
import pipelines
from pipelines.app.cli import app
out = {"pipelines": pipelines.__file__}
for name, config in json.loads(sys.argv[1]).items():
    argv = ["compile", "--output", name + ".spec.yaml", "--config", config]
    result = CliRunner().invoke(app, argv)
    out[name] = [result.exit_code, result.output.strip().splitlines()[-1:]]
if len(sys.argv) > 2:
    from trainer.models import MODELS, builder_of
    spec = MODELS.get(sys.argv[2])
    out["builder"] = spec and builder_of(spec)("probe", 2)
print(json.dumps(out))
"""


def run_in(copy: Path, script: str, *args: str) -> dict[str, Any]:
    """Run `script` with the copy's code first on the path; the JSON it prints last."""
    process = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=copy,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy), "HOME": str(copy)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads(process.stdout.strip().splitlines()[-1])
    assert result["pipelines"].startswith(str(copy)), result  # the copy's code ran
    return result


def run_probe(copy: Path, configs: dict[str, str], model: str | None = None) -> dict[str, Any]:
    """`compile` in the copy with each YAML config (and the `model`'s builder looked up)."""
    for name, body in configs.items():
        (copy / f"{name}.yaml").write_text(body)
    args = [json.dumps({n: f"{n}.yaml" for n in configs})] + ([model] if model else [])
    return run_in(copy, PROBE, *args)


TOY_BUILDER = '''"""A toy model, added by the recipe's dry run."""


def build(image_shape, num_classes, *, num_units=8, input_dtype="float32"):
    """Not built in the dry run: the probe calls it with a marker and gets it back."""
    return image_shape
'''

TOY_ENTRY = """        ModelSpec(
            "toy",
            "trainer.models.toy:build",
            (_units(8),),
            typed_input=True,
            description="a toy model (the recipe's dry run)",
        ),
"""


def _write_builder(path: Path) -> None:
    path.write_text(TOY_BUILDER)


def _register(path: Path) -> None:
    text = path.read_text()
    anchor = "    )\n}\n"  # the end of the MODELS tuple of specs
    assert text.count(anchor) == 1, f"{path}: MODELS no longer ends with {anchor!r}"
    path.write_text(text.replace(anchor, TOY_ENTRY + anchor))


# How the dry run performs each step a model recipe may list (a step it cannot is a failure).
MODEL_STEPS = {"trainer/models/<name>.py": _write_builder, "trainer/models/__init__.py": _register}


def test_the_model_recipe_is_exactly_what_adding_a_model_takes(tmp_path):
    files = recipe_files("A model")
    unknown = [f for f in files if f not in MODEL_STEPS]
    assert unknown == [], f"the dry run knows no step for {unknown}: extend MODEL_STEPS"
    _copy_code(tmp_path)
    for file in files:
        MODEL_STEPS[file](tmp_path / file.replace("<name>", "toy"))
    assert changed_files(tmp_path) == {f.replace("<name>", "toy") for f in files}

    result = run_probe(tmp_path, {"toy": "model: toy\n", "nope": "model: nope\n"}, model="toy")
    assert result["toy"][0] == 0, result  # compile accepts the new model
    assert "defaultValue: toy" in (tmp_path / "toy.spec.yaml").read_text()
    assert result["nope"][0] != 0 and "toy" in result["nope"][1][0], result  # listed
    assert result["builder"] == "probe"  # its builder module is the one registered


TOY_BACKBONE_BUILDER = '''"""A toy pretrained backbone, added by the recipe's dry run."""

import keras

from trainer.models import backbones

build = backbones.transfer_builder(
    "toy_backbone",
    keras.applications.MobileNet,
    to_backbone=lambda images: images * 2.0 - 1.0,
    alpha=0.25,
)
'''

TOY_BACKBONE_ENTRY = """        transfer_spec(
            "toy_backbone",
            "toy_backbone",
            16,
            BackboneSpec(
                ((2, 8), (2, 16), (4, 32), (4, 32), (8, 64), (8, 64)) + ((16, 128),) * 6
                + ((32, 256), (32, 256)),
                r"^(?:conv_(?:dw|pw|pad)_)?(conv1|\\d+)(?:_|$)",
                params=218_544,
            ),
            "the stem and 13 depthwise blocks",
            "a toy backbone (the recipe's dry run)",
        ),
"""

# Runs in the copy: the toy backbone built, cut at every block boundary, planned and estimated.
BACKBONE_PROBE = """
import json
import numpy as np
import pipelines
from pipelines.targets.local.cli.preflight import model_params
from pipelines.settings import load_settings
from pipelines.settings_space import study_space
from pipelines.study.feature_plan import plan_features
from trainer import feature_keys, frozen
from trainer.models import MODELS, build_model
spec = MODELS["toy_backbone"]
model = build_model(spec, {"trainable_blocks": 1}, "none", (64, 64, 3), 3)
images = np.random.default_rng(0).random((2, 64, 64, 3)).astype("float32")
whole = np.asarray(model(images, training=False))
depths = list(range(1, spec.blocks + 1))
shapes, parts = [], []
for depth, values in zip(depths, frozen.prefix_model(model, spec, depths)(images), strict=True):
    shapes.append([list(values.shape[1:]), list(feature_keys.feature_shape(spec, [64, 64], depth))])
    part = frozen.trainable_part(model, spec, depth, "float32")
    parts.append(bool(np.allclose(np.asarray(part(values, training=False)), whole, atol=1e-5)))
asked = {"model": "toy_backbone", "search_space": "transfer"}
settings = load_settings(overrides=asked, environ={})
print(json.dumps({
    "pipelines": pipelines.__file__,
    "blocks": spec.blocks,
    "shapes": shapes,
    "parts": parts,
    "params": [frozen.backbone_of(model).count_params(), spec.backbone.params],
    "plan": plan_features(spec, study_space(settings).parameters, "auto").reason,
    "disk_params": model_params(settings),
}))
"""


def _write_backbone_builder(path: Path) -> None:
    path.write_text(TOY_BACKBONE_BUILDER)


def _register_backbone(path: Path) -> None:
    text = path.read_text()
    anchor = "    )\n}\n"  # the end of the MODELS tuple of specs
    assert text.count(anchor) == 1, f"{path}: MODELS no longer ends with {anchor!r}"
    path.write_text(text.replace(anchor, TOY_BACKBONE_ENTRY + anchor))


BACKBONE_STEPS = {
    "trainer/models/<name>.py": _write_backbone_builder,
    "trainer/models/__init__.py": _register_backbone,
}


@pytest.mark.slow
def test_the_backbone_recipe_is_exactly_what_adding_a_cacheable_backbone_takes(tmp_path):
    files = recipe_files("A pretrained backbone", (ROOT / "docs" / "models.md").read_text())
    unknown = [f for f in files if f not in BACKBONE_STEPS]
    assert unknown == [], f"the dry run knows no step for {unknown}: extend BACKBONE_STEPS"
    _copy_code(tmp_path)
    for file in files:
        BACKBONE_STEPS[file](tmp_path / file.replace("<name>", "toy_backbone"))
    assert changed_files(tmp_path) == {f.replace("<name>", "toy_backbone") for f in files}

    config = "model: toy_backbone\nsearch_space: transfer\nweights: none\n"
    compiled = run_probe(tmp_path, {"toy": config})
    assert compiled["toy"][0] == 0, compiled  # compile accepts it with the transfer preset
    result = run_in(tmp_path, BACKBONE_PROBE)
    assert result["blocks"] == 14
    for found, declared in result["shapes"]:  # every block's output is the declared one
        assert found == declared, result["shapes"]
    assert all(result["parts"]) and len(result["parts"]) == 14  # one tensor at every cut
    assert result["params"][0] == result["params"][1]
    assert result["plan"].startswith(
        "caching toy_backbone's frozen prefix for trainable_blocks 0,2"
    )
    assert result["disk_params"] == 218_544 + 256 * 256  # its own head width, not ResNet50's


def _add_metric_goal(path: Path) -> None:
    text = path.read_text()
    line = '    "val_loss": "minimize",\n'
    assert text.count(line) == 1, f"{path}: METRIC_GOALS no longer lists {line!r}"
    path.write_text(text.replace(line, line + '    "val_toy": "maximize",\n'))


def _compute_metric(path: Path) -> None:
    text = path.read_text()
    line = '            "val_accuracy": total_correct / max(total_seen, 1),\n'
    assert text.count(line) == 1, f"{path}: the validation pass no longer returns {line!r}"
    path.write_text(text.replace(line, line + '            "val_toy": 0.25,\n'))


METRIC_STEPS = {"trainer/contract.py": _add_metric_goal, "trainer/train.py": _compute_metric}


@pytest.mark.slow
def test_the_metric_recipe_is_exactly_what_adding_a_metric_takes(tmp_path):
    from tests.synthetic import write_dataset

    files = recipe_files("A metric")
    unknown = [f for f in files if f not in METRIC_STEPS]
    assert unknown == [], f"the dry run knows no step for {unknown}: extend METRIC_STEPS"
    copy = tmp_path / "copy"
    _copy_code(copy)
    for file in files:
        METRIC_STEPS[file](copy / file)
    assert changed_files(copy) == set(files)

    configs = {"toy": "objectives: [val_toy, val_loss]\n", "nope": "objectives: [val_nope]\n"}
    result = run_probe(copy, configs)
    assert result["toy"][0] == 0, result  # the objectives check takes it, goal and all
    assert "val_toy" in (copy / "toy.spec.yaml").read_text()
    assert result["nope"][0] != 0 and "val_toy" in result["nope"][1][0], result  # listed

    metrics = tmp_path / "output.metrics"
    trained = subprocess.run(
        [sys.executable, "-m", "trainer.task", f"--data={write_dataset(str(tmp_path / 'd'))}"]
        + ["--epochs=1", "--batch_size=16", f"--model_dir={tmp_path / 'model'}"],
        cwd=copy,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy), "HOME": str(copy)}
        | {"CLOUD_ML_HP_METRIC_FILE": str(metrics), "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    reported = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [float(r["val_toy"]) for r in reported if "val_toy" in r] == [0.25]  # each epoch


def _replace_once(path: Path, line: str, new: str) -> None:
    text = path.read_text()
    assert text.count(line) == 1, f"{path}: no longer holds {line!r} once"
    path.write_text(text.replace(line, new))


HP_BATCH_SIZE = (
    '        Hyperparameter("batch_size", int, 32, 1, help="examples per replica per step"),\n'
)
HP_TOY_CLIP = (
    '        Hyperparameter("toy_clip", float, 0.0, 0.0, help="a toy: SGD\'s clip norm"),\n'
)
HP_EPOCHS_FIELD = '    epochs: int = int(TRAINER_HYPERPARAMETERS["epochs"].default)\n'
HP_TOY_FIELD = '    toy_clip: float = float(TRAINER_HYPERPARAMETERS["toy_clip"].default)\n'
HP_SGD = "keras.optimizers.SGD(hparams.learning_rate, momentum=hparams.momentum)"
HP_TOY_SGD = HP_SGD.replace(")", ", clipnorm=hparams.toy_clip or None)")
HYPERPARAMETER_STEPS = {
    "trainer/contract.py": lambda path: _replace_once(
        path, HP_BATCH_SIZE, HP_BATCH_SIZE + HP_TOY_CLIP
    ),
    "trainer/config.py": lambda path: _replace_once(
        path, HP_EPOCHS_FIELD, HP_EPOCHS_FIELD + HP_TOY_FIELD
    ),
    "trainer/train.py": lambda path: _replace_once(path, HP_SGD, HP_TOY_SGD),
}

# Runs in the copy: the flag parsed into `HParams` and used by the optimizer.
HYPERPARAMETER_PROBE = """
import json, sys
import pipelines
from trainer import flags, train
hparams, _ = flags.parse_args(["--data=" + sys.argv[1], "--toy_clip=0.5"])
clipnorm = train.make_optimizer(hparams).clipnorm
print(json.dumps({"pipelines": pipelines.__file__, "clipnorm": clipnorm}))
"""


@pytest.mark.slow
def test_the_hyperparameter_recipe_is_exactly_what_adding_one_takes(tmp_path):
    from tests.synthetic import write_dataset

    files = recipe_files("A trainer hyperparameter")
    unknown = [f for f in files if f not in HYPERPARAMETER_STEPS]
    assert unknown == [], f"the dry run knows no step for {unknown}: extend HYPERPARAMETER_STEPS"
    _copy_code(tmp_path)
    for file in files:
        HYPERPARAMETER_STEPS[file](tmp_path / file)
    assert changed_files(tmp_path) == set(files)

    space = "parameters:\n  - {id: toy_clip, type: double, min: 0.1, max: 1.0}\n"
    (tmp_path / "toy-space.yaml").write_text(space)
    (tmp_path / "bad-space.yaml").write_text(
        space.replace("max: 1.0", "max: 1.0}\n  - {id: toy_clip, type: double, min: -1.0, max: 0.0")
    )
    configs = {"toy": "search_space: toy-space.yaml\n", "bad": "search_space: bad-space.yaml\n"}
    result = run_probe(tmp_path, configs)
    assert result["toy"][0] == 0, result  # the search-space check takes it
    assert "toy_clip" in (tmp_path / "toy.spec.yaml").read_text()
    assert result["bad"][0] != 0, result  # ... and its range
    data = write_dataset(str(tmp_path / "data"))
    assert run_in(tmp_path, HYPERPARAMETER_PROBE, data)["clipnorm"] == 0.5  # parsed, used


def _write_preset(path: Path) -> None:
    path.write_text(
        "parameters:\n  - id: learning_rate\n    type: double\n    min: 0.001\n    max: 0.1\n"
    )


PRESET_STEPS = {"pipelines/study/presets/<name>.yaml": _write_preset}


def test_the_preset_recipe_is_exactly_what_adding_a_preset_takes(tmp_path):
    files = recipe_files("A search-space preset")
    unknown = [f for f in files if f not in PRESET_STEPS]
    assert unknown == [], f"the dry run knows no step for {unknown}: extend PRESET_STEPS"
    _copy_code(tmp_path)
    for file in files:
        PRESET_STEPS[file](tmp_path / file.replace("<name>", "toy_space"))
    assert changed_files(tmp_path) == {f.replace("<name>", "toy_space") for f in files}
    result = run_probe(
        tmp_path, {"toy_space": "search_space: toy_space\n", "gone": "search_space: gone\n"}
    )
    assert result["toy_space"][0] == 0, result  # compile accepts the new preset
    assert "max_value: 0.1\n" in (tmp_path / "toy_space.spec.yaml").read_text()  # its bounds
    assert result["gone"][0] != 0, result  # as an unknown preset is not


TOY_COMMANDS = '''"""A toy command, added by the recipe's dry run."""

import typer


def toy(name: str = typer.Option("x", help="Who to greet.")) -> None:
    """Greet, as a new command would work."""
    typer.echo(f"toy {name}")
'''


def _register_command(path: Path) -> None:
    text = path.read_text()
    assert "\napp = typer.Typer(" in text, f"{path}: no `app = typer.Typer(` to register on"
    path.write_text(
        text + "\nfrom pipelines.app import toy_commands  # noqa: E402\n\n"
        'app.command("toy")(toy_commands.toy)\n'
    )


CLI_STEPS = {
    "pipelines/app/<subject>_commands.py": lambda path: path.write_text(TOY_COMMANDS),
    "pipelines/app/cli.py": _register_command,
}
CLI_PROBE = """
import json
from typer.testing import CliRunner
import pipelines
from pipelines.app.cli import app
listing, ran = CliRunner().invoke(app, ["--help"]), CliRunner().invoke(app, ["toy", "--name", "y"])
print(json.dumps({"pipelines": pipelines.__file__, "help": listing.output, "ran": ran.output}))
"""


def test_the_cli_command_recipe_is_exactly_what_adding_a_command_takes(tmp_path):
    files = recipe_files("A CLI command")
    unknown = [f for f in files if f not in CLI_STEPS]
    assert unknown == [], f"the dry run knows no step for {unknown}: extend CLI_STEPS"
    _copy_code(tmp_path)
    for file in files:
        CLI_STEPS[file](tmp_path / file.replace("<subject>", "toy"))
    assert changed_files(tmp_path) == {f.replace("<subject>", "toy") for f in files}
    result = run_in(tmp_path, CLI_PROBE)
    assert re.search(r"^\W*toy\b", result["help"], re.MULTILINE), result["help"]  # listed
    assert result["ran"].strip() == "toy y", result


TOY_FIELD = "    toy_setting: int = 3  # added by the recipe's dry run\n"
TOY_CHECK = '        need(self, self.toy_setting >= 1, "toy_setting", "an integer >= 1")\n'


def _add_field(path: Path) -> None:
    """A field at the end of the training section, and its refusal first in its `check`."""
    text = path.read_text()
    section = text.index("class TrainingSettings")
    check = text.index("\n    def check(self) -> None:\n", section)
    opening = text.index('"""', check)
    body = text.index('"""\n', opening + 3) + 4  # after the check's docstring
    text = text[:check] + TOY_FIELD + text[check:body] + TOY_CHECK + text[body:]
    path.write_text(text)


def _add_parameter(path: Path) -> None:
    text = path.read_text()
    end = text.index("\n)\n", text.index("PARAMETERS:"))  # the end of the parameters' tuple
    path.write_text(text[:end] + '\n    ("toy_setting", int),' + text[end:])


SETTING_STEPS = {
    "pipelines/settings_sections.py": _add_field,
    "pipelines/pipeline_parameters.py": _add_parameter,
}
SETTING_PROBE = """
import json
from typer.testing import CliRunner
import pipelines
from pipelines.app.cli import app
from pipelines.settings import SECTION_OF, SettingsError, load_settings
out = {"pipelines": pipelines.__file__, "section": SECTION_OF.get("toy_setting")}
out["env"] = load_settings(environ={"HPT_TOY_SETTING": "5"}).training.toy_setting
out["flag"] = load_settings(overrides={"toy_setting": 6}, environ={}).training.toy_setting
try:
    load_settings(overrides={"toy_setting": 0}, environ={})
except SettingsError as err:
    out["refused"] = str(err)
argv = ["compile", "--output", "toy.spec.yaml", "--config", "toy.yaml"]
out["compile"] = CliRunner().invoke(app, argv).exit_code
print(json.dumps(out))
"""


def test_the_setting_recipe_is_exactly_what_adding_a_setting_takes(tmp_path):
    page = (ROOT / "docs" / "parameters.md").read_text()
    files = recipe_files("A setting", page)
    unknown = [f for f in files if f not in SETTING_STEPS]
    assert unknown == [], f"the dry run knows no step for {unknown}: extend SETTING_STEPS"
    _copy_code(tmp_path)
    for file in files:
        SETTING_STEPS[file](tmp_path / file)
    assert changed_files(tmp_path) == set(files)
    (tmp_path / "toy.yaml").write_text("toy_setting: 7\n")
    result = run_in(tmp_path, SETTING_PROBE)
    assert result["section"] == "training", result  # SECTION_OF follows the dataclass
    assert (result["env"], result["flag"]) == (5, 6), result  # HPT_* and a flag's override
    assert result["refused"] == "toy_setting=0: expected an integer >= 1", result
    assert result["compile"] == 0, result  # the YAML key is accepted
    spec = yaml.safe_load((tmp_path / "toy.spec.yaml").read_text())
    parameter = spec["root"]["inputDefinitions"]["parameters"]["toy_setting"]
    assert parameter["defaultValue"] == 7, parameter  # the YAML value is the parameter's default


def readme_team_model(readme: str) -> str:
    """The README's team builder, exactly as shown (the block under `# teammodels/tiny.py`)."""
    found = re.search(r"```python\n# teammodels/tiny\.py\n(.*?)```", readme, re.S)
    assert found, "README.md: no `# teammodels/tiny.py` block"
    return found[1]


@pytest.mark.slow
def test_the_readme_team_model_builds_as_shown(tmp_path):
    """Issue 51, case 17: copied as shown (was: no imports, `NameError: Literal`), it is a
    builder `run` takes: the check `run` makes before any work passes and finds its arguments."""
    package = tmp_path / "teammodels"
    package.mkdir()
    (package / "tiny.py").write_text(readme_team_model((ROOT / "README.md").read_text()))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-m", "trainer.models.custom", "teammodels.tiny:build"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    spec = json.loads(done.stdout.strip().splitlines()[-1])
    assert [(h["name"], h["default"]) for h in spec["hyperparameters"]] == [
        ("width", 16),
        ("act", "relu"),
    ]
