"""A run's settings are resolved once into its plan (issue 57 item 3), and walk a short way.

Before: 53 calls receiving the settings from `run_local`, in 27 functions of 10 modules,
with 10 climbs back up; the model and the search space were derived from the settings
again by `run`'s checks, its notes, the study's identity, the pipeline's build and its
second build for lineage (`tests/settings_walk.py`).
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any
from unittest import mock

import pytest
from typer.testing import CliRunner

from pipelines.app import cli, run_summary
from pipelines.plan import source_fingerprint
from pipelines.settings_space import listed_objectives, settings_model, study_space
from pipelines.targets import earlier_runs
from pipelines.targets.local.cli import run as local_run
from tests.settings_walk import walk_run_local
from tests.test_continuation_sources import trials_file

# What the plan resolves; each may run once per command.
DERIVATIONS = {
    f.__code__: f.__name__
    for f in (settings_model, study_space, listed_objectives, earlier_runs.continued)
}
DERIVATIONS[source_fingerprint.__code__] = "source_fingerprint"


@contextlib.contextmanager
def derivations() -> Iterator[Counter[str]]:
    """Count the calls of each of `DERIVATIONS` while the block runs."""
    counts: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in DERIVATIONS:
            counts[DERIVATIONS[frame.f_code]] += 1

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(before)


def test_the_settings_walk_from_run_local_is_within_issue_57s_aim(tmp_path):
    walk = walk_run_local(tmp_path)
    assert len(walk.calls) <= 25, walk.line()
    assert len(walk.climbs) <= 3, walk.climbs
    assert not {"settings_model", "study_space"} & {s.split(":")[-1] for s in walk.stays}


def _no_execution(pipeline: Any, artifacts: Path, *args: Any, **kwargs: Any) -> None:
    (artifacts / "run-0").mkdir()  # kfp.local's run folder; its steps run in processes


def test_hpt_pipeline_run_derives_the_model_and_the_space_once(tmp_path):
    args = ["run", "--output", str(tmp_path / "run"), "--registry", str(tmp_path / "reg")]
    with (
        mock.patch.object(local_run, "_run", _no_execution),
        mock.patch.object(
            local_run.fork_client, "shared_for_children", lambda **_: contextlib.nullcontext()
        ),
        mock.patch.object(run_summary, "show", lambda console, result: None),
        derivations() as counts,
    ):
        result = CliRunner().invoke(cli.app, args, env={})
    assert result.exit_code == 0, result.output
    assert dict(counts) == {
        "settings_model": 1,
        "study_space": 1,
        "listed_objectives": 1,
        "source_fingerprint": 1,  # the study's identity
    }


@pytest.mark.parametrize("continued", [False, True])
def test_hpt_pipeline_compile_derives_the_model_and_the_space_once(tmp_path, continued):
    args = ["compile", "--target", "local", "--output", str(tmp_path / "p.yaml")]
    if continued:  # the earlier run's trials: read and checked once, with today's data
        args += ["--continue-from", str(trials_file(tmp_path))]
    with derivations() as counts:
        result = CliRunner().invoke(cli.app, args, env={})
    assert result.exit_code == 0, result.output
    expected = {"settings_model": 1, "study_space": 1, "listed_objectives": 1}
    if continued:
        expected |= {"continued": 1, "source_fingerprint": 1}
    assert dict(counts) == expected
