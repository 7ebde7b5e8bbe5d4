"""The local final job kept with its study: reused when finished, resumed when interrupted.

Issue 51 (11, 14): kfp.local runs every task again, so a rerun retrained the final job from
epoch 1, after Ctrl-C as after a finished run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.jobs import kept_job
from pipelines.jobs.worker_pools import training_worker_pool_specs
from tests.conftest import ROOT


def pools(data: str, *args: str, workers: int = 1, command: list[str] | None = None) -> list:
    return training_worker_pool_specs(
        image_uri="local",
        command=command or ["python", "-m", "trainer.task"],
        args=[f"--data={data}", "--batch_size=16", *args],
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        worker_count=workers,
    )


def test_the_key_leaves_out_the_dataset_path_a_rerun_changes_and_nothing_else():
    key = kept_job.job_key(pools("/o/artifacts/run-1/prepare-dataset/dataset", "--epochs=3"))
    assert key == kept_job.job_key(pools("/o/artifacts/run-2/prepare-dataset/x", "--epochs=3"))
    assert key == kept_job.job_key([json.dumps(p) for p in pools("/d2", "--epochs=3")])
    assert key != kept_job.job_key(pools("/d", "--epochs=4"))
    assert key != kept_job.job_key(pools("/d", "--epochs=3", workers=2))
    assert kept_job.job_dir("/o/study", pools("/d", "--epochs=3")) == f"/o/study/final/{key}"


def test_a_finished_job_is_reused_without_starting_a_process(tmp_path):
    never = pools("/d", command=[str(tmp_path / "no-such-program")])
    base = Path(kept_job.job_dir(str(tmp_path / "study"), never))
    (base / "model").mkdir(parents=True)
    (base / "model" / "model.json").write_text("{}")
    shown: list[str] = []
    with pytest.raises(Exception, match="no-such-program"):  # no done.json: it runs, and fails
        kept_job.run(never, str(tmp_path / "job_dir"), str(tmp_path / "study"), shown.append)
    assert not (base / kept_job.DONE_FILE).exists()
    (base / kept_job.DONE_FILE).write_text("{}")
    assert kept_job.run(never, "/unused", str(tmp_path / "study"), shown.append) == str(base)
    assert shown == [f"final job: reused, it finished in an earlier run ({base})"]


def test_without_a_study_folder_the_job_runs_where_the_spec_says(tmp_path):
    """A local spec run outside `hpt-pipeline run` (no study_dir): Vertex's layout, kept nowhere."""
    job = pools("/d", command=[sys.executable, "-c", "pass"], workers=0)
    assert kept_job.run(job, str(tmp_path / "job_dir"), "", print) == str(tmp_path / "job_dir")
    assert (tmp_path / "job_dir" / kept_job.DONE_FILE).is_file()


_RESUMED = re.compile(r"resuming from checkpoint after epoch (\d+)")


def _latest_epoch(checkpoints: Path) -> int:
    state = (checkpoints / kept_job.CHECKPOINT_STATE).read_text()
    return int(re.search(r'model_checkpoint_path: "ckpt-(\d+)"', state)[1])


@pytest.mark.slow
def test_an_interrupted_final_job_resumes_chief_and_worker_after_the_same_epoch(
    tmp_path, synthetic_data
):
    """Ctrl-C during the final job, then the rerun: both replicas resume, none from epoch 1."""
    epochs = 300  # far more than a quiet host trains between the first checkpoint and Ctrl-C
    job = pools(synthetic_data, f"--epochs={epochs}")
    study = tmp_path / "study"
    base = Path(kept_job.job_dir(str(study), job))
    code = (
        "import json, sys; from pipelines.jobs import kept_job; "
        "kept_job.run(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3])"
    )
    args = [sys.executable, "-c", code, json.dumps(job), str(tmp_path / "unused"), str(study)]
    # The replicas are the step's own processes, as under `hpt-pipeline run` (whose fork server
    # is in its process group), not forks of a server outside the group that Ctrl-C reaches.
    env = {**os.environ, "HPT_FORK_SERVER": "off"}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    step = subprocess.Popen(args, cwd=ROOT, env=env, start_new_session=True, **quiet)
    deadline = time.monotonic() + 400
    while not (base / "checkpoints" / kept_job.CHECKPOINT_STATE).exists():
        assert step.poll() is None and time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.2)
    os.killpg(step.pid, signal.SIGINT)  # Ctrl-C: the run's whole process group, replicas too
    step.wait(timeout=120)
    stopped_after = _latest_epoch(base / "checkpoints")
    assert stopped_after < epochs and not (base / kept_job.DONE_FILE).exists()
    logs = {name: base / "local" / f"{name}.log" for name in ("chief-0", "worker-0")}
    before = {name: len(log.read_text()) for name, log in logs.items()}

    shown: list[str] = []
    assert kept_job.run(job, "/unused", str(study), shown.append) == str(base)
    assert shown == [f"final job: resuming the one an earlier run left ({base})"]
    for name, log in logs.items():
        rerun = log.read_text()[before[name] :]
        assert [int(n) for n in _RESUMED.findall(rerun)] == [stopped_after], name
        assert f"epoch 1/{epochs}" not in rerun, name
        assert f"epoch {epochs}/{epochs}" in rerun, name
    assert (base / "model" / "model.json").is_file() and (base / kept_job.DONE_FILE).is_file()
    # The copies the killed worker left are gone, as the resumed worker's own.
    assert not [p for p in (base / "checkpoints").iterdir() if p.name.startswith(".worker")]
