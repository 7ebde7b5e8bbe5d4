"""Shared fixtures: a tiny prepared dataset and helpers to run project commands."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pipelines.scratch import TMP_VARIABLES, temp_folder

ROOT = Path(__file__).resolve().parents[1]
# Paths written by code that ignores TMPDIR: cloudml-hypertune's default metric file.
WATCHED = (Path("/tmp/hypertune"), Path("/tmp/hypertune/output.metrics"))


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


@pytest.fixture(scope="session", autouse=True)
def private_system_tmp(tmp_path_factory: pytest.TempPathFactory):
    """The session's temporary folder: private, and checked for leaks at the end.

    `TMPDIR`, `TEMP`, `TMP` and `tempfile.tempdir` point at `<basetemp>/system-tmp`
    for the whole session (subprocesses inherit them), so nothing a test starts
    writes to the system's temporary folder through them (each test then gets its own,
    `own_tmp`; what is left here came from outside any test's folder). At the end the suite
    fails when that folder holds anything (a local run or job that left files
    outside its own output) or when `/tmp/hypertune` was written (a trainer run
    without its own `CLOUD_ML_HP_METRIC_FILE`). On a machine shared with other
    suites, another suite's write to `/tmp/hypertune` trips it too.
    """
    private = tmp_path_factory.mktemp("system-tmp", numbered=False)
    before = {p: _stamp(p) for p in WATCHED}
    with temp_folder(private):
        yield private
    problems = [f"{p} was written" for p in WATCHED if _stamp(p) != before[p]]
    problems += [f"{p} left in the temporary folder" for p in sorted(private.iterdir())]
    if problems:
        pytest.fail("written outside the tests' own folders: " + "; ".join(problems[:20]))


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A prepared dataset of 32×32 dark-vs-bright images (96 train / 32 val / 32 test)."""
    from tests.synthetic import write_dataset

    return write_dataset(str(tmp_path_factory.mktemp("synthetic")))


def use_temp_folder(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point `TMPDIR` and friends, and `tempfile.tempdir`, at `folder` (undone by `monkeypatch`)."""
    for name in TMP_VARIABLES:
        monkeypatch.setenv(name, str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture(autouse=True)
def own_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's temporary files (TensorFlow run in the test or in what it starts) in its own.

    A test's in-process TensorFlow and the trainer runs it starts write autograph files
    to the temporary folder: a folder of the test's own, not the session's checked one.
    Module- and session-scoped fixtures run before this one: those that run TensorFlow
    call `use_temp_folder` themselves.
    """
    return use_temp_folder(tmp_path_factory.mktemp("tmp"), monkeypatch)


def run_env(**extra: str) -> dict[str, str]:
    """This environment without TF_CONFIG/CLUSTER_SPEC leaking in, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "CLUSTER_SPEC")}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", **extra})
    return env


def python_stdout(code: str) -> str:
    """Run `code` as `python -c` in a fresh process from the project root; its stdout.

    Raises:
        subprocess.CalledProcessError: The code failed (its stderr is on the error).
    """
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def run_trainer(args: list[str], timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """Run `python -m trainer.task ARGS` to completion and capture its output.

    Forked from the session's preloaded trainer where a fresh process could not differ
    (`tests/trainer_runs.py`; `HPT_FORK_SERVER=off` starts every run afresh).
    """
    from tests import trainer_runs

    return trainer_runs.run(args, env=run_env(**env), server_env=run_env(), timeout=timeout)


def start_trainer(args: list[str], **env: str) -> Any:
    """Start `python -m trainer.task ARGS` in a session of its own; `.stdout` has all its output.

    Forked as `run_trainer`'s runs are; a `subprocess.Popen` where it starts afresh.
    """
    from tests import trainer_runs

    return trainer_runs.start(args, env=run_env(**env), server_env=run_env())


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test`), the files holding slow tests are handed out first.

    Workers take whole files in collection order (`--dist loadfile`); a long file left to the
    end runs alone on one core while the other idles. A serial run keeps pytest's order.
    """
    if not hasattr(config, "workerinput"):  # set on an xdist worker, the one that collects
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: same order otherwise
