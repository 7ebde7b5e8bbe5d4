"""The local custom-job executor: one process per replica, Vertex's env, fail-fast, deadlines."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from pipelines.jobs import local_job, replica_env
from pipelines.jobs.local_job import CustomJobError, LocalCustomJob, run_custom_job
from pipelines.jobs.worker_pools import training_worker_pool_specs, trial_worker_pool_specs
from tests.conftest import ROOT, python_stdout

FAKE = str(ROOT / "tests" / "fake_trainer.py")


def fake_job(*args: str, workers: int = 1, accelerators: int = 0) -> list[dict]:
    return training_worker_pool_specs(
        image_uri="local",
        command=["python", FAKE],
        args=list(args),
        worker_count=workers,
        accelerator_type="NVIDIA_TESLA_T4" if accelerators else None,
        accelerator_count=accelerators,
    )


def ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_every_replica_gets_vertex_env_and_its_own_log(tmp_path):
    book = tmp_path / "ledger.jsonl"
    echoed: list[str] = []
    specs = fake_job("--epochs=1", f"--ledger={book}", workers=2, accelerators=2)
    result = run_custom_job(specs, str(tmp_path / "base"), echo=echoed.append)

    assert result.exit_codes == {"chief-0": 0, "worker-0": 0, "worker-1": 0}
    records = {
        f"{r['task']}-{json.loads(r['env']['TF_CONFIG'])['task']['index']}": r for r in ledger(book)
    }
    assert sorted(records) == ["chief-0", "worker-0", "worker-1"]
    tf_config = json.loads(records["chief-0"]["env"]["TF_CONFIG"])
    addresses = tf_config["cluster"]["chief"] + tf_config["cluster"]["worker"]
    assert len(set(addresses)) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
    for name, record in records.items():
        env = record["env"]
        cluster_spec = json.loads(env["CLUSTER_SPEC"])
        pool = 0 if name == "chief-0" else 1
        assert cluster_spec["task"]["type"] == f"workerpool{pool}"
        assert cluster_spec["cluster"]["workerpool1"] == tf_config["cluster"]["worker"]
        assert json.loads(env["TF_CONFIG"])["cluster"] == tf_config["cluster"]
        assert env["AIP_MODEL_DIR"] == f"{tmp_path}/base/model/"
        assert env["AIP_CHECKPOINT_DIR"] == f"{tmp_path}/base/checkpoints/"
        assert env["HPT_LOGICAL_DEVICES"] == "2"  # accelerator_count → logical devices
        assert env["HPT_CPU_THREADS"] == str(max(1, replica_env.host_cores() // 3))
        assert "CLOUD_ML_TRIAL_ID" not in env
        log = Path(result.log_paths[name]).read_text()
        assert f"fake_trainer: {record['task']}" in log
    # Issue 51, case 20: each epoch once on the screen, the chief's; the workers' in their logs.
    assert any(line.startswith("[chief-0] fake_trainer: chief") for line in echoed)
    assert not [line for line in echoed if not line.startswith("[chief-0] ")]


def test_one_accelerator_sets_no_logical_devices_and_trial_env_lands_under_trial_dir(tmp_path):
    book = tmp_path / "ledger.jsonl"
    specs = trial_worker_pool_specs(
        image_uri="local", command=["python", FAKE], args=["--epochs=1", f"--ledger={book}"]
    )
    run_custom_job(
        specs,
        str(tmp_path),
        trial_id="7",
        extra_env={"CLOUD_ML_TRIAL_ID": "7", "CLOUD_ML_HP_METRIC_FILE": str(tmp_path / "m")},
        echo=None,
    )
    (record,) = ledger(book)
    assert "HPT_LOGICAL_DEVICES" not in record["env"]
    assert "HPT_CPU_THREADS" not in record["env"]  # a lone replica keeps TensorFlow's default
    assert record["env"]["AIP_MODEL_DIR"] == f"{tmp_path}/7/model/"
    assert json.loads(record["env"]["CLUSTER_SPEC"])["task"] == {
        "type": "workerpool0",
        "index": 0,
        "trial": "7",
    }
    assert (tmp_path / "7" / "local" / "chief-0.log").exists()


def test_arguments_reach_the_process_verbatim_never_through_a_shell(tmp_path):
    book = tmp_path / "ledger.jsonl"
    tricky = "a b;$(touch pwned)|`x`"
    specs = fake_job("--epochs=1", f"--ledger={book}", f"--note={tricky}", workers=0)
    run_custom_job(specs, str(tmp_path), echo=None, cwd=str(tmp_path))
    (record,) = ledger(book)
    assert record["params"]["note"] == tricky
    assert not (tmp_path / "pwned").exists()


def test_a_crashing_worker_stops_the_job_fast_and_is_named(tmp_path):
    # The chief ignores SIGTERM like MultiWorkerMirroredStrategy: it must be SIGKILLed.
    specs = fake_job(
        "--epochs=100", "--sleep=0.1", "--fail_at=2", "--task=worker", "--ignore_sigterm"
    )
    job = LocalCustomJob(specs, base_output_directory=str(tmp_path), echo=None, grace_period=1)
    started = time.monotonic()
    with pytest.raises(CustomJobError) as err, job:
        job.wait()
    elapsed = time.monotonic() - started
    assert elapsed < 8
    assert err.value.replica == "worker-0"
    assert err.value.exit_code == 3
    first_line = str(err.value).splitlines()[0]
    assert "replica worker-0 (workerpool1, replica 0) exited with code 3" in first_line
    assert "failing at epoch 2" in err.value.log_tail
    assert not any(pid_alive(r.process.pid) for r in job.replicas)
    assert job.replicas[0].returncode == -9  # the chief needed SIGKILL


def test_replicas_write_temporary_files_under_the_job_removed_when_it_succeeds(tmp_path):
    book = tmp_path / "ledger.jsonl"
    run_custom_job(
        fake_job("--epochs=1", "--tmp_file", f"--ledger={book}"), str(tmp_path), echo=None
    )
    local = tmp_path / "local"
    assert sorted(r["env"]["TMPDIR"] for r in ledger(book)) == [
        str(local / "tmp" / "chief-0"),
        str(local / "tmp" / "worker-0"),
    ]
    assert not (local / "tmp").exists()  # the job ended well: its temporary files are gone


def test_a_failed_job_keeps_its_temporary_files_and_names_them(tmp_path):
    specs = fake_job("--epochs=3", "--tmp_file", "--fail_at=2", "--task=chief", workers=0)
    with pytest.raises(CustomJobError) as err:
        run_custom_job(specs, str(tmp_path), echo=None)
    kept = tmp_path / "local" / "tmp"
    assert f"temporary files kept in {kept}" in str(err.value).splitlines()[0]
    assert [p.name[:14] for p in (kept / "chief-0").iterdir()] == ["fake_autograph"]


def test_a_replica_that_never_joins_hits_the_startup_deadline(tmp_path):
    specs = fake_job("--epochs=100", "--sleep=0.1", "--hang_at=0", "--silent", "--task=worker")
    started = time.monotonic()
    with pytest.raises(CustomJobError, match="replica worker-0 .* never joined") as err:
        run_custom_job(specs, str(tmp_path), echo=None, startup_timeout=1.5, grace_period=1)
    assert time.monotonic() - started < 8
    assert err.value.replica == "worker-0"


def test_a_job_past_its_timeout_fails(tmp_path):
    specs = fake_job("--epochs=100", "--hang_at=1", workers=0)
    with pytest.raises(CustomJobError, match="chief-0 .* timed out: the job ran past 1s"):
        run_custom_job(specs, str(tmp_path), echo=None, timeout=1, grace_period=1)


def test_a_missing_command_fails_naming_the_replica(tmp_path):
    specs = training_worker_pool_specs(image_uri="local", command=[str(tmp_path / "nope")])
    with pytest.raises(CustomJobError, match="replica chief-0: cannot start"):
        run_custom_job(specs, str(tmp_path), echo=None)


def test_on_tick_stops_the_job_as_stopped_not_failed(tmp_path):
    specs = fake_job("--epochs=100", "--sleep=0.1", workers=1)
    ticks = []
    result = run_custom_job(
        specs, str(tmp_path), echo=None, on_tick=lambda: len(ticks) > 3 or ticks.append(1) and False
    )
    assert result.stopped
    assert result.elapsed_seconds < 5


def test_parameter_servers_are_stopped_once_the_others_succeed(tmp_path):
    ps = fake_job("--epochs=1", "--hang_at=0", "--task=ps")[0]
    specs = fake_job("--epochs=1", "--hang_at=0", "--task=ps", workers=1) + [
        {**ps, "replica_count": 2}
    ]
    result = run_custom_job(specs, str(tmp_path), echo=None, grace_period=1)
    assert not result.stopped
    assert result.exit_codes["chief-0"] == 0 and result.exit_codes["worker-0"] == 0
    assert {k for k in result.exit_codes if k.startswith("ps-")} == {"ps-0", "ps-1"}


def test_a_job_ends_when_its_replicas_exit_not_at_the_next_poll(tmp_path):
    """The wait wakes on a replica's exit: with a 60 s poll, a 2-replica job still ends at once."""
    job = LocalCustomJob(
        fake_job("--epochs=2"), base_output_directory=str(tmp_path), echo=None, grace_period=1
    )
    started = time.monotonic()
    with job:
        result = job.wait(poll_interval=60)
    assert time.monotonic() - started < 30  # ~1 s of work; a poll would have slept 60
    assert result.exit_codes == {"chief-0": 0, "worker-0": 0} and not result.stopped


