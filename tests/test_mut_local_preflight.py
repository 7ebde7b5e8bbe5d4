"""What the local run's preflight refuses, says and counts, as a user meets it.

Written for the mutants `make mutmut MODULES=pipelines/targets/local/cli/preflight.py`
left alive (issue 56); each test names what a user would have seen instead.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from pipelines.settings import LOCAL_RUN_DEFAULTS, Settings, SettingsError
from pipelines.targets.local.cli import preflight

UNREACHABLE = ("host.invalid", 443)  # .invalid never resolves (RFC 2606)


def settings(tmp_path: Path, **values) -> Settings:
    return Settings(**{**LOCAL_RUN_DEFAULTS, "output": str(tmp_path / "out"), **values})


def test_the_cnns_dense_weights_alone_can_exceed_a_small_machine(tmp_path):
    """1024 px, batch 1, one trial of 2 replicas: ~7 GiB, 6.4 of it the Dense layer's weights."""
    one = settings(tmp_path, image_size=1024, batch_size=1, parallel_trials=1)
    with pytest.raises(SettingsError) as refused:
        preflight.check_memory(one, memory=2 << 30)
    message = str(refused.value)
    assert message.startswith("image_size=1024: training would need ~7 GiB")
    assert "Dense(256) weights on 1,048,576 features" in message
    # no workers: nothing about processes per trial between the trials and the weights
    assert "× 1 parallel trial(s), and the CNN's Dense(256)" in message


def test_one_replica_on_one_core_is_no_warning(tmp_path):
    one = settings(tmp_path, trial_accelerator_count=1)
    assert preflight.replica_warning(one, cores=1) is None


def test_a_tfds_dataset_is_prepared_only_by_its_own_folder_whatever_its_version(tmp_path):
    data_dir = tmp_path / "tfds"
    (data_dir / "beans" / "0.1.0").mkdir(parents=True)
    (data_dir / "beans" / "0.1.0" / "dataset_info.json").write_text("{}")
    with pytest.raises(SettingsError, match=r"^source=tfds:cassava: not prepared"):
        preflight.check_tfds_reachable("tfds:cassava", str(data_dir), host=UNREACHABLE)
    (data_dir / "cassava" / "0.1.0").mkdir(parents=True)
    (data_dir / "cassava" / "0.1.0" / "dataset_info.json").write_text("{}")
    preflight.check_tfds_reachable("tfds:cassava:0.1.0", str(data_dir), host=UNREACHABLE)


def test_an_unreachable_host_is_named_with_why_and_waited_for_seconds_not_forever(
    tmp_path, monkeypatch
):
    waited: list[object] = []

    def connect(host, timeout=None):
        waited.append(timeout)
        raise TimeoutError()  # no strerror: the reason is the error's kind

    monkeypatch.setattr(socket, "create_connection", connect)
    with pytest.raises(SettingsError) as refused:
        preflight.check_tfds_reachable("tfds:cassava", str(tmp_path / "tfds"))
    assert "storage.googleapis.com (TFDS's download host) is unreachable (TimeoutError)" in str(
        refused.value
    )
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setattr(preflight, "KERAS_FALLBACK_HOME", str(tmp_path / "fallback"))
    with pytest.raises(SettingsError, match=r"is unreachable \(TimeoutError\)"):
        preflight.check_imagenet_reachable()
    assert waited == [preflight.REACH_TIMEOUT_S] * 2


