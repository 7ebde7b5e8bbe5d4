"""A compiled template records its target, and `submit` refuses one made for another target."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines import templates
from pipelines.app import cli
from pipelines.compiler import compile_pipeline
from pipelines.settings import SettingsError
from pipelines.wiring import tune_tasks
from tests.support import normalize_spec
from tests.test_pipeline_spec import for_target


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("templates")
    return {
        target: Path(compile_pipeline(target, for_target(target), folder / f"{target}.yaml"))
        for target in ("vertex", "kubeflow")
    }


def test_compile_writes_the_target_as_the_first_line_and_golden_files_ignore_it(compiled):
    for target, path in compiled.items():
        text = path.read_text()
        assert text.splitlines()[0] == f"# hpt-pipeline target: {target}"
        assert templates.recorded_target(path, tune_tasks()) == target
        assert "hpt-pipeline target" not in normalize_spec(text)


def test_a_template_without_the_mark_is_known_by_its_tune_step(compiled, tmp_path):
    bare = tmp_path / "bare.yaml"
    bare.write_text("".join(compiled["kubeflow"].read_text().splitlines(keepends=True)[1:]))
    assert templates.recorded_target(bare, tune_tasks()) == "kubeflow"
    with pytest.raises(SettingsError, match="compiled for --target kubeflow, not vertex"):
        templates.check_target(bare, "vertex", tune_tasks())
    templates.check_target(bare, "kubeflow", tune_tasks())


def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPT_TRAINER_IMAGE", "registry.example.com/hpt/trainer:v1")
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", "registry.example.com/hpt/components:v1")


def test_kubeflow_submit_refuses_a_vertex_template(compiled, monkeypatch, tmp_path):
    env(monkeypatch)
    result = CliRunner().invoke(
        cli.app,
        [
            "submit",
            "--target=kubeflow",
            "--host=http://kfp.example:8080",
            "--namespace=team-a",
            "--pipeline-root=gs://b/root",
            f"--template={compiled['vertex']}",
            "--dry-run",
            f"--output={tmp_path / 'run.json'}",
        ],
    )
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line == (
        f"hpt-pipeline: error: --template={compiled['vertex']}: compiled for --target vertex, "
        "not kubeflow; compile it with `hpt-pipeline compile --target kubeflow` (or leave "
        "--template out)"
    )
    assert not (tmp_path / "run.json").exists()


def test_vertex_submit_refuses_a_kubeflow_template(compiled, monkeypatch, tmp_path):
    env(monkeypatch)
    result = CliRunner().invoke(
        cli.app,
        [
            "submit",
            "--target=vertex",
            "--project=hpt-demo-project",
            "--region=europe-west4",
            "--pipeline-root=gs://b/root",
            f"--template={compiled['kubeflow']}",
            "--dry-run",
            f"--output={tmp_path / 'job.json'}",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "compiled for --target kubeflow, not vertex" in result.stderr
    assert not (tmp_path / "job.json").exists()
