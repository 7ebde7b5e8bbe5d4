"""Shared fixtures: a tiny prepared dataset and helpers to run project commands."""

from __future__ import annotations

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