def test_gcs_base_is_refused(tmp_path):
    with pytest.raises(CustomJobError, match="needs a local path"):
        LocalCustomJob(fake_job(workers=0), base_output_directory="gs://bucket/run")


# --- the real trainer -----------------------------------------------------------------------------


def real_job(data: str, *extra: str, workers: int = 1) -> list[dict]:
    return training_worker_pool_specs(
        image_uri="local",
        command=["python", "-m", "trainer.task"],
        args=[f"--data={data}", "--batch_size=16", *extra],
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        worker_count=workers,
    )


@pytest.mark.slow
def test_real_trainer_chief_and_worker_only_the_chief_exports(tmp_path, synthetic_data):
    base = tmp_path / "job"
    result = run_custom_job(
        real_job(synthetic_data, "--epochs=2"), str(base), cwd=str(ROOT), echo=None, timeout=400
    )
    assert result.exit_codes == {"chief-0": 0, "worker-0": 0}
    chief_log = Path(result.log_paths["chief-0"]).read_text()
    worker_log = Path(result.log_paths["worker-0"]).read_text()
    for log in (chief_log, worker_log):
        assert "MultiWorkerMirroredStrategy, 2 replica(s) in sync, chief + 1 worker(s)" in log
    assert "exported model to" in chief_log and "exported model to" not in worker_log
    model = base / "model"
    assert sorted(p.name for p in model.iterdir()) == [
        "assets",
        "fingerprint.pb",
        "model.json",
        "saved_model.pb",
        "variables",
    ]
    card = json.loads((model / "model.json").read_text())
    assert card["training"]["replicas"] == 2
    # Nothing else (no staging or worker copies) beside the model; worker checkpoints cleaned up.
    assert sorted(p.name for p in base.iterdir()) == ["checkpoints", "local", "logs", "model"]
    assert not [p for p in (base / "checkpoints").iterdir() if p.name.startswith(".worker")]


