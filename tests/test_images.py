"""Container images stay in step with the project (no Docker engine needed).

A small Dockerfile parser reads both images; `image_problems` lists every way an
image disagrees with pyproject.toml, and is itself tested on modified copies.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from pipelines import images
from pipelines.targets.kubeflow.kube import RUN_AS_UID
from tests.conftest import use_temp_folder
from tests.image_layout import (
    component_modules,
    components_imports,
    components_layout,
    copy_build_context,
    dockerignore_rules,
    ignored,
    import_from_layout,
)
from tests.support import project_pins
from tests.test_architecture import import_graph
from trainer.models import MODELS

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILES = {name: ROOT / "images" / name / "Dockerfile" for name in images.IMAGES}
CODE_DIRS = tuple(images.project_packages())  # the one list of what ships
IMAGE_EXTRA = {"trainer": "gpu", "components": "cpu"}


# --------------------------------------------------------------------------- parser


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: keyword, its argument text, and its first line number."""

    cmd: str
    args: str
    line: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Parse instructions, joining `\\` continuations and skipping comments and blank lines."""
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):  # comment lines inside a continuation are dropped
            continue
        if not buf:
            start = number
        if stripped.endswith("\\"):
            buf.append(stripped[:-1].strip())
            continue
        buf.append(stripped)
        joined = " ".join(part for part in buf if part)
        buf = []
        cmd, _, args = joined.partition(" ")
        if not re.fullmatch(r"[A-Za-z]+", cmd):
            raise ValueError(f"line {start}: not an instruction: {joined!r}")
        out.append(Instruction(cmd.upper(), args.strip(), start))
    if buf:
        raise ValueError("file ends inside a line continuation")
    return out


def substitute(text: str, variables: dict[str, str]) -> str:
    """Expand `$VAR` / `${VAR}` the way Dockerfiles do for ARG values."""
    return re.sub(
        r"\$\{(\w+)\}|\$(\w+)", lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text
    )


def base_image(instructions: list[Instruction]) -> str:
    """The final stage's FROM image, with ARG defaults declared before FROM expanded."""
    args: dict[str, str] = {}
    image = ""
    for ins in instructions:
        if ins.cmd == "ARG" and "=" in ins.args and not image:
            key, value = ins.args.split("=", 1)
            args[key.strip()] = value.strip().strip('"')
        elif ins.cmd == "FROM":
            image = substitute(ins.args.split()[0], args)
    return image


def exec_form(ins: Instruction) -> list[str]:
    """The JSON-array form of CMD/ENTRYPOINT (shell form is not allowed here)."""
    parsed = yaml.safe_load(ins.args)
    assert isinstance(parsed, list), f"line {ins.line}: {ins.cmd} must use the exec (JSON) form"
    return [str(x) for x in parsed]


def requirements_command(instructions: list[Instruction]) -> tuple[Instruction, list[str]]:
    """The RUN that renders the requirement list, and that command's argv."""
    for ins in instructions:
        if ins.cmd == "RUN" and "images.py requirements" in ins.args:
            command = ins.args.split(">", 1)[0]
            return ins, shlex.split(command)
    raise AssertionError("no RUN renders the requirements with pipelines/images.py")


def pip_pins(instructions: list[Instruction]) -> dict[str, str]:
    """Every `name==version` written into a RUN, by normalized name."""
    pins = {}
    for ins in instructions:
        if ins.cmd == "RUN":
            for name, version in re.findall(
                r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s'\"]+)", ins.args
            ):
                pins[images.requirement_name(name)] = version
    return pins


def rendered_requirements(dockerfile: Path, pyproject: Path, tmp: Path) -> list[str]:
    """Run the Dockerfile's requirement-rendering command on `pyproject`, as the build does."""
    ins, argv = requirements_command(parse_dockerfile(dockerfile.read_text()))
    build = tmp / "build"
    build.mkdir(parents=True, exist_ok=True)
    shutil.copy(pyproject, build / "pyproject.toml")
    shutil.copy(ROOT / "pipelines" / "images.py", build / "images.py")
    assert argv[0] == "python", f"line {ins.line}: expected `python ...`, got {argv[0]!r}"
    argv = [sys.executable] + [a.replace("/build/", f"{build}/") for a in argv[1:]]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line.strip()]


