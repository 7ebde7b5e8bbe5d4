"""Multi-worker trials (`trial_workers`) in the local study: real processes, the fake trainer.

Each trial is the final job's kind of job, a chief and workers on loopback ports, run by
`pipelines/jobs/local_job.py` under the study's parallelism; the metric is the chief's; a
worker that dies fails its trial in one line and the study goes on.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from pipelines.jobs.worker_pools import training_worker_pool_specs
from pipelines.study import trials as tl
from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.study.trials import TrialState
from pipelines.targets.local.local_study import run_study
from tests.conftest import ROOT

FAKE = str(ROOT / "tests" / "fake_trainer.py")
SPACE = SearchSpace(parameters=(Parameter("learning_rate", "double", min=1e-3, max=0.1),))


def study(tmp_path: Path, *fake_args: str, **options) -> list[dict]:
    """Two trials at once, each a chief and one worker (the pools `trial_workers: 1` gives)."""
    pools = training_worker_pool_specs(
        image_uri="local", command=["python", FAKE], args=list(fake_args), worker_count=1
    )
    for name, value in dict(max_trial_count=2, parallel_trial_count=2, seed=0).items():
        options.setdefault(name, value)
    return run_study(
        worker_pool_specs=pools,
        study_spec_metrics=SPACE.to_study_spec_metrics(),
        study_spec_parameters=SPACE.to_study_spec_parameters(),
        base_output_directory=str(tmp_path / "study"),
        max_failed_trial_count=2,
        show_progress=False,
        **options,
    )


def test_each_trial_is_one_cluster_of_two_replicas_and_its_metric_is_the_chiefs(tmp_path):
    book = tmp_path / "ledger.jsonl"
    trials = study(tmp_path, "--epochs=2", f"--ledger={book}")
    assert [tl.trial_state(t) for t in trials] == [TrialState.SUCCEEDED] * 2
    runs = [json.loads(line) for line in book.read_text().splitlines()]
    for trial in trials:
        ran = {r["task"]: r for r in runs if r["trial"] == trial["id"]}
        assert sorted(ran) == ["chief", "worker"]  # two replicas…
        configs = [json.loads(r["env"]["TF_CONFIG"]) for r in ran.values()]
        assert configs[0]["cluster"] == configs[1]["cluster"]  # …in one cluster
        assert [len(configs[0]["cluster"][t]) for t in ("chief", "worker")] == [1, 1]
        local = tmp_path / "study" / trial["id"] / "local"
        assert (local / "chief-0.log").exists() and (local / "worker-0.log").exists()
        assert len(trial["measurements"]) == 2  # the chief's two epochs, once each


def test_a_killed_worker_fails_its_trial_in_one_line_and_the_study_goes_on(tmp_path):
    """The chief of trial 1 waits forever on its peer and ignores SIGTERM, as a
    MultiWorkerMirroredStrategy chief does; its worker is killed while it trains."""
    pids = tmp_path / "pids"
    pids.mkdir()
    killed: list[int] = []

    def kill_trial_1s_worker() -> None:
        pid_file = pids / "1-worker.pid"
        while not pid_file.exists():
            threading.Event().wait(0.05)
        pid = int(pid_file.read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_trial_1s_worker, daemon=True)
    killer.start()
    trials = study(
        tmp_path,
        "--epochs=6",
        "--sleep=0.3",
        f"--pid_dir={pids}",
        "--hang_at=2",
        "--task=chief",
        "--fail_trials=1",
        "--ignore_sigterm",
    )
    killer.join(timeout=5)
    assert killed
    by_id = {t["id"]: t for t in trials}
    assert tl.trial_state(by_id["2"]) == TrialState.SUCCEEDED
    failed = by_id["1"]
    assert tl.trial_state(failed) == TrialState.INFEASIBLE
    reason = failed["infeasibleReason"]
    assert "\n" not in reason
    assert reason.startswith("replica worker-0 (workerpool1, replica 0) was killed by SIGKILL")


def test_successive_halving_stops_a_trial_with_workers_and_the_cost_is_the_chiefs(tmp_path):
    """One trial at a time: which trial reaches a rung first then does not depend on timing."""
    trials = study(
        tmp_path,
        "--epochs=9",
        "--cost",
        max_trial_count=5,
        parallel_trial_count=1,
        scheduler="asha",
        rungs=(1, 3, 9),
    )
    stopped = [t for t in trials if t[tl.LOCAL_KEY].get("earlyStopped")]
    full = [t for t in trials if not t[tl.LOCAL_KEY].get("earlyStopped")]
    assert stopped and full  # the rung rule stopped whole trials (every replica) and kept some
    assert all(tl.trial_state(t) == TrialState.SUCCEEDED for t in trials)
    for trial in full:  # the cost, measured once, reported by the chief with the last step
        metrics = {m["metricId"] for m in trial["finalMeasurement"]["metrics"]}
        assert {"val_accuracy", "model_size_mb", "latency_ms"} <= metrics


def test_trials_with_workers_stopped_by_the_study_resume_on_a_rerun(tmp_path):
    book = tmp_path / "ledger.jsonl"
    args = ("--epochs=12", "--sleep=0.3", "--resume", f"--ledger={book}")
    first = study(tmp_path, *args, max_study_hours=1.5 / 3600)
    assert [tl.trial_outcome(t) for t in first] == [tl.INTERRUPTED] * 2  # not failed
    second = study(tmp_path, *args)
    assert [tl.trial_state(t) for t in second] == [TrialState.SUCCEEDED] * 2
    runs = [json.loads(line) for line in book.read_text().splitlines()]
    for trial in second:  # the rerun: the same trial, both replicas again, every epoch kept
        assert sorted(r["task"] for r in runs if r["trial"] == trial["id"]) == ["chief", "worker"]
        assert len(trial["measurements"]) == 12


def _replica_pid(trial_id: str, task_type: str, base: Path) -> int | None:
    """The pid of this study's replica (exec'd: its environment is readable in /proc)."""
    for entry in Path("/proc").iterdir():
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        tf_config = next((v[len(b"TF_CONFIG=") :] for v in env if v.startswith(b"TF_CONFIG=")), b"")
        if (
            f"CLOUD_ML_TRIAL_ID={trial_id}".encode() in env
            and tf_config
            and json.loads(tf_config)["task"]["type"] == task_type
            and any(str(base).encode() in v for v in env)
        ):
            return int(entry.name)
    return None


@pytest.mark.slow
def test_the_real_trainer_a_killed_worker_fails_its_trial_in_one_line(tmp_path, monkeypatch):
    """Two real trainer processes in one MultiWorkerMirroredStrategy cluster; the worker is
    SIGKILLed after its first epoch: the trial fails with one line, the study returns."""
    from pipelines.jobs import fork_client
    from tests.synthetic import write_dataset

    monkeypatch.setenv(fork_client.ENV, "off")  # exec'd replicas: /proc shows their env

    data = write_dataset(str(tmp_path / "data"), counts=(64, 16, 16))
    base = tmp_path / "study"
    pools = training_worker_pool_specs(
        image_uri="local",
        command=[sys.executable, "-m", "trainer.task"],
        args=[f"--data={data}", "--epochs=40", "--batch_size=8", "--precision=float32"],
        worker_count=1,
    )
    killed: list[int] = []

    def kill_the_worker_after_an_epoch() -> None:
        log = base / "1" / "local" / "worker-0.log"
        while not (log.exists() and "epoch 1/" in log.read_text(errors="replace")):
            threading.Event().wait(0.1)
        pid = _replica_pid("1", "worker", base)
        if pid:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    threading.Thread(target=kill_the_worker_after_an_epoch, daemon=True).start()
    (trial,) = run_study(
        worker_pool_specs=pools,
        study_spec_metrics=SPACE.to_study_spec_metrics(),
        study_spec_parameters=SPACE.to_study_spec_parameters(),
        base_output_directory=str(base),
        max_trial_count=1,
        parallel_trial_count=1,
        max_failed_trial_count=2,  # the study ends with its trial, not on the failure rule
        seed=0,
        show_progress=False,
    )
    assert killed
    assert tl.trial_state(trial) == TrialState.INFEASIBLE
    reason = trial["infeasibleReason"]
    assert "\n" not in reason
    assert reason.startswith("replica worker-0 (workerpool1, replica 0) was killed by SIGKILL")
    chief_log = (base / "1" / "local" / "chief-0.log").read_text()
    assert "MultiWorkerMirroredStrategy, 2 replica(s) in sync, chief + 1 worker(s)" in chief_log