@pytest.mark.slow
def test_real_trainer_worker_killed_mid_run_fails_fast_naming_it(tmp_path, synthetic_data):
    base = tmp_path / "job"
    job = LocalCustomJob(
        real_job(synthetic_data, "--epochs=200"),
        base_output_directory=str(base),
        cwd=str(ROOT),
        echo=None,
        grace_period=2,
        timeout=400,
    )
    worker = job.replicas[1]
    killed_at: list[float] = []

    def crash_worker_after_first_epoch() -> bool:
        if not killed_at and "epoch 1/200" in Path(worker.log_path).read_text(errors="replace"):
            os.kill(worker.process.pid, 9)  # a crash: no chance to clean up
            killed_at.append(time.monotonic())
        return False

    with pytest.raises(CustomJobError) as err, job:
        job.wait(on_tick=crash_worker_after_first_epoch)
    assert killed_at, "the worker never reached epoch 1"
    assert time.monotonic() - killed_at[0] < 15
    assert err.value.replica == "worker-0"
    assert "replica worker-0 (workerpool1, replica 0) was killed by SIGKILL" in str(err.value)
    assert "epoch 1/200" in err.value.log_tail
    assert all(r.returncode is not None for r in job.replicas)
    assert not (base / "model").exists()


def test_local_dir_layout():
    assert local_job.job_local_dir("/b") == "/b/local"
    assert local_job.job_local_dir("/b", "3") == "/b/3/local"


def test_describing_a_local_export_reads_its_card_without_tensorflow(tmp_path):
    """The local final step reads model.json as plain JSON: no TensorFlow import (~2.8 s)."""

    card = {
        "versions": {"tensorflow": "2.21.0"},
        "hyperparameters": {"learning_rate": 0.003},
        "final_metrics": {"val_accuracy": 0.9, "epoch": 3},
        "dataset": {"metadata_sha256": "abc", "path": "/d", "class_names": ["a", "b"]},
        "training": {"replicas": 2, "strategy": "MultiWorkerMirroredStrategy"},
    }
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.json").write_text(json.dumps(card))
    probe = (
        "import json, sys, types\n"
        "from pipelines.jobs import model_artifact\n"
        "model = types.SimpleNamespace(uri='', metadata={})\n"
        f"model_artifact.describe(model, {str(tmp_path)!r})\n"
        "print(json.dumps([model.uri, model.metadata, 'tensorflow' in sys.modules]))\n"
    )
    uri, metadata, tensorflow_imported = json.loads(python_stdout(probe))
    assert uri == str(tmp_path / "model")
    assert metadata["replicas"] == 2 and metadata["final_metrics"] == {"val_accuracy": 0.9}
    assert tensorflow_imported is False


@pytest.mark.parametrize(
    ("processes", "cores", "expected"),
    [(1, 2, {}), (2, 2, {"HPT_CPU_THREADS": "1"}), (3, 2, {"HPT_CPU_THREADS": "1"}),
     (2, 16, {"HPT_CPU_THREADS": "8"}), (4, 16, {"HPT_CPU_THREADS": "4"})],
)  # fmt: skip
def test_replicas_sharing_the_host_get_their_share_of_the_cores(processes, cores, expected):
    assert replica_env.cpu_threads_env(processes, cores) == expected


def test_parallel_trials_share_the_cores(tmp_path):
    specs = trial_worker_pool_specs(image_uri="local", command=["python", FAKE], args=[])
    alone, shared = (
        local_job.plan_replicas(specs, log_dir=str(tmp_path / str(n)), jobs_at_once=n)[0].env
        for n in (1, 2)
    )
    assert "HPT_CPU_THREADS" not in alone
    assert shared["HPT_CPU_THREADS"] == str(max(1, replica_env.host_cores() // 2))
