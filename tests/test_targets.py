"""Each target readable from one place: its wiring module's `PARTS` lists every file of it."""

from __future__ import annotations

import importlib

import pytest

from pipelines.wiring import TARGETS
from tests.conftest import ROOT


def parts(target: str) -> list[str]:
    return [path for path, _ in importlib.import_module(f"pipelines.wiring.{target}").PARTS]


def named_for(target: str) -> set[str]:
    """Files whose place says they belong to `target`: a component or CLI module named for
    it, its wiring module, and everything in its run-time package `pipelines/targets/<t>/`."""
    named = {
        path.relative_to(ROOT).as_posix()
        for folder in ("components", "pipelines/app")
        for path in (ROOT / folder).glob("*.py")
        if target in path.stem.split("_")
    }
    package = ROOT / "pipelines" / "targets" / target
    named |= {p.relative_to(ROOT).as_posix() for p in package.glob("*.py")}
    return named | {f"pipelines/wiring/{target}.py"}


@pytest.mark.parametrize("target", TARGETS)
def test_every_part_listed_for_a_target_exists_once(target):
    listed = parts(target)
    assert len(listed) == len(set(listed)) >= 4
    assert [p for p in listed if not (ROOT / p).is_file()] == []


@pytest.mark.parametrize("target", TARGETS)
def test_every_file_named_for_a_target_is_in_its_parts(target):
    assert named_for(target) - set(parts(target)) == set()


@pytest.mark.parametrize("target", TARGETS)
def test_each_step_a_target_binds_has_a_component_named_for_it(target):
    """`<step>_<target>.py` for features, tune, train_final, register (Vertex's GCPC ops aside)."""
    components = {p for p in parts(target) if p.startswith("components/")}
    steps = {p.removeprefix("components/").removesuffix(f"_{target}.py") for p in components}
    assert steps == {"features", "tune", "train_final", "register"}


def test_a_component_named_for_a_target_but_unlisted_is_caught(tmp_path, monkeypatch):
    stray = ROOT / "components" / "evaluate_vertex.py"
    assert not stray.exists()
    monkeypatch.setattr("tests.test_targets.ROOT", tmp_path)
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "evaluate_vertex.py").write_text("")
    (tmp_path / "pipelines" / "app").mkdir(parents=True)
    assert named_for("vertex") == {"components/evaluate_vertex.py", "pipelines/wiring/vertex.py"}
    assert "components/evaluate_vertex.py" not in parts("vertex")
