"""Kubeflow from the command line: one namespace rule everywhere, and what Katib searches on."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pipelines.app import cli
from pipelines.settings import Settings
from pipelines.targets.kubeflow import manifests

IMAGES = (
    "trainer_image: registry.example.com/team/hpt-trainer:1\n"
    "components_image: registry.example.com/team/hpt-components:1\n"
)
NAMESPACE_REFUSAL = (
    "hpt-pipeline: error: kubeflow_namespace=kubeflow: Kubeflow's own namespace runs no trials "
    "in a full install (no Katib metrics-collector label; PSS restricted from 1.11): pass "
    "--namespace with your profile namespace (compile, manifests, submit, schedule), or set "
    "kubeflow_namespace in --config or HPT_KUBEFLOW_NAMESPACE"
)
KATIB_NOTE = (
    "objectives: Katib searches on val_accuracy only (its suggestion services ignore "
    "additionalMetricNames; currentOptimalTrial ranks val_accuracy alone); the others "
    "(latency_ms) are collected and count only at selection (the Pareto pick)"
)


def invoke(tmp_path: Path, *args: str, config: str = "") -> object:
    path = tmp_path / "kubeflow.yaml"
    path.write_text(IMAGES + config)
    return CliRunner().invoke(cli.app, [*args, "--config", str(path)], env={})


def test_compile_takes_namespace_and_puts_it_in_the_pipeline(tmp_path: Path):
    out = tmp_path / "p.yaml"
    result = invoke(tmp_path, "compile", "--target", "kubeflow", "--namespace", "team-a",
                    "--output", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    spec = yaml.safe_load(out.read_text().split("\n", 1)[1])
    tune = spec["root"]["dag"]["tasks"]["tune-on-katib"]["inputs"]["parameters"]["namespace"]
    assert tune == {"runtimeValue": {"constant": "team-a"}}


@pytest.mark.parametrize("command", ["compile", "manifests"])
def test_the_default_namespace_is_refused_alike_by_compile_and_manifests(tmp_path, command):
    out = tmp_path / "out"
    target = ["--target", "kubeflow"]
    result = invoke(tmp_path, command, *target, "--output", str(out / "p.yaml"))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [NAMESPACE_REFUSAL]
    assert not out.exists()


def test_namespace_with_another_target_is_refused_in_one_line(tmp_path: Path):
    result = invoke(tmp_path, "compile", "--target", "vertex", "--namespace", "team-a",
                    "--output", str(tmp_path / "p.yaml"))  # fmt: skip
    assert result.exit_code == 2
    assert result.output.strip() == (
        "hpt-pipeline: error: --namespace: only used with --target kubeflow"
    )


def test_compile_says_katib_searches_on_the_primary_objective_only(tmp_path: Path):
    several = "kubeflow_namespace: team-a\nobjectives: [val_accuracy, latency_ms]\n"
    out = tmp_path / "p.yaml"
    result = invoke(tmp_path, "compile", "--target", "kubeflow", "--output", str(out),
                    config=several)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"note: {KATIB_NOTE}"
    one = invoke(tmp_path, "compile", "--target", "kubeflow", "--output", str(out),
                 config="kubeflow_namespace: team-a\n")  # fmt: skip
    assert "Katib searches" not in one.output


def test_manifests_and_the_tune_step_say_it_too():
    settings = Settings(kubeflow_namespace="team-a", objectives=("val_accuracy", "latency_ms"))
    assert KATIB_NOTE in manifests.notes(settings)
    assert not any("Katib searches" in n for n in manifests.notes(Settings()))
