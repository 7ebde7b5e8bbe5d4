"""Shared fixtures: a tiny prepared dataset and helpers to run project commands."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A prepared dataset of 32×32 dark-vs-bright images (96 train / 32 val / 32 test)."""
    from tests.synthetic import write_dataset

    return write_dataset(str(tmp_path_factory.mktemp("synthetic")))


def run_env(**extra: str) -> dict[str, str]:
    """This environment without TF_CONFIG/CLUSTER_SPEC leaking in, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "CLUSTER_SPEC")}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", **extra})
    return env


def run_trainer(args: list[str], timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """Run `python -m trainer.task ARGS` to completion and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "trainer.task", *args],
        cwd=ROOT,
        env=run_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small compiled pipeline: two tasks and one parameter of every KFP type."""
    from kfp import compiler, dsl

    @dsl.component(base_image="python:3.11", install_kfp_package=False)
    def scale(epochs: int, learning_rate: float, source: str, use_gpu: bool) -> float:
        return epochs * learning_rate

    @dsl.component(base_image="python:3.11", install_kfp_package=False)
    def report(value: float, search_space: dict, tags: list) -> str:
        return f"{value} {search_space} {tags}"

    @dsl.pipeline(name="tiny-hpt", description="Two steps; parameters of every type.")
    def tiny(
        epochs: int = 2,
        learning_rate: float = 0.01,
        source: str = "sample",
        use_gpu: bool = False,
        search_space: dict = {"units": [16, 32]},  # noqa: B006 - a pipeline default
        tags: list = ["a"],  # noqa: B006
        # Cloud settings repeated as parameters, as the project's pipeline does.
        location: str = "us-central1",
        service_account: str = "",
        labels: dict = {},  # noqa: B006
    ):
        scaled = scale(epochs=epochs, learning_rate=learning_rate, source=source, use_gpu=use_gpu)
        report(value=scaled.output, search_space=search_space, tags=tags)

    path = tmp_path_factory.mktemp("template") / "tiny.yaml"
    compiler.Compiler().compile(tiny, str(path))
    return path
