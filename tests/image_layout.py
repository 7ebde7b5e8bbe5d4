"""The components image's code layout, reproduced without a container engine.

The components Dockerfile copies the build context (the repository filtered by
`.dockerignore`) and runs `pip install --no-deps` on it. `components_layout` does the
same into a folder: the context copied with Docker's ignore rules, then installed by
pip with the pinned setuptools. `import_from_layout` imports modules with the
checkout out of reach (no editable finder, no checkout path, another working
directory), so what imports is what the image would hold.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dockerignore_rules(root: Path = ROOT) -> list[tuple[bool, re.Pattern]]:
    """(negated, regex) per .dockerignore line, in order."""
    rules = []
    for raw in (root / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex += "(?:.*/)?"
                i += 3
            elif pattern.startswith("**", i):
                regex += ".*"
                i += 2
            elif pattern[i] == "*":
                regex += "[^/]*"
                i += 1
            elif pattern[i] == "?":
                regex += "[^/]"
                i += 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                regex += pattern[i : end + 1]
                i = end + 1
            else:
                regex += re.escape(pattern[i])
                i += 1
        rules.append((negated, re.compile(regex + r"\Z")))
    return rules


def ignored(path: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    result = False
    for negated, regex in rules:
        if any(regex.match(c) for c in candidates):
            result = not negated
    return result


def copy_build_context(dest: Path, root: Path = ROOT) -> Path:
    """Copy what a `docker build .` from `root` sends: every file .dockerignore lets in.

    Folders are pruned when ignored; that is exact only while no `!` rule re-admits
    something below an ignored folder, which is checked.
    """
    rules = dockerignore_rules(root)
    if any(negated for negated, _ in rules):
        raise ValueError(".dockerignore has `!` rules: pruning ignored folders would be wrong")
    for folder, dirs, files in os.walk(root):
        rel_dir = Path(folder).relative_to(root)
        dirs[:] = [d for d in dirs if not ignored((rel_dir / d).as_posix(), rules)]
        for name in files:
            rel = (rel_dir / name).as_posix()
            if not ignored(rel, rules):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(folder) / name, dest / rel)
    return dest


def components_layout(workdir: Path, context: Path | None = None) -> Path:
    """Install the build context the way the components Dockerfile does; return its site dir.

    Args:
        workdir: An empty scratch folder.
        context: A prepared build context (default: a fresh copy of this repository's).
    """
    context = context or copy_build_context(workdir / "context")
    site = workdir / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "--target", str(site), str(context)],
        check=True,
        capture_output=True,
        text=True,
    )
    (workdir / "pip-install.log").write_text(done.stdout + done.stderr)  # what pip printed
    return site


_IMPORTER = textwrap.dedent(
    """
    import importlib, json, os, sys
    site, root, names = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    # The checkout out of reach: no editable-install finder, no path into the repository.
    sys.meta_path[:] = [f for f in sys.meta_path
                        if "__editable__" not in getattr(f, "__module__", "") + type(f).__module__]
    sys.path[:] = [site] + [p for p in sys.path if p and os.path.abspath(p) != root]
    results = {}
    for name in names:
        try:
            module = importlib.import_module(name)
            results[name] = {"ok": True, "file": module.__file__}
        except Exception as exc:  # report, do not stop: every module is listed
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(results))
    """
)


def import_from_layout(site: Path, modules: list[str], cwd: Path) -> dict[str, dict]:
    """Import `modules` from `site` only (not the checkout); `{name: {ok, file|error}}`."""
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTER, str(site), str(ROOT), json.dumps(modules)],
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def components_imports(site: Path) -> list[str]:
    """Every module the component shells import, in function bodies too.

    A lightweight component imports project code inside its body, so importing the
    component's module alone proves nothing about the step: these are what it runs.
    The modules a body runs as processes of their own (`step_process.run_module(
    "<module>", ...)`) count too.
    """
    names: set[str] = set()
    for path in shell_files(site):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "run_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(str(node.args[0].value))
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                base = site.joinpath(*node.module.split("."))
                names.update(  # `from package import module`
                    f"{node.module}.{alias.name}"
                    for alias in node.names
                    if (base / f"{alias.name}.py").is_file() or (base / alias.name).is_dir()
                )
    return sorted(names - {"__future__"})


def shell_files(site: Path) -> list[Path]:
    """The component shells installed in `site`: the shared steps (`components/`) and each
    target's own (`pipelines/targets/<name>/steps/`)."""
    shared = sorted((site / "components").glob("*.py"))
    return shared + sorted((site / "pipelines" / "targets").glob("*/steps/*.py"))


def component_modules(site: Path) -> list[str]:
    """Every module of the component shells as installed in `site`."""
    return sorted(
        ".".join(path.relative_to(site).with_suffix("").parts)
        for path in shell_files(site)
        if path.stem != "__init__"
    )
