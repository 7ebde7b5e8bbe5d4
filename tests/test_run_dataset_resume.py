"""Issue 52: a rerun of `hpt-pipeline run` resumes its data step, not preparing from the start.

A real `run` is stopped with Ctrl-C (SIGINT to its process group) once its data step has
written the train split's shards; the rerun of the same command keeps them (same inode and
modification time) in the dataset it finishes, writes only the others, and says so. Before,
every run's data step wrote a new artifact folder and prepared everything again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.bench_prepare_scale import write_jpegs
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

HPT = str(Path(sys.executable).with_name("hpt-pipeline"))
# Validation and test are large, so the run is stopped while they are being written.
ENV = {"HPT_VALIDATION_FRACTION": "0.4", "HPT_TEST_FRACTION": "0.4", "TF_CPP_MIN_LOG_LEVEL": "2"}


def _command(source: Path, out: Path) -> list[str]:
    return [
        HPT,
        "run",
        f"--source={source}",
        f"--output={out}",
        "--image-size=32",
        "--max-trials=1",
        "--parallel-trials=1",
        "--epochs=1",
        "--workers=0",
        "--tracking=off",
    ]


def _inodes(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("*.tfrecord")}


def _stopped_in_its_data_step(source: Path, out: Path) -> Path:
    """Start a run, Ctrl-C it once the train split's shards have receipts; its dataset stage."""
    run = subprocess.Popen(
        _command(source, out),
        cwd=ROOT,
        env={**os.environ, **ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    deadline = time.monotonic() + 300
    receipts: list[Path] = []
    while not receipts and run.poll() is None and time.monotonic() < deadline:
        receipts = list((out / "datasets").glob(".*.partial/done/*.json"))
        time.sleep(0.01)
    if run.poll() is None:
        os.killpg(run.pid, signal.SIGINT)
    assert run.wait(timeout=120) != 0, "the run ended before its data step left a shard to keep"
    assert receipts
    return receipts[0].parent.parent


def test_a_rerun_after_ctrl_c_in_the_data_step_keeps_the_shards_it_had_written(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    write_jpegs(source, 1200, size=64)
    out = tmp_path / "out"
    stage = _stopped_in_its_data_step(source, out)
    kept = {n: i for n, i in _inodes(stage).items() if (stage / "done" / f"{n}.json").exists()}
    assert kept and all(name.startswith("train-") for name in kept)

    again = subprocess.run(
        _command(source, out),
        cwd=ROOT,
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        check=False,
    )

    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    dataset = out / "datasets" / stage.name[1 : -len(".partial")]
    lines = [line.strip() for line in again.stdout.splitlines()]
    said = [line for line in lines if line.startswith(f"kept {len(kept)} of 24 shard(s)")]
    assert said and str(stage) in said[0], lines
    after = _inodes(dataset)
    assert {name: after[name] for name in kept} == kept  # not written again
    assert len(after) == 24 and not stage.exists()