def test_imagenet_weights_are_looked_for_in_the_home_keras_cache_and_the_fallback(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("KERAS_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(preflight, "KERAS_FALLBACK_HOME", str(tmp_path / "fallback"))
    assert preflight.keras_caches()[0] == tmp_path / "home" / ".keras" / "models"
    (tmp_path / "fallback" / "models").mkdir(parents=True)
    (tmp_path / "fallback" / "models" / "resnet50.h5").write_bytes(b"")
    monkeypatch.setattr(preflight, "TFDS_HOST", UNREACHABLE)
    preflight.check_imagenet_reachable()  # cached in the fallback: no network needed


def test_a_pretrained_models_disk_estimate_counts_its_head_on_its_backbone(tmp_path):
    from trainer.models import MODELS

    run = settings(tmp_path, model="resnet50", max_trials=3)
    backbone = MODELS["resnet50"].backbone
    assert backbone is not None
    copies = (3 + 1) * (2 * preflight.PARAM_COPIES + 1) * 4  # trials + final, float32
    need = preflight.planned_disk_bytes(run, 0)
    assert need - copies * backbone.params == copies * backbone.pooled_width * 256


def test_a_source_that_is_no_local_folder_counts_no_image_files():
    assert preflight.source_images("gs://bucket/images") == 0


def test_sizes_from_one_gib_up_are_in_gib():
    assert preflight.size_text(1 << 30) == "1.0 GiB"


def test_a_tfds_dataset_still_to_download_counts_no_image_on_disk(tmp_path):
    run = settings(tmp_path, source="tfds:cassava")
    need = preflight.planned_disk_bytes(run, 0)
    assert preflight.check_disk(run, free=need) is not None  # the note, not a refusal
    with pytest.raises(SettingsError) as refused:
        preflight.check_disk(run, free=need - 1)
    assert str(refused.value).endswith(
        "expected more free space, or fewer trials or a smaller image size"
    )


def test_a_file_in_the_way_of_the_output_is_refused_naming_it(tmp_path):
    (tmp_path / "out").write_text("")
    with pytest.raises(SettingsError) as refused:
        preflight.check_writable("output", str(tmp_path / "out" / "run"))
    assert str(refused.value) == (
        f"output={tmp_path / 'out' / 'run'}: {tmp_path / 'out'} is a file, not a folder; "
        "expected a folder this run can write"
    )


def test_a_folder_nothing_can_be_created_in_is_refused_with_the_systems_reason(tmp_path):
    """/proc takes no new files, even from root (the tests may run as root)."""
    with pytest.raises(SettingsError) as refused:
        preflight.check_writable("registry", "/proc/hpt-registry")
    reason = "(No such file or directory|Permission denied)"  # root's, another user's
    assert re.fullmatch(
        rf"registry=/proc/hpt-registry: cannot write in /proc \({reason}\); "
        "expected a folder this run can write",
        str(refused.value),
    )
    preflight.check_writable("output", str(tmp_path / "new" / "out"))
    assert os.listdir(tmp_path) == []  # tried where it would be created, nothing left


def test_a_relative_sqlite_store_is_made_absolute_for_the_steps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = settings(tmp_path, tracking_uri="sqlite:///runs.db")
    assert preflight.tracking_uri(run) == f"sqlite:///{tmp_path / 'runs.db'}"
    assert preflight.tracking_uri(settings(tmp_path)).endswith(str(tmp_path / "out" / "mlflow.db"))


def test_an_unreachable_store_is_refused_under_mlflow_and_said_under_auto(tmp_path):
    uri = "http://host.invalid:5000"
    with pytest.raises(SettingsError, match=rf"^tracking_uri={uri}: .*set tracking=auto"):
        preflight.check_tracking(settings(tmp_path, tracking="mlflow", tracking_uri=uri), print)
    said: list[str] = []
    preflight.check_tracking(settings(tmp_path, tracking="auto", tracking_uri=uri), said.append)
    assert len(said) == 1 and said[0].startswith(f"tracking: {uri} ")


def test_the_memory_estimate_is_the_dense_weights_and_activations_of_the_larger_job(tmp_path):
    """1020 px: 127² × 64 = 1,032,256 features × 256 units × 4 bytes × 3 copies (weights,
    gradients, momentum), plus 1020² px × 360 bytes of activations for one image."""
    run = settings(
        tmp_path,
        image_size=1020,
        batch_size=1,
        parallel_trials=1,
        trial_accelerator_count=1,
        final_accelerator_count=1,
        workers=0,
    )
    need = 1_032_256 * 256 * 4 * 3 + 1020**2 * 360
    assert preflight.planned_bytes(run) == need == 3_545_634_432
    assert preflight.planned_bytes(run.replace(workers=1)) == 2 * need  # the final job's two
    preflight.check_memory(run, memory=need * 5 // 4)  # exactly 80 % of the machine: fits
    with pytest.raises(SettingsError) as refused:
        preflight.check_memory(run, memory=1)
    message = str(refused.value)
    assert message.startswith("image_size=1020: training would need ~3 GiB (1020×1020 px")
    assert "Dense(256) weights on 1,032,256 features" in message
    assert "expected image_size <= 1 at these settings" in message  # nothing fits: down to 1


def test_weights_none_or_in_a_bucket_are_not_looked_for_on_this_disk(tmp_path, monkeypatch):
    """`none` starts no probe (TensorFlow's import is minutes on shared cores); a gs:// file
    is the probe's to load, not 'no such file'; a missing local file is, before any probe."""
    probed: list[list[str]] = []

    def probe(argv, **_):
        probed.append(argv[3:])
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(preflight.subprocess, "run", probe)
    preflight.check_weights_load(settings(tmp_path, model="mobilenet_v3_small", weights="none"))
    assert probed == []
    preflight.check_weights_load(
        settings(tmp_path, model="mobilenet_v3_small", weights="gs://bucket/w.h5", image_size=96)
    )
    assert probed == [["mobilenet_v3_small", "gs://bucket/w.h5", "96"]]
    missing = str(tmp_path / "no.h5")
    with pytest.raises(SettingsError, match=r"no such file \(expected a Keras weights file\)"):
        preflight.check_weights_load(
            settings(tmp_path, model="mobilenet_v3_small", weights=missing)
        )
    assert len(probed) == 1


@pytest.mark.parametrize(
    ("code", "stderr", "said"),
    [
        (2, "noise\ntrainer: error: --weights=w.h5: bad file\nafter\n", "--weights=w.h5: bad file"),
        (
            1,
            "Traceback (most recent call last):\n  ...\nValueError: bad header\n",
            "ValueError: bad header",
        ),
        (1, "", "?"),
        (
            2,
            "trainer: error: --weights=w.h5: h5py: error: truncated\n",
            "--weights=w.h5: h5py: error: truncated",
        ),
    ],
)
def test_a_probe_that_fails_is_refused_with_its_one_line(tmp_path, monkeypatch, code, stderr, said):
    """The trainer's `error:` line, else the last line it wrote (a crash), else `?`; the
    probe runs bounded in time and without TensorFlow's log noise."""
    calls: list[dict] = []

    def probe(argv, **kwargs):
        calls.append(kwargs)
        return subprocess.CompletedProcess(argv, code, "", stderr)

    monkeypatch.setattr(preflight.subprocess, "run", probe)
    weights = tmp_path / "w.h5"
    weights.write_bytes(b"x")
    with pytest.raises(SettingsError) as refused:
        preflight.check_weights_load(
            settings(tmp_path, model="mobilenet_v3_small", weights=str(weights))
        )
    assert str(refused.value) == said
    [kwargs] = calls
    assert kwargs["timeout"] == preflight.WEIGHTS_PROBE_TIMEOUT_S
    assert kwargs["env"]["TF_CPP_MIN_LOG_LEVEL"] == "3"
    assert kwargs["env"]["PYTHONWARNINGS"] == "ignore"


def test_a_probe_that_takes_too_long_is_refused_naming_the_limit(tmp_path, monkeypatch):
    def probe(argv, timeout, **_):
        raise subprocess.TimeoutExpired(argv, timeout)

    monkeypatch.setattr(preflight.subprocess, "run", probe)
    weights = tmp_path / "w.h5"
    weights.write_bytes(b"x")
    with pytest.raises(SettingsError) as refused:
        preflight.check_weights_load(
            settings(tmp_path, model="mobilenet_v3_small", weights=str(weights)), timeout=30
        )
    assert str(refused.value) == (
        f"--weights={weights}: loading them into mobilenet_v3_small took over 30 s"
    )


def test_a_prepared_tfds_dataset_counts_its_own_examples_whatever_its_version(tmp_path):
    """Its own dataset_info.json (not another dataset's); a split without shard lengths, or
    an info without splits, counts none instead of failing the preflight."""
    data_dir = tmp_path / "out" / "tensorflow_datasets"
    infos = {
        "cassava/0.1.0": {"splits": [{"name": "train", "shardLengths": ["10"]}, {"name": "x"}]},
        "zebra/1.0.0": {"splits": [{"name": "train", "shardLengths": ["99"]}]},
        "plain/1.0.0": {},
    }
    for where, info in infos.items():
        (data_dir / where).mkdir(parents=True)
        (data_dir / where / "dataset_info.json").write_text(json.dumps(info))
    assert preflight.dataset_images(settings(tmp_path, source="tfds:cassava:0.1.0")) == 10
    assert preflight.dataset_images(settings(tmp_path, source="tfds:plain")) == 0
