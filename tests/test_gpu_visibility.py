"""GPUs really used on Vertex: the image sees the mounted driver, the trainer refuses fewer GPUs."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from pipelines.jobs import worker_pools
from tests.test_images import DOCKERFILES, parse_dockerfile
from trainer import devices
from trainer.flags import parse_args

CONTAINER = dict(image_uri="t:1", command=["python", "-m", "trainer.task"], args=["--epochs=1"])


def _image_env() -> dict[str, str]:
    """The trainer image's environment as its ENV instructions leave it (PATH from a base)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    for ins in parse_dockerfile(DOCKERFILES["trainer"].read_text()):
        if ins.cmd != "ENV":
            continue
        for word in shlex.split(ins.args.replace("\\\n", " ")):
            name, _, value = word.partition("=")
            env[name] = value.replace("${PATH}", env.get("PATH", ""))
    return env


def test_trainer_image_puts_the_vertex_driver_mount_on_the_loader_and_command_paths():
    env = _image_env()
    assert "/usr/local/nvidia/lib64" in env["LD_LIBRARY_PATH"].split(":")
    assert env["PATH"].split(":")[0] == "/usr/local/nvidia/bin"
    assert "/usr/local/bin" in env["PATH"].split(":"), "the base's PATH is kept"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert "compute" in env["NVIDIA_DRIVER_CAPABILITIES"].split(",")


@pytest.mark.parametrize(
    ("gpus", "expected", "refused"),
    [([], 0, False), ([], 1, True), (["Tesla T4"], 2, True), (["T4", "T4"], 2, False)],
)
def test_fewer_gpus_than_expected_is_refused(gpus, expected, refused):
    if refused:
        match = f"--expected_gpus={expected}: .* {len(gpus)} GPU"
        with pytest.raises(devices.DeviceError, match=match):
            devices.check_expected(gpus, expected)
    else:
        devices.check_expected(gpus, expected)


def test_device_line_names_the_devices():
    assert devices.device_line(["Tesla T4", "Tesla T4"], 2) == (
        "devices: 2 GPUs (expected 2): Tesla T4, Tesla T4"
    )
    assert devices.device_line([], 0, 2) == (
        "devices: CPU only, no GPU visible, split into 2 logical devices"
    )


def test_expected_gpus_flag_is_parsed_and_checked(tmp_path):
    (tmp_path / "metadata.json").write_text("{}")
    _, run = parse_args(["--data", str(tmp_path), "--expected_gpus=2"])
    assert run.expected_gpus == 2
    assert parse_args(["--data", str(tmp_path)])[1].expected_gpus == 0
    with pytest.raises(ValueError, match=r"--expected_gpus=-1: expected an integer >= 0"):
        parse_args(["--data", str(tmp_path), "--expected_gpus=-1"])


def test_trainer_refuses_more_gpus_than_this_host_has_in_one_line(tmp_path):
    """On this host (any host): one GPU more than it sees is refused before training."""
    expected = len(devices.visible_gpus()) + 1
    (tmp_path / "metadata.json").write_text("{}")  # never read: the check comes first
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    cmd = [sys.executable, "-m", "trainer.task", f"--data={tmp_path}"]
    cmd.append(f"--expected_gpus={expected}")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    ours = [line for line in proc.stderr.splitlines() if line.startswith(("trainer:", "devices:"))]
    assert proc.returncode == 1, proc.stderr
    assert len(ours) == 1 and ours[0].startswith(f"trainer: error: --expected_gpus={expected}: ")
    assert "LD_LIBRARY_PATH" in ours[0] and "precision:" not in proc.stderr


@pytest.mark.parametrize(
    ("accelerator", "count", "expect", "flag"),
    [
        ("NVIDIA_TESLA_T4", 2, True, "--expected_gpus=2"),
        ("NVIDIA_TESLA_T4", 2, False, None),  # local: the count is logical CPU devices
        ("TPU_V3", 8, True, None),
        (None, 0, True, None),
    ],
)
def test_cloud_pools_tell_the_trainer_how_many_gpus_it_was_given(accelerator, count, expect, flag):
    for pools in (
        worker_pools.trial_worker_pool_specs(
            **CONTAINER, accelerator_type=accelerator, accelerator_count=count, expect_gpus=expect
        ),
        worker_pools.training_worker_pool_specs(
            **CONTAINER,
            accelerator_type=accelerator,
            accelerator_count=count,
            worker_count=2,
            expect_gpus=expect,
        ),
    ):
        worker_pools.validate_worker_pool_specs(pools)
        for pool in pools:
            args = pool["container_spec"]["args"]
            got = [a for a in args if a.startswith("--expected_gpus")]
            assert got == ([flag] if flag else []), args


@pytest.mark.parametrize("gpus, rewrites", [([], False), (["/physical_device:GPU:0"], True)])
def test_grappler_rewrites_only_where_a_gpu_is_visible_and_the_setting_found_comes_back(
    monkeypatch, gpus, rewrites
):
    """CPU only: no Grappler (its passes cost ResNet50 ~3 s of start-up); GPUs keep its layouts."""
    import tensorflow as tf

    from trainer import distribute

    before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": rewrites})
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: list(gpus))
    try:
        with distribute.graph_rewrites() as on:
            assert on is rewrites
            options = tf.config.optimizer.get_experimental_options()
            assert options["disable_meta_optimizer"] is (not rewrites)
        # What it found (here the opposite of what it set) is back.
        assert tf.config.optimizer.get_experimental_options()["disable_meta_optimizer"] is rewrites
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})


def test_a_training_run_restores_the_graph_rewrite_setting_it_found(synthetic_data):
    """Training in a process that goes on (tests, the fork server) leaves Grappler as it was."""
    import tensorflow as tf

    from trainer import train
    from trainer.config import HParams, RunConfig

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
    result = train.train(HParams(epochs=1, batch_size=32), RunConfig(data=synthetic_data))
    assert len(result.history) == 1
    assert tf.config.optimizer.get_experimental_options()["disable_meta_optimizer"] is False