# ----------------------------------------------------------------- the image checks


def image_problems(name: str, dockerfile: Path, pyproject: Path, tmp: Path) -> list[str]:
    """Every way image `name` disagrees with `pyproject` (empty when in step)."""
    problems = []
    instructions = parse_dockerfile(dockerfile.read_text())
    project = tomllib.loads(pyproject.read_text())["project"]
    pins = project_pins(pyproject)

    image = base_image(instructions)
    match = re.fullmatch(r"python:(\d+\.\d+\.\d+)-slim-\w+", image)
    if not match:
        problems.append(f"base image {image!r} is not a pinned python:X.Y.Z-slim-* tag")
    elif match.group(1) not in SpecifierSet(project["requires-python"]):
        problems.append(f"base Python {match.group(1)} is outside {project['requires-python']}")

    for pkg, version in pip_pins(instructions).items():
        if pins.get(pkg) != version:
            problems.append(f"Dockerfile pins {pkg}=={version}, pyproject has {pins.get(pkg)}")

    reqs = [Requirement(r) for r in rendered_requirements(dockerfile, pyproject, tmp)]
    by_name = {images.requirement_name(r.name): r for r in reqs}
    for r in reqs:
        if len(r.specifier) != 1 or next(iter(r.specifier)).operator != "==":
            problems.append(f"{r} is not an exact pin")
    tf_builds = {"tensorflow", "tensorflow-cpu"} & set(by_name)
    if len(tf_builds) != 1:
        problems.append(f"image installs TensorFlow builds {sorted(tf_builds)}; exactly one")
    want = "tensorflow" if IMAGE_EXTRA[name] == "gpu" else "tensorflow-cpu"
    if want not in by_name:
        problems.append(f"{name} image must install {want}")
    if name == "trainer" and "and-cuda" not in by_name.get("tensorflow", Requirement("x")).extras:
        problems.append("trainer must install tensorflow[and-cuda] (the GPU build)")
    needed = {"cloudml-hypertune"} | (
        {"kfp", "google-cloud-pipeline-components", "google-cloud-aiplatform"}
        if name == "components"
        else set()
    )
    for pkg in sorted(needed - set(by_name)):
        problems.append(f"{name} image does not install {pkg}")
    tf_versions = {pins.get(p) for p in ("tensorflow", "tensorflow-cpu", "tensorboard")}
    if len(tf_versions) != 1:
        problems.append(f"pyproject's TensorFlow/TensorBoard pins differ: {sorted(tf_versions)}")
    return problems


@pytest.mark.parametrize("name", images.IMAGES)
def test_image_is_in_step_with_pyproject(name, tmp_path):
    assert image_problems(name, DOCKERFILES[name], ROOT / "pyproject.toml", tmp_path) == []


@pytest.mark.parametrize("name", images.IMAGES)
def test_image_installs_exactly_the_pinned_versions(name, tmp_path):
    pins = project_pins()
    reqs = rendered_requirements(DOCKERFILES[name], ROOT / "pyproject.toml", tmp_path)
    got = {images.requirement_name(r.split("==")[0]): r.split("==")[1] for r in reqs}
    assert got == {k: pins[k] for k in got}
    assert got["cloudml-hypertune"] == pins["cloudml-hypertune"] == "0.1.0.dev6"
    if name == "trainer":
        assert f"tensorflow[and-cuda]=={pins['tensorflow']}" in reqs
        assert set(got) == {"tensorflow", "tensorboard", "cloudml-hypertune"}
    else:
        assert f"tensorflow-cpu=={pins['tensorflow-cpu']}" in reqs
        for pkg in ("kfp", "google-cloud-pipeline-components", "google-cloud-aiplatform"):
            assert got[pkg] == pins[pkg]


def _mutate(src: Path, dst: Path, old: str, new: str) -> Path:
    text = src.read_text()
    assert old in text, f"{old!r} not in {src}"
    dst.write_text(text.replace(old, new, 1))
    return dst


