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
