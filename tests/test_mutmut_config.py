"""What `make mutmut` hands mutmut: its `[tool.mutmut]` section as mutmut itself reads it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutmut_run  # noqa: E402


def _read_back(section: str, folder: Path, monkeypatch: pytest.MonkeyPatch):
    from mutmut.configuration import _load_config

    (folder / "pyproject.toml").write_text('[project]\nname = "x"\n' + section)
    monkeypatch.chdir(folder)
    return _load_config()


def test_the_section_names_the_modules_tests_and_fork_server(tmp_path, monkeypatch):
    tests = ["tests/test_selection.py"]
    section = mutmut_run.mutmut_section(["pipelines/study/selection.py", "dataprep/"], tests)
    config = _read_back(section, tmp_path, monkeypatch)
    assert config.only_mutate == ["pipelines/study/selection.py", "dataprep/*"]
    assert config.pytest_add_cli_args_test_selection == tests
    assert config.process_isolation == "forkserver"
    assert config.timeout_multiplier == 15.0  # mutmut's own, unless asked


def test_a_timeout_multiplier_reaches_mutmut(tmp_path, monkeypatch):
    section = mutmut_run.mutmut_section(["pipelines/study/selection.py"], [], 60.0)
    assert _read_back(section, tmp_path, monkeypatch).timeout_multiplier == 60.0


def test_outside_a_git_checkout_the_files_are_those_gitignore_keeps(tmp_path):
    """An exported tree (no `.git`): the copies `make mutants`/`make mutmut` make need no git."""
    from tests.mutants import walked_files

    (tmp_path / ".gitignore").write_text(
        "# outputs\n.venv/\n__pycache__/\n*.pyc\n*.egg-info/\nruns/\n/.whl/\n"
        "benchmarks/results/*\n!benchmarks/results/*.md\n"
    )
    kept = ["Makefile", "pipelines/a.py", "benchmarks/results/README.md", "docs/runs.md"]
    dropped = [".venv/bin/python", "pipelines/__pycache__/a.cpython-311.pyc", "b.pyc",
               "x.egg-info/PKG-INFO", "runs/1/m.json", "pipelines/runs/2.json", ".whl/k.whl",
               "benchmarks/results/r.json", ".git"]  # fmt: skip
    for rel in kept + dropped:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert sorted(walked_files(tmp_path)) == sorted([".gitignore", *kept])


def test_the_walk_lists_what_git_lists_here():
    """In a checkout, the walk and `git ls-files` agree on this tree (in a copy: the walk)."""
    from tests.mutants import ROOT, project_files, walked_files

    assert sorted(walked_files(ROOT)) == sorted(project_files())