@pytest.mark.parametrize(
    ("name", "old", "new", "expected"),
    [
        ("trainer", "--extra gpu", "--extra cpu", "must install tensorflow"),
        ("components", "--extra cpu", "--extra gpu", "must install tensorflow-cpu"),
        (
            "trainer",
            "&& rm -rf /build",
            "&& pip install tensorflow==2.20.0 && rm -rf /build",
            "pins tensorflow==2.20.0",
        ),
        (
            "components",
            "&& rm -rf /build",
            "&& pip install kfp==2.16.0 && rm -rf /build",
            "pins kfp==2.16.0",
        ),
        ("trainer", "python:3.11.14-slim", "python:3.12.8-slim", "outside"),
        ("components", "python:3.11.14-slim-bookworm", "python:3.11-slim", "not a pinned"),
    ],
)
def test_a_disagreeing_dockerfile_is_caught(name, old, new, expected, tmp_path):
    bad = _mutate(DOCKERFILES[name], tmp_path / "Dockerfile", old, new)
    problems = image_problems(name, bad, ROOT / "pyproject.toml", tmp_path)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("name", "old", "new", "expected"),
    [
        ("trainer", 'requires-python = ">=3.11,<3.12"', 'requires-python = ">=3.12"', "outside"),
        ("trainer", '"tensorflow[and-cuda]==2.21.0"', '"tensorflow[and-cuda]==2.20.0"', "differ"),
        ("components", '"cloudml-hypertune==0.1.0.dev6",', "", "not install cloudml-hypertune"),
    ],
)
def test_a_disagreeing_pyproject_is_caught(name, old, new, expected, tmp_path):
    pyproject = _mutate(ROOT / "pyproject.toml", tmp_path / "pyproject.toml", old, new)
    problems = image_problems(name, DOCKERFILES[name], pyproject, tmp_path)
    assert any(expected in p for p in problems), problems


def test_trainer_without_hypertune_in_pyproject_fails_to_render(tmp_path):
    pyproject = _mutate(
        ROOT / "pyproject.toml", tmp_path / "pyproject.toml", '"cloudml-hypertune==0.1.0.dev6",', ""
    )
    with pytest.raises(AssertionError, match="not in the project's dependencies"):
        rendered_requirements(DOCKERFILES["trainer"], pyproject, tmp_path)


def test_parser_handles_continuations_comments_and_args():
    text = (
        "# header\nARG BASE=python:3.11.14-slim-bookworm\nFROM ${BASE}\n\n"
        "RUN a \\\n    && b \\\n# inline comment\n    && c\n"
        'ENTRYPOINT ["python", "-m", "x.y"]\n'
    )
    ins = parse_dockerfile(text)
    assert [i.cmd for i in ins] == ["ARG", "FROM", "RUN", "ENTRYPOINT"]
    assert ins[2].args == "a && b && c"
    assert ins[2].line == 5
    assert base_image(ins) == "python:3.11.14-slim-bookworm"
    assert exec_form(ins[3]) == ["python", "-m", "x.y"]
    with pytest.raises(ValueError, match="continuation"):
        parse_dockerfile("RUN a \\\n")


# ------------------------------------------------------------------ image structure


@pytest.mark.parametrize("name", images.IMAGES)
def test_user_is_chosen_and_dependencies_come_before_code(name):
    """Components run as non-root; the trainer as root, like Google's prebuilt training
    containers, so cloudml-hypertune can write /tmp/hypertune on Vertex (cloudml-hypertune#6)."""
    ins = parse_dockerfile(DOCKERFILES[name].read_text())
    cmds = [i.cmd for i in ins]
    users = [i for i in ins if i.cmd == "USER"]
    assert users, "no USER instruction"
    if name == "trainer":
        assert users[-1].args == "root"
        assert any(
            i.cmd == "RUN" and "mkdir -p /tmp/hypertune" in i.args and "1777" in i.args for i in ins
        )
    else:
        assert users[-1].args not in ("root", "0", "0:0")
    # Both images have the account Kubeflow pods run as (`kube.RUN_AS_UID`).
    assert any(i.cmd == "RUN" and f"--uid {RUN_AS_UID} " in i.args for i in ins)
    last_user = max(k for k, c in enumerate(cmds) if c == "USER")
    if "ENTRYPOINT" in cmds:
        assert last_user < cmds.index("ENTRYPOINT")
    assert all(c not in ("RUN", "COPY", "ADD") for c in cmds[last_user:]), "work done after USER"

    install = ins.index(next(i for i in ins if i.cmd == "RUN" and "pip install" in i.args))
    code_copies = [
        k
        for k, i in enumerate(ins)
        if i.cmd == "COPY"
        and any(src.rstrip("/") in CODE_DIRS + (".",) for src in i.args.split()[:-1])
    ]
    dep_copies = [k for k, i in enumerate(ins) if i.cmd == "COPY" and k < install]
    assert code_copies and min(code_copies) > install
    for k in dep_copies:  # only the pins (and the stdlib-only renderer) go in before the install
        assert ins[k].args.split()[:-1] == ["pyproject.toml", "pipelines/images.py"]


