"""In-process TensorFlow: its native (fd 2) chatter to a log file, our output to the terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from pipelines.app import native_log
from tests.conftest import ROOT, run_env

# Lines as a native library writes them: straight to descriptor 2, past sys.stderr.
NATIVE = b"I0000 00:00:1795424006.634089    3320 port.cc:153] oneDNN custom operations are on.\n"

IN_A_PROCESS = textwrap.dedent(
    """
    import os, sys
    from pipelines.app import native_log

    with native_log.stderr_to_file(sys.argv[1]) as terminal:
        os.write(2, b"I0000 00:00:1.0 1 port.cc:153] oneDNN custom operations are on.\\n")
        print("python warning", file=sys.stderr)
        terminal.write("prepared 1/2 images\\n")
    print("hpt-pipeline: error: one line", file=sys.stderr)
    """
)


def test_descriptor_2_goes_to_the_log_and_the_terminal_keeps_our_lines(tmp_path):
    log = tmp_path / "tf.log"
    done = subprocess.run(
        [sys.executable, "-c", IN_A_PROCESS, str(log)],
        cwd=ROOT,
        env=run_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stderr == "prepared 1/2 images\nhpt-pipeline: error: one line\n"
    assert log.read_text() == (
        "I0000 00:00:1.0 1 port.cc:153] oneDNN custom operations are on.\npython warning\n"
    )


def test_a_stand_in_stderr_is_the_terminal_and_fd_2_is_restored(tmp_path, monkeypatch):
    """Under a test runner's stand-in stderr, our lines go to it; fd 2 comes back after errors."""
    stand_in = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stand_in)
    log = tmp_path / "tf.log"
    before = os.fstat(2)
    with pytest.raises(RuntimeError), native_log.stderr_to_file(log) as terminal:
        assert terminal is stand_in
        os.write(2, NATIVE)
        terminal.write("ours\n")
        raise RuntimeError("restored on the way out")
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    assert stand_in.getvalue() == "ours\n"
    assert log.read_bytes() == NATIVE


def test_an_empty_log_is_removed(tmp_path):
    empty = native_log.new_log_file(tmp_path / "logs" / "x.log")
    assert empty.exists() and empty.read_bytes() == b""
    assert native_log.keep_if_written(empty) is None and not empty.exists()
    written = native_log.new_log_file(tmp_path / "logs" / "x.log")
    written.write_text("W0000 something\n")
    assert native_log.keep_if_written(written) == written
    assert native_log.new_log_file(written).read_bytes() == b""  # a new run, a new log


def test_prepare_keeps_tensorflows_chatter_off_the_terminal(tmp_path):
    """`hpt-pipeline prepare` on a folder with corrupt images, as a user runs it."""
    source = tmp_path / "images"
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        (source / name).mkdir(parents=True)
        for i in range(10):
            pixels = rng.integers(0, 256, size=(24, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(source / name / f"{i}.jpg")
    whole = (source / "a" / "0.jpg").read_bytes()
    (source / "a" / "0.jpg").write_bytes(whole[: len(whole) // 2])  # truncated JPEG
    (source / "b" / "bad.jpg").write_bytes(b"not an image")
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    env = run_env(TMPDIR=str(private_tmp))
    env.pop("TF_CPP_MIN_LOG_LEVEL")  # as a user's shell has it

    def prepare(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", "from pipelines.app.cli import main; main()", "prepare"]
            + [f"--source={source}", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )

    done = prepare(f"--output={tmp_path / 'out'}", "--max-bad-fraction=0.2")
    assert done.returncode == 0, done.stderr
    screen = done.stdout + done.stderr
    assert "prepared 21/21 images" in screen and "2 unreadable images skipped" in screen
    logs = list(tmp_path.glob("*.prepare.log"))
    assert logs == [tmp_path / "out.prepare.log"]  # beside the output
    assert f"TensorFlow's log: {logs[0]}" in done.stdout
    log = logs[0].read_text()
    for marker in ("absl::InitializeLog", "Local rendezvous"):
        assert marker in log, marker
    for marker in ("oneDNN custom operations", "absl::InitializeLog", "Local rendezvous"):
        assert marker not in screen, marker  # oneDNN's line: only on CPUs where it is enabled
    assert not any(line[:1] in "IWE" and line[1:5].isdigit() for line in screen.splitlines())

    # too many bad images: one error line naming them, no TensorFlow line, no log left behind
    failed = prepare(f"--output={tmp_path / 'again'}", "--max-bad-fraction=0.01")
    assert failed.returncode == 2 and failed.stdout == ""
    errors = [line for line in failed.stderr.splitlines() if not line.startswith("prepared ")]
    assert len(errors) == 1 and errors[0].startswith("hpt-pipeline: error: --source=")
    assert "of 21 images are unreadable or corrupt" in errors[0] and ".jpg (" in errors[0]
    assert list(tmp_path.glob("*.prepare.log")) == logs
    # nothing written to the system's temporary folder; preparation converts nothing with
    # autograph, so the failed run had no temporary files to keep (test_scratch: when it has)
    assert list(private_tmp.iterdir()) == []
    assert "temporary files kept" not in errors[0]
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["images", "out", "out.prepare.log", "tmp"]
