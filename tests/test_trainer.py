"""The trainer end to end: strategies, hypertune reports, resume, chief-only export, bad input."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import run_trainer, start_trainer
from tests.synthetic import CLASS_NAMES, make_images
from trainer.contract import COST_METRICS, PRECISIONS
from trainer.precision import parse_line

pytestmark = pytest.mark.slow


def read_hypertune(path: Path, tag: str | None = "val_accuracy") -> list[dict]:
    """The file's reports (of `tag` only, unless None)."""
    reports = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in reports if tag is None or tag in r]


def read_tensorboard(folder: Path) -> tuple[dict[str, list[tuple[int, float]]], dict]:
    """The event files' scalars (tag → [(step, value)]) and the HParams session start info."""
    import tensorflow as tf
    from google.protobuf import json_format
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    scalars = {
        tag: [
            (e.step, pytest.approx(float(tf.make_ndarray(e.tensor_proto))))
            for e in events.Tensors(tag)
        ]
        for tag in events.Tags()["tensors"]
        if not tag.startswith("_hparams_")
    }
    content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    return scalars, json_format.MessageToDict(start)


def png_bytes(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def predict(model_dir: Path, images: np.ndarray) -> dict:
    import tensorflow as tf

    serve = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
    return serve(image_bytes=tf.constant([png_bytes(img) for img in images]))


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_mirrored_over_two_logical_cpus_reports_every_epoch(synthetic_data, tmp_path):
    metrics_file = tmp_path / "hypertune" / "output.metrics"
    result = run_trainer(
        [
            f"--data={synthetic_data}",
            "--epochs=3",
            "--batch_size",
            "16",
            "--learning_rate=0.05",
            f"--model_dir={tmp_path / 'model'}",
            f"--tensorboard_dir={tmp_path / 'tb'}",
        ],
        HPT_LOGICAL_DEVICES="2",
        HPT_CPU_THREADS="1",  # the local executors' share of a host's cores
        CLOUD_ML_HP_METRIC_FILE=str(metrics_file),
        CLOUD_ML_TRIAL_ID="7",
    )
    assert result.returncode == 0, result.stderr
    assert "MirroredStrategy, 2 replica(s) in sync" in result.stderr
    assert "op threads 1/1 (intra/inter)" in result.stderr
    assert "graph rewrites off (CPU only)" in result.stderr
    card = json.loads((tmp_path / "model" / "model.json").read_text())
    assert card["training"]["strategy"] == "MirroredStrategy"
    assert card["training"]["replicas_in_sync"] == 2
    records = read_hypertune(metrics_file)
    assert [r["global_step"] for r in records] == ["1", "2", "3"]
    assert all(r["trial"] == "7" and 0.0 <= float(r["val_accuracy"]) <= 1.0 for r in records)
    # The last report is the final validation metric.
    assert float(records[-1]["val_accuracy"]) == pytest.approx(
        card["final_metrics"]["val_accuracy"]
    )
    # The cost, measured once after training, comes with the last step (and in model.json).
    costs = {k: r for r in read_hypertune(metrics_file, None) for k in COST_METRICS if k in r}
    assert sorted(costs) == sorted(COST_METRICS)
    assert all(r["global_step"] == "3" and r["trial"] == "7" for r in costs.values())
    on_disk = sum(p.stat().st_size for p in (tmp_path / "model" / "variables").iterdir())
    assert float(costs["model_size_mb"]["model_size_mb"]) == pytest.approx(on_disk / 1e6, rel=0.05)
    assert 0 < float(costs["latency_ms"]["latency_ms"]) < 10_000
    assert card["cost"] == pytest.approx({k: float(r[k]) for k, r in costs.items()})
    # TensorBoard (what `tensorboard --logdir` reads): every epoch's scalars at its step, and
    # the HParams plugin's session for this trial, its hyperparameters under its trial id.
    scalars, session = read_tensorboard(tmp_path / "tb")
    assert scalars["val_accuracy"] == [
        (int(r["global_step"]), float(r["val_accuracy"])) for r in records
    ]
    assert [step for step, _ in scalars["train_loss"]] == [1, 2, 3]
    assert session["groupName"] == "7"
    assert session["hparams"]["learning_rate"] == 0.05 and session["hparams"]["batch_size"] == 16
    assert session["hparams"]["optimizer"] == "sgd" and session["hparams"]["model"] == "cnn"


def test_two_process_multi_worker_only_chief_exports(synthetic_data, tmp_path):
    chief_port, worker_port = free_ports(2)
    cluster = {"chief": [f"127.0.0.1:{chief_port}"], "worker": [f"127.0.0.1:{worker_port}"]}
    procs = {}
    for task_type in ("chief", "worker"):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": 0}})
        procs[task_type] = start_trainer(
            [
                f"--data={synthetic_data}",
                "--epochs=3",
                "--batch_size=16",
                "--learning_rate=0.05",
                f"--model_dir={tmp_path / task_type / 'model'}",
                f"--checkpoint_dir={tmp_path / 'checkpoints'}",
            ],
            TF_CONFIG=tf_config,
            CLOUD_ML_HP_METRIC_FILE=str(tmp_path / task_type / "metrics"),
        )
    try:
        outputs = {name: proc.communicate(timeout=240)[0] for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert procs["chief"].returncode == 0, outputs["chief"][-3000:]
    assert procs["worker"].returncode == 0, outputs["worker"][-3000:]
    started = "MultiWorkerMirroredStrategy, 2 replica(s) in sync, chief + 1 worker(s)"
    assert started in outputs["chief"]
    # Only the chief writes a model (and reports the metric); the worker leaves no trace.
    assert (tmp_path / "chief" / "model" / "saved_model.pb").exists()
    assert not (tmp_path / "worker").exists()
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".worker")]
    assert not [p for p in (tmp_path / "chief").iterdir() if p.name.startswith(".staging")]
    card = json.loads((tmp_path / "chief" / "model" / "model.json").read_text())
    assert card["training"]["replicas"] == 2
    # The export predicts from encoded image bytes, as a Vertex prediction request carries.
    images, labels = make_images(16, 32, seed=99)
    out = predict(tmp_path / "chief" / "model", images)
    probabilities = out["probabilities"].numpy()
    assert probabilities.shape == (16, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    predicted = [label.decode() for label in out["label"].numpy()]
    expected = [CLASS_NAMES[i] for i in labels]
    assert sum(p == e for p, e in zip(predicted, expected, strict=True)) >= 14


def test_killed_run_resumes_at_the_next_epoch(synthetic_data, tmp_path):
    args = [
        f"--data={synthetic_data}",
        "--epochs=40",
        "--batch_size=16",
        f"--checkpoint_dir={tmp_path / 'ckpt'}",
        f"--model_dir={tmp_path / 'model'}",
    ]
    proc = start_trainer(args)
    deadline = time.monotonic() + 180
    for line in proc.stdout:  # kill it (no chance to clean up) once epoch 2 is done
        if line.startswith("epoch 2/40") or time.monotonic() > deadline:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    import tensorflow as tf

    stopped_after = int(tf.train.latest_checkpoint(str(tmp_path / "ckpt")).rsplit("-", 1)[1])
    assert 2 <= stopped_after < 40
    assert not (tmp_path / "model").exists()

    result = run_trainer([*args[:1], "--epochs=" + str(stopped_after + 2), *args[2:]])
    assert result.returncode == 0, result.stderr
    assert f"resuming from checkpoint after epoch {stopped_after}" in result.stderr
    epochs_run = [
        line.split(":")[0] for line in result.stderr.splitlines() if line.startswith("epoch ")
    ]
    assert epochs_run == [
        f"epoch {stopped_after + 1}/{stopped_after + 2}",
        f"epoch {stopped_after + 2}/{stopped_after + 2}",
    ]
    card = json.loads((tmp_path / "model" / "model.json").read_text())
    assert card["training"]["resumed_after_epoch"] == stopped_after
    assert [h["epoch"] for h in card["history"]] == [stopped_after + 1, stopped_after + 2]

    # A trial rerun after its last epoch (killed before its study recorded it) trains
    # nothing and reports its measurement, instead of reporting nothing at all.
    metric_file = tmp_path / "hypertune.metrics"
    again = run_trainer(
        [*args[:1], "--epochs=" + str(stopped_after + 2), *args[2:]],
        CLOUD_ML_TRIAL_ID="1",
        CLOUD_ML_HP_METRIC_FILE=str(metric_file),
    )
    assert again.returncode == 0, again.stderr
    assert f"already past epoch {stopped_after + 2}" in again.stderr
    reports = [json.loads(line) for line in metric_file.read_text().splitlines()]
    # One report per tag (every validation metric, then the cost), all at the last epoch.
    assert {int(r["global_step"]) for r in reports} == {stopped_after + 2}
    accuracy = [r for r in reports if "val_accuracy" in r]
    assert len(accuracy) == 1 and 0.0 <= float(accuracy[0]["val_accuracy"]) <= 1.0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--data=/nonexistent/dataset"], "--data=/nonexistent/dataset"),
        (["--learning_rate=-1"], "--learning_rate=-1: expected a number > 0"),
        (["--bogus_flag=3"], "unrecognized arguments: --bogus_flag=3"),
        (["--momentum", "1.5"], "--momentum=1.5"),
        (["--distribution=ring"], "--distribution=ring"),
        (
            ["--precision=fp16"],
            "--precision=fp16: expected one of auto, float32, mixed_bfloat16",
        ),
    ],
)
def test_bad_input_is_one_line_without_traceback(synthetic_data, args, expected):
    if not any(a.startswith("--data") for a in args):
        args = [f"--data={synthetic_data}", *args]
    result = run_trainer(args, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("trainer: error: ") and expected in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "float32", "auto"])