def _copied(name: str) -> list[tuple[str, str]]:
    out = []
    for ins in parse_dockerfile(DOCKERFILES[name].read_text()):
        if ins.cmd == "COPY":
            parts = ins.args.split()
            out += [(src, parts[-1]) for src in parts[:-1] if not src.startswith("--")]
    return out


@pytest.mark.parametrize("name", images.IMAGES)
def test_copied_paths_exist_and_reach_the_build_context(name):
    rules = dockerignore_rules()
    for src, _ in _copied(name):
        assert (ROOT / src).exists(), src
        assert not ignored(src.rstrip("/"), rules), f"{src} is excluded by .dockerignore"
        if src.rstrip("/") == ".":
            continue  # the whole context: what reaches it is checked below, package by package
        for path in (ROOT / src).rglob("*.py") if (ROOT / src).is_dir() else []:
            rel = path.relative_to(ROOT).as_posix()
            if "__pycache__" not in rel:
                assert not ignored(rel, rules), rel


def test_every_project_package_reaches_the_build_context():
    rules = dockerignore_rules()
    for package in CODE_DIRS:
        for path in (ROOT / package).rglob("*"):
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and "__pycache__" not in rel:
                assert not ignored(rel, rules), f"{rel} is kept out of the build context"


def test_components_image_installs_the_project_with_pip():
    """The code step is `COPY . <dir>` then `pip install --no-deps <dir>`: the image holds
    what pyproject's package discovery finds, which `components_layout` reproduces."""
    ins = parse_dockerfile(DOCKERFILES["components"].read_text())
    copies = [i.args.split() for i in ins if i.cmd == "COPY"]
    assert copies[-1][0] == "." and len(copies[-1]) == 2, copies[-1]
    src = copies[-1][1]
    installs = [i.args for i in ins if i.cmd == "RUN" and f"pip install --no-deps {src}" in i.args]
    assert installs, f"no `pip install --no-deps {src}` after `COPY . {src}`"
    assert not any(i.cmd == "ENV" and "PYTHONPATH" in i.args for i in ins), "PYTHONPATH shadows"


def test_package_list_is_pyprojects_discovery():
    assert set(CODE_DIRS) == {"trainer", "dataprep", "components", "pipelines"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "pipelines" / "images.py"), "packages", "--mypy"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [word for name in sorted(CODE_DIRS) for word in ("-p", name)]
    makefile = (ROOT / "Makefile").read_text()
    assert "mypy $$($(PY) -m pipelines.images packages --mypy)" in makefile
    assert "packages" not in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """The components image's code, installed from a copy of the build context."""
    work = tmp_path_factory.mktemp("components-layout")
    return components_layout(work)


def test_every_component_module_imports_from_the_image_layout(layout, tmp_path):
    """The modules, and every module their bodies import when the step runs."""
    modules = component_modules(layout)
    assert "components.prepare_dataset" in modules and len(modules) >= 10
    body_imports = components_imports(layout)
    assert {"dataprep.prepare", "trainer.evaluate", "pipelines.targets.vertex.hpt_job"} <= set(
        body_imports
    )
    results = import_from_layout(layout, modules + body_imports, cwd=tmp_path)
    failed = {name: r["error"] for name, r in results.items() if not r["ok"]}
    assert not failed, failed
    for name, result in results.items():
        if name.split(".")[0] in CODE_DIRS:
            assert Path(result["file"]).is_relative_to(layout), (name, result["file"])


def test_installing_the_project_prints_no_deprecation_warning(layout):
    """The build backend reads pyproject.toml on every install: a deprecated form there
    (`license = { text = ... }` was one) prints a warning block into every image build."""
    printed = (layout.parent / "pip-install.log").read_text()
    assert "deprecat" not in printed.lower(), printed


def test_the_image_layout_holds_the_package_data(layout, tmp_path):
    """Presets and API descriptors are package data, read beside the modules that use them."""
    results = import_from_layout(layout, ["pipelines.study.search_space"], cwd=tmp_path)
    module_file = Path(results["pipelines.study.search_space"]["file"])
    assert module_file.parent == layout / "pipelines" / "study"
    presets = sorted(p.name for p in (layout / "pipelines" / "study" / "presets").glob("*.yaml"))
    assert presets == sorted(p.name for p in (ROOT / "pipelines/study/presets").glob("*.yaml"))
    assert "default.yaml" in presets
    shipped = layout / "pipelines" / "vertex_types.binpb"
    assert shipped.read_bytes() == (ROOT / "pipelines" / "vertex_types.binpb").read_bytes()


def test_a_package_missing_from_discovery_breaks_the_layout_import(tmp_path):
    """Demonstrates the check: drop `dataprep` from pyproject's discovery, and the
    prepare component (which imports dataprep) no longer imports from the image."""
    context = copy_build_context(tmp_path / "context")
    pyproject = context / "pyproject.toml"
    text = pyproject.read_text()
    assert '"dataprep*", ' in text
    pyproject.write_text(text.replace('"dataprep*", ', ""))
    site = components_layout(tmp_path, context)
    assert not (site / "dataprep").exists()
    results = import_from_layout(site, components_imports(site), cwd=tmp_path)
    assert not results["dataprep.prepare"]["ok"]
    assert "No module named 'dataprep'" in results["dataprep.prepare"]["error"]
    assert all(r["ok"] for name, r in results.items() if not name.startswith("dataprep"))