def test_every_precision_trains_in_sync_and_exports_float32(synthetic_data, tmp_path, precision):
    import tensorflow as tf

    result = run_trainer(
        [
            f"--data={synthetic_data}",
            "--epochs=2",
            "--batch_size=16",
            "--learning_rate=0.05",
            f"--precision={precision}",
            f"--model_dir={tmp_path / 'model'}",
        ],
        HPT_LOGICAL_DEVICES="2",
    )
    assert result.returncode == 0, result.stderr
    card = json.loads((tmp_path / "model" / "model.json").read_text())
    resolved = card["training"]["precision"]
    assert card["training"]["precision_requested"] == precision
    assert resolved == precision if precision != "auto" else resolved in PRECISIONS
    assert "2 replica(s) in sync" in result.stderr and f"precision: {resolved} (" in result.stderr
    saved = tf.train.load_checkpoint(str(tmp_path / "model" / "variables" / "variables"))
    floats = {d.name for d in saved.get_variable_to_dtype_map().values() if d.is_floating}
    assert floats == {"float32"}  # every weight, whatever the training precision
    serve = tf.saved_model.load(str(tmp_path / "model")).signatures["serving_default"]
    assert serve.structured_outputs["probabilities"].dtype.name == "float32"
    images, _ = make_images(4, 32, seed=5)
    out = predict(tmp_path / "model", images)
    assert out["probabilities"].dtype.name == "float32"
    np.testing.assert_allclose(out["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-5)


def test_a_trial_under_auto_reports_a_finite_metric_and_its_precision(synthetic_data, tmp_path):
    metrics_file = tmp_path / "hypertune" / "output.metrics"
    result = run_trainer(
        [f"--data={synthetic_data}", "--epochs=2", "--batch_size=16", "--learning_rate=0.05"],
        CLOUD_ML_TRIAL_ID="3",
        CLOUD_ML_HP_METRIC_FILE=str(metrics_file),
    )
    assert result.returncode == 0, result.stderr
    reports = read_hypertune(metrics_file)
    assert [r["global_step"] for r in reports] == ["1", "2"]
    assert all(math.isfinite(float(r["val_accuracy"])) for r in reports)
    lines = result.stderr.splitlines()
    assert parse_line(result.stderr) in PRECISIONS[1:]
    (line,) = [x for x in lines if x.startswith("precision: ")]
    assert "(auto: " in line
    assert any(x.startswith("first step done ") for x in lines)


def test_auto_trains_in_float32_where_onednn_is_capped_below_bf16(synthetic_data, tmp_path):
    """Capped at AVX2, oneDNN cannot run a bf16 convolution at all, bf16 units or not."""
    metrics_file = tmp_path / "hypertune" / "output.metrics"
    result = run_trainer(
        [f"--data={synthetic_data}", "--epochs=1", "--batch_size=16"],
        CLOUD_ML_TRIAL_ID="4",
        CLOUD_ML_HP_METRIC_FILE=str(metrics_file),
        ONEDNN_MAX_CPU_ISA="AVX2",
    )
    assert result.returncode == 0, result.stderr
    assert "precision: float32 (auto: oneDNN limited to AVX2 (ONEDNN_MAX_CPU_ISA))" in (
        result.stderr.splitlines()
    )
    assert math.isfinite(float(read_hypertune(metrics_file)[-1]["val_accuracy"]))


def test_a_diverging_trial_is_a_poor_trial_not_a_failed_one(synthetic_data, tmp_path):
    """Vertex counts a non-zero exit against max_failed_trial_count; a NaN loss must not."""
    metrics_file = tmp_path / "hypertune" / "output.metrics"
    result = run_trainer(
        [
            f"--data={synthetic_data}",
            "--epochs=3",
            "--learning_rate=1000",
            f"--model_dir={tmp_path / 'model'}",
        ],
        CLOUD_ML_HP_METRIC_FILE=str(metrics_file),
        CLOUD_ML_TRIAL_ID="3",
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "training diverged at epoch" in result.stderr
    assert "reported val_accuracy=0.0 (the worst value), nothing exported" in result.stderr
    last = read_hypertune(metrics_file)[-1]
    assert float(last["val_accuracy"]) == 0.0  # finite, and last for a maximized metric
    worst_costs = [r for r in read_hypertune(metrics_file, None) if "latency_ms" in r]
    assert [float(r["latency_ms"]) for r in worst_costs] == [1e9]  # the worst cost, once
    assert not (tmp_path / "model").exists()


def test_a_diverging_final_job_fails_in_one_line(synthetic_data, tmp_path):
    result = run_trainer(
        [f"--data={synthetic_data}", "--epochs=2", "--learning_rate=1000"],
        CLOUD_ML_TRIAL_ID="",
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "trainer: error: training diverged at epoch" in result.stderr.strip().splitlines()[-1]


def test_an_unwritable_metric_file_fails_at_once_in_one_line(synthetic_data, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    result = run_trainer(
        [f"--data={synthetic_data}", "--epochs=1"],
        CLOUD_ML_HP_METRIC_FILE=str(blocker / "output.metrics"),
        CLOUD_ML_TRIAL_ID="1",
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("trainer: error: cannot write the hypertune metric file")
    assert "epoch 1/1" not in result.stderr  # refused before any training


def test_the_tests_trainer_runs_are_forked_unless_the_server_would_differ(
    synthetic_data, monkeypatch
):
    """`run_trainer` forks from the session's preloaded trainer; a differing run starts afresh."""
    from tests import trainer_runs

    fresh: list[list[str]] = []

    def fresh_run(argv, **kwargs):
        fresh.append(argv)
        return subprocess.CompletedProcess(argv, 2, stdout="", stderr="fresh\n")

    monkeypatch.setattr(trainer_runs.subprocess, "run", fresh_run)
    monkeypatch.delenv("HPT_FORK_SERVER", raising=False)
    forked = run_trainer([f"--data={synthetic_data}", "--bogus_flag=3"], CLOUD_ML_TRIAL_ID="2")
    assert fresh == [] and forked.returncode == 2  # a per-replica variable: still forked
    assert "unrecognized arguments: --bogus_flag=3" in forked.stderr
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test")  # set by pytest, test by test
    assert run_trainer([f"--data={synthetic_data}", "--bogus_flag=3"]).returncode == 2
    assert fresh == []
    started = start_trainer([f"--data={synthetic_data}", "--bogus_flag=3"])
    assert isinstance(started, trainer_runs.Started)  # forked too
    output, _ = started.communicate(timeout=60)
    assert started.returncode == 2 and "unrecognized arguments: --bogus_flag=3" in output
    differing = run_trainer([f"--data={synthetic_data}"], ONEDNN_MAX_CPU_ISA="AVX2")
    assert len(fresh) == 1 and differing.stderr == "fresh\n"  # the server's TF would differ
    monkeypatch.setenv("HPT_FORK_SERVER", "off")
    run_trainer([f"--data={synthetic_data}"])
    assert len(fresh) == 2