@pytest.mark.parametrize("name", images.IMAGES)
def test_entrypoint_modules_exist_and_run_help(name, tmp_path):
    ins = parse_dockerfile(DOCKERFILES[name].read_text())
    entrypoints = [exec_form(i) for i in ins if i.cmd == "ENTRYPOINT"]
    if name == "trainer":
        assert entrypoints == [["python", "-m", "trainer.task"]]
    app = tmp_path / "app"  # the image's /app: only what the Dockerfile copies
    for src, dst in _copied(name):
        if dst.startswith("/app/"):
            shutil.copytree(ROOT / src, app / dst.removeprefix("/app/"))
    for argv in entrypoints:
        assert argv[:2] == ["python", "-m"]
        module = argv[2]
        assert (app / (module.replace(".", "/") + ".py")).is_file(), f"{module} not in the image"
        proc = subprocess.run(
            [sys.executable, "-m", module, *argv[3:], "--help"],
            cwd=app,
            env={**os.environ, "PYTHONPATH": str(app)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert "--learning_rate" in proc.stdout


def _imports_reachable_from(module: str) -> set[str]:
    """Top-level names imported by `module` and every project module it imports, transitively."""
    seen, todo, imported = set(), [module], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((ROOT / (name.replace(".", "/") + ".py")).read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for full in names:
                imported.add(full.split(".")[0])
                if (
                    full.startswith("trainer.")
                    and (ROOT / (full.replace(".", "/") + ".py")).exists()
                ):
                    todo.append(full)
    return imported


def test_trainer_image_provides_everything_trainer_task_imports():
    imported = _imports_reachable_from("trainer.task")
    assert {"tensorflow", "hypertune"} <= imported  # the walk really followed trainer.*
    third_party = imported - set(sys.stdlib_module_names) - {"trainer", "__future__"}
    dists = md.packages_distributions()

    def installed_name(req_name: str) -> str:  # this venv has the CPU build of the same module
        return "tensorflow-cpu" if req_name == "tensorflow" else req_name

    closure, todo = (
        set(),
        [
            installed_name(images.requirement_name(r))
            for r in images.requirements("gpu", images.TRAINER_PACKAGES)
        ],
    )
    while todo:
        dist = todo.pop()
        if dist in closure:
            continue
        closure.add(dist)
        for req in md.requires(dist) or []:
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(images.requirement_name(r.name))
    for module in sorted(third_party):
        provided = {images.requirement_name(d) for d in dists.get(module, [])}
        assert provided & closure, f"trainer imports {module}, the trainer image lacks {provided}"


def test_the_trainer_image_ships_only_the_trainer():
    """It copies `trainer/`, and every module there is the trainer's: reached from its entry
    points or a registered model's builder (the local fork server lives in `pipelines/jobs`)."""
    code = [(src, dst) for src, dst in _copied("trainer") if dst.startswith("/app")]
    assert code == [("trainer/", "/app/trainer/")]
    graph = import_graph()
    roots = ["trainer.task", "trainer.evaluate", "trainer.features"]  # features: its own step
    roots += ["trainer.weights_probe"]  # `--weights` checked before a run, in its own process
    roots += [spec.builder.partition(":")[0] for spec in MODELS.values()]
    reached, todo = set(roots), list(roots)
    while todo:
        for imported in graph[todo.pop()] - reached:
            reached.add(imported)
            todo.append(imported)
    modules = {name for name in graph if name.startswith("trainer.")}
    assert len(modules) > 10 and modules - reached == set()


# ----------------------------------------------------------------------- .dockerignore


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".git/HEAD",
        "runs/2024/model/saved_model.pb",
        "out/pipeline.yaml",
        "outputs/x",
        "data/horses/1.png",
        "benchmarks/results/r.json",
        "tests/test_images.py",
        "trainer/__pycache__/task.cpython-311.pyc",
        "pipelines/x.pyc",
        "hpt_pipeline.egg-info/PKG-INFO",
        ".pytest_cache/v/cache",
    ],
)
def test_dockerignore_keeps_out(path):
    assert ignored(path, dockerignore_rules())


@pytest.mark.parametrize(
    "path", ["pyproject.toml", "trainer/task.py", "components/base.py", "pipelines/images.py"]
)
def test_dockerignore_lets_in(path):
    assert not ignored(path, dockerignore_rules())


# -------------------------------------------------------------------- cloudbuild.yaml


def test_cloudbuild_builds_the_uris_images_py_computes():
    config = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    subs = {**config["substitutions"], "PROJECT_ID": "p", "_REGION": "r", "_TAG": "t"}
    assert set(config["substitutions"]) == {"_REGION", "_REPOSITORY", "_TAG"}

    def sub(text: str) -> str:
        return substitute(text, subs).replace("$$", "$")

    expected = images.image_uris(images.registry("p", "r", subs["_REPOSITORY"]), "t")
    assert [sub(i) for i in config["images"]] == list(expected.values())
    builds = {}
    for step in config["steps"]:
        args = [sub(a) for a in step.get("args", [])]
        if args[:1] == ["build"]:
            opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
            tags = [a.split("=", 1)[1] for a in args if a.startswith("--tag=")]
            builds[opts["file"]] = tags
            assert args[-1] == "."
    for name, uri in expected.items():
        tags = builds[f"images/{name}/Dockerfile"]
        assert uri in tags
        assert uri.rsplit(":", 1)[0] + ":latest" in tags
    push = next(s for s in config["steps"] if "push" in s["id"])
    assert "docker push" in push["args"][-1] and "RepoDigests" in push["args"][-1]


def test_cloudbuild_uses_no_undeclared_substitution():
    text = (ROOT / "cloudbuild.yaml").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    used = set(re.findall(r"(?<!\$)\$\{?(_[A-Z0-9_]+)", body))
    declared = set(yaml.safe_load(text)["substitutions"])
    assert used == declared


# ----------------------------------------------------------------------------- make


def make(*args: str, path: str | None = None) -> subprocess.CompletedProcess:
    makefile = (ROOT / "Makefile").read_text()
    files = ["-f", "Makefile"]
    if not re.search(r"^\s*-?include\s+images/images\.mk", makefile, re.M):
        files += ["-f", "images/images.mk"]  # until the main Makefile includes it
    env = {**os.environ, "MAKEFLAGS": ""}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        ["make", "--no-print-directory", *files, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_n_images_with_cloud_build():
    proc = make("-n", "images", "PROJECT=p", "REGION=r", "TAG=t", "USE_DOCKER=0")
    assert proc.returncode == 0, proc.stderr
    lines = [shlex.split(line) for line in proc.stdout.splitlines() if line.strip()]
    assert lines == [
        [
            "gcloud", "builds", "submit", "--project=p", "--region=r",
            "--config=cloudbuild.yaml",
            "--substitutions=_REGION=r,_REPOSITORY=hpt-pipeline,_TAG=t", ".",
        ]
    ]  # fmt: skip


def test_make_n_images_with_docker():
    proc = make("-n", "images", "PROJECT=p", "REGION=r", "TAG=t", "USE_DOCKER=1")
    assert proc.returncode == 0, proc.stderr
    uris = images.image_uris(images.registry("p", "r"), "t")
    lines = [shlex.split(line) for line in proc.stdout.splitlines() if line.strip()]
    assert lines == [
        ["docker", "build", "--platform=linux/amd64", "-f", "images/trainer/Dockerfile",
         "-t", uris["trainer"], "."],
        ["docker", "build", "--platform=linux/amd64", "-f", "images/components/Dockerfile",
         "-t", uris["components"], "."],
        ["docker", "push", uris["trainer"]],
        ["docker", "push", uris["components"]],
    ]  # fmt: skip


@pytest.mark.parametrize(("docker_ok", "builder"), [(True, "docker"), (False, "gcloud")])
def test_make_images_picks_docker_when_an_engine_answers(docker_ok, builder, tmp_path):
    fake = tmp_path / "docker"
    fake.write_text(f"#!/bin/sh\nexit {0 if docker_ok else 1}\n")
    fake.chmod(0o755)
    path = f"{tmp_path}{os.pathsep}{os.environ['PATH']}"
    env_backup = os.environ.pop("USE_DOCKER", None)
    try:
        proc = make("-n", "images", "PROJECT=p", "REGION=r", "TAG=t", path=path)
    finally:
        if env_backup is not None:
            os.environ["USE_DOCKER"] = env_backup
    assert proc.returncode == 0, proc.stderr
    assert {line.split()[0] for line in proc.stdout.splitlines() if line.strip()} == {builder}


def test_make_images_without_project_fails_clearly():
    proc = make("-n", "images", "REGION=r", "PROJECT=")
    assert proc.returncode != 0
    assert "PROJECT is not set" in proc.stderr
    assert "gcloud" not in proc.stdout and "docker" not in proc.stdout


def test_make_image_uris_prints_what_images_py_computes():
    proc = make("-s", "image-uris", "PROJECT=p", "REGION=r", "TAG=t", f"PY={sys.executable}")
    assert proc.returncode == 0, proc.stderr
    uris = images.image_uris(images.registry("p", "r"), "t")
    assert proc.stdout.split() == [f"{images.ENV_VARS[n]}={u}" for n, u in uris.items()]


# ---------------------------------------------------------------- pipelines/images.py


def test_image_uris_by_tag_and_digest():
    reg = images.registry("proj", "europe-west4", "repo")
    assert reg == "europe-west4-docker.pkg.dev/proj/repo"
    assert images.image_uris(reg, "v1") == {
        "trainer": f"{reg}/trainer:v1",
        "components": f"{reg}/components:v1",
    }
    digest = "sha256:" + "a" * 64
    assert images.image_uris(reg + "/", digest)["trainer"] == f"{reg}/trainer@{digest}"


def test_default_components_image_matches_the_component_decorator():
    from components.base import DEFAULT_COMPONENTS_IMAGE

    assert images.image_uris()["components"] == DEFAULT_COMPONENTS_IMAGE


def test_the_image_variables_set_the_images_a_run_uses():
    """`images uris` prints `ENV_VARS` lines; the settings read exactly those variables."""
    from pipelines.settings import load_settings

    environ = {images.ENV_VARS["trainer"]: "x/trainer:1"}
    settings = load_settings(environ=environ)
    assert settings.images.trainer_image == "x/trainer:1"
    assert settings.images.components_image == images.image_uris()["components"]


def test_requirements_reject_unknown_extras_and_names():
    with pytest.raises(ValueError, match="unknown extra"):
        images.requirements("tpu")
    with pytest.raises(ValueError, match="not in the project's dependencies"):
        images.requirements("gpu", ["no-such-package"])
    assert images.requirement_name("tensorflow[and-cuda]==2.21.0") == "tensorflow"
    assert images.requirement_name("importlib_resources==7.1.0") == "importlib-resources"


def test_project_pins_read_dependencies_and_extras():
    pins = project_pins()
    assert pins["tensorflow"] == pins["tensorflow-cpu"] == "2.21.0"
    assert pins["kfp"] == "2.17.0"
    assert pins["google-cloud-pipeline-components"] == "2.22.0"
    assert pins["google-cloud-aiplatform"] == "1.165.1"
    assert pins["pytest"]  # extras count too


# --------------------------------------------------------------------- serving image

# Ops in the trainer's serving SavedModel, verified to load and give the same outputs in
# TF 2.15.1 (the runtime of the pinned tf2-*.2-15 serving containers); see images/README.md.
SERVING_OPS_VERIFIED_ON_TF_2_15 = {
    "AddV2", "ArgMax", "AssignVariableOp", "BiasAdd", "Cast", "Const", "Conv2D", "DecodeImage",
    "DisableCopyOnRead", "ExpandDims", "GatherV2", "Identity", "Less", "LogicalAnd", "MatMul",
    "MaxPool", "Maximum", "MergeV2Checkpoints", "Minimum", "NoOp", "Pack", "Placeholder",
    "ReadVariableOp", "RealDiv", "Relu", "Reshape", "RestoreV2", "Round", "SaveV2",
    "ScaleAndTranslate", "Select", "Shape", "ShardedFilename", "Softmax", "Squeeze",
    "StatefulPartitionedCall", "StatelessWhile", "StaticRegexFullMatch", "StridedSlice",
    "StringJoin", "TensorListFromTensor", "TensorListGetItem", "TensorListReserve",
    "TensorListSetItem", "TensorListStack", "VarHandleOp", "VarIsInitializedOp",
}  # fmt: skip


def test_serving_image_is_the_newest_prebuilt_tf_container_not_newer_than_ours():
    from google.cloud.aiplatform.constants import prediction

    def version(uri: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.search(r"\.(\d+-\d+):latest$", uri).group(1).split("-"))

    ours = tuple(int(x) for x in project_pins()["tensorflow"].split(".")[:2])
    usable = [u for u in prediction.TF_CONTAINER_URIS if version(u) <= ours]
    for uri in (images.SERVING_IMAGE_URI, images.SERVING_IMAGE_URI_GPU):
        assert uri in prediction.TF_CONTAINER_URIS
        assert version(uri) == max(version(u) for u in usable)
    assert "tf2-cpu" in images.SERVING_IMAGE_URI and "tf2-gpu" in images.SERVING_IMAGE_URI_GPU
    assert images.serving_image_uri("europe-west4").startswith("europe-docker.pkg.dev/")
    assert images.serving_image_uri("asia-east1", gpu=True) in prediction.TF_CONTAINER_URIS
    assert images.serving_image_uri("us-central1") == images.SERVING_IMAGE_URI
    assert images.serving_image_uri("me-west1") == images.SERVING_IMAGE_URI


@pytest.fixture(scope="module")
def exported_model(tmp_path_factory):
    from trainer.config import HParams
    from trainer.export import export_model
    from trainer.models.cnn import build as build_model

    shape = (32, 32, 3)
    model_dir = str(tmp_path_factory.mktemp("serving") / "model")
    with pytest.MonkeyPatch.context() as mp:  # autograph's files: in a folder of this fixture
        use_temp_folder(tmp_path_factory.mktemp("serving-tmp"), mp)
        model = build_model(shape, 2, num_units=8)
        export_model(
            model.get_weights(),
            model_dir=model_dir,
            image_shape=shape,
            class_names=["a", "b"],
            hparams=HParams(model_params={"num_units": 8}),
            card={},
        )
    return model_dir


def test_exported_model_uses_only_ops_the_serving_runtime_has(exported_model):
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(exported_model) / "saved_model.pb").read_bytes())
    ops, functions = set(), set()
    for graph in saved.meta_graphs:
        ops |= {n.op for n in graph.graph_def.node}
        for f in graph.graph_def.library.function:
            functions.add(f.signature.name)
            ops |= {n.op for n in f.node_def}
    ops -= functions
    assert "DecodeImage" in ops  # the serving signature really was inspected
    assert ops <= SERVING_OPS_VERIFIED_ON_TF_2_15, sorted(ops - SERVING_OPS_VERIFIED_ON_TF_2_15)
